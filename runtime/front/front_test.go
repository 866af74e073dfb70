package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMain doubles as a stand-in runtime host (the seam between the front and its host, the
// protocol of runtime/protocol/host-protocol.json): run with FAKE_HOST set, the test binary
// answers the hello, then each request with its op and its pid; with FAKE_HOST=crash it exits at
// once; with FAKE_HOST=answer:<JSON object> it answers that object as every request's result;
// with FAKE_HOST=refuse it refuses the hello as a host of another protocol version does.
func TestMain(m *testing.M) {
	mode := os.Getenv("FAKE_HOST")
	switch mode {
	case "":
		os.Exit(m.Run())
	case "crash":
		os.Exit(3)
	}
	fixed, hasFixed := strings.CutPrefix(mode, "answer:")
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		var req map[string]any
		_ = json.Unmarshal(lines.Bytes(), &req)
		var answer map[string]any
		switch {
		case req["op"] == "hello" && mode == "refuse":
			answer = map[string]any{"error": map[string]any{"code": "protocol-mismatch", "message": "the runtime host speaks protocol 7"}}
		case req["op"] == "hello":
			answer = map[string]any{"result": map[string]any{"protocol": req["protocol"], "host": "fake"}}
		case hasFixed:
			result := map[string]any{}
			_ = json.Unmarshal([]byte(fixed), &result)
			answer = map[string]any{"result": result}
		default:
			answer = map[string]any{"result": map[string]any{"op": req["op"], "pid": os.Getpid()}}
		}
		answer["id"] = req["id"]
		line, _ := json.Marshal(answer)
		os.Stdout.Write(append(line, '\n'))
		if mode == "refuse" {
			os.Exit(0)
		}
	}
	os.Exit(0)
}

func testConfig() *Config {
	return &Config{
		Application: "hello", Node: "n1", Host: "127.0.0.1", Port: 8080, VersionLine: "cell 9.9.9",
		HealthPath: "/.well-known/cell/health", SupervisorHeader: "cell-supervisor", StateDir: "/nonexistent",
		PollMs: 1000, LeaseTTLMs: 3000, DrainMs: 100, StopDrainMs: 100, StartTimeoutMs: 1000,
		RetryMs: 100, MaxRetryMs: 1000, PrivateHost: []string{os.Args[0]},
	}
}

