package routing

import (
	"sort"
	"strings"
)

// Route outcomes, the values of the `svc.route` request variable.
const (
	RouteOK          = "ok"
	RouteDenied      = "denied"
	RouteUnknown     = "unknown"
	RouteUnavailable = "unavailable"
)

// Fleet is one fleet's input to a Table: its name, whether its hosts are
// redirected from plain HTTP, and its current document (nil before the first).
type Fleet struct {
	Name         string
	HTTPRedirect bool
	Document     *Document
}

// Answer is what a host resolved to: the fleet and document key that answered,
// and what to proxy to. Answers are immutable once a Table is built.
type Answer struct {
	// Fleet is the name of the fleet that answered.
	Fleet string
	// Matched is the document key that answered: a route host, a `*.<base>`
	// key, or an API host.
	Matched string
	// Application is the route's application; empty for an API host.
	Application string
	// API is true when Matched is one of the fleet's API hosts.
	API bool
	// Denied holds the API's denied path prefixes (API answers only).
	Denied []string
	// Upstreams are the document's upstreams, in document order.
	Upstreams []Upstream
	// Dials are the upstream addresses, in document order.
	Dials []string
	// HTTPRedirect is the answering fleet's http_redirect option.
	HTTPRedirect bool
	// MatchedValue and FleetValue hold Matched and Fleet already converted
	// to interface values, so that setting them as request variables on
	// every request does not allocate.
	MatchedValue, FleetValue any
}

// Conflict records a document key published by more than one fleet.
type Conflict struct {
	// Key is the contested route host, wildcard key or API host (API hosts are
	// prefixed with "api:" to keep the two namespaces apart).
	Key string
	// Owner is the fleet that answers for the key.
	Owner string
	// Others are the other fleets publishing it, in configuration order.
	Others []string
}

// Table resolves hosts across every fleet of a configuration. It is built
// whole on each document change and read without locks.
type Table struct {
	routes      map[string]*Answer
	api         map[string]*Answer
	wildcards   map[string]string // base -> fleet asking for it
	anyDocument bool
	owners      map[string]string
	conflicts   []Conflict
}

