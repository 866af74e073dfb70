package routing

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// vector is the part of a testdata/routing file (docs/routing-vectors.md) the
// adapter reads: the expected documents and the optional lookups.
type vector struct {
	Name           string                     `json:"name"`
	Expected       json.RawMessage            `json:"expected"`
	ExpectedPrefer map[string]json.RawMessage `json:"expectedPrefer"`
	Lookups        []struct {
		Host        string     `json:"host"`
		Path        string     `json:"path"`
		Route       string     `json:"route"`
		Matched     string     `json:"matched"`
		Application *string    `json:"application"`
		Upstreams   []Upstream `json:"upstreams"`
	} `json:"lookups"`
}

func loadVectors(t *testing.T) map[string]vector {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "routing", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no routing vectors in testdata/routing")
	}
	out := map[string]vector{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if v.Name == "" {
			v.Name = strings.TrimSuffix(filepath.Base(f), ".json")
		}
		out[v.Name] = v
	}
	return out
}

// compact gives the bytes the node would serve for a document value.
func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVectorsResolve checks resolution against every expected document of the
// shared vectors: route hosts resolve to themselves, `*.<base>` keys cover one
// label down and not two, API hosts resolve and deny their denied paths at a
// segment boundary, and permission approves exactly route and API hosts.
func TestVectorsResolve(t *testing.T) {
	for name, v := range loadVectors(t) {
		docs := map[string]json.RawMessage{"": v.Expected}
		for k, d := range v.ExpectedPrefer {
			docs["prefer="+k] = d
		}
		for label, raw := range docs {
			t.Run(name+"/"+label, func(t *testing.T) {
				doc, err := Parse(compact(t, raw))
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				checkDocument(t, doc)
			})
		}
	}
}

func checkDocument(t *testing.T, doc *Document) {
	table := Build([]Fleet{{Name: "f", HTTPRedirect: true, Document: doc}}, nil)
	if !table.HasDocument() {
		t.Fatal("table has no document")
	}
	routeHosts := map[string]bool{}
	for _, r := range doc.Routes {
		routeHosts[r.Host] = true
	}
	for _, r := range doc.Routes {
		if base, wild := strings.CutPrefix(r.Host, "*."); wild {
			probe := "zz-probe." + base
			if !routeHosts[probe] {
				a := table.Resolve(probe)
				if a == nil || a.Matched != r.Host || a.Application != r.Application {
					t.Errorf("%s: got %+v, want the key %s", probe, a, r.Host)
				}
				if table.Approved(probe) {
					t.Errorf("permission approved %s, covered only by %s", probe, r.Host)
				}
			}
			deep := "a.zz-probe." + base
			if a := table.Resolve(deep); a != nil && a.Matched == r.Host {
				t.Errorf("%s two labels below %s resolved to it", deep, base)
			}
			if table.Approved(r.Host) {
				t.Errorf("permission approved the wildcard key %s", r.Host)
			}
			continue
		}
		for _, host := range []string{r.Host, strings.ToUpper(r.Host), r.Host + ":443", strings.ToUpper(r.Host) + ":8080"} {
			route, a := table.Outcome(RequestHost(host), "/")
			if route != RouteOK || a.Matched != r.Host || a.Application != r.Application || a.Fleet != "f" {
				t.Errorf("%s: got %s %+v, want the route %s", host, route, a, r.Host)
				continue
			}
			if !reflect.DeepEqual(a.Upstreams, r.Upstreams) {
				t.Errorf("%s: upstreams %v, want document order %v", host, a.Upstreams, r.Upstreams)
			}
			for i, u := range r.Upstreams {
				if a.Dials[i] != u.Address {
					t.Errorf("%s: dial %d is %s, want %s", host, i, a.Dials[i], u.Address)
				}
			}
		}
		if !table.Approved(r.Host) || !table.Approved(strings.ToUpper(r.Host)+".") {
			t.Errorf("permission refused the route host %s", r.Host)
		}
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			if routeHosts[h] {
				continue // rule 6: a route wins; the renderer never does this, but be exact
			}
			route, a := table.Outcome(h, "/v1/applications")
			if route != RouteOK || !a.API || a.Matched != h {
				t.Errorf("api host %s: got %s %+v", h, route, a)
				continue
			}
			if !reflect.DeepEqual(a.Upstreams, doc.API.Upstreams) {
				t.Errorf("api host %s: upstreams %v, want %v", h, a.Upstreams, doc.API.Upstreams)
			}
			if !table.Approved(h) {
				t.Errorf("permission refused the API host %s", h)
			}
			for _, p := range doc.API.Denied {
				for _, path := range []string{p, p + "/", p + "/objects/x", p + "?q", strings.ToUpper(p), "/x/.." + p, "/" + p} {
					denyPath := strings.SplitN(path, "?", 2)[0]
					if route, a := table.Outcome(h, denyPath); route != RouteDenied || a.Matched != h || a.Fleet != "f" {
						t.Errorf("api host %s path %s: got %s, want denied", h, path, route)
					}
				}
				if route, _ := table.Outcome(h, p+"x"); route != RouteOK {
					t.Errorf("api host %s path %sx: got %s, want ok (not a segment boundary)", h, p, route)
				}
			}
		}
	}
	// Permission approves exactly the route hosts and API hosts.
	approvable := map[string]bool{}
	for h := range routeHosts {
		if !strings.HasPrefix(h, "*.") {
			approvable[h] = true
		}
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			approvable[h] = true
		}
	}
	for _, probe := range []string{"unknown.invalid", "zz-probe.svc.test", "svc", ""} {
		if !approvable[probe] && table.Approved(probe) {
			t.Errorf("permission approved %q, named by no document", probe)
		}
	}
}