func TestParseConfigRefusesWhatTheShimWouldNeverWrite(t *testing.T) {
	good, _ := json.Marshal(testConfig())
	if _, err := ParseConfig(string(good)); err != nil {
		t.Fatalf("a whole configuration is refused: %v", err)
	}
	for name, raw := range map[string]string{
		"unset":     "",
		"not JSON":  "{",
		"no app":    strings.Replace(string(good), `"application":"hello"`, `"application":""`, 1),
		"bad port":  strings.Replace(string(good), `"port":8080`, `"port":70000`, 1),
		"no host":   strings.Replace(string(good), `"privateHost":[`+jsonString(os.Args[0])+`]`, `"privateHost":[]`, 1),
		"zero poll": strings.Replace(string(good), `"pollMs":1000`, `"pollMs":0`, 1),
	} {
		if _, err := ParseConfig(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func fakeHost(t *testing.T, mode string) (*Host, *[]string) {
	var mu sync.Mutex
	var logged []string
	cfg := testConfig()
	h := NewHost(cfg, append(os.Environ(), "FAKE_HOST="+mode), func(line string) {
		mu.Lock()
		logged = append(logged, line)
		mu.Unlock()
	})
	t.Cleanup(func() { h.Close(time.Second) })
	return h, &logged
}

func TestAPrivateHostAnswersEveryRequestAndStays(t *testing.T) {
	h, _ := fakeHost(t, "echo")
	var wg sync.WaitGroup
	pids := make([]float64, 8)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var answer struct {
				Op  string  `json:"op"`
				PID float64 `json:"pid"`
			}
			if err := h.Call("look", map[string]int{"n": i}, &answer); err != nil || answer.Op != "look" {
				t.Errorf("call %d: %v %+v", i, err, answer)
			}
			pids[i] = answer.PID
		}()
	}
	wg.Wait()
	for _, pid := range pids {
		if pid != pids[0] {
			t.Fatalf("the calls reached more than one host process: %v", pids)
		}
	}
}

func TestAHostThatCannotStartFailsTheCallWithinItsBound(t *testing.T) {
	h, logged := fakeHost(t, "crash")
	var answer struct{}
	started := time.Now()
	if err := h.CallWithin(300*time.Millisecond, "look", nil, &answer); err == nil {
		t.Fatal("a host that exited without answering gave no error")
	}
	if waited := time.Since(started); waited > 5*time.Second {
		t.Fatalf("the call waited %v past its bound", waited)
	}
	if len(*logged) != 1 || !strings.Contains((*logged)[0], "cannot reach the runtime host") {
		t.Fatalf("the failure to connect was not said once: %q", *logged)
	}
}

func TestAHostOfAnotherProtocolIsRefusedWithItsReason(t *testing.T) {
	h, _ := fakeHost(t, "refuse")
	var answer struct{}
	err := h.CallWithin(200*time.Millisecond, "look", nil, &answer)
	if err == nil || !strings.Contains(err.Error(), "the runtime host speaks protocol 7") {
		t.Fatalf("a refused hello: %v", err)
	}
}

func TestFailedStartsWaitLongerEachTimeAndLogOnce(t *testing.T) {
	var logged []string
	f := NewFollower(testConfig(), nil, func(line string) { logged = append(logged, line) }, func(*Instance) {}, func() {})
	selection := "etag1|"
	want := []time.Duration{100, 200, 400, 800, 1000}
	for i, w := range want {
		// The wait is measured from the failure, so it is bracketed by the clock read either
		// side of it, however slowly the machine runs.
		before := time.Now()
		f.failed(&selection, "hello/abc failed to start: boom")
		after := time.Now()
		if wait := w * time.Millisecond; f.retryAt.Before(before.Add(wait)) || f.retryAt.After(after.Add(wait)) {
			t.Fatalf("failure %d: retry at %v after the failure, want %v", i+1, f.retryAt.Sub(before), wait)
		}
	}
	if len(logged) != 1 || logged[0] != "cell: hello/abc failed to start: boom" {
		t.Fatalf("logged %q", logged)
	}
	if status, detail := f.Status(); status != statusFailed || detail == "" {
		t.Fatalf("status %q %q", status, detail)
	}
	other := "etag2|"
	f.failed(&other, "hello/def failed to start: boom")
	if f.failures != 1 || len(logged) != 2 {
		t.Fatalf("a new selection counts from one: failures %d, logged %q", f.failures, logged)
	}
}

func TestHealthSaysWhereTheReplicaStands(t *testing.T) {
	cfg := testConfig()
	f := NewFollower(cfg, nil, func(string) {}, func(*Instance) {}, func() {})
	p := NewProxy(cfg, f, func(string) {})
	get := func(header string) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodGet, cfg.HealthPath, nil)
		if header != "" {
			req.Header.Set(header, "1")
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("health is not JSON: %q", rec.Body.String())
		}
		return rec.Code, body
	}
	code, body := get("")
	if code != 503 || body["status"] != "starting" || body["runtime"] != "cell 9.9.9" || body["application"] != "hello" {
		t.Fatalf("before the first look: %d %v", code, body)
	}
	f.setStatus(statusNoDeployment, "")
	if code, body = get(""); code != 503 || body["status"] != "no-deployment" {
		t.Fatalf("nothing published: %d %v", code, body)
	}
	f.active.Store(&Instance{Prepared: Prepared{Script: "hello", Deployment: "abc"}})
	code, body = get("")
	if code != 200 || body["status"] != "ready" || body["deployment"] != "abc" {
		t.Fatalf("serving: %d %v", code, body)
	}
	p.supervisedAt.Store(0)
	get("")
	if p.supervisedAt.Load() != 0 {
		t.Fatal("a probe without the supervisor's header was taken for supervision")
	}
	get(cfg.SupervisorHeader)
	if p.supervisedAt.Load() == 0 {
		t.Fatal("a supervisor's probe was not noted")
	}
	f.Stop()
	if code, body = get(""); code != 503 || body["status"] != "stopping" {
		t.Fatalf("stopping: %d %v", code, body)
	}
}

