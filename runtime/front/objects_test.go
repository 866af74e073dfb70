package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// objectsHost stands in for a runtime host on a Unix socket: it answers the hello, and each
// `objects` question with what `answer` says, once the channel it gives is released (nil: at
// once; `never`: never), as a host holds a question until its next renewal.
type objectsHost struct {
	questions atomic.Int32
	answer    func(n int, question objectsRequest) (map[string]any, <-chan struct{})
}

// never is a release that never comes: the host does not answer (a stopped daemon).
var never = make(chan struct{})

// after is a release that comes `d` from now: an answer that is late by that much, the input of
// a test about late answers.
func after(d time.Duration) <-chan struct{} {
	release := make(chan struct{})
	time.AfterFunc(d, func() { close(release) })
	return release
}

func listenObjectsHost(t *testing.T, h *objectsHost) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.sock")
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Close() })
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			go func() {
				var writing sync.Mutex
				write := func(line map[string]any) {
					text, _ := json.Marshal(line)
					writing.Lock()
					defer writing.Unlock()
					_, _ = conn.Write(append(text, '\n'))
				}
				lines := bufio.NewScanner(conn)
				for lines.Scan() {
					var req struct {
						ID int    `json:"id"`
						Op string `json:"op"`
						objectsRequest
					}
					_ = json.Unmarshal(lines.Bytes(), &req)
					if req.Op == "hello" {
						write(map[string]any{"id": req.ID, "result": map[string]any{"protocol": hostProtocolVersion, "host": "stand-in"}})
						continue
					}
					if req.Op != "objects" {
						write(map[string]any{"id": req.ID, "error": map[string]any{"code": "bad-request", "message": "unknown op"}})
						continue
					}
					result, release := h.answer(int(h.questions.Add(1)), req.objectsRequest)
					go func() {
						if release != nil {
							<-release
						}
						if result["error"] != nil {
							write(map[string]any{"id": req.ID, "error": result["error"]})
							return
						}
						write(map[string]any{"id": req.ID, "result": result})
					}()
				}
			}()
		}
	}()
	return path
}

// newTestGuard makes a guard on a stand-in host; its lapses are counted, the time of the first kept.
type lapses struct {
	mu    sync.Mutex
	count int
	first time.Time
	why   string
}

func newTestGuard(t *testing.T, h *objectsHost) (*objectsGuard, *lapses) {
	t.Helper()
	cfg := testConfig()
	cfg.HostSocket, cfg.PrivateHost = listenObjectsHost(t, h), nil
	host := NewHost(cfg, nil, func(string) {})
	t.Cleanup(func() { host.Close(time.Second) })
	seen := &lapses{}
	g := newObjectsGuard(host, func(string) {}, func(why string) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if seen.count == 0 {
			seen.first, seen.why = time.Now(), why
		}
		seen.count++
	})
	t.Cleanup(g.Stop)
	return g, seen
}

func (l *lapses) get() (int, time.Time, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count, l.first, l.why
}

