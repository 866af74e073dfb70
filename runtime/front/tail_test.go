package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func listenTail(t *testing.T) (*Tail, string) {
	t.Helper()
	tail := &Tail{subs: map[*tailSub]struct{}{}}
	path := filepath.Join(t.TempDir(), "tails", "app.sock")
	tail.Listen(path, "n1", "shop", func(line string) { t.Errorf("tail said %q", line) })
	t.Cleanup(tail.Close)
	return tail, path
}

func attach(t *testing.T, tail *Tail, path string) (net.Conn, *bufio.Scanner) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	deadline := time.Now().Add(5 * time.Second)
	for !tail.Attached() {
		if time.Now().After(deadline) {
			t.Fatal("the connection was never counted as attached")
		}
		time.Sleep(time.Millisecond)
	}
	lines := bufio.NewScanner(conn)
	if hello := next(t, conn, lines); hello["kind"] != "hello" || hello["node"] != "n1" || hello["scriptName"] != "shop" {
		t.Fatalf("the first line is %+v, not the hello", hello)
	}
	return conn, lines
}

func next(t *testing.T, conn net.Conn, lines *bufio.Scanner) map[string]any {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if !lines.Scan() {
		t.Fatalf("no record: %v", lines.Err())
	}
	var r map[string]any
	if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// without drops the fields that vary (times) and those every record carries alike.
func without(r map[string]any) map[string]any {
	for _, key := range []string{"eventTimestamp", "node", "scriptName", "diagnosticsChannelEvents"} {
		delete(r, key)
	}
	for _, list := range []string{"logs", "exceptions"} {
		for _, item := range r[list].([]any) {
			delete(item.(map[string]any), "timestamp")
		}
	}
	return r
}

func TestNothingIsRecordedWhileNobodyTails(t *testing.T) {
	tail, _ := listenTail(t)
	tail.Output([]byte("a console line without its end"))
	if tail.Attached() || tail.partial != nil {
		t.Fatalf("attached %v, kept %q", tail.Attached(), tail.partial)
	}
}

func TestOutputLinesBecomeLogsExceptionsAndRuntimeLines(t *testing.T) {
	tail, path := listenTail(t)
	conn, lines := attach(t, tail, path)
	tail.Output([]byte("hello { a: 1 } http://x/\nsecond "))
	tail.Output([]byte("half\nworkerd/server/server/listen/mod.rs:372: error: Uncaught exception: workerd/jsg/value.h:1456: failed: remote.jsg.TypeError: boom here\n"))
	tail.Output([]byte("workerd/server/server.c++:1000: warning: something of workerd's own\n"))
	want := []string{
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["hello { a: 1 } http://x/"],"level":"log"}],"exceptions":[]}`,
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["second half"],"level":"log"}],"exceptions":[]}`,
		`{"kind":"exception","outcome":"exception","event":null,"logs":[],"exceptions":[{"name":"TypeError","message":"boom here"}]}`,
		`{"kind":"runtime","outcome":"ok","event":null,"logs":[],"exceptions":[],"message":"workerd: warning: something of workerd's own"}`,
	}
	for _, w := range want {
		got, _ := json.Marshal(without(next(t, conn, lines)))
		var expected map[string]any
		_ = json.Unmarshal([]byte(w), &expected)
		text, _ := json.Marshal(expected)
		if string(got) != string(text) {
			t.Fatalf("got %s, want %s", got, text)
		}
	}
}

func TestASlowReaderLosesRecordsCountedAndNeverBlocksThePublisher(t *testing.T) {
	tail, path := listenTail(t)
	conn, lines := attach(t, tail, path)
	// Nobody reads: the socket's buffers and then the queue fill; publishing must not wait.
	const sent = 200_000
	began := time.Now()
	for i := 0; i < sent; i++ {
		tail.Runtime("a line long enough to fill the buffers quickly, padded out")
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("publishing %d records to a reader that does not read took %s", sent, took)
	}
	var received, dropped int64
	for received+dropped < sent {
		r := next(t, conn, lines)
		switch r["kind"] {
		case "runtime":
			received++
		case "dropped":
			dropped += int64(r["dropped"].(float64))
		}
	}
	if dropped == 0 || received+dropped != sent {
		t.Fatalf("received %d, dropped %d, of %d", received, dropped, sent)
	}
}

func TestTheSocketIsRemovedAtCloseUnlessAnotherProcessReplacedIt(t *testing.T) {
	tail, path := listenTail(t)
	tail.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left: %v", err)
	}
	first := &Tail{subs: map[*tailSub]struct{}{}}
	first.Listen(path, "n1", "shop", func(string) {})
	second := &Tail{subs: map[*tailSub]struct{}{}}
	second.Listen(path, "n1", "shop", func(string) {})
	defer second.Close()
	first.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the newer socket was removed: %v", err)
	}
}
