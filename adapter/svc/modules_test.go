package svc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/svc-dev/svc/adapter/routing"
)

// provisionApp resolves and starts an app outside Caddy (no caddy.Context).
func provisionApp(t *testing.T, a *App) *App {
	t.Helper()
	if a.environ == nil {
		a.environ = []string{}
	}
	if err := a.resolve(); err != nil {
		t.Fatal(err)
	}
	if err := a.startFleets(context.Background(), transport); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Cleanup() })
	return a
}

func fleetConfig(n *fakeNode, name string) FleetConfig {
	return FleetConfig{Name: name, Endpoint: n.server.URL, Token: n.token, PollInterval: "5ms"}
}

type resolved struct {
	route, host, matched, fleet string
	dials                       []string
}

func resolve(t *testing.T, u *Upstreams, host, path string) resolved {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	r.Host = host
	vars := map[string]any{}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	ups, err := u.GetUpstreams(r)
	if err != nil {
		t.Fatal(err)
	}
	out := resolved{route: vars[VarRoute].(string), host: vars[VarHost].(string), matched: vars[VarMatched].(string), fleet: vars[VarFleet].(string)}
	for _, up := range ups {
		out.dials = append(out.dials, up.Dial)
	}
	return out
}

const apiDoc = `{"v":1,"routes":[{"host":"shop.svc.test","application":"shop","upstreams":[{"node":"n1","address":"10.0.0.1:8001"},{"node":"n2","address":"10.0.0.2:8001"}]},
{"host":"*.shop.example","application":"shop","upstreams":[{"node":"n1","address":"10.0.0.1:8001"}]}],
"api":{"hosts":["svc.test"],"upstreams":[{"node":"n1","address":"10.0.0.1:7070"}],"denied":["/v1/storage","/v1/ingress/routes"]}}`

func TestUpstreamsSetsVariables(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(apiDoc)
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "main")}})
	u := &Upstreams{app: app}
	cases := []struct {
		host, path string
		want       resolved
	}{
		{"Shop.SVC.test:443", "/", resolved{"ok", "shop.svc.test", "shop.svc.test", "main", []string{"10.0.0.1:8001", "10.0.0.2:8001"}}},
		{"x.shop.example", "/", resolved{"ok", "x.shop.example", "*.shop.example", "main", []string{"10.0.0.1:8001"}}},
		{"a.x.shop.example", "/", resolved{"unknown", "a.x.shop.example", "", "", nil}},
		{"svc.test", "/v1/applications", resolved{"ok", "svc.test", "svc.test", "main", []string{"10.0.0.1:7070"}}},
		{"svc.test", "/v1/storage/objects/x", resolved{"denied", "svc.test", "svc.test", "main", nil}},
		{"svc.test", "/v1/ingress/routes", resolved{"denied", "svc.test", "svc.test", "main", nil}},
		{"svc.test", "/v1/storagex", resolved{"ok", "svc.test", "svc.test", "main", []string{"10.0.0.1:7070"}}},
		{"shop.svc.test", "/v1/storage", resolved{"ok", "shop.svc.test", "shop.svc.test", "main", []string{"10.0.0.1:8001", "10.0.0.2:8001"}}},
	}
	for _, c := range cases {
		got := resolve(t, u, c.host, c.path)
		if got.route != c.want.route || got.host != c.want.host || got.matched != c.want.matched || got.fleet != c.want.fleet || strings.Join(got.dials, ",") != strings.Join(c.want.dials, ",") {
			t.Errorf("%s%s: got %+v, want %+v", c.host, c.path, got, c.want)
		}
	}
}

func TestUpstreamsUnavailableUntilAnyDocument(t *testing.T) {
	n := newFakeNode(t)
	n.setRoutes(func(*http.Request) (int, string, []byte) {
		return 503, "application/problem+json", []byte(`{"title":"Routing is not known yet"}`)
	})
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "main")}})
	u := &Upstreams{app: app}
	if got := resolve(t, u, "shop.svc.test", "/"); got.route != "unavailable" || got.matched != "" || got.fleet != "" {
		t.Fatalf("got %+v, want unavailable", got)
	}
	p := &Permission{app: app}
	if err := p.CertificateAllowed(context.Background(), "shop.svc.test"); err == nil {
		t.Fatal("permission approved a name before any document")
	}
	n.setDocument(apiDoc)
	eventually(t, "a document", func() bool { return resolve(t, u, "shop.svc.test", "/").route == "ok" })
	if got := resolve(t, u, "nobody.example", "/"); got.route != "unknown" {
		t.Fatalf("got %+v, want unknown once a document arrived", got)
	}
}

func TestUnreachableFleetAffectsOnlyItsHosts(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setDocument(docA)
	b.setDocument(docB)
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(a, "fleet-a"), fleetConfig(b, "fleet-b")}})
	u := &Upstreams{app: app}
	if got := resolve(t, u, "b.example", "/"); got.route != "ok" || got.fleet != "fleet-b" {
		t.Fatalf("got %+v", got)
	}
	b.server.Close() // fleet-b becomes unreachable
	a.setDocument(`{"v":1,"routes":[{"host":"a2.example","application":"a","upstreams":[{"node":"n1","address":"127.0.0.1:9009"}]}]}`)
	eventually(t, "fleet-a's change", func() bool { return resolve(t, u, "a2.example", "/").route == "ok" })
	if got := resolve(t, u, "b.example", "/"); got.route != "ok" || got.fleet != "fleet-b" || got.dials[0] != "127.0.0.1:9003" {
		t.Fatalf("fleet-b's last document stopped answering: %+v", got)
	}
}

