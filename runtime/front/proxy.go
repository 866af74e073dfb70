package main

// The front's HTTP side (docs/runtime.md "cell serve" and "The request path"): it owns the
// application's port for the whole life of the process, answers the health itself, and streams
// each request (and each WebSocket) to the workerd of the deployment being served at that
// moment, so a switch between deployments never closes the port.

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
	// geoip fills request.cf (geoip.go); nil: none, and a client's blob is still removed.
	geoip *GeoIP
	// supervisedAt is when a supervisor last asked for the health, by probe or over the host
	// connection (unix ms).
	supervisedAt atomic.Int64

	// hold bounds the wait for a deployment that is starting (holdWhileStarting); holding counts
	// the requests waiting now.
	hold    time.Duration
	holding atomic.Int32

	mu       sync.Mutex
	upgraded map[net.Conn]struct{}
}

// NewProxy makes the handler.
func NewProxy(cfg *Config, follower *Follower, log func(string)) *Proxy {
	p := &Proxy{cfg: cfg, follower: follower, log: log, hold: holdWhileStarting, upgraded: map[net.Conn]struct{}{}}
	p.Supervised()
	return p
}

// hopByHop are the headers that describe one connection, never forwarded either way (RFC 9110
// section 7.6.1 and the fixed list RFC 2616 section 13.5.1 gave, as Caddy's reverse proxy strips
// them); besides them, every header the Connection header names is dropped.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// ApplicationHeader names the application the ingress routed a request to (docs/ingress.md
// "Misdirected requests"). MisdirectedHeader marks the front's own refusal of one meant for
// another application, so that the ingress retries it elsewhere and never a worker's 421.
const (
	ApplicationHeader = "Svc-Application"
	MisdirectedHeader = "Svc-Misdirected"
)

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if meant, ok := r.Header[ApplicationHeader]; ok {
		if len(meant) != 1 || meant[0] != p.cfg.Application {
			p.misdirected(w, strings.Join(meant, ", "))
			return
		}
		// The worker sees the request as the client sent it.
		r.Header.Del(ApplicationHeader)
	}
	p.geoip.Stamp(r)
	if isUpgrade(r) {
		p.upgrade(w, r)
		return
	}
	if r.Method == http.MethodConnect {
		notImplemented(w, "CONNECT is not supported: the application serves HTTP requests, not tunnels")
		return
	}
	// Go's HTTP/1 server otherwise reads away the rest of the request body once the answer
	// starts: a worker that answers while it still reads (an echo, an upload with progress)
	// would lose the body, or wait for it forever. Not supported by a test's recorder: no matter.
	_ = http.NewResponseController(w).EnableFullDuplex()
	started := time.Now()
	recorder := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	if p.cfg.OTel {
		defer p.span(r, recorder, started)
	}
	if path, _, _ := strings.Cut(r.RequestURI, "?"); path == p.cfg.HealthPath {
		p.health(recorder, r)
		return
	}
	if theTail.Attached() {
		defer func() { theTail.Request(r, recorder, started, p.deployment()) }()
	}
	p.forward(recorder, r, nil)
}

func (p *Proxy) health(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(p.cfg.SupervisorHeader) != "" {
		p.Supervised()
	}
	status, lastError, active := healthNow(p.follower)
	ready := active != nil && status == statusReady
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

// misdirected refuses a request the ingress routed to another application: this port served
// that application once (before a restart of its node gave it another port), and an ingress
// with an older routing document still sends it here. 421 Misdirected Request (RFC 9110 section
// 15.5.20) says this server cannot answer for the target; the ingress retries it on another
// upstream, since nothing of it ran.
func (p *Proxy) misdirected(w http.ResponseWriter, meant string) {
	w.Header().Set(MisdirectedHeader, p.cfg.Application)
	w.Header().Set("Connection", "close") // the body, if any, is not read
	plain(w, http.StatusMisdirectedRequest,
		fmt.Sprintf("This port serves the application %q, not %q: the routing that sent it here is out of date", p.cfg.Application, meant))
}

func unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	plain(w, http.StatusServiceUnavailable, why)
}