// Build makes a Table from fleets given in configuration order. previous is
// the owner map of the table this one replaces (nil at first): a fleet that
// owned a key keeps it while it still publishes it ("first publisher keeps a
// host"); a key with no previous owner still publishing it goes to the first
// publishing fleet in configuration order.
func Build(fleets []Fleet, previous map[string]string) *Table {
	t := &Table{
		routes:    map[string]*Answer{},
		api:       map[string]*Answer{},
		wildcards: map[string]string{},
		owners:    map[string]string{},
	}
	type candidate struct {
		fleet  int
		answer *Answer
	}
	candidates := map[string][]candidate{}
	var keys []string
	add := func(key string, fleet int, a *Answer) {
		if _, seen := candidates[key]; !seen {
			keys = append(keys, key)
		}
		for _, c := range candidates[key] {
			if c.fleet == fleet {
				return // a fleet naming a key twice: its first entry counts
			}
		}
		candidates[key] = append(candidates[key], candidate{fleet, a})
	}
	for i, f := range fleets {
		doc := f.Document
		if doc == nil {
			continue
		}
		t.anyDocument = true
		for _, r := range doc.Routes {
			add(r.Host, i, &Answer{
				Fleet: f.Name, Matched: r.Host, Application: r.Application,
				Upstreams: r.Upstreams, Dials: dials(r.Upstreams), HTTPRedirect: f.HTTPRedirect,
				MatchedValue: r.Host, FleetValue: f.Name,
			})
		}
		if doc.API != nil && len(doc.API.Hosts) > 0 {
			for _, h := range doc.API.Hosts {
				add("api:"+h, i, &Answer{
					Fleet: f.Name, Matched: h, API: true, Denied: doc.API.Denied,
					Upstreams: doc.API.Upstreams, Dials: dials(doc.API.Upstreams), HTTPRedirect: f.HTTPRedirect,
					MatchedValue: h, FleetValue: f.Name,
				})
			}
		}
		for _, w := range doc.Wildcards {
			if _, taken := t.wildcards[w]; !taken {
				t.wildcards[w] = f.Name
			}
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		cs := candidates[key]
		chosen := cs[0]
		if prev, ok := previous[key]; ok {
			for _, c := range cs {
				if fleets[c.fleet].Name == prev {
					chosen = c
					break
				}
			}
		}
		t.owners[key] = fleets[chosen.fleet].Name
		if name, ok := strings.CutPrefix(key, "api:"); ok {
			t.api[name] = chosen.answer
		} else {
			t.routes[key] = chosen.answer
		}
		if len(cs) > 1 {
			c := Conflict{Key: key, Owner: fleets[chosen.fleet].Name}
			for _, other := range cs {
				if other.fleet != chosen.fleet {
					c.Others = append(c.Others, fleets[other.fleet].Name)
				}
			}
			t.conflicts = append(t.conflicts, c)
		}
	}
	return t
}

func dials(ups []Upstream) []string {
	out := make([]string, len(ups))
	for i, u := range ups {
		out[i] = u.Address
	}
	return out
}

// Owners is the key-to-fleet map to pass as Build's previous argument for the
// table that replaces this one. The caller must not modify it.
func (t *Table) Owners() map[string]string { return t.owners }

// Conflicts lists the keys more than one fleet publishes, sorted by key.
func (t *Table) Conflicts() []Conflict { return t.conflicts }

// HasDocument reports whether any fleet has a document yet. Until then every
// request is `unavailable` rather than `unknown`.
func (t *Table) HasDocument() bool { return t != nil && t.anyDocument }

// Resolve answers a request host (already in RequestHost form): a route
// naming it exactly in any fleet, else an API host naming it, else the
// wildcard key of its first label, looked up once. Nil when nothing answers.
func (t *Table) Resolve(host string) *Answer {
	if t == nil || host == "" || host[0] == '*' {
		return nil // a wildcard key is not a host
	}
	if a := t.routes[host]; a != nil {
		return a
	}
	if a := t.api[host]; a != nil {
		return a
	}
	if key := WildcardKey(host); key != "" {
		return t.routes[key]
	}
	return nil
}

// Outcome resolves a request host and path to the `svc.route` value and the
// answer behind it (nil for unknown and unavailable). A denied path on an API
// host is `denied` and carries the answer only to name the fleet and key.
func (t *Table) Outcome(host, path string) (string, *Answer) {
	if !t.HasDocument() {
		return RouteUnavailable, nil
	}
	a := t.Resolve(host)
	switch {
	case a == nil:
		return RouteUnknown, nil
	case a.API && IsDenied(path, a.Denied):
		return RouteDenied, a
	default:
		return RouteOK, a
	}
}

// Approved reports whether an on-demand certificate may be had for name:
// only an exact route host or an API host of some fleet's current document;
// never a name covered only by a `*.` key, never a wildcard name itself.
func (t *Table) Approved(name string) bool {
	if t == nil {
		return false
	}
	name = NormalizeName(name)
	if name == "" || strings.Contains(name, "*") {
		return false
	}
	return t.routes[name] != nil || t.api[name] != nil
}

// Owner names the fleet owning a domain for certificate storage: the fleet a
// request for it would resolve to; for `*.<base>`, the fleet publishing the
// `*.<base>` key, else the one answering on <base> as an API host, else the
// one asking for <base> in its wildcards. "" when no fleet owns it.
func (t *Table) Owner(domain string) string {
	if t == nil {
		return ""
	}
	domain = NormalizeName(domain)
	if base, ok := strings.CutPrefix(domain, "*."); ok {
		if a := t.routes[domain]; a != nil {
			return a.Fleet
		}
		if a := t.api[base]; a != nil {
			return a.Fleet
		}
		return t.wildcards[base]
	}
	if a := t.Resolve(domain); a != nil {
		return a.Fleet
	}
	return ""
}

// WildcardBases lists the bases of every `*.<base>` key and wildcard request
// of the current documents, sorted.
func (t *Table) WildcardBases() []string {
	if t == nil {
		return nil
	}
	set := map[string]bool{}
	for key := range t.routes {
		if base, ok := strings.CutPrefix(key, "*."); ok {
			set[base] = true
		}
	}
	for base := range t.wildcards {
		set[base] = true
	}
	out := make([]string, 0, len(set))
	for b := range set {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}
