package main

// The front's HTTP side: it owns the application's port for the whole life of the process,
// answers the health itself, and streams each request (and each WebSocket) to the workerd of the
// deployment being served at that moment, so a switch between deployments never closes the port.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proxy is the http.Handler on the application's port.
type Proxy struct {
	cfg      *Config
	follower *Follower
	log      func(string)
	// supervisedAt is when a supervisor last probed the health (unix ms).
	supervisedAt atomic.Int64

	mu       sync.Mutex
	upgraded map[net.Conn]struct{}
}

// NewProxy makes the handler.
func NewProxy(cfg *Config, follower *Follower, log func(string)) *Proxy {
	p := &Proxy{cfg: cfg, follower: follower, log: log, upgraded: map[net.Conn]struct{}{}}
	p.supervisedAt.Store(time.Now().UnixMilli())
	return p
}

var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isUpgrade(r) {
		p.upgrade(w, r)
		return
	}
	started := time.Now()
	recorder := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	if p.cfg.OTel {
		defer p.span(r, recorder, started)
	}
	if path, _, _ := strings.Cut(r.RequestURI, "?"); path == p.cfg.HealthPath {
		p.health(recorder, r)
		return
	}
	p.forward(recorder, r, 0)
}

func (p *Proxy) health(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(p.cfg.SupervisorHeader) != "" {
		p.supervisedAt.Store(time.Now().UnixMilli())
	}
	active := p.follower.Active()
	stopping := p.follower.Stopping()
	ready := active != nil && !stopping
	status, lastError := p.follower.Status()
	if stopping {
		status = "stopping"
	} else if ready {
		status = statusReady
	}
	body := struct {
		Status      string `json:"status"`
		Application string `json:"application"`
		Node        string `json:"node"`
		Runtime     string `json:"runtime"`
		Script      string `json:"script,omitempty"`
		Deployment  string `json:"deployment,omitempty"`
		Detail      string `json:"detail,omitempty"`
	}{Status: status, Application: p.cfg.Application, Node: p.cfg.Node, Runtime: p.cfg.VersionLine}
	if active != nil {
		body.Script, body.Deployment = active.Script, active.Deployment
	}
	if !ready {
		body.Detail = lastError
	}
	text, _ := json.Marshal(body)
	code := http.StatusServiceUnavailable
	if ready {
		code = http.StatusOK
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(text)
	}
}

func unavailable(w http.ResponseWriter, why string) {
	text := why + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Retry-After", "1")
	h.Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, text)
}

// forward streams one request to the active instance. A request without a body that fails before
// any answer (a kept-alive connection closed under it) is sent once more, to whichever instance is
// active by then.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, attempt int) {
	in := p.follower.Active()
	if in == nil {
		status, _ := p.follower.Status()
		if status == statusNoDeployment {
			unavailable(w, "No deployment has been published yet")
		} else {
			unavailable(w, "The deployment is starting")
		}
		return
	}
	in.Enter()
	defer in.Leave()
	bodiless := len(r.TransferEncoding) == 0 && r.ContentLength <= 0
	answer, err := in.transport.RoundTrip(outgoing(r, bodiless))
	if err != nil {
		if bodiless && attempt == 0 && r.Context().Err() == nil {
			p.forward(w, r, 1)
			return
		}
		if r.Context().Err() == nil {
			p.log(fmt.Sprintf("cell: %s failed a request: %s", in.Label, errnoName(err)))
			unavailable(w, "The deployment did not answer")
		}
		return
	}
	defer answer.Body.Close()
	h := w.Header()
	for name, values := range answer.Header {
		if !hopByHop[name] {
			h[name] = values
		}
	}
	if _, ok := answer.Header["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffed type: the client sees what the worker sent
	}
	w.WriteHeader(answer.StatusCode)
	if err := copyBody(w, answer); err != nil && r.Context().Err() == nil {
		panic(http.ErrAbortHandler) // the answer broke off: so does the client's
	}
}

// outgoing is the request as workerd gets it: the client's, less the hop-by-hop headers. A
// shallow copy, not Clone: the proxy is on every request's path.
func outgoing(r *http.Request, bodiless bool) *http.Request {
	out := new(http.Request)
	*out = *r
	target := *r.URL
	target.Scheme, target.Host = "http", "workerd"
	out.URL = &target
	out.RequestURI = ""
	out.Header = withoutHopByHop(r.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // no Go default: the worker sees what the client sent
	}
	if bodiless {
		out.Body, out.ContentLength = nil, 0
	}
	return out
}

