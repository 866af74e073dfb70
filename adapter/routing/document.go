// Package routing reads the generic routing document a fleet serves at
// GET /v1/ingress/routes (docs/ingress.md "The routing document") and
// resolves request hosts and paths against one or several of them
// (docs/adapter.md "Modules"). It does no I/O: the
// Caddy modules in package svc poll, this package answers from memory.
package routing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Version is the only routing document version this package understands.
const Version = 1

// Upstream is one process answering for a route, or one daemon answering for
// the fleet API.
type Upstream struct {
	Node    string `json:"node"`
	Address string `json:"address"`
}

// Route is one host of a fleet: an exact host or a `*.<base>` wildcard key.
type Route struct {
	Host        string     `json:"host"`
	Application string     `json:"application"`
	Upstreams   []Upstream `json:"upstreams"`
}

// API describes the fleet API the rendering node publishes on its platform apexes.
type API struct {
	Hosts     []string   `json:"hosts"`
	Upstreams []Upstream `json:"upstreams"`
	Denied    []string   `json:"denied"`
}

// Document is a FleetRouting document. Wildcards is optional and not part of
// the spec's table: bases a fleet asks managed wildcard certificates for; it
// only widens certificate storage ownership.
type Document struct {
	V         int      `json:"v"`
	Routes    []Route  `json:"routes"`
	API       *API     `json:"api,omitempty"`
	Wildcards []string `json:"wildcards,omitempty"`
}

// ErrVersion is wrapped by Parse when a document's `v` is anything but 1.
var ErrVersion = errors.New("unsupported routing document version")

// Parse decodes a routing document. A document whose `v` is absent or not
// exactly 1 is refused whole (ErrVersion), never partly routed against.
// Hosts are lowercased; routes without upstreams are dropped (the spec says
// they never occur; routing to nothing would only produce 503s).
func Parse(data []byte) (*Document, error) {
	var probe struct {
		V json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("routing document is not a JSON object: %w", err)
	}
	if v := bytes.TrimSpace(probe.V); !bytes.Equal(v, []byte("1")) {
		if len(v) == 0 {
			return nil, fmt.Errorf("%w: the document has no v", ErrVersion)
		}
		return nil, fmt.Errorf("%w: v is %s, this adapter reads 1", ErrVersion, v)
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("routing document does not parse: %w", err)
	}
	routes := doc.Routes[:0]
	for _, r := range doc.Routes {
		r.Host = NormalizeName(r.Host)
		if r.Host == "" || len(r.Upstreams) == 0 {
			continue
		}
		routes = append(routes, r)
	}
	doc.Routes = routes
	if doc.API != nil {
		for i, h := range doc.API.Hosts {
			doc.API.Hosts[i] = NormalizeName(h)
		}
	}
	for i, w := range doc.Wildcards {
		doc.Wildcards[i] = strings.TrimPrefix(NormalizeName(w), "*.")
	}
	return &doc, nil
}

// NormalizeName lowercases a DNS name and drops one trailing dot.
func NormalizeName(name string) string {
	name = strings.TrimSuffix(strings.TrimSpace(name), ".")
	return strings.ToLower(name)
}