func TestVectorLookups(t *testing.T) {
	n := 0
	for name, v := range loadVectors(t) {
		if len(v.Lookups) == 0 {
			continue
		}
		doc, err := Parse(compact(t, v.Expected))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		table := Build([]Fleet{{Name: "f", Document: doc}}, nil)
		for _, l := range v.Lookups {
			n++
			route, a := table.Outcome(RequestHost(l.Host), l.Path)
			if route != l.Route {
				t.Errorf("%s %s%s: route %s, want %s", name, l.Host, l.Path, route, l.Route)
				continue
			}
			matched, app := "", ""
			var ups []Upstream
			if a != nil {
				matched, app = a.Matched, a.Application
				if route == RouteOK {
					ups = a.Upstreams
				}
			}
			if matched != l.Matched {
				t.Errorf("%s %s%s: matched %q, want %q", name, l.Host, l.Path, matched, l.Matched)
			}
			if l.Application != nil && app != *l.Application {
				t.Errorf("%s %s%s: application %q, want %q", name, l.Host, l.Path, app, *l.Application)
			}
			if len(ups) != len(l.Upstreams) || (len(ups) > 0 && !reflect.DeepEqual(ups, l.Upstreams)) {
				t.Errorf("%s %s%s: upstreams %v, want %v", name, l.Host, l.Path, ups, l.Upstreams)
			}
		}
	}
	if n == 0 {
		t.Fatal("no lookups in the vectors")
	}
}

// TestVectorsAsFleets loads every vector's expected document as its own fleet
// in one table: each key resolves to the first fleet publishing it in
// configuration order, and conflicts are reported for every shared key.
func TestVectorsAsFleets(t *testing.T) {
	vs := loadVectors(t)
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	sort.Strings(names)
	var fleets []Fleet
	for _, n := range names {
		doc, err := Parse(compact(t, vs[n].Expected))
		if err != nil {
			t.Fatal(err)
		}
		fleets = append(fleets, Fleet{Name: n, Document: doc})
	}
	table := Build(fleets, nil)
	first := map[string]string{}
	publishers := map[string]int{}
	for _, f := range fleets {
		for _, r := range f.Document.Routes {
			publishers[r.Host]++
			if _, ok := first[r.Host]; !ok {
				first[r.Host] = f.Name
			}
		}
	}
	for host, fleet := range first {
		if strings.HasPrefix(host, "*.") {
			continue
		}
		if a := table.Resolve(host); a == nil || a.Fleet != fleet {
			t.Errorf("%s: got %+v, want fleet %s", host, a, fleet)
		}
	}
	conflicted := map[string]bool{}
	for _, c := range table.Conflicts() {
		conflicted[c.Key] = true
	}
	for host, n := range publishers {
		if n > 1 && !conflicted[host] {
			t.Errorf("%s is published by %d fleets but no conflict is reported", host, n)
		}
	}
}
