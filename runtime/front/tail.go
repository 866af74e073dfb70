package main

// The live tail's source (docs/observability.md "svc tail"): while the node daemon is connected
// to the tail socket, the front writes one JSON line per request it proxied, per line of
// workerd's output and per line of its own, to every connection. Nobody connected costs each
// request one atomic load. A connection that is read slowly never slows serving: each has a
// bounded queue, and what does not fit is dropped, counted, and the count written when there is
// room again.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	// tailDropNotice is how soon a count of dropped records is written when no record follows.
	tailDropNotice = time.Second
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

// TailRecord is one line on the tail socket; Kind says which fields are set.
type TailRecord struct {
	Kind       string  `json:"kind"` // hello, request, log, exception, runtime, dropped
	Ts         int64   `json:"ts"`
	Method     string  `json:"method,omitempty"`
	URL        string  `json:"url,omitempty"`
	Status     int     `json:"status,omitempty"`
	DurationMs float64 `json:"durationMs,omitempty"`
	Outcome    string  `json:"outcome,omitempty"`
	Deployment string  `json:"deployment,omitempty"`
	Level      string  `json:"level,omitempty"`
	Name       string  `json:"name,omitempty"`
	Message    string  `json:"message,omitempty"`
	Count      int64   `json:"count,omitempty"`
}

// Tail is the set of connections being fed.
type Tail struct {
	attached atomic.Int32
	mu       sync.Mutex
	subs     map[*tailSub]struct{}
	listener net.Listener
	path     string
	stat     os.FileInfo
	partial  []byte // an output line still without its end, kept only while attached
}

type tailSub struct {
	queue   chan []byte
	dropped atomic.Int64
}

// theTail is the process's one tail: workerd's output reaches it from every instance.
var theTail = &Tail{subs: map[*tailSub]struct{}{}}

// Attached says whether anyone is tailing; the only cost to a request when nobody is.
func (t *Tail) Attached() bool { return t.attached.Load() > 0 }

// Listen opens the tail socket (a stale one left by a process that died is replaced).
func (t *Tail) Listen(path string, log func(string)) {
	if path == "" {
		return
	}
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
			go t.serve(conn)
		}
	}()
}

// Close stops listening and removes the socket, unless another process has replaced it.
func (t *Tail) Close() {
	if t.listener == nil {
		return
	}
	_ = t.listener.Close()
	if now, err := os.Stat(t.path); err == nil && t.stat != nil && os.SameFile(now, t.stat) && now.ModTime().Equal(t.stat.ModTime()) {
		_ = os.Remove(t.path)
	}
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
		t.mu.Lock()
		delete(t.subs, sub)
		t.attached.Add(-1)
		if t.attached.Load() == 0 {
			t.partial = nil
		}
		t.mu.Unlock()
		_ = conn.Close()
	}()
	out := bufio.NewWriter(conn)
	// Said once the connection is counted: whatever happens from here reaches it.
	hello, _ := json.Marshal(TailRecord{Kind: "hello", Ts: time.Now().UnixMilli()})
	if _, err := out.Write(append(hello, '\n')); err != nil || out.Flush() != nil {
		return
	}
	notice := time.NewTicker(tailDropNotice)
	defer notice.Stop()
	for {
		select {
		case <-gone:
			return
		case line := <-sub.queue:
			if sayDropped(out, sub) != nil {
				return
			}
			if _, err := out.Write(line); err != nil {
				return
			}
			// Write what is queued together; flush when the queue is empty.
			if len(sub.queue) == 0 && out.Flush() != nil {
				return
			}
		case <-notice.C:
			if sayDropped(out, sub) != nil || out.Flush() != nil {
				return
			}
		}
	}
}

// sayDropped writes the count of records dropped since the last count, if any.
func sayDropped(out *bufio.Writer, sub *tailSub) error {
	n := sub.dropped.Swap(0)
	if n == 0 {
		return nil
	}
	line, _ := json.Marshal(TailRecord{Kind: "dropped", Ts: time.Now().UnixMilli(), Count: n})
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
		t.Publish(TailRecord{Kind: "runtime", Ts: time.Now().UnixMilli(), Message: line})
	}
}

// Request passes on one proxied request once its answer is over.
func (t *Tail) Request(r *http.Request, w *statusRecorder, started time.Time, deployment string) {
	outcome := "ok"
	switch {
	case r.Context().Err() != nil:
		outcome = "canceled"
	case w.uncaught:
		outcome = "exception"
	}
	t.Publish(TailRecord{
		Kind: "request", Ts: started.UnixMilli(), Method: r.Method, URL: requestURL(r),
		Status: w.status, DurationMs: float64(time.Since(started).Microseconds()) / 1e3,
		Outcome: outcome, Deployment: deployment,
	})
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
	workerdLine  = regexp.MustCompile(`^[\w./-]+\.(?:c\+\+|rs|h):\d+: (\w+): (.*)$`)
	uncaughtText = regexp.MustCompile(`Uncaught[^:]*:? (?:.*?(?:jsg\.|: ))?(\w*(?:Error|Exception)): (.*)$`)
)

// Output passes on workerd's output, whole lines only.
func (t *Tail) Output(p []byte) {
	if !t.Attached() {
		return
	}
	now := time.Now().UnixMilli()
	t.mu.Lock()
	t.partial = append(t.partial, p...)
	var lines []string
	for {
		end := strings.IndexByte(string(t.partial), '\n')
		if end < 0 {
			break
		}
		lines = append(lines, string(t.partial[:end]))
		t.partial = t.partial[end+1:]
	}
	if len(t.partial) > tailLineMax {
		lines = append(lines, string(t.partial[:tailLineMax]))
		t.partial = nil
	}
	t.mu.Unlock()
	for _, line := range lines {
		t.Publish(outputRecord(strings.TrimRight(line, "\r"), now))
	}
}

// outputRecord tells a worker's console line from workerd's own lines and its uncaught exceptions.
func outputRecord(line string, now int64) TailRecord {
	if len(line) > tailLineMax {
		line = line[:tailLineMax]
	}
	m := workerdLine.FindStringSubmatch(line)
	if m == nil {
		return TailRecord{Kind: "log", Ts: now, Level: "log", Message: line}
	}
	if u := uncaughtText.FindStringSubmatch(m[2]); u != nil {
		return TailRecord{Kind: "exception", Ts: now, Name: u[1], Message: u[2]}
	}
	if strings.Contains(m[2], "Uncaught") {
		return TailRecord{Kind: "exception", Ts: now, Name: "Error", Message: m[2]}
	}
	return TailRecord{Kind: "runtime", Ts: now, Level: m[1], Message: "workerd: " + m[2]}
}
