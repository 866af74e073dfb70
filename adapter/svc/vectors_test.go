package svc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVectorsThroughModules serves every expected document of the shared
// vectors (testdata/routing) from a fake node and checks the upstreams and
// permission modules against it: route hosts resolve to themselves,
// `*.<base>` covers one label down and not two, API hosts resolve and deny
// their denied paths, and permission approves exactly route and API hosts.
func TestVectorsThroughModules(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "routing", "*.json"))
	if len(files) == 0 {
		t.Fatal("no vectors")
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Expected json.RawMessage `json:"expected"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Routes []struct {
				Host      string `json:"host"`
				Upstreams []struct {
					Address string `json:"address"`
				} `json:"upstreams"`
			} `json:"routes"`
			API *struct {
				Hosts  []string `json:"hosts"`
				Denied []string `json:"denied"`
			} `json:"api"`
		}
		_ = json.Unmarshal(v.Expected, &doc)
		var compact any
		_ = json.Unmarshal(v.Expected, &compact)
		body, _ := json.Marshal(compact)
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			n := newFakeNode(t)
			n.setDocument(string(body))
			app := provisionApp(t, &App{Fleets: []FleetConfig{fleetConfig(n, "v")}})
			u, p := &Upstreams{app: app}, &Permission{app: app}
			hosts := map[string]bool{}
			for _, r := range doc.Routes {
				hosts[r.Host] = true
			}
			for _, r := range doc.Routes {
				var want []string
				for _, up := range r.Upstreams {
					want = append(want, up.Address)
				}
				if base, ok := strings.CutPrefix(r.Host, "*."); ok {
					if !hosts["probe."+base] {
						if got := resolve(t, u, "probe."+base, "/"); got.route != "ok" || got.matched != r.Host || strings.Join(got.dials, ",") != strings.Join(want, ",") {
							t.Errorf("probe.%s: %+v", base, got)
						}
						if p.CertificateAllowed(context.Background(), "probe."+base) == nil {
							t.Errorf("permission approved probe.%s, covered only by %s", base, r.Host)
						}
					}
					if got := resolve(t, u, "a.probe."+base, "/"); got.matched == r.Host {
						t.Errorf("two labels below %s matched it", base)
					}
					if p.CertificateAllowed(context.Background(), r.Host) == nil {
						t.Errorf("permission approved %s", r.Host)
					}
					continue
				}
				got := resolve(t, u, strings.ToUpper(r.Host)+":443", "/")
				if got.route != "ok" || got.matched != r.Host || got.fleet != "v" || strings.Join(got.dials, ",") != strings.Join(want, ",") {
					t.Errorf("%s: %+v, want upstreams %v", r.Host, got, want)
				}
				if err := p.CertificateAllowed(context.Background(), r.Host); err != nil {
					t.Errorf("permission refused %s: %v", r.Host, err)
				}
			}
			if doc.API != nil {
				for _, h := range doc.API.Hosts {
					if got := resolve(t, u, h, "/v1/applications"); got.route != "ok" || got.matched != h {
						t.Errorf("api %s: %+v", h, got)
					}
					if err := p.CertificateAllowed(context.Background(), h); err != nil {
						t.Errorf("permission refused the API host %s: %v", h, err)
					}
					for _, d := range doc.API.Denied {
						for _, path := range []string{d, d + "/x"} {
							if got := resolve(t, u, h, path); got.route != "denied" || len(got.dials) != 0 {
								t.Errorf("api %s%s: %+v, want denied", h, path, got)
							}
						}
						if got := resolve(t, u, h, d+"x"); got.route != "ok" {
							t.Errorf("api %s%sx: %+v, want ok", h, d, got)
						}
					}
				}
			}
			if p.CertificateAllowed(context.Background(), "unnamed.invalid") == nil {
				t.Error("permission approved a name in no document")
			}
		})
	}
}