func eventually(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The validity counts from when the question was sent, not from when its answer was read: an
// answer that comes late buys no time beyond the host's own deadline.
func TestTheDeadlineCountsFromTheQuestionNotTheAnswer(t *testing.T) {
	h := &objectsHost{answer: func(n int, q objectsRequest) (map[string]any, <-chan struct{}) {
		if n == 1 {
			return map[string]any{"result": "holding", "validMs": 600, "renewal": 1}, after(300 * time.Millisecond)
		}
		return nil, never // the host stops answering (a stopped daemon)
	}}
	g, seen := newTestGuard(t, h)
	if g.Serving() {
		t.Fatal("a guard that heard nothing lets the objects serve")
	}
	asked := time.Now()
	askedSinceBase := time.Since(g.base)
	g.Begin()
	answeredAfter := time.Since(asked)
	if !g.Serving() || answeredAfter < 250*time.Millisecond {
		t.Fatalf("after the first answer (%v): serving %v", answeredAfter, g.Serving())
	}
	if d := time.Duration(g.deadline.Load()) - askedSinceBase; d < 600*time.Millisecond || d >= 700*time.Millisecond {
		t.Fatalf("the deadline is %v after the question; want 600 ms from it (not from the answer, 300 ms later)", d)
	}
	eventually(t, 3*time.Second, "the deadline passes", func() bool { n, _, _ := seen.get(); return n > 0 })
	_, at, why := seen.get()
	if took := at.Sub(asked); took < 600*time.Millisecond {
		t.Fatalf("the lapse came %v after the question, before the deadline", took)
	}
	if g.Serving() || why == "" {
		t.Fatalf("past the deadline: serving %v, reason %q", g.Serving(), why)
	}
}

// Renewals heard in time keep the objects served; each question names the renewal last heard, so
// the host holds it until the next one, and there is one question per renewal.
func TestRenewalsHeardInTimeKeepServing(t *testing.T) {
	const renewalsMade = 12
	var renewals []int64
	var mu sync.Mutex
	renew := make(chan struct{}) // the test renews: the question outstanding is answered
	h := &objectsHost{answer: func(n int, q objectsRequest) (map[string]any, <-chan struct{}) {
		mu.Lock()
		renewals = append(renewals, q.Renewal)
		mu.Unlock()
		if q.WaitMs <= 0 {
			t.Errorf("a question with no wait bound: %+v", q)
		}
		answer := map[string]any{"result": "holding", "validMs": 30_000, "renewal": n}
		if n == 1 {
			return answer, nil
		}
		return answer, renew
	}}
	g, seen := newTestGuard(t, h)
	g.Begin()
	for n := 2; n <= renewalsMade+1; n++ {
		eventually(t, 5*time.Second, "the next question", func() bool { return int(h.questions.Load()) >= n })
		if !g.Serving() {
			t.Fatalf("the objects stopped serving at renewal %d", n-1)
		}
		if n <= renewalsMade {
			renew <- struct{}{}
		}
	}
	if n, _, why := seen.get(); n != 0 {
		t.Fatalf("lapsed while renewed: %s", why)
	}
	mu.Lock()
	defer mu.Unlock()
	want := make([]int64, renewalsMade+1)
	for k := range want {
		want[k] = int64(k)
	}
	if fmt.Sprint(renewals) != fmt.Sprint(want) {
		t.Fatalf("the questions named the renewals %v; want %v (one question per renewal)", renewals, want)
	}
}

// A host that says this node stands by ends serving at once.
func TestAStandbyAnswerEndsServingAtOnce(t *testing.T) {
	h := &objectsHost{answer: func(n int, q objectsRequest) (map[string]any, <-chan struct{}) {
		if n == 1 {
			return map[string]any{"result": "holding", "validMs": 60_000, "renewal": 1}, nil
		}
		return map[string]any{"result": "standby"}, nil
	}}
	g, seen := newTestGuard(t, h)
	g.Begin()
	eventually(t, 2*time.Second, "the standby answer is acted on", func() bool { n, _, _ := seen.get(); return n == 1 })
	if g.Serving() {
		t.Fatal("serving after the host said this node stands by")
	}
	if n := h.questions.Load(); n != 2 {
		t.Fatalf("%d questions; after standby the guard asks no more (a later start asks again)", n)
	}
}

// A host that keeps no lease (`unleased`), or is older than the question (bad-request), leaves
// the objects served without a deadline, as before.
func TestAHostWithoutALeaseLeavesNoDeadline(t *testing.T) {
	for name, answer := range map[string]map[string]any{
		"unleased":    {"result": "unleased"},
		"an old host": {"error": map[string]any{"code": "bad-request", "message": "unknown op \"objects\""}},
	} {
		t.Run(name, func(t *testing.T) {
			h := &objectsHost{answer: func(int, objectsRequest) (map[string]any, <-chan struct{}) { return answer, nil }}
			g, seen := newTestGuard(t, h)
			g.Begin()
			if !g.Serving() {
				t.Fatal("not serving")
			}
			// The guard asks no more once the host said it keeps no lease.
			eventually(t, 5*time.Second, "the guard to stop asking", func() bool { return !g.isRunning() })
			if n, _, _ := seen.get(); n != 0 || !g.Serving() || h.questions.Load() != 1 {
				t.Fatalf("lapses %d, serving %v, questions %d", n, g.Serving(), h.questions.Load())
			}
		})
	}
}

// The follower hands out an instance with Durable Objects only before the deadline; one without
// them is never held back. A lapse takes the instance out, says starting, and owes a look.
func TestTheFollowerServesObjectsOnlyBeforeTheDeadline(t *testing.T) {
	f := NewFollower(testConfig(), nil, func(string) {}, func(*Instance) {}, func() {})
	dial := func(context.Context) (net.Conn, error) { return nil, net.ErrClosed }
	plainIn := &Instance{Prepared: Prepared{Label: "a/1"}, transport: newTransport(dial), exited: make(chan struct{})}
	objectsIn := &Instance{Prepared: Prepared{Label: "a/2", Exclusive: true, Dir: t.TempDir()}, transport: newTransport(dial), exited: make(chan struct{})}

	f.active.Store(plainIn)
	f.setStatus(statusReady, "")
	if f.Active() != plainIn {
		t.Fatal("an instance without Durable Objects is held back")
	}
	f.active.Store(objectsIn)
	if f.Active() != nil {
		t.Fatal("an instance with Durable Objects serves with no deadline heard")
	}
	if status, detail := f.Status(); status != statusStarting || detail == "" {
		t.Fatalf("past the deadline the status is %q (%q)", status, detail)
	}
	f.objects.extend(time.Since(f.objects.base) + time.Hour)
	if f.Active() != objectsIn {
		t.Fatal("an instance with Durable Objects is held back before its deadline")
	}
	if status, _ := f.Status(); status != statusReady {
		t.Fatalf("before the deadline the status is %q", status)
	}
	f.objects.expire("the test ends the right")
	if f.active.Load() != nil || f.Active() != nil {
		t.Fatal("the lapsed instance is still the active one")
	}
	if status, detail := f.Status(); status != statusStarting || detail != "the test ends the right" {
		t.Fatalf("after the lapse the status is %q (%q)", status, detail)
	}
	select {
	case <-f.lapsed:
	default:
		t.Fatal("the loop was not told of the lapse")
	}
	f.seenEtag = new(string)
	f.standBy()
	if f.seenEtag != nil || !f.asked {
		t.Fatal("after a lapse the next look must start the deployment again, and soon")
	}
	f.objects.Stop()
}

// A start after a lapse, while the guard's question is still out (a daemon restarting), waits for
// the host's fresh answer instead of starting a deployment that may not serve.
func TestABeginAfterALapseWaitsForTheFreshAnswer(t *testing.T) {
	var fresh atomic.Int32 // questions that name no renewal: a watch of its own
	h := &objectsHost{answer: func(n int, q objectsRequest) (map[string]any, <-chan struct{}) {
		if q.Renewal == 0 {
			fresh.Add(1)
		}
		if n == 1 {
			return map[string]any{"result": "holding", "validMs": 100, "renewal": 1}, nil
		}
		// Held past the short validity (the lapse) and into the second Begin.
		return map[string]any{"result": "holding", "validMs": 60_000, "renewal": 1}, after(500 * time.Millisecond)
	}}
	g, seen := newTestGuard(t, h)
	g.Begin()
	eventually(t, 2*time.Second, "the short validity lapses", func() bool { n, _, _ := seen.get(); return n == 1 })
	if g.Serving() {
		t.Fatal("serving past the deadline")
	}
	g.Begin()
	if !g.Serving() {
		t.Fatal("Begin returned before the host's fresh answer")
	}
	if n := fresh.Load(); n != 1 {
		t.Fatalf("%d first questions; the second Begin asks nothing of its own", n)
	}
}