// copyBody sends the worker's body on. An answer of unknown length (a stream, server-sent events)
// is flushed piece by piece so it arrives as sent; one of known length is copied whole.
func copyBody(w http.ResponseWriter, answer *http.Response) error {
	if answer.ContentLength >= 0 {
		_, err := io.Copy(w, answer.Body)
		if err != nil && isClientWriteError(err) {
			return nil
		}
		return err
	}
	return copyFlushing(w, answer.Body)
}

// isClientWriteError tells a client that left (nothing to tell it) from a worker's answer that broke.
func isClientWriteError(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, http.ErrHandlerTimeout)
}

// copyFlushing streams the body, flushing each piece so that a streamed answer arrives as sent.
func copyFlushing(w http.ResponseWriter, body io.Reader) error {
	control := http.NewResponseController(w)
	buf := make([]byte, 32*1024)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil // the client left; nothing to tell it
			}
			_ = control.Flush()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func withoutHopByHop(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for name, values := range in {
		if !hopByHop[name] {
			out[name] = values
		}
	}
	return out
}

func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// upgrade pipes the raw bytes both ways between the client and the active instance (WebSockets).
func (p *Proxy) upgrade(w http.ResponseWriter, r *http.Request) {
	in := p.follower.Active()
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot upgrade", http.StatusInternalServerError)
		return
	}
	if in == nil {
		_, _ = io.WriteString(client, "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
		client.Close()
		return
	}
	in.Enter()
	p.mu.Lock()
	p.upgraded[client] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.upgraded, client)
		p.mu.Unlock()
		in.Leave()
	}()
	upstream, err := net.Dial("unix", in.Socket)
	if err != nil {
		client.Close()
		return
	}
	defer upstream.Close()
	defer client.Close()
	out := r.Clone(r.Context())
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""}
	}
	if err := out.Write(upstream); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(upstream, io.MultiReader(bufferedPart(buffered.Reader), client))
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		done <- struct{}{}
	}()
	<-done // either side ending ends both
}

func bufferedPart(r *bufio.Reader) io.Reader {
	n := r.Buffered()
	if n == 0 {
		return strings.NewReader("")
	}
	b, _ := r.Peek(n)
	return strings.NewReader(string(b))
}

// CutUpgraded closes every upgraded connection still open: the stop's bound is over.
func (p *Proxy) CutUpgraded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.upgraded {
		c.Close()
	}
}

// SupervisedAt is when a supervisor last probed the health.
func (p *Proxy) SupervisedAt() time.Time { return time.UnixMilli(p.supervisedAt.Load()) }

var traceparent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)

// span writes one span-shaped JSON line per request on stdout (CELL_OTEL=1).
func (p *Proxy) span(r *http.Request, w *statusRecorder, started time.Time) {
	parent := traceparent.FindStringSubmatch(r.Header.Get("Traceparent"))
	path, _, _ := strings.Cut(r.RequestURI, "?")
	line := struct {
		Kind         string  `json:"kind"`
		Name         string  `json:"name"`
		TraceID      string  `json:"trace_id"`
		ParentSpanID string  `json:"parent_span_id,omitempty"`
		SpanID       string  `json:"span_id"`
		Application  string  `json:"application"`
		Node         string  `json:"node"`
		Deployment   string  `json:"deployment,omitempty"`
		Method       string  `json:"method"`
		Path         string  `json:"path"`
		Status       int     `json:"status"`
		DurationMs   float64 `json:"duration_ms"`
		Time         string  `json:"time"`
	}{
		Kind: "span", Name: "http.request", TraceID: randomHex(16), SpanID: randomHex(8),
		Application: p.cfg.Application, Node: p.cfg.Node, Method: r.Method,
		Path: path, Status: w.status,
		DurationMs: float64(time.Since(started).Nanoseconds()) / 1e6,
		Time:       time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
	}
	if parent != nil {
		line.TraceID, line.ParentSpanID = parent[1], parent[2]
	}
	if in := p.follower.Active(); in != nil {
		line.Deployment = in.Deployment
	}
	text, _ := json.Marshal(line)
	_, _ = os.Stdout.Write(append(text, '\n'))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// statusRecorder remembers the status written, for the span line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// errnoNames are the short names Node gave the failures a front meets (a listen, a connection).
var errnoNames = map[syscall.Errno]string{
	syscall.EADDRINUSE: "EADDRINUSE", syscall.EACCES: "EACCES", syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
	syscall.ECONNREFUSED: "ECONNREFUSED", syscall.ECONNRESET: "ECONNRESET", syscall.ENOENT: "ENOENT",
	syscall.EPIPE: "EPIPE",
}

// errnoName names a failure as Node did (EADDRINUSE, ECONNREFUSED, ...), else by its message.
func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name, ok := errnoNames[errno]; ok {
			return name
		}
	}
	return err.Error()
}
