package svc

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/svc-dev/svc/adapter/routing"
)

const docA = `{"v":1,"routes":[{"host":"a.example","application":"a","upstreams":[{"node":"n1","address":"127.0.0.1:9001"},{"node":"n2","address":"127.0.0.1:9002"}]}]}`
const docB = `{"v":1,"routes":[{"host":"b.example","application":"b","upstreams":[{"node":"n1","address":"127.0.0.1:9003"}]}]}`

func testSpec(n *fakeNode, name string) fleetSpec {
	return fleetSpec{
		Name: name, Endpoint: n.server.URL, Token: n.token, Prefer: "self",
		PollInterval: 5 * time.Millisecond, Timeout: 2 * time.Second, StorageTimeout: 2 * time.Second, HTTPRedirect: true,
	}
}

// startPoller runs a poller outside the pool with an observed logger.
func startPoller(t *testing.T, spec fleetSpec) (*poller, *observer.ObservedLogs, *counter) {
	core, logs := observer.New(zap.DebugLevel)
	p := newPoller(spec, transport, zap.New(core))
	c := &counter{}
	p.subscribe(c.inc)
	p.start()
	t.Cleanup(func() { _ = p.Destruct() })
	return p, logs, c
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func countLogs(logs *observer.ObservedLogs, prefix string) int {
	n := 0
	for _, e := range logs.All() {
		if strings.HasPrefix(e.Message, prefix) {
			n++
		}
	}
	return n
}

func TestPollerDropsIdenticalBytes(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(docA)
	p, logs, published := startPoller(t, testSpec(n, "a"))
	eventually(t, "several polls", func() bool { return n.hits() >= 5 })
	if published.get() != 1 {
		t.Fatalf("published %d times for identical bytes, want 1", published.get())
	}
	if got := countLogs(logs, "routing document received"); got != 1 {
		t.Fatalf("%d document log lines, want 1", got)
	}
	n.setDocument(docB)
	eventually(t, "the new document", func() bool { return published.get() == 2 })
	if d := p.current(); d.Routes[0].Host != "b.example" {
		t.Fatalf("current %+v", d)
	}
}

func TestPollerRefusesOtherVersionsWhole(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(docA)
	p, logs, published := startPoller(t, testSpec(n, "a"))
	eventually(t, "first document", func() bool { return published.get() == 1 })
	n.setDocument(`{"v":2,"routes":[{"host":"evil.example","application":"x","upstreams":[{"node":"n","address":"1.2.3.4:1"}]}]}`)
	h := n.hits()
	eventually(t, "polls of the v2 document", func() bool { return n.hits() >= h+4 })
	if published.get() != 1 || p.current().Routes[0].Host != "a.example" {
		t.Fatalf("a v2 document replaced the last understood one: %+v", p.current())
	}
	if got := countLogs(logs, "routing fetch failed"); got != 1 {
		t.Fatalf("%d failure log lines for a repeated refusal, want 1", got)
	}
	n.setDocument(docB)
	eventually(t, "a v1 document again", func() bool { return published.get() == 2 })
}

func TestPollerKeepsLastDocumentOnFailureAndLogsOncePerChange(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(docA)
	p, logs, published := startPoller(t, testSpec(n, "a"))
	eventually(t, "first document", func() bool { return published.get() == 1 })
	n.setRoutes(func(*http.Request) (int, string, []byte) { return 500, "text/plain", []byte("boom") })
	h := n.hits()
	eventually(t, "failing polls", func() bool { return n.hits() >= h+5 })
	if p.current() == nil || p.current().Routes[0].Host != "a.example" {
		t.Fatal("the last document was lost on failure")
	}
	if got := countLogs(logs, "routing fetch failed; serving the last document"); got != 1 {
		t.Fatalf("%d failure lines, want 1", got)
	}
	n.setDocument(docA) // same bytes as before the failure
	eventually(t, "recovery", func() bool { return countLogs(logs, "routing fetch recovered") == 1 })
	if published.get() != 1 {
		t.Fatal("identical bytes republished after a recovery")
	}
	n.setRoutes(func(*http.Request) (int, string, []byte) { return 500, "text/plain", []byte("boom") })
	eventually(t, "second failure", func() bool { return countLogs(logs, "routing fetch failed") == 2 })
}

func TestPollerTreatsDrainingAsFailure(t *testing.T) {
	n := newFakeNode(t)
	n.setRoutes(func(*http.Request) (int, string, []byte) {
		return 503, "application/problem+json", []byte(`{"type":"urn:svc:draining","title":"Routing is not known yet","status":503,"detail":"node n1 has not completed its first reconcile pass"}`)
	})
	p, logs, published := startPoller(t, testSpec(n, "a"))
	eventually(t, "a failure", func() bool { return countLogs(logs, "routing fetch failed") == 1 })
	if p.current() != nil || published.get() != 0 {
		t.Fatal("a draining answer was taken as a document")
	}
	msg := logs.All()[0].ContextMap()["error"].(string)
	if !strings.Contains(msg, "503") || !strings.Contains(msg, "Routing is not known yet") || !strings.Contains(msg, "node n1") {
		t.Fatalf("failure does not report the problem's title and detail: %s", msg)
	}
	table := routing.Build([]routing.Fleet{{Name: "a", Document: p.current()}}, nil)
	if route, _ := table.Outcome("a.example", "/"); route != routing.RouteUnavailable {
		t.Fatalf("route %s before any document, want unavailable", route)
	}
	n.setDocument(docA)
	eventually(t, "document", func() bool { return published.get() == 1 })
}

func TestPollerWaitsPollIntervalAfterEachAttempt(t *testing.T) {
	n := newFakeNode(t)
	const interval = 40 * time.Millisecond
	var mu sync.Mutex
	var starts, ends []time.Time
	n.setRoutes(func(*http.Request) (int, string, []byte) {
		mu.Lock()
		starts = append(starts, time.Now())
		slow := len(starts) == 1
		mu.Unlock()
		if slow {
			<-time.After(3 * interval) // a slow node: longer than the interval
		}
		mu.Lock()
		ends = append(ends, time.Now())
		mu.Unlock()
		return 200, "application/json", []byte(docA)
	})
	spec := testSpec(n, "a")
	spec.PollInterval = interval
	startPoller(t, spec)
	eventually(t, "three attempts", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts) && i < len(ends); i++ {
		if gap := starts[i].Sub(ends[i-1]); gap < interval {
			t.Errorf("attempt %d started %v after the previous one ended, want at least %v", i+1, gap, interval)
		}
	}
}

func TestPollerTimeoutBoundsOneFetch(t *testing.T) {
	n := newFakeNode(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	n.setRoutes(func(r *http.Request) (int, string, []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return 200, "application/json", []byte(docA)
	})
	spec := testSpec(n, "a")
	spec.Timeout = 30 * time.Millisecond
	_, logs, _ := startPoller(t, spec)
	eventually(t, "a timed-out fetch", func() bool { return countLogs(logs, "routing fetch failed") == 1 })
	eventually(t, "a second attempt after the timeout", func() bool { return n.hits() >= 2 })
}

func TestPollerPrefer(t *testing.T) {
	for prefer, want := range map[string]string{"self": "prefer=self", "": "", "n-2": "prefer=n-2"} {
		n := newFakeNode(t)
		n.setDocument(docA)
		spec := testSpec(n, "a")
		spec.Prefer = prefer
		_, _, published := startPoller(t, spec)
		eventually(t, "a document", func() bool { return published.get() == 1 })
		n.mu.Lock()
		got := n.routeQueries[0]
		n.mu.Unlock()
		if got != want {
			t.Errorf("prefer %q sent query %q, want %q", prefer, got, want)
		}
	}
}

func TestPollerPathPrefixPreserved(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(docA)
	spec := testSpec(n, "a")
	spec.Endpoint = n.server.URL + "/node-api"
	p, _, published := startPoller(t, spec)
	eventually(t, "a document", func() bool { return published.get() == 1 })
	if got := p.routesURL(); got != n.server.URL+"/node-api/v1/ingress/routes?prefer=self" {
		t.Fatalf("url %s", got)
	}
}

func TestPollersSharedAcrossReloads(t *testing.T) {
	n := newFakeNode(t)
	n.setDocument(docA)
	fc := FleetConfig{Name: "shared", Endpoint: n.server.URL, Token: n.token, PollInterval: "5ms"}
	old := &App{Fleets: []FleetConfig{fc}, environ: []string{}}
	if err := old.resolve(); err != nil {
		t.Fatal(err)
	}
	if err := old.startFleets(context.Background(), transport); err != nil {
		t.Fatal(err)
	}
	if route, _ := old.Table().Outcome("a.example", "/"); route != routing.RouteOK {
		t.Fatalf("the first fetch during provisioning did not answer: %s", route)
	}
	// A reload: the new configuration takes its reference first.
	fresh := &App{Fleets: []FleetConfig{fc}, environ: []string{}}
	if err := fresh.resolve(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.startFleets(context.Background(), transport); err != nil {
		t.Fatal(err)
	}
	if fresh.fleets[0].poller != old.fleets[0].poller {
		t.Fatal("the reloaded configuration got a new poller")
	}
	p := fresh.fleets[0].poller
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		t.Fatal("the poller stopped while the new configuration uses it")
	default:
	}
	h := n.hits()
	eventually(t, "polling after the old configuration left", func() bool { return n.hits() > h+2 })
	n.setDocument(docB)
	eventually(t, "the new configuration to see a change", func() bool {
		route, _ := fresh.Table().Outcome("b.example", "/")
		return route == routing.RouteOK
	})
	if err := fresh.Cleanup(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the poller did not stop when the last configuration released it")
	}
}
