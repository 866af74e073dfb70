package routing

import (
	"errors"
	"strings"
	"testing"
)

func doc(t *testing.T, body string) *Document {
	t.Helper()
	d, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func routeDoc(t *testing.T, hosts ...string) *Document {
	var routes []string
	for _, h := range hosts {
		routes = append(routes, `{"host":"`+h+`","application":"app","upstreams":[{"node":"n1","address":"10.0.0.1:1"}]}`)
	}
	return doc(t, `{"v":1,"routes":[`+strings.Join(routes, ",")+`]}`)
}

func TestParseRefusesOtherVersions(t *testing.T) {
	for _, body := range []string{`{"v":2,"routes":[]}`, `{"v":"1","routes":[]}`, `{"routes":[]}`, `{"v":1.5}`, `{"v":0}`, `[]`, `not json`, `{"v":1,"routes":{}}`} {
		if _, err := Parse([]byte(body)); err == nil {
			t.Errorf("%s: parsed", body)
		}
	}
	if _, err := Parse([]byte(`{"v":2}`)); !errors.Is(err, ErrVersion) {
		t.Errorf("v 2: %v, want ErrVersion", err)
	}
	d := doc(t, `{"v":1,"routes":[{"host":"A.Example.","application":"a","upstreams":[{"node":"n","address":"x:1"}]},{"host":"b.example","application":"b","upstreams":[]}],"future":true}`)
	if len(d.Routes) != 1 || d.Routes[0].Host != "a.example" {
		t.Errorf("routes %+v", d.Routes)
	}
}

func TestRequestHost(t *testing.T) {
	cases := map[string]string{
		"Shop.Example:443": "shop.example",
		"shop.example":     "shop.example",
		"shop.example.":    "shop.example",
		"[::1]:8080":       "::1",
		"[::1]":            "::1",
		"::1":              "::1",
		"10.0.0.1:80":      "10.0.0.1",
		"":                 "",
		"UPPER":            "upper",
	}
	for in, want := range cases {
		if got := RequestHost(in); got != want {
			t.Errorf("RequestHost(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { RequestHost("shop.example:443") }); n != 0 {
		t.Errorf("RequestHost allocates %v times for a lowercase host", n)
	}
}

func TestWildcardKey(t *testing.T) {
	cases := map[string]string{
		"a.shop.example": "*.shop.example",
		"shop":           "",
		".shop":          "",
		"shop.":          "",
		"a.b.c":          "*.b.c",
	}
	for in, want := range cases {
		if got := WildcardKey(in); got != want {
			t.Errorf("WildcardKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsDenied(t *testing.T) {
	denied := []string{"/v1/storage", "/v1/ingress/routes"}
	yes := []string{"/v1/storage", "/v1/storage/", "/v1/storage/objects/x", "/v1/ingress/routes", "/v1/ingress/routes/proxyb",
		"//v1/storage", "/v1//storage", "/v1/./storage", "/x/../v1/storage", "/V1/Storage", "v1/storage", "/v1/storage/.", "/v1/storage/.."}
	no := []string{"/", "/v1/storagex", "/v1/storage-x", "/v1/ingress/routesx", "/v1/ingress", "/v1/applications", "/v2/storage", ""}
	for _, p := range yes {
		if !IsDenied(p, denied) {
			t.Errorf("%q not denied", p)
		}
	}
	for _, p := range no {
		if IsDenied(p, denied) {
			t.Errorf("%q denied", p)
		}
	}
	if IsDenied("/v1/storage", nil) {
		t.Error("denied with no prefixes")
	}
	if n := testing.AllocsPerRun(100, func() { IsDenied("/v1/applications/x", denied) }); n != 0 {
		t.Errorf("IsDenied allocates %v times on a clean path", n)
	}
}

func TestResolutionOrderAcrossFleets(t *testing.T) {
	a := doc(t, `{"v":1,"routes":[{"host":"*.shop.example","application":"wild","upstreams":[{"node":"n1","address":"a:1"}]}],
		"api":{"hosts":["svc.test","x.shop.example"],"upstreams":[{"node":"n1","address":"a:7070"}],"denied":["/v1/storage"]}}`)
	b := routeDoc(t, "svc.test", "exact.shop.example")
	table := Build([]Fleet{{Name: "a", Document: a}, {Name: "b", Document: b}}, nil)
	check := func(host, wantFleet, wantMatched string) {
		t.Helper()
		got := table.Resolve(host)
		if wantFleet == "" {
			if got != nil {
				t.Errorf("%s: got %+v, want nothing", host, got)
			}
			return
		}
		if got == nil || got.Fleet != wantFleet || got.Matched != wantMatched {
			t.Errorf("%s: got %+v, want %s/%s", host, got, wantFleet, wantMatched)
		}
	}
	check("svc.test", "b", "svc.test")                     // an exact route in any fleet beats an API host
	check("x.shop.example", "a", "x.shop.example")         // an API host beats a wildcard
	check("exact.shop.example", "b", "exact.shop.example") // an exact route beats another fleet's wildcard
	check("y.shop.example", "a", "*.shop.example")
	check("a.y.shop.example", "", "")
	check("*.shop.example", "", "")
}

func TestFirstPublisherKeepsHost(t *testing.T) {
	one := routeDoc(t, "shared.example", "only-a.example")
	two := routeDoc(t, "shared.example")
	// b published first (a had no document yet)
	t1 := Build([]Fleet{{Name: "a"}, {Name: "b", Document: two}}, nil)
	if got := t1.Resolve("shared.example"); got.Fleet != "b" {
		t.Fatalf("first table: %s", got.Fleet)
	}
	// a arrives later: b keeps the host although a comes first in configuration order
	t2 := Build([]Fleet{{Name: "a", Document: one}, {Name: "b", Document: two}}, t1.Owners())
	if got := t2.Resolve("shared.example"); got.Fleet != "b" {
		t.Fatalf("b lost the host to a later publisher: %s", got.Fleet)
	}
	if c := t2.Conflicts(); len(c) != 1 || c[0].Key != "shared.example" || c[0].Owner != "b" || c[0].Others[0] != "a" {
		t.Fatalf("conflicts %+v", c)
	}
	// b stops publishing: a takes it
	t3 := Build([]Fleet{{Name: "a", Document: one}, {Name: "b", Document: routeDoc(t, "other.example")}}, t2.Owners())
	if got := t3.Resolve("shared.example"); got.Fleet != "a" {
		t.Fatalf("after b stopped: %s", got.Fleet)
	}
	// b publishes it again: a keeps it now
	t4 := Build([]Fleet{{Name: "a", Document: one}, {Name: "b", Document: two}}, t3.Owners())
	if got := t4.Resolve("shared.example"); got.Fleet != "a" {
		t.Fatalf("a lost the host back to b: %s", got.Fleet)
	}
	// same refresh: configuration order decides
	t5 := Build([]Fleet{{Name: "z", Document: two}, {Name: "a", Document: one}}, nil)
	if got := t5.Resolve("shared.example"); got.Fleet != "z" {
		t.Fatalf("same refresh: %s, want the first in configuration order", got.Fleet)
	}
}

func TestUnavailableUntilAnyDocument(t *testing.T) {
	empty := Build([]Fleet{{Name: "a"}, {Name: "b"}}, nil)
	if route, _ := empty.Outcome("x.example", "/"); route != RouteUnavailable {
		t.Fatalf("no document: %s", route)
	}
	if empty.Approved("x.example") {
		t.Fatal("approved with no document")
	}
	var nilTable *Table
	if route, _ := nilTable.Outcome("x.example", "/"); route != RouteUnavailable {
		t.Fatalf("nil table: %s", route)
	}
	one := Build([]Fleet{{Name: "a", Document: routeDoc(t)}, {Name: "b"}}, nil)
	if route, _ := one.Outcome("x.example", "/"); route != RouteUnknown {
		t.Fatalf("one empty document: %s", route)
	}
}

func TestOwner(t *testing.T) {
	a := doc(t, `{"v":1,"routes":[{"host":"*.shop.example","application":"s","upstreams":[{"node":"n","address":"a:1"}]},
		{"host":"app.svc.test","application":"s","upstreams":[{"node":"n","address":"a:1"}]}],
		"api":{"hosts":["svc.test"],"upstreams":[],"denied":[]}}`)
	b := doc(t, `{"v":1,"routes":[],"api":{"hosts":["other.test"],"upstreams":[],"denied":[]},"wildcards":["asked.example"]}`)
	table := Build([]Fleet{{Name: "a", Document: a}, {Name: "b", Document: b}}, nil)
	cases := map[string]string{
		"*.shop.example":   "a",
		"x.shop.example":   "a",
		"app.svc.test":     "a",
		"*.svc.test":       "a", // apex answered as an API host
		"*.other.test":     "b",
		"*.asked.example":  "b",
		"nobody.example":   "",
		"*.nobody.example": "",
		"App.SVC.test":     "a",
	}
	for domain, want := range cases {
		if got := table.Owner(domain); got != want {
			t.Errorf("Owner(%s) = %q, want %q", domain, got, want)
		}
	}
	if bases := table.WildcardBases(); strings.Join(bases, ",") != "asked.example,shop.example" {
		t.Errorf("wildcard bases %v", bases)
	}
}

func FuzzRequestHost(f *testing.F) {
	for _, s := range []string{"Shop.Example:443", "[::1]:80", "::1", "", "a.", "[", "[]", ":", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		got := RequestHost(host)
		if strings.ContainsAny(got, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("RequestHost(%q) = %q has upper case", host, got)
		}
		if len(got) > len(host) {
			t.Errorf("RequestHost(%q) = %q grew", host, got)
		}
		_ = WildcardKey(got)
	})
}

func FuzzIsDenied(f *testing.F) {
	for _, s := range []string{"/v1/storage", "/v1/storagex", "/v1/storage/x", "//v1/storage", "/a/../v1/storage", "/v1/ingress/routes/", "", "/.."} {
		f.Add(s)
	}
	denied := []string{"/v1/storage", "/v1/ingress/routes"}
	f.Fuzz(func(t *testing.T, path string) {
		got := IsDenied(path, denied)
		// Whatever the path, the exact prefixes at a segment boundary are always denied.
		for _, p := range denied {
			if (path == p || strings.HasPrefix(path, p+"/")) && !got {
				t.Errorf("%q not denied", path)
			}
		}
		// A path that cleans to a denied one is denied.
		if c := cleanPath("/" + strings.TrimPrefix(path, "/")); IsDenied(c, denied) && !got {
			t.Errorf("%q cleans to denied %q but is not denied", path, c)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"v":1,"routes":[]}`, `{"v":2}`, `{"v":1,"routes":[{"host":"A.b","application":"a","upstreams":[{"node":"n","address":"x:1"}]}],"api":{"hosts":["B"],"upstreams":[],"denied":["/v1/storage"]}}`, `null`, `{"v":1e0}`, `{"v":1,"api":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data)
		if err != nil {
			return
		}
		if doc.V != 1 {
			t.Fatalf("accepted v=%d", doc.V)
		}
		table := Build([]Fleet{{Name: "f", Document: doc}}, nil)
		for _, r := range doc.Routes {
			if len(r.Upstreams) == 0 {
				t.Fatal("a route without upstreams was kept")
			}
			_, _ = table.Outcome(RequestHost(r.Host), "/")
			_ = table.Approved(r.Host)
		}
	})
}