func TestRequestsBeforeAnyDeploymentAreToldToRetryAndWhy(t *testing.T) {
	cfg := testConfig()
	cfg.PollMs = 300_000
	nothing, _ := fakeHost(t, "echo")
	f := NewFollower(cfg, nothing, func(string) {}, func(*Instance) {}, func() {})
	p := NewProxy(cfg, f, func(string) {})
	p.hold = 0 // what a request held in vain is told (the hold itself: proxy_test.go)
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		return rec
	}
	// A front that has not looked yet (it just started, or restarted) does not know of nothing.
	if rec := get(); rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != "The deployment is starting\n" {
		t.Fatalf("before the first look: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
	f.host, _ = fakeHost(t, `answer:{"result":"none"}`)
	f.look()
	if rec := get(); rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != "No deployment has been published yet\n" {
		t.Fatalf("after a look found nothing: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

func TestUpgradeNeedsBothHeaders(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/ws", nil)
	req.Header.Set("Upgrade", "websocket")
	if isUpgrade(req) {
		t.Fatal("Upgrade without Connection: upgrade counted")
	}
	req.Header.Set("Connection", "keep-alive, Upgrade")
	if !isUpgrade(req) {
		t.Fatal("Connection: keep-alive, Upgrade not counted")
	}
}

// receive answers the next value from `ch`, failing the test if none comes within 5 s.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for " + what)
	}
	var zero T
	return zero
}

func TestTheLeaseJoinsALookWhenItsRenewalIsDueAnyway(t *testing.T) {
	cfg := testConfig()
	cfg.LeaseTTLMs = 30_000 // renewed every 10 s

	// The decision alone: renew now only when the timer would anyway within the look's interval.
	idle := NewLease(cfg, nil, 1, func(string) {}, func() map[string]string { return nil })
	idle.next.Store(time.Now().Add(10 * time.Second).UnixMilli())
	idle.RenewIfDueWithin(time.Second)
	if len(idle.renew) != 0 {
		t.Fatal("a renewal not due within the look's interval was asked for early")
	}
	idle.RenewIfDueWithin(20 * time.Second)
	if len(idle.renew) != 1 {
		t.Fatal("a renewal due within the look's interval was not asked for")
	}

	// And the loop: it arms the next renewal after each write, and an early one is made at once.
	s, _ := fakeHost(t, "echo")
	writes := make(chan struct{}, 8)
	l := NewLease(cfg, s, 1, func(string) {}, func() map[string]string {
		writes <- struct{}{}
		return nil
	})
	go l.Run()
	defer l.Release()
	receive(t, writes, "the first lease write")
	l.RenewIfDueWithin(20 * time.Second)
	receive(t, writes, "the early renewal")
	if until := time.Until(time.UnixMilli(l.next.Load())); until < 9*time.Second {
		t.Fatalf("the renewal after the first write was armed %v ahead, not a third of the lifetime", until)
	}
}

func TestOnlyThePollIntervalsLooksAreTold(t *testing.T) {
	s, _ := fakeHost(t, "echo")
	cfg := testConfig()
	cfg.PollMs = 20
	polled := make(chan struct{}, 64)
	var polls atomic.Int32
	f := NewFollower(cfg, s, func(string) {}, func(*Instance) {}, func() {
		polls.Add(1)
		select {
		case polled <- struct{}{}:
		default:
		}
	})
	go f.Run()
	for range 3 {
		receive(t, polled, "a safety look")
	}
	f.Stop()
	<-f.done
	s.mu.Lock()
	looks := s.nextID
	s.mu.Unlock()
	// Every look but the first (at start, asked for by nobody's timer) came from the poll
	// interval: each of those is told, and the first is not.
	if int(polls.Load()) != looks-1 {
		t.Fatalf("%d polls told for %d looks, want one less (the look at start is no poll)", polls.Load(), looks)
	}
}

func TestAnOwedLookThatCannotReadTheSelectorIsTriedAgainSoon(t *testing.T) {
	down, _ := fakeHost(t, `answer:{"result":"failed","selection":null,"message":"the bucket is not answering"}`)
	cfg := testConfig()
	cfg.PollMs = 300_000
	f := NewFollower(cfg, down, func(string) {}, func(*Instance) {}, func() {})
	// A safety look (nobody asked for it) that fails waits for the next safety look.
	f.look()
	if !f.lookAgainAt.IsZero() {
		t.Fatalf("a failed safety look was scheduled again at %v", f.lookAgainAt)
	}
	if wait := f.nextLookIn(); wait != ms(cfg.PollMs) {
		t.Fatalf("next look in %v, want the poll interval", wait)
	}
	// An owed look (a SIGHUP asked for it) is tried again after 1 s, doubling to 5 s.
	f.asked = true
	var waits []time.Duration
	for range 5 {
		f.look()
		waits = append(waits, f.nextLookIn().Round(100*time.Millisecond))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if status, _ := f.Status(); status == statusFailed {
		t.Fatal("a bucket that does not answer was held against the deployment")
	}
	// Once a look reads the selector, nothing is owed and the poll interval applies again.
	up, _ := fakeHost(t, `answer:{"result":"none"}`)
	f.host = up
	f.look()
	if f.asked || f.unread != 0 || !f.lookAgainAt.IsZero() || f.nextLookIn() != ms(cfg.PollMs) {
		t.Fatalf("after a read: asked %v, unread %d, again at %v", f.asked, f.unread, f.lookAgainAt)
	}
}

func TestAnOwedLookRunsAgainWithoutThePoll(t *testing.T) {
	down, _ := fakeHost(t, `answer:{"result":"failed","selection":null,"message":"the bucket is not answering"}`)
	cfg := testConfig()
	cfg.PollMs = 300_000
	polled := make(chan struct{}, 8)
	f := NewFollower(cfg, down, func(string) {}, func(*Instance) {}, func() { polled <- struct{}{} })
	go f.Run()
	defer func() {
		f.Stop()
		<-f.done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		down.mu.Lock()
		looks := down.nextID
		down.mu.Unlock()
		if looks >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d looks in 10 s: the owed first look was not tried again", looks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-polled:
		t.Fatal("a look tried again was told as a safety look")
	default:
	}
}
