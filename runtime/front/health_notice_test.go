package main

import (
	"path/filepath"
	"testing"
	"time"
)

// noticeHost is the stand-in host (host_test.go), its `health` requests handed to the test.
func noticeHost(t *testing.T) (string, <-chan map[string]any) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.sock")
	host := listenSocketHost(t, path)
	notices := make(chan map[string]any, 16)
	go func() {
		for req := range host.requests {
			if req["op"] == "health" {
				notices <- req
			}
		}
	}()
	return path, notices
}

func nextNotice(t *testing.T, notices <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case n := <-notices:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no health notice came")
		return nil
	}
}

// The host hears of each change of what the health answers, once, and of nothing else.
func TestTheHostIsToldEachChangeOfTheHealthOnce(t *testing.T) {
	path, notices := noticeHost(t)
	cfg := testConfig()
	cfg.HostSocket, cfg.PrivateHost = path, nil
	host := NewHost(cfg, nil, func(string) {})
	t.Cleanup(func() { host.Close(time.Second) })
	f := NewFollower(cfg, host, func(string) {}, func(*Instance) {}, func() {})
	teller := NewHealthTeller(host, func() healthNotice { return currentHealth(f) })
	t.Cleanup(teller.Stop)
	f.healthMoved = teller.Changed

	f.setStatus(statusNoDeployment, "")
	n := nextNotice(t, notices)
	if n["status"] != "no-deployment" || n["deployment"] != nil {
		t.Fatalf("first notice %v", n)
	}
	// The same again is no change; the next change is the next notice.
	f.setStatus(statusNoDeployment, "")
	f.setStatus(statusStarting, "")
	if n = nextNotice(t, notices); n["status"] != "starting" {
		t.Fatalf("after the same status then starting, the host heard %v", n)
	}
	f.active.Store(&Instance{Prepared: Prepared{Script: "hello", Deployment: "abc"}})
	f.setStatus(statusReady, "")
	if n = nextNotice(t, notices); n["status"] != "ready" || n["deployment"] != "abc" {
		t.Fatalf("serving: %v", n)
	}
	f.active.Store(&Instance{Prepared: Prepared{Script: "hello", Deployment: "def"}})
	f.setStatus(statusReady, "")
	if n = nextNotice(t, notices); n["status"] != "ready" || n["deployment"] != "def" {
		t.Fatalf("switched: %v", n)
	}
	f.Stop()
	if n = nextNotice(t, notices); n["status"] != "stopping" {
		t.Fatalf("stopping: %v", n)
	}
	if sent := teller.Sent(); sent != 5 {
		t.Fatalf("%d notices sent, want 5", sent)
	}
	select {
	case n := <-notices:
		t.Fatalf("a notice with no change: %v", n)
	default:
	}
}

// While its parent lives the front looks at its supervision a few times per bound; once
// orphaned, just when the bound since the last probe would pass.
func TestTheUnsupervisedWatchWakesRarely(t *testing.T) {
	bound := 300 * time.Second
	cases := []struct {
		unsupervised, want time.Duration
	}{
		{0, 75 * time.Second},
		{10 * time.Second, 75 * time.Second},
		{290 * time.Second, 10*time.Second + time.Millisecond},
		{300 * time.Second, time.Millisecond},
	}
	for _, c := range cases {
		if got := unsupervisedCheckIn(bound, c.unsupervised); got != c.want {
			t.Errorf("unsupervised %v: next look in %v, want %v", c.unsupervised, got, c.want)
		}
	}
	if got := unsupervisedCheckIn(400*time.Millisecond, 0); got != 250*time.Millisecond {
		t.Errorf("a short bound: %v, want 250ms", got)
	}
}

// Asked by the node's host (the `health` push), the front tells its health although it did not
// change, marked asked, and counts the question as supervision (an orphaned front the daemon
// asks this way does not drain for want of health probes).
func TestTheHostsHealthQuestionIsAnsweredAndCountsAsSupervision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.sock")
	host := listenSocketHost(t, path)
	cfg := testConfig()
	cfg.HostSocket, cfg.PrivateHost = path, nil
	r := newRuntime(cfg, func(string) {})
	t.Cleanup(func() {
		r.health.Stop()
		r.host.Close(time.Second)
	})
	r.follower.setStatus(statusNoDeployment, "")
	first := <-host.requests
	if first["op"] != "health" || first["status"] != "no-deployment" || first["asked"] != nil {
		t.Fatalf("the change told %v", first)
	}
	conn := <-host.conns
	r.proxy.supervisedAt.Store(0)
	if _, err := conn.Write([]byte(`{"push":"health"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-host.requests:
		if n["op"] != "health" || n["status"] != "no-deployment" || n["asked"] != true {
			t.Fatalf("asked, the front told %v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the question got no answer")
	}
	if r.proxy.SupervisedAt().UnixMilli() == 0 {
		t.Fatal("being asked did not count as supervision")
	}
	if sent := r.health.Sent(); sent != 2 {
		t.Fatalf("%d notices sent, want 2", sent)
	}
}
