package main

// The live tail's source (docs/observability.md "svc tail"): while the node daemon is connected
// to the tail socket, the front writes one JSON line per request it proxied, per line of
// workerd's output and per line of its own, to every connection. Nobody connected costs each
// request one atomic load. A connection that is read slowly never slows serving: each has a
// bounded queue, and what does not fit is dropped, counted, and the count written with the next
// batch.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// tailQueue bounds the records waiting for one connection.
	tailQueue = 1024
	// tailFlushEvery is how long a record may wait in the connection's buffer (64 KiB, written at
	// once when full): records go out in batches, not one write each.
	tailFlushEvery = 20 * time.Millisecond
	tailBuffer     = 64 << 10
	// tailCloseWait bounds how long a stopping process waits for its connections' last lines.
	tailCloseWait = 200 * time.Millisecond
	// tailLineMax bounds one output line passed on (the rest is cut).
	tailLineMax = 16 << 10
)

// TailSocketPath is where a front under a node daemon listens: beside the daemon's runtime host
// socket, named by a digest of the application (a socket path is at most 107 bytes). Empty for
// a front with a private host, which no daemon tails.
func TailSocketPath(cfg *Config) string {
	if cfg.HostSocket == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(cfg.Application))
	return filepath.Join(filepath.Dir(cfg.HostSocket), "tails", hex.EncodeToString(sum[:8])+".sock")
}

// TailRecord is one line on the tail socket: the record `svc tail --format json` prints, the keys of
// wrangler tail's JSON records (outcome, scriptName, exceptions, logs, eventTimestamp, event,
// diagnosticsChannelEvents) plus kind and node, and for a request its duration and deployment.
// The node passes the lines on as they are, so this is the one place their shape is made.
type TailRecord struct {
	Kind                     string          `json:"kind"` // hello, request, log, exception, runtime, dropped
	Node                     string          `json:"node,omitempty"`
	ScriptName               string          `json:"scriptName,omitempty"`
	Outcome                  string          `json:"outcome,omitempty"`
	EventTimestamp           int64           `json:"eventTimestamp"`
	Event                    *TailEvent      `json:"event"`
	Logs                     []TailLog       `json:"logs"`
	Exceptions               []TailException `json:"exceptions"`
	DiagnosticsChannelEvents []struct{}      `json:"diagnosticsChannelEvents"`
	DurationMs               *float64        `json:"durationMs,omitempty"`
	Deployment               string          `json:"deployment,omitempty"`
	Message                  string          `json:"message,omitempty"`
	Dropped                  int64           `json:"dropped,omitempty"`
}

// TailEvent is a request record's event, as wrangler's.
type TailEvent struct {
	Request struct {
		URL    string `json:"url"`
		Method string `json:"method"`
	} `json:"request"`
	Response struct {
		Status int `json:"status"`
	} `json:"response"`
}

// TailLog is one console line, as wrangler's (its message a list of the call's arguments: here one string).
type TailLog struct {
	Message   []string `json:"message"`
	Level     string   `json:"level"`
	Timestamp int64    `json:"timestamp"`
}

// TailException is one uncaught exception, as wrangler's.
type TailException struct {
	Name      string `json:"name"`
	Message   string `json:"message"`
	Timestamp int64  `json:"timestamp"`
	Stack     string `json:"stack,omitempty"`
}

// Tail is the set of connections being fed.
type Tail struct {
	node, application string
	attached          atomic.Int32
	mu                sync.Mutex
	subs              map[*tailSub]struct{}
	listener          net.Listener
	path              string
	stat              os.FileInfo
	closing           chan struct{} // closed at stop: each connection writes what it holds and ends
	served            sync.WaitGroup
}

type tailSub struct {
	queue   chan []byte
	dropped atomic.Int64
}

// theTail is the process's one tail: workerd's output reaches it from every instance.
var theTail = &Tail{subs: map[*tailSub]struct{}{}}

// Attached says whether anyone is tailing; the only cost to a request when nobody is.
func (t *Tail) Attached() bool { return t.attached.Load() > 0 }

// Listen opens the tail socket (a stale one left by a process that died is replaced); its records
// name the node and the application.
func (t *Tail) Listen(path, node, application string, log func(string)) {
	if path == "" {
		return
	}
	t.node, t.application = node, application
	t.closing = make(chan struct{})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		log("cell: no live tail: " + err.Error())
		return
	}
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		log("cell: no live tail: " + errnoName(err))
		return
	}
	_ = os.Chmod(path, 0o600)
	// A socket another process put there since is not ours to remove (Close checks).
	listener.(*net.UnixListener).SetUnlinkOnClose(false)
	t.listener, t.path = listener, path
	t.stat, _ = os.Stat(path)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			t.served.Add(1)
			go t.serve(conn)
		}
	}()
}

