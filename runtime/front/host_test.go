package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// The protocol's one definition: every example in runtime/protocol/host-protocol.json.
type protocolVectors struct {
	Protocol int `json:"protocol"`
	Messages []struct {
		Name    string          `json:"name"`
		From    string          `json:"from"`
		Answers string          `json:"answers"`
		Line    json.RawMessage `json:"line"`
	} `json:"messages"`
}

func readVectors(t *testing.T) protocolVectors {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "protocol", "host-protocol.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v protocolVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// strictly decodes `raw` into `into`, refusing a field the Go side does not know.
func strictly(raw []byte, into any) error {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

func sameJSON(t *testing.T, name string, got, want []byte) {
	t.Helper()
	var a, b any
	_ = json.Unmarshal(got, &a)
	_ = json.Unmarshal(want, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s: the front writes\n%s\nwhere the protocol says\n%s", name, got, want)
	}
}

func TestTheFrontSpeaksTheProtocolsVersion(t *testing.T) {
	if v := readVectors(t); v.Protocol != hostProtocolVersion {
		t.Fatalf("the protocol file is version %d, the front speaks %d", v.Protocol, hostProtocolVersion)
	}
}

// Each request the front may send is written exactly as the example: every field, no other.
func TestTheFrontsRequestsAreTheProtocolsExamples(t *testing.T) {
	requests := map[string]func() any{
		"hello":     func() any { return &helloRequest{} },
		"look":      func() any { return &lookRequest{} },
		"lease":     func() any { return &leaseRequest{} },
		"cron-next": func() any { return &cronNextRequest{} },
		"cron-fire": func() any { return &cronFireRequest{} },
		"objects":   func() any { return &objectsRequest{} },
		"health":    func() any { return &healthNotice{} },
	}
	seen := map[string]bool{}
	for _, m := range readVectors(t).Messages {
		if m.From != "front" {
			continue
		}
		var head struct {
			ID int    `json:"id"`
			Op string `json:"op"`
		}
		_ = json.Unmarshal(m.Line, &head)
		fields := map[string]json.RawMessage{}
		_ = json.Unmarshal(m.Line, &fields)
		delete(fields, "id")
		delete(fields, "op")
		body, _ := json.Marshal(fields)
		make, ok := requests[head.Op]
		if !ok {
			t.Errorf("%s: the front has no request %q", m.Name, head.Op)
			continue
		}
		request := make()
		if err := strictly(body, request); err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		line, err := requestLine(head.Op, reflect.ValueOf(request).Elem().Interface())
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, m.Name, withID(line, head.ID), m.Line)
		seen[head.Op] = true
	}
	for op := range requests {
		if !seen[op] {
			t.Errorf("the protocol has no example of the front's %q", op)
		}
	}
}

// Each line a host may write is read whole: the envelope, and the result of the op it answers.
func TestTheFrontReadsEveryAnswerOfTheProtocol(t *testing.T) {
	results := map[string]func() any{
		"hello":     func() any { return &helloAnswer{} },
		"look":      func() any { return &lookAnswer{} },
		"lease":     func() any { return &leaseAnswer{} },
		"cron-next": func() any { return &cronNextAnswer{} },
		"cron-fire": func() any { return &cronFireAnswer{} },
		"objects":   func() any { return &objectsAnswer{} },
		"health":    func() any { return &struct{}{} },
	}
	for _, m := range readVectors(t).Messages {
		if m.From != "host" {
			continue
		}
		var line hostLine
		if err := strictly(m.Line, &line); err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		switch {
		case line.Push != "":
			log := line.Push == "log" && line.Line != ""
			asked := line.Push == "health" && line.Line == ""
			if !(log || asked) || line.ID != nil {
				t.Errorf("%s: a push the front does not act on: %s", m.Name, m.Line)
			}
		case line.Error != nil:
			if line.ID == nil || line.Error.Code == "" || line.Error.Message == "" || line.Result != nil {
				t.Errorf("%s: an error without its id, code or message, or with a result: %s", m.Name, m.Line)
			}
		default:
			make, ok := results[m.Answers]
			if !ok || line.ID == nil {
				t.Errorf("%s: a result of no known op %q, or without an id", m.Name, m.Answers)
				continue
			}
			if err := strictly(line.Result, make()); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
		}
	}
}

// socketHost is a stand-in for the node daemon's host on a Unix socket: it answers the hello and
// echoes each request's op, hands each request but the hello to `requests`, and can drop its
// connections as a restarting daemon does.
type socketHost struct {
	listener net.Listener
	conns    chan net.Conn
	requests chan map[string]any
}

func listenSocketHost(t *testing.T, path string) *socketHost {
	t.Helper()
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	h := &socketHost{listener: listener, conns: make(chan net.Conn, 16), requests: make(chan map[string]any, 16)}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			h.conns <- conn
			go func() {
				lines := bufio.NewScanner(conn)
				for lines.Scan() {
					var req map[string]any
					_ = json.Unmarshal(lines.Bytes(), &req)
					result := map[string]any{"op": req["op"]}
					if req["op"] == "hello" {
						result = map[string]any{"protocol": req["protocol"], "host": "stand-in"}
					} else {
						select {
						case h.requests <- req:
						default: // a test that does not read them
						}
					}
					answer, _ := json.Marshal(map[string]any{"id": req["id"], "result": result})
					_, _ = conn.Write(append(answer, '\n'))
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = listener.Close() })
	return h
}

// A daemon restart: the connection breaks, the socket is gone a while, then a new host listens.
// Calls made meanwhile wait for it and are answered by it; none is sent twice.
func TestAFrontReconnectsToAHostThatRestarted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.sock")
	first := listenSocketHost(t, path)
	cfg := testConfig()
	cfg.HostSocket, cfg.PrivateHost = path, nil
	// Lines are logged from the host's own goroutine.
	var logMu sync.Mutex
	var logged []string
	h := NewHost(cfg, nil, func(line string) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, line)
	})
	t.Cleanup(func() { h.Close(time.Second) })
	var answer struct {
		Op string `json:"op"`
	}
	if err := h.Call("look", nil, &answer); err != nil || answer.Op != "look" {
		t.Fatalf("first call: %v %+v", err, answer)
	}
	_ = first.listener.Close()
	(<-first.conns).Close()
	_ = os.Remove(path)

	answered := make(chan error, 1)
	go func() {
		var a struct {
			Op string `json:"op"`
		}
		err := h.Call("cron-fire", nil, &a)
		if err == nil && a.Op != "cron-fire" {
			err = os.ErrInvalid
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a call with no host to take it returned at once: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	second := listenSocketHost(t, path)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the call made while the host was away: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call made while the host was away was never answered")
	}
	if len(second.conns) != 1 {
		t.Fatalf("the front made %d connections to the new host, want 1", len(second.conns))
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(strings.Join(logged, "\n"), "connected to the runtime host again") {
		t.Fatalf("the reconnection was not said: %q", logged)
	}
}