func notImplemented(w http.ResponseWriter, why string) {
	plain(w, http.StatusNotImplemented, why)
}

func badRequest(w http.ResponseWriter, why string) {
	w.Header().Set("Connection", "close") // the rest of what the client sends cannot be framed
	plain(w, http.StatusBadRequest, why)
}

// plain answers a one-line text the front itself gives (not the worker).
func plain(w http.ResponseWriter, code int, why string) {
	text := why + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, text)
}

// forward streams one request to the active instance, its body and the answer's flowing at the
// same time. A request that failed before any answer is sent once more, to whichever instance
// is active by then, only when that cannot run it twice: nothing reached the worker (the dial
// failed), or the method is safe (GET, HEAD, OPTIONS, TRACE) and no body was sent. Caddy's
// reverse proxy draws the same line (it retries GET); PUT and DELETE are idempotent by RFC 9110
// but a worker's handler need not be, so they are not sent again.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, failed *Instance) {
	in := p.serving(r, failed)
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
	var body *requestBody
	if !bodiless {
		body = &requestBody{body: r.Body}
	}
	answer, err := in.transport.RoundTrip(outgoing(r, body))
	if err != nil {
		switch {
		case r.Context().Err() != nil: // the client left; nothing to tell it
		case body.broken() != nil:
			badRequest(w, "The request body is malformed: "+body.broken().Error())
		case failed == nil && mayResend(r, body, err):
			p.forward(w, r, in)
		default:
			p.log(fmt.Sprintf("cell: %s failed a request: %s", in.Label, errnoName(err)))
			unavailable(w, "The deployment did not answer")
		}
		return
	}
	defer answer.Body.Close()
	h := w.Header()
	copyEndToEnd(h, answer.Header)
	if _, ok := answer.Header["Content-Type"]; !ok {
		h["Content-Type"] = nil // no sniffed type: the client sees what the worker sent
	}
	announced := announceTrailers(h, answer.Trailer)
	if body.unfinished() {
		// The worker answered before the client's body ended (a 405, a redirect, an echo). In
		// full-duplex mode Go's server closes the connection after such an exchange if the body is
		// still unread then, without saying so, which cuts off a client already sending its next
		// request on it: say so, as Go's server does itself for a body it will not read.
		h.Set("Connection", "close")
	}
	w.WriteHeader(answer.StatusCode)
	if err := copyBody(w, answer); err != nil && r.Context().Err() == nil {
		panic(http.ErrAbortHandler) // the answer broke off: so does the client's
	}
	passTrailers(w, answer, announced)
}

// mayResend says whether a failed request can be sent again without running twice.
func mayResend(r *http.Request, body *requestBody, err error) bool {
	if body.touched() {
		return false
	}
	var dial dialError
	if errors.As(err, &dial) {
		return true
	}
	if body != nil {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// requestBody is the client's body as the transport reads it. It notes whether any of it was
// read (a body nobody read can still be sent again) and how it broke, if it did (a malformed
// body is the client's fault, not the worker's). The transport's Close is ignored, so that a
// failed dial leaves the body whole for the second try; the server closes it when the request
// ends.
type requestBody struct {
	body  io.ReadCloser
	read  atomic.Bool
	ended atomic.Bool
	bad   atomic.Pointer[error]
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.ended.Store(true)
	} else if err != nil {
		b.bad.Store(&err)
	}
	return n, err
}

// unfinished says whether the client's body has not been read to its end yet.
func (b *requestBody) unfinished() bool { return b != nil && !b.ended.Load() }

func (b *requestBody) Close() error { return nil }

func (b *requestBody) touched() bool { return b != nil && b.read.Load() }

// broken is the error that broke the client's body, unless the client went away: a client
// that left is told nothing, it is not a bad request.
func (b *requestBody) broken() error {
	if b == nil {
		return nil
	}
	if err := b.bad.Load(); err != nil && !isClientGone(*err) {
		return *err
	}
	return nil
}

func isClientGone(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, os.ErrDeadlineExceeded)
}