// Close stops listening, lets each connection write what it holds (the process's last lines), for
// at most tailCloseWait, and removes the socket, unless another process has replaced it.
func (t *Tail) Close() {
	if t.listener == nil {
		return
	}
	_ = t.listener.Close()
	close(t.closing)
	written := make(chan struct{})
	go func() {
		t.served.Wait()
		close(written)
	}()
	select {
	case <-written:
	case <-time.After(tailCloseWait):
	}
	if now, err := os.Stat(t.path); err == nil && t.stat != nil && os.SameFile(now, t.stat) && now.ModTime().Equal(t.stat.ModTime()) {
		_ = os.Remove(t.path)
	}
	t.listener = nil
}

func (t *Tail) serve(conn net.Conn) {
	sub := &tailSub{queue: make(chan []byte, tailQueue)}
	t.mu.Lock()
	t.subs[sub] = struct{}{}
	t.attached.Add(1)
	t.mu.Unlock()
	gone := make(chan struct{})
	go func() {
		// The reader sends nothing; its end (or any byte) is the end of the tail.
		_, _ = conn.Read(make([]byte, 1))
		close(gone)
	}()
	defer func() {
		defer t.served.Done()
		t.mu.Lock()
		delete(t.subs, sub)
		t.attached.Add(-1)
		t.mu.Unlock()
		_ = conn.Close()
	}()
	out := bufio.NewWriterSize(conn, tailBuffer)
	// Said once the connection is counted: whatever happens from here reaches it.
	hello, _ := json.Marshal(t.record("hello", time.Now().UnixMilli()))
	if _, err := out.Write(append(hello, '\n')); err != nil || out.Flush() != nil {
		return
	}
	flush := time.NewTicker(tailFlushEvery)
	defer flush.Stop()
	for {
		select {
		case <-gone:
			return
		case line := <-sub.queue:
			if _, err := out.Write(line); err != nil {
				return
			}
		case <-t.closing:
			for len(sub.queue) > 0 {
				_, _ = out.Write(<-sub.queue)
			}
			_ = t.sayDropped(out, sub)
			_ = out.Flush()
			return
		case <-flush.C:
			// The count of what was dropped goes out with the next batch.
			if t.sayDropped(out, sub) != nil {
				return
			}
			if out.Buffered() > 0 && out.Flush() != nil {
				return
			}
		}
	}
}

// record is an empty record of the kind: outcome ok, no event, no logs, no exceptions.
func (t *Tail) record(kind string, ts int64) TailRecord {
	return TailRecord{
		Kind: kind, Node: t.node, ScriptName: t.application, Outcome: "ok", EventTimestamp: ts,
		Logs: []TailLog{}, Exceptions: []TailException{}, DiagnosticsChannelEvents: []struct{}{},
	}
}

// sayDropped writes the count of records dropped since the last count, if any.
func (t *Tail) sayDropped(out *bufio.Writer, sub *tailSub) error {
	n := sub.dropped.Swap(0)
	if n == 0 {
		return nil
	}
	r := t.record("dropped", time.Now().UnixMilli())
	r.Dropped = n
	r.Message = fmt.Sprintf("%d records dropped by the runtime process on node %s: this tail read too slowly", n, t.node)
	line, _ := json.Marshal(r)
	_, err := out.Write(append(line, '\n'))
	return err
}

