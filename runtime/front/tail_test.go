package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
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
	out := workerdOutput{tail: tail}
	shown := out.Write([]byte("a console line\nwithout its end"))
	if tail.Attached() || string(shown) != "a console line\n" {
		t.Fatalf("attached %v, shown %q", tail.Attached(), shown)
	}
}

// What workerd --verbose writes for a fetch handler that throws, between two console lines.
const verboseThrow = "seen GET /boom\n" +
	"workerd/io/worker.c++:3042: info: uncaught exception; source = Uncaught (in promise); stack = TypeError: boom here\n" +
	"    at Object.fetch (w.js:1:147)\n" +
	"workerd/io/io-context.c++:656: info: uncaught exception; exception = workerd/jsg/value.h:1456: failed: jsg.TypeError: boom here\n" +
	"stack: /bin/workerd@3f68b70 /bin/workerd@3f69955\n" +
	"workerd/server/server/listen/mod.rs:372: error: Uncaught exception: workerd/jsg/value.h:1456: failed: remote.jsg.TypeError: boom here\n" +
	"  indented console line\n"

func TestOutputLinesBecomeLogsExceptionsWithTheirStackAndRuntimeLines(t *testing.T) {
	tail, path := listenTail(t)
	conn, lines := attach(t, tail, path)
	out := workerdOutput{tail: tail}
	var shown []byte
	shown = append(shown, out.Write([]byte("hello { a: 1 } http://x/\nsecond "))...)
	shown = append(shown, out.Write([]byte("half\n"+verboseThrow))...)
	shown = append(shown, out.Write([]byte("workerd/server/server.c++:1000: warning: something of workerd's own\n"))...)
	// Our output is what workerd writes without --verbose.
	wantShown := "hello { a: 1 } http://x/\nsecond half\nseen GET /boom\n" +
		"workerd/server/server/listen/mod.rs:372: error: Uncaught exception: workerd/jsg/value.h:1456: failed: remote.jsg.TypeError: boom here\n" +
		"  indented console line\n" +
		"workerd/server/server.c++:1000: warning: something of workerd's own\n"
	if string(shown) != wantShown {
		t.Fatalf("shown %q\nwant  %q", shown, wantShown)
	}
	want := []string{
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["hello { a: 1 } http://x/"],"level":"log"}],"exceptions":[]}`,
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["second half"],"level":"log"}],"exceptions":[]}`,
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["seen GET /boom"],"level":"log"}],"exceptions":[]}`,
		`{"kind":"exception","outcome":"exception","event":null,"logs":[],"exceptions":[{"name":"TypeError","message":"boom here","stack":"TypeError: boom here\n    at Object.fetch (w.js:1:147)"}]}`,
		`{"kind":"log","outcome":"ok","event":null,"logs":[{"message":["  indented console line"],"level":"log"}],"exceptions":[]}`,
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

func TestVerboseIsAddedToServeOnly(t *testing.T) {
	if got := strings.Join(verbose([]string{"serve", "--experimental", "config.capnp"}), " "); got != "serve --verbose --experimental config.capnp" {
		t.Fatal(got)
	}
	if got := strings.Join(verbose([]string{"--version"}), " "); got != "--version" {
		t.Fatal(got)
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

func TestTheLastLinesOfAStoppingProcessReachTheReader(t *testing.T) {
	tail, path := listenTail(t)
	conn, lines := attach(t, tail, path)
	tail.Runtime("cell: SIGTERM: stopping shop")
	tail.Runtime("cell: stopped shop")
	tail.Close()
	for _, want := range []string{"cell: SIGTERM: stopping shop", "cell: stopped shop"} {
		if got := next(t, conn, lines); got["message"] != want {
			t.Fatalf("got %v, want %q", got, want)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if lines.Scan() || lines.Err() != nil {
		t.Fatalf("the connection is not ended after the last lines: %q, %v", lines.Bytes(), lines.Err())
	}
}
