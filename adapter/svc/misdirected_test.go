package svc

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// shippedProxySnippet is the (svc_proxy) snippet of the shipped Caddyfile, so
// that these tests check the settings operators get.
func shippedProxySnippet(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(text), "(svc_proxy) {")
	end := strings.Index(string(text)[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("the shipped Caddyfile has no (svc_proxy) snippet")
	}
	return string(text)[start : start+end+3]
}

// frontOf stands in for a cell-front serving `application` (the seam is the
// upstream's HTTP): it refuses a request routed to another application as the
// front does, and otherwise answers with the application's body, noting what
// the worker would see of the application header.
func frontOf(t *testing.T, application string, workerSaw *atomic.Value, hits *atomic.Int32) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if meant := r.Header.Values(ApplicationHeader); len(meant) != 1 || meant[0] != application {
			w.Header().Set(MisdirectedHeader, application)
			w.WriteHeader(http.StatusMisdirectedRequest)
			fmt.Fprintf(w, "this port serves %s", application)
			return
		}
		if workerSaw != nil {
			workerSaw.Store(r.Header.Get(ApplicationHeader))
		}
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "body of %s", application)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// TestAMisdirectedRequestIsTriedOnTheNextUpstream: the route of hello names
// first a port where another application's front now listens (a restarted
// node), then hello's front on another node. Through the shipped settings,
// every request gets hello's body, whatever its method, and never the other
// application's; a client's own Svc-Application is replaced; a worker's own
// 421 (without the marker) is passed on, not retried.
func TestAMisdirectedRequestIsTriedOnTheNextUpstream(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var seen atomic.Value
	var strayHits, helloHits, worker421Hits atomic.Int32
	stray := frontOf(t, "shop", nil, &strayHits)
	hello := frontOf(t, "hello", &seen, &helloHits)
	worker421 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		worker421Hits.Add(1)
		w.WriteHeader(http.StatusMisdirectedRequest)
		fmt.Fprint(w, "the worker's own 421")
	}))
	defer worker421.Close()
	n := newFakeNode(t)
	n.setDocument(fmt.Sprintf(`{"v":1,"routes":[
		{"host":"hello.svc.test","application":"hello","upstreams":[{"node":"n1","address":"%s"},{"node":"n2","address":"%s"}]},
		{"host":"w.svc.test","application":"w","upstreams":[{"node":"n1","address":"%s"},{"node":"n2","address":"%s"}]}]}`,
		stray, hello, strings.TrimPrefix(worker421.URL, "http://"), hello))
	port := freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin off
	svc {
		fleet main {
			endpoint %s
			token {env.SVC_E2E_TOKEN}
			poll_interval 20ms
		}
	}
}

%s
http://:%d {
	import svc_proxy
}
`, n.server.URL, shippedProxySnippet(t), port)
	t.Setenv("SVC_E2E_TOKEN", n.token)
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()

	sendBody := func(method, host, forged, content string) (int, string) {
		var payload io.Reader
		if content != "" {
			payload = strings.NewReader(content)
		}
		req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/", port), payload)
		req.Host = host
		if forged != "" {
			req.Header.Set(ApplicationHeader, forged)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	send := func(method, host, forged string) (int, string) { return sendBody(method, host, forged, "") }
	eventually(t, "the document through Caddy", func() bool { s, _ := send(http.MethodGet, "hello.svc.test", ""); return s == 200 })
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		before := strayHits.Load()
		status, body := send(method, "hello.svc.test", "")
		if status != 200 || body != "body of hello" {
			t.Fatalf("%s: got %d %q, want hello's body", method, status, body)
		}
		if strayHits.Load() != before+1 {
			t.Fatalf("%s: the stray front was asked %d times, want once (then left out)", method, strayHits.Load()-before)
		}
	}
	// A body already went to the stray front with the request: Caddy cannot send it again, and
	// says so (502); the client never gets the other application's answer.
	before := strayHits.Load()
	if status, body := sendBody(http.MethodPost, "hello.svc.test", "", "a body"); status != 502 || strayHits.Load() != before+1 {
		t.Fatalf("a request with a body: got %d %q after %d tries of the stray front, want 502 after one", status, body, strayHits.Load()-before)
	}
	if status, body := send(http.MethodGet, "hello.svc.test", "shop"); status != 200 || body != "body of hello" {
		t.Fatalf("a client's own %s: got %d %q", ApplicationHeader, status, body)
	}
	if got := seen.Load(); got != "hello" {
		t.Fatalf("the front was told %q, want hello", got)
	}
	if status, body := sendBody(http.MethodPost, "w.svc.test", "", "x"); status != 421 || body != "the worker's own 421" || worker421Hits.Load() != 1 {
		t.Fatalf("a worker's own 421: got %d %q after %d tries, want it passed on after one", status, body, worker421Hits.Load())
	}
}
