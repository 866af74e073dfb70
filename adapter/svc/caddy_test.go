package svc

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestThroughCaddy runs the modules inside a real Caddy (in this process)
// in front of a fake node and two backends: routing by host, the denied path
// answered 404 without reaching the node, unknown hosts 404, 503 before any
// document, the 308 redirect for redirected fleets, and on-demand TLS
// approved only for named hosts with the certificate stored through the
// fleet's storage protocol.
func TestThroughCaddy(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "app %s %s", r.Host, r.URL.Path) }))
	defer app.Close()
	daemonHits := make(chan string, 100)
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		daemonHits <- r.URL.Path
		fmt.Fprint(w, "daemon")
	}))
	defer daemon.Close()
	appAddr, daemonAddr := strings.TrimPrefix(app.URL, "http://"), strings.TrimPrefix(daemon.URL, "http://")

	n := newFakeNode(t)
	n.setRoutes(func(*http.Request) (int, string, []byte) {
		return 503, "application/problem+json", []byte(`{"type":"urn:svc:draining","title":"Routing is not known yet","status":503}`)
	})
	httpPort, httpsPort, directPort := freePort(t), freePort(t), freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin off
	http_port %d
	https_port %d
	storage svc
	svc {
		fleet main {
			endpoint %s
			token {env.SVC_E2E_TOKEN}
			poll_interval 20ms
			http_redirect off
		}
	}
	on_demand_tls {
		permission svc
	}
}

(proxy) {
	reverse_proxy {
		dynamic svc
		lb_policy first
		lb_retries 1
		lb_try_duration 1s
		max_fails 1
		fail_duration 30s
	}
}

(errors) {
	handle_errors {
		@unserved expression `+"`{http.vars.svc.route} in [\"unknown\", \"denied\"]`"+`
		handle @unserved {
			respond "<!doctype html><title>Not found</title>" 404
		}
		respond "{err.status_code} {err.status_text} {http.vars.svc.route}" {err.status_code}
	}
}

http:// {
	@plain svc_plain_http
	handle @plain {
		import proxy
	}
	handle {
		redir https://{host}{uri} 308
	}
	import errors
}

http://:%d {
	import proxy
	import errors
}

https:// {
	tls internal {
		on_demand
	}
	import proxy
	import errors
}
`, httpPort, httpsPort, n.server.URL, directPort)
	t.Setenv("SVC_E2E_TOKEN", n.token)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), n.token) {
		t.Fatal("the token was baked into the adapted configuration")
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()

	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the internal CA
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr)
				return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
			},
		},
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 308 {
			return 308, resp.Header.Get("Location")
		}
		return resp.StatusCode, string(body)
	}
	plain := func(host, path string) string { return fmt.Sprintf("http://%s:%d%s", host, httpPort, path) }

	// No document yet: 503 with svc.route unavailable (on a site that
	// proxies every host); the plain-HTTP matcher matches nothing yet.
	if status, body := get(fmt.Sprintf("http://shop.svc.test:%d/", directPort)); status != 503 || !strings.Contains(body, "unavailable") {
		t.Fatalf("before any document: %d %q", status, body)
	}
	if status, body := get(plain("shop.svc.test", "/")); status != 308 {
		t.Fatalf("before any document, plain HTTP: %d %q", status, body)
	}
	n.setDocument(fmt.Sprintf(`{"v":1,"routes":[{"host":"shop.svc.test","application":"shop","upstreams":[{"node":"n1","address":"%s"}]}],
		"api":{"hosts":["svc.test"],"upstreams":[{"node":"n1","address":"%s"}],"denied":["/v1/storage","/v1/ingress/routes"]}}`, appAddr, daemonAddr))
	eventually(t, "the document through Caddy", func() bool { s, _ := get(plain("shop.svc.test", "/")); return s == 200 })
	if status, body := get(plain("Shop.SVC.test", "/x")); status != 200 || !strings.HasPrefix(body, "app ") || !strings.HasSuffix(body, " /x") {
		t.Fatalf("routed: %d %q", status, body)
	}
	if status, body := get(plain("nobody.example", "/")); status != 308 || body != "https://nobody.example/" {
		t.Fatalf("an unserved host on plain HTTP: %d %q", status, body)
	}
	if status, body := get(fmt.Sprintf("http://nobody.example:%d/", directPort)); status != 404 || !strings.Contains(body, "Not found") {
		t.Fatalf("an unknown host: %d %q", status, body)
	}
	if status, body := get(plain("svc.test", "/v1/applications")); status != 200 || body != "daemon" {
		t.Fatalf("api host: %d %q", status, body)
	}
	<-daemonHits
	for _, path := range []string{"/v1/storage/objects/x", "/v1/ingress/routes", "/v1//storage"} {
		if status, body := get(plain("svc.test", path)); status != 404 || !strings.Contains(body, "Not found") {
			t.Fatalf("denied %s: %d %q", path, status, body)
		}
	}
	select {
	case p := <-daemonHits:
		t.Fatalf("a denied path reached the node: %s", p)
	default:
	}

	// HTTPS with on-demand TLS: a named host gets a certificate, stored in
	// the fleet's storage; an unnamed host gets none.
	secure := func(host, path string) string { return fmt.Sprintf("https://%s:%d%s", host, httpsPort, path) }
	if status, body := get(secure("shop.svc.test", "/tls")); status != 200 || !strings.HasPrefix(body, "app ") {
		t.Fatalf("https: %d %q", status, body)
	}
	n.mu.Lock()
	var stored []string
	for k := range n.objects {
		stored = append(stored, k)
	}
	n.mu.Unlock()
	if !strings.Contains(strings.Join(stored, " "), "certificates/local/shop.svc.test/shop.svc.test.crt") {
		t.Fatalf("the certificate was not stored through the fleet: %v", stored)
	}
	if status, body := get(secure("nobody.example", "/")); status != 0 || !strings.Contains(body, "tls") {
		t.Fatalf("an unnamed host got a TLS answer: %d %q", status, body)
	}
	if status, body := get(secure("nobody2.svc.test", "/")); status != 0 {
		t.Fatalf("an unnamed host got a TLS answer: %d %q", status, body)
	}
}