// Publish queues the record for every connection, never waiting: a full queue drops it.
func (t *Tail) Publish(record TailRecord) {
	if !t.Attached() {
		return
	}
	line, err := json.Marshal(record)
	if err != nil {
		return
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	for sub := range t.subs {
		select {
		case sub.queue <- line:
		default:
			sub.dropped.Add(1)
		}
	}
}

// Runtime passes on one of the front's own lines.
func (t *Tail) Runtime(line string) {
	if t.Attached() {
		r := t.record("runtime", time.Now().UnixMilli())
		r.Message = line
		t.Publish(r)
	}
}

// Request passes on one proxied request once its answer is over.
func (t *Tail) Request(req *http.Request, w *statusRecorder, started time.Time, deployment string) {
	outcome := "ok"
	switch {
	case req.Context().Err() != nil:
		outcome = "canceled"
	case w.uncaught:
		outcome = "exception"
	}
	r := t.record("request", started.UnixMilli())
	r.Outcome = outcome
	r.Event = &TailEvent{}
	r.Event.Request.URL, r.Event.Request.Method = requestURL(req), req.Method
	r.Event.Response.Status = w.status
	duration := float64(time.Since(started).Microseconds()) / 1e3
	r.DurationMs, r.Deployment = &duration, deployment
	t.Publish(r)
}

// requestURL is the URL the client asked for, as far as the front can tell (the ingress keeps
// the Host and says the scheme in X-Forwarded-Proto).
func requestURL(r *http.Request) string {
	scheme := "http"
	if proto := r.Header.Get("X-Forwarded-Proto"); proto == "https" {
		scheme = proto
	}
	return scheme + "://" + r.Host + r.RequestURI
}

// workerd's own log lines (`file.c++:123: error: ...`), and the uncaught exception among them.
var (
	workerdLine   = regexp.MustCompile(`^[\w./-]+\.(?:c\+\+|rs|h):\d+: (\w+): (.*)$`)
	workerdSource = regexp.MustCompile(`^[\w./-]+\.(?:c\+\+|rs|h):\d+$`)
	uncaughtText  = regexp.MustCompile(`Uncaught[^:]*:? (?:.*?(?:jsg\.|: ))?(\w*(?:Error|Exception)): (.*)$`)
)

// workerdOutput is one workerd's output on its way to ours, line by line. workerd runs with
// --verbose so that an uncaught exception's JavaScript stack is written (as an info entry before its
// error line); info entries are all that --verbose adds, so they are kept from our output, which
// stays as it was without the flag, and the tail takes the stack from them.
type workerdOutput struct {
	tail    *Tail
	partial []byte
	inInfo  bool   // the lines read now continue an info entry
	inStack bool   // ... and that entry is an uncaught exception's stack
	stack   string // the stack for the next uncaught exception's error line
}

// Write takes a piece of output and answers what goes on to ours: its whole lines, info entries left out.
func (o *workerdOutput) Write(p []byte) []byte {
	o.partial = append(o.partial, p...)
	var shown []byte
	for {
		end := bytes.IndexByte(o.partial, '\n')
		if end < 0 {
			break
		}
		if o.line(strings.TrimRight(string(o.partial[:end]), "\r")) {
			shown = append(shown, o.partial[:end+1]...)
		}
		o.partial = o.partial[end+1:]
	}
	if len(o.partial) > tailLineMax {
		shown = append(shown, o.Flush()...)
	}
	return shown
}

// Flush answers a last line without its end (at workerd's exit), passed on as it is.
func (o *workerdOutput) Flush() []byte {
	rest := o.partial
	o.partial = nil
	if len(rest) > 0 {
		o.line(string(rest))
	}
	return rest
}

const (
	infoMark     = ": info: "
	uncaughtMark = "uncaught exception; source = "
	stackMark    = "; stack = "
)

// line reads one line; answers whether it goes on to our output.
func (o *workerdOutput) line(text string) bool {
	if o.inInfo && (strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t") || strings.HasPrefix(text, "stack: ")) {
		if o.inStack {
			o.stack += "\n" + text
		}
		return false
	}
	o.inInfo, o.inStack = false, false
	if at := strings.Index(text, infoMark); at > 0 && workerdSource.MatchString(text[:at]) {
		o.inInfo = true
		entry := text[at+len(infoMark):]
		if strings.HasPrefix(entry, uncaughtMark) {
			if s := strings.Index(entry, stackMark); s >= 0 {
				o.stack, o.inStack = entry[s+len(stackMark):], true
			}
		}
		return false
	}
	if o.tail.Attached() {
		record := o.tail.outputRecord(text, time.Now().UnixMilli())
		if record.Kind == "exception" {
			record.Exceptions[0].Stack = o.stack
			o.stack = ""
		}
		o.tail.Publish(record)
	}
	return true
}

// outputRecord tells a worker's console line from workerd's own lines and its uncaught exceptions.
func (t *Tail) outputRecord(line string, now int64) TailRecord {
	if len(line) > tailLineMax {
		line = line[:tailLineMax]
	}
	m := workerdLine.FindStringSubmatch(line)
	if m == nil {
		r := t.record("log", now)
		r.Logs = []TailLog{{Message: []string{line}, Level: "log", Timestamp: now}}
		return r
	}
	if u := uncaughtText.FindStringSubmatch(m[2]); u != nil {
		return t.exception(now, u[1], u[2])
	}
	if strings.Contains(m[2], "Uncaught") {
		return t.exception(now, "Error", m[2])
	}
	r := t.record("runtime", now)
	r.Message = "workerd: " + m[1] + ": " + m[2]
	return r
}

func (t *Tail) exception(now int64, name, message string) TailRecord {
	r := t.record("exception", now)
	r.Outcome = "exception"
	r.Exceptions = []TailException{{Name: name, Message: message, Timestamp: now}}
	return r
}