// dialError marks a failure to connect to workerd: nothing of the request reached the worker.
type dialError struct{ error }

func (e dialError) Unwrap() error { return e.error }

// outgoing is the request as workerd gets it: the client's, less the hop-by-hop headers, with
// `body` (nil for none) as its body. A shallow copy, not Clone: the proxy is on every request's
// path. The client's trailers go on as the transport writes them after the body.
func outgoing(r *http.Request, body *requestBody) *http.Request {
	out := new(http.Request)
	*out = *r
	target := *r.URL
	target.Scheme, target.Host = "http", "workerd"
	out.URL = &target
	out.RequestURI = ""
	out.Header = make(http.Header, len(r.Header))
	copyEndToEnd(out.Header, r.Header)
	// The worker may answer with trailers if the client said it takes them (as Caddy does).
	if hasToken(r.Header["Te"], "trailers") {
		out.Header["Te"] = []string{"trailers"}
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // no Go default: the worker sees what the client sent
	}
	if body == nil {
		out.Body, out.ContentLength, out.Trailer = nil, 0, nil
	} else {
		out.Body = body
	}
	return out
}

// copyEndToEnd copies the headers that are meant for the far end: not the hop-by-hop ones, nor
// any that the Connection header names.
func copyEndToEnd(to, from http.Header) {
	named := connectionNamed(from)
	for name, values := range from {
		if !hopByHop[name] && !named[name] {
			to[name] = values
		}
	}
}

// connectionNamed is the set of headers the Connection header names (canonical names), nil for none.
func connectionNamed(h http.Header) map[string]bool {
	var named map[string]bool
	for _, v := range h["Connection"] {
		for token := range strings.SplitSeq(v, ",") {
			if token = strings.TrimSpace(token); token != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(token)] = true
			}
		}
	}
	return named
}

// hasToken says whether a comma-separated header's values hold `token` (case-insensitive).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// announceTrailers declares the trailers the worker announced, so the client is told of them
// before the body; answers how many there were.
func announceTrailers(h http.Header, trailer http.Header) int {
	if len(trailer) == 0 {
		return 0
	}
	names := make([]string, 0, len(trailer))
	for name := range trailer {
		names = append(names, name)
	}
	h.Add("Trailer", strings.Join(names, ", "))
	return len(trailer)
}

// passTrailers sends on the trailers that came after the worker's body: the announced ones under
// their names, any others with the prefix Go's server takes for trailers it was not told of.
func passTrailers(w http.ResponseWriter, answer *http.Response, announced int) {
	_ = answer.Body.Close() // fills answer.Trailer
	if len(answer.Trailer) == 0 {
		return
	}
	h := w.Header()
	for name, values := range answer.Trailer {
		if len(answer.Trailer) != announced {
			name = http.TrailerPrefix + name
		}
		h[name] = values
	}
}

// copyBody sends the worker's body on. An answer of unknown length (a stream, server-sent events)
// is flushed piece by piece so it arrives as sent; one of known length is copied whole.
func copyBody(w http.ResponseWriter, answer *http.Response) error {
	if answer.ContentLength >= 0 {
		buf := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(buf)
		_, err := io.CopyBuffer(w, answer.Body, *buf)
		if err != nil && isClientWriteError(err) {
			return nil
		}
		return err
	}
	return copyFlushing(w, answer.Body)
}

// copyBuffers are the buffers answers are copied through, taken again by the next request: each
// answer's own 32 KiB (io.Copy's, as neither the worker's body nor the statusRecorder offers a
// shortcut) was a tenth of the front's CPU on small answers, and most of its collections.
var copyBuffers = sync.Pool{New: func() any { buf := make([]byte, 32*1024); return &buf }}