// TestWildcardPolicyThroughCaddy checks that a `*.<base>` key of the first
// documents becomes an automation policy of Caddy's TLS app, solved by the
// DNS provider whose zone covers the base, and is put under management.
func TestWildcardPolicyThroughCaddy(t *testing.T) {
	// Certificate management goes on in the background for a moment after
	// Stop, so the data directory is removed best-effort, not by t.TempDir.
	data, err := os.MkdirTemp("", "svc-wildcard-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("XDG_CONFIG_HOME", data)
	ca := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no CA here", 500) }))
	defer ca.Close()
	n := newFakeNode(t)
	n.setDocument(`{"v":1,"routes":[{"host":"*.shop.corp.example","application":"shop","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]},
		{"host":"*.other.example","application":"other","upstreams":[{"node":"n1","address":"127.0.0.1:1"}]}]}`)
	cfgFile := fmt.Sprintf(`{
	admin off
	http_port %d
	https_port %d
	storage svc
	svc {
		fleet main {
			endpoint %s
			token %s
		}
		dns corp svctest {
			zones corp.example
			api_token corp
		}
		acme_ca %s
		acme_email ops@example.com
	}
	on_demand_tls {
		permission svc
	}
}
https:// {
	tls {
		on_demand
	}
	reverse_proxy {
		dynamic svc
	}
}
`, freePort(t), freePort(t), n.server.URL, n.token, ca.URL)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfgFile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	v, err := caddy.ActiveContext().App("tls")
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, ap := range v.(*caddytls.TLS).Automation.Policies {
		subjects = append(subjects, ap.Subjects()...)
	}
	if !strings.Contains(strings.Join(subjects, " "), "*.shop.corp.example") {
		t.Fatalf("no automation policy for *.shop.corp.example: %v", subjects)
	}
	if strings.Contains(strings.Join(subjects, " "), "*.other.example") {
		t.Fatalf("a policy for a base no provider solves: %v", subjects)
	}
}