func TestConflictFirstPublisherAcrossFleets(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	shared := `{"v":1,"routes":[{"host":"shared.example","application":"x","upstreams":[{"node":"n1","address":"127.0.0.1:%s"}]}]}`
	a.setDocument(strings.Replace(shared, "%s", "1001", 1))
	b.setDocument(strings.Replace(shared, "%s", "2002", 1))
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(b, "zulu"), fleetConfig(a, "alpha")}})
	u := &Upstreams{app: app}
	// Same refresh (both first documents during provisioning): declaration order.
	if got := resolve(t, u, "shared.example", "/"); got.fleet != "zulu" {
		t.Fatalf("got %+v, want zulu (declared first)", got)
	}
	// zulu stops publishing it: alpha takes over; zulu publishing again does not take it back.
	b.setDocument(docB)
	eventually(t, "alpha takes the host", func() bool { return resolve(t, u, "shared.example", "/").fleet == "alpha" })
	b.setDocument(strings.Replace(shared, "%s", "2003", 1))
	eventually(t, "zulu's new document", func() bool {
		c := app.Table().Conflicts()
		return len(c) == 1 && c[0].Owner == "alpha"
	})
	if got := resolve(t, u, "shared.example", "/"); got.fleet != "alpha" {
		t.Fatalf("got %+v, want alpha to keep the host", got)
	}
}

func TestPermissionApprovesOnlyRouteAndAPIHosts(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(apiDoc)
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "main")}})
	p := &Permission{app: app}
	for name, want := range map[string]bool{
		"shop.svc.test": true, "SHOP.svc.test": true, "svc.test": true,
		"x.shop.example": false, "*.shop.example": false, "shop.example": false, "other.example": false, "": false,
	} {
		err := p.CertificateAllowed(context.Background(), name)
		if (err == nil) != want {
			t.Errorf("%q: allowed=%v, want %v (%v)", name, err == nil, want, err)
		}
	}
}

func TestPlainHTTPMatcher(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setDocument(docA)
	b.setDocument(docB)
	plain := fleetConfig(b, "plain")
	plain.HTTPRedirect = "off"
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(a, "secure"), plain}})
	m := &PlainHTTP{app: app}
	for host, want := range map[string]bool{"b.example": true, "B.example:80": true, "a.example": false, "nobody.example": false} {
		r := httptest.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		r.Host = host
		if got, _ := m.MatchWithError(r); got != want {
			t.Errorf("%s: matched %v, want %v", host, got, want)
		}
	}
}

func TestNoOptionModulesRefuseOptions(t *testing.T) {
	type unmarshaler interface {
		caddyfile.Unmarshaler
		json.Unmarshaler
	}
	modules := map[string]unmarshaler{"storage": &Storage{}, "upstreams": &Upstreams{}, "permission": &Permission{}, "matcher": &PlainHTTP{}}
	for name, m := range modules {
		for _, input := range []string{"svc endpoint http://x", "svc {\n endpoint http://x\n}"} {
			err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
			if err == nil || !strings.Contains(err.Error(), "global svc block") {
				t.Errorf("%s: %q: %v, want a refusal saying where fleets are configured", name, input, err)
			}
		}
		if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser("svc")); err != nil {
			t.Errorf("%s: bare svc refused: %v", name, err)
		}
		if err := m.UnmarshalJSON([]byte(`{"endpoint":"http://x"}`)); err == nil || !strings.Contains(err.Error(), "global svc block") {
			t.Errorf("%s: JSON option: %v", name, err)
		}
		if err := m.UnmarshalJSON([]byte(`{}`)); err != nil {
			t.Errorf("%s: empty JSON refused: %v", name, err)
		}
	}
}

func TestGetUpstreamsAllocatesOnlyTheAnswer(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(apiDoc)
	app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "main")}})
	u := &Upstreams{app: app}
	r := httptest.NewRequest(http.MethodGet, "http://shop.svc.test/", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	allocs := testing.AllocsPerRun(200, func() { _, _ = u.GetUpstreams(r) })
	if allocs > 4 {
		t.Errorf("GetUpstreams allocates %v times, want at most 4 (the answer, the host variable and the application header)", allocs)
	}
	if _, ok := any(u).(interface{ ResetCache(*http.Request) error }); ok {
		t.Error("no cache to reset: GetUpstreams is a map lookup")
	}
	_ = routing.RouteOK
}

func TestUpstreamsNameTheApplicationOnlyToAnApplicationsUpstreams(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(apiDoc)
	u := &Upstreams{app: provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "main")}})}
	for _, c := range []struct{ url, want string }{
		{"http://shop.svc.test/", "shop"},
		{"http://a.shop.example/", "shop"},
		{"http://svc.test/v1/applications", ""},
		{"http://svc.test/v1/storage/x", ""},
		{"http://nobody.example/", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, c.url, nil)
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		r.Header.Set(ApplicationHeader, "forged")
		_, _ = u.GetUpstreams(r)
		if got := r.Header.Values(ApplicationHeader); c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
			t.Errorf("%s: %s %v, want %q", c.url, ApplicationHeader, got, c.want)
		}
	}
}
