package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheClient sends requests to the cache socket at `path`.
func cacheClient(path string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

func TestTheCacheAnswersAsAnAlwaysEmptyCache(t *testing.T) {
	dir := t.TempDir()
	cache, err := listenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.close()
	client := cacheClient(cacheSocketPath(dir))
	ask := func(method string, body io.Reader) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://cache.example/page", body)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		rest, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if len(rest) != 0 {
			t.Errorf("%s answered a body %q", method, rest)
		}
		return res
	}
	for _, method := range []string{http.MethodGet, http.MethodHead, "WHATEVER"} {
		res := ask(method, nil)
		if res.StatusCode != http.StatusGatewayTimeout || res.Header.Get("Cf-Cache-Status") != "MISS" {
			t.Errorf("%s: %d, Cf-Cache-Status %q; want a miss (504, MISS)", method, res.StatusCode, res.Header.Get("Cf-Cache-Status"))
		}
	}
	// A put's body is the response to keep: read to its end (a large one too), then dropped.
	stored := strings.Repeat("HTTP/1.1 200 OK\r\ncache-control: max-age=600\r\n\r\nkept?", 20000)
	body := &countingReader{r: strings.NewReader(stored)}
	if res := ask(http.MethodPut, body); res.StatusCode != http.StatusNoContent || res.Header.Get("Cf-Cache-Status") != "" {
		t.Errorf("PUT: %d, Cf-Cache-Status %q; want 204 and no status", res.StatusCode, res.Header.Get("Cf-Cache-Status"))
	}
	if body.n != len(stored) {
		t.Errorf("the put's body was read to byte %d of %d", body.n, len(stored))
	}
	if res := ask(http.MethodGet, nil); res.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("a match after a put: %d; want a miss, nothing is kept", res.StatusCode)
	}
	if res := ask("PURGE", nil); res.StatusCode != http.StatusNotFound || res.Header.Get("Cf-Cache-Status") != "" {
		t.Errorf("PURGE: %d, Cf-Cache-Status %q; want 404 (nothing was there)", res.StatusCode, res.Header.Get("Cf-Cache-Status"))
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestAStaleCacheSocketIsReplaced(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(cacheSocketPath(dir), []byte("left by a process that died"), 0o600); err != nil {
		t.Fatal(err)
	}
	cache, err := listenCache(dir)
	if err != nil {
		t.Fatalf("a stale file at the cache socket path stopped the listener: %v", err)
	}
	cache.close()
	cache.close() // a second close does nothing
	if _, err := os.Stat(cacheSocketPath(dir)); !os.IsNotExist(err) {
		t.Fatalf("the cache socket is left after close: %v", err)
	}
}

// prepareCacheWorker lays out a worker as prepareWorker does, its workerd config pointing the
// Cache API at the instance's cache socket as runtime/src/workerd.ts writes it; the worker
// answers what `caches.default` gave it.
func prepareCacheWorker(t *testing.T, stateDir string) Prepared {
	t.Helper()
	p := prepareWorker(t, stateDir, `export default {
  async fetch() {
    const key = new Request("https://cached.example/page");
    await caches.default.put(key, new Response("kept?", { headers: { "cache-control": "max-age=600" } }));
    const found = await caches.default.match(key);
    const deleted = await caches.default.delete(key);
    return Response.json({ found: found ?? null, deleted });
  },
};`)
	config := `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "cell-user", worker = .userWorker), (name = "cell-cache", external = (address = "unix:` + cacheSocketPath(p.Dir) + `", http = ())) ],
  sockets = [ (name = "http", address = "unix:` + p.Socket + `", http = (), service = "cell-user") ],
);
const userWorker :Workerd.Worker = (
  modules = [ (name = "w.js", esModule = embed "modules/w.js") ],
  compatibilityDate = "2025-06-01",
  cacheApiOutbound = "cell-cache",
);
`
	if err := os.WriteFile(filepath.Join(p.Dir, "config.capnp"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// askWorker fetches / from the instance's worker.
func askWorker(t *testing.T, in *Instance) string {
	t.Helper()
	res, err := (&http.Client{Transport: in.transport, Timeout: 30 * time.Second}).Get("http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the worker answered %d: %s\n%s", res.StatusCode, body, in.output())
	}
	return string(body)
}

// assertCacheGone fails unless nothing answers at the cache socket path any more.
func assertCacheGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the cache socket %s outlived its instance (%v)", path, err)
	}
	if conn, err := net.Dial("unix", path); err == nil {
		conn.Close()
		t.Errorf("something still answers at %s", path)
	}
}

func TestTheFrontAnswersAnInstancesCacheUntilTheInstanceStops(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareCacheWorker(t, stateDir)
	in, err := StartInstance(p, stateDir, 30*time.Second, func(string) {}, func(*Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	path := cacheSocketPath(p.Dir)
	if _, err := os.Stat(path); err != nil {
		in.Stop(true)
		t.Fatalf("no cache socket while the instance runs: %v", err)
	}
	if got := askWorker(t, in); got != `{"found":null,"deleted":false}` {
		in.Stop(true)
		t.Fatalf("the worker's cache calls gave %s; want a miss and nothing deleted", got)
	}
	in.Stop(false)
	assertCacheGone(t, path)
}

func TestTheCacheSocketGoesWithAWorkerdThatExitsOnItsOwn(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareCacheWorker(t, stateDir)
	lost := make(chan *Instance, 1)
	in, err := StartInstance(p, stateDir, 30*time.Second, func(string) {}, func(in *Instance) { lost <- in })
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop(true)
	path := cacheSocketPath(p.Dir)
	_ = in.cmd.Process.Kill()
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed workerd was not reported lost")
	}
	// The instance is lost but not stopped yet (its folder is still there): its cache socket is
	// already gone.
	if _, err := os.Stat(p.Dir); err != nil {
		t.Fatalf("the instance's folder went before Stop: %v", err)
	}
	assertCacheGone(t, path)
}

func TestAnInstanceWhoseCacheSocketCannotBeOpenedDoesNotStart(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareWorker(t, stateDir, `export default { fetch() { return new Response("ok"); } };`)
	// A folder in the way of the socket: the listener cannot be created there.
	if err := os.MkdirAll(filepath.Join(cacheSocketPath(p.Dir), "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := StartInstance(p, stateDir, 30*time.Second, func(string) {}, func(*Instance) {})
	if err == nil {
		in.Stop(true)
		t.Fatal("an instance started without its cache socket")
	}
	if !strings.HasPrefix(err.Error(), "web/v1 failed to start: ") || !strings.Contains(err.Error(), "cache socket") {
		t.Fatalf("the refusal %q does not say the cache socket is why", err)
	}
	if _, statErr := os.Stat(filepath.Join(stateDir, "workerd.pids")); statErr == nil {
		t.Fatal("workerd was started without its cache socket")
	}
}