// isClientWriteError tells a client that left (nothing to tell it) from a worker's answer that broke.
func isClientWriteError(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, http.ErrHandlerTimeout)
}

// copyFlushing streams the body, flushing each piece so that a streamed answer arrives as sent.
func copyFlushing(w http.ResponseWriter, body io.Reader) error {
	control := http.NewResponseController(w)
	pooled := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(pooled)
	buf := *pooled
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

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && hasToken(r.Header["Connection"], "upgrade")
}

// upgrade pipes the raw bytes both ways between the client and the active instance (WebSockets).
func (p *Proxy) upgrade(w http.ResponseWriter, r *http.Request) {
	in := p.serving(r, nil)
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
	out.Header = make(http.Header, len(r.Header))
	copyEndToEnd(out.Header, r.Header)
	// Of the hop-by-hop headers, only the upgrade itself goes on.
	out.Header["Connection"] = []string{"Upgrade"}
	out.Header["Upgrade"] = r.Header["Upgrade"]
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

// holdWhileStarting bounds how long a request waits for a deployment that is starting: the
// workerd of the serving deployment died and is started again (about a second), or the front has
// just started and not yet looked at the selector. Below the ingress's own bound for trying
// upstreams (5 s in the shipped Caddyfiles), so a request held in vain still gets its 503 in time.
const holdWhileStarting = 3 * time.Second

// exitGrace bounds the wait to learn whether the workerd that just failed a request has exited
// (its connections break a moment before its exit is seen).
const exitGrace = 250 * time.Millisecond

// serving is the instance a request goes to. While a deployment is starting, the request waits
// for it (up to p.hold) rather than being answered 503 at once; so does the second try of a
// request whose first went to `failed`, if that instance's workerd has exited and the follower
// has not yet put it aside. nil when none serves.
func (p *Proxy) serving(r *http.Request, failed *Instance) *Instance {
	taken := p.follower.TakenOver() // before Active: a takeover in between still wakes us
	in := p.follower.Active()
	if in != nil && in == failed && !in.Exited() {
		grace := time.NewTimer(exitGrace)
		select {
		case <-in.exited:
		case <-taken:
		case <-grace.C:
		case <-r.Context().Done():
		}
		grace.Stop()
		in = p.follower.Active()
	}
	if in != nil && (in != failed || !in.Exited()) {
		return in
	}
	if status, _ := p.follower.Status(); in == nil && status != statusStarting || p.follower.Stopping() {
		return in
	}
	timer := time.NewTimer(p.hold)
	defer timer.Stop()
	p.holding.Add(1)
	defer p.holding.Add(-1)
	select {
	case <-taken:
	case <-timer.C:
	case <-r.Context().Done():
	case <-p.follower.quit:
	}
	return p.follower.Active()
}

// CutUpgraded closes every upgraded connection still open: the stop's bound is over.
func (p *Proxy) CutUpgraded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.upgraded {
		c.Close()
	}
}

// SupervisedAt is when a supervisor last asked for the health.
func (p *Proxy) SupervisedAt() time.Time { return time.UnixMilli(p.supervisedAt.Load()) }

// Supervised notes that a supervisor asked for the health (its probe, or over the host connection).
func (p *Proxy) Supervised() { p.supervisedAt.Store(time.Now().UnixMilli()) }

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

// statusRecorder remembers the status written, for the span line and the tail.
type statusRecorder struct {
	http.ResponseWriter
	status int
	// uncaught: the answer is workerd's own to a worker that threw (500, no content type,
	// "Internal Server Error"), which a worker's own 500 is not unless it copies it exactly.
	uncaught bool
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	if code == http.StatusInternalServerError {
		h := s.Header()
		s.uncaught = h.Get("Content-Type") == "" && h.Get("Content-Length") == "21"
	}
	s.ResponseWriter.WriteHeader(code)
}

// deployment is the one serving now, for the tail's request records.
func (p *Proxy) deployment() string {
	if in := p.follower.Active(); in != nil {
		return in.Deployment
	}
	return ""
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
