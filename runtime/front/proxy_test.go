package main

// The request path (docs/runtime.md "The request path"): the proxy in front of a stand-in
// workerd, a Go HTTP server on a Unix socket (the seam is the instance's socket).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// standInWorkerd serves `handler` on a Unix socket, as workerd serves a deployment.
func standInWorkerd(t *testing.T, handler http.Handler) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "w.sock")
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	server := &httptest.Server{Listener: listener, Config: &http.Server{Handler: handler}}
	server.Start()
	t.Cleanup(server.Close)
	return socket
}

func dialUnix(socket string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
}

// frontServing runs the proxy on a loopback port, serving an instance that dials with `dial`.
func frontServing(t *testing.T, dial func(context.Context) (net.Conn, error)) (string, *[]string) {
	t.Helper()
	cfg := testConfig()
	var logged []string
	f := NewFollower(cfg, nil, func(string) {}, func(*Instance) {}, func() {})
	in := &Instance{Prepared: Prepared{Label: "hello/abc", Script: "hello", Deployment: "abc"}, transport: newTransport(dial)}
	t.Cleanup(in.transport.CloseIdleConnections)
	f.active.Store(in)
	front := httptest.NewServer(NewProxy(cfg, f, func(line string) { logged = append(logged, line) }))
	t.Cleanup(front.Close)
	return front.Listener.Addr().String(), &logged
}

// echo answers at once, then sends back each piece of the request body as it arrives.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	control := http.NewResponseController(w)
	_ = control.EnableFullDuplex()
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_ = control.Flush()
	buf := make([]byte, 1024)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			_ = control.Flush()
		}
		if err != nil {
			return
		}
	}
})

// lineWithin reads one line, failing the test if none comes within 5 s.
func lineWithin(t *testing.T, r *bufio.Reader, what string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := r.ReadString('\n')
		got <- line
	}()
	return receive(t, got, what)
}

func TestTheBodyAndTheAnswerFlowAtTheSameTime(t *testing.T) {
	addr, _ := frontServing(t, dialUnix(standInWorkerd(t, echo)))
	pieces := make([]string, 8)
	for i := range pieces {
		pieces[i] = fmt.Sprintf("piece %d\n", i)
	}
	for _, framing := range []string{"chunked", "content-length"} {
		t.Run(framing, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second)) // a stuck answer fails, not hangs
			head := "POST /echo HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n"
			if framing == "content-length" {
				head = fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: app\r\nContent-Length: %d\r\n\r\n", len(strings.Join(pieces, "")))
			}
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			reader := bufio.NewReader(conn)
			var answer *bufio.Reader
			// Each piece is sent only once the one before has come back: the answer must flow
			// while the body is still open, or this waits for ever.
			for i, piece := range pieces {
				frame := piece
				if framing == "chunked" {
					frame = fmt.Sprintf("%x\r\n%s\r\n", len(piece), piece)
				}
				if _, err := io.WriteString(conn, frame); err != nil {
					t.Fatal(err)
				}
				if answer == nil {
					res, err := http.ReadResponse(reader, nil)
					if err != nil || res.StatusCode != 200 {
						t.Fatalf("answer: %v %v", res, err)
					}
					answer = bufio.NewReader(res.Body) // closing conn ends it
				}
				if got := lineWithin(t, answer, "the echo of "+strings.TrimSpace(piece)); got != piece {
					t.Fatalf("piece %d came back as %q", i, got)
				}
			}
			if framing == "chunked" {
				_, _ = io.WriteString(conn, "0\r\n\r\n")
			}
			if rest, err := io.ReadAll(answer); err != nil || len(rest) != 0 {
				t.Fatalf("after the last piece: %q %v", rest, err)
			}
		})
	}
}

// stubborn reads each request whole, counts it, and closes the connection without answering:
// a worker that acted on the request and died.
func stubborn(count *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		count.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
}

func TestARequestThatMayHaveRunIsNotSentAgain(t *testing.T) {
	for method, want := range map[string]int32{
		http.MethodPost: 1, http.MethodDelete: 1, http.MethodPut: 1, http.MethodPatch: 1,
		http.MethodGet: 2, http.MethodHead: 2, http.MethodOptions: 2,
	} {
		var count atomic.Int32
		addr, logged := frontServing(t, dialUnix(standInWorkerd(t, stubborn(&count))))
		req, _ := http.NewRequest(method, "http://"+addr+"/order", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 503 || (method != http.MethodHead && string(body) != "The deployment did not answer\n") {
			t.Errorf("%s: %d %q", method, res.StatusCode, body)
		}
		if got := count.Load(); got != want {
			t.Errorf("%s reached the worker %d times, want %d", method, got, want)
		}
		if len(*logged) != 1 || !strings.HasPrefix((*logged)[0], "cell: hello/abc failed a request: ") {
			t.Errorf("%s: logged %q", method, *logged)
		}
	}
}

func TestARequestThatReachedNothingIsSentAgainWithItsBody(t *testing.T) {
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}))
	var dials atomic.Int32
	addr, _ := frontServing(t, func(ctx context.Context) (net.Conn, error) {
		if dials.Add(1) == 1 {
			return nil, errors.New("connect: connection refused") // as a workerd that is not there yet
		}
		return dialUnix(socket)(ctx)
	})
	res, err := http.Post("http://"+addr+"/order", "text/plain", strings.NewReader("one order"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "one order" || dials.Load() != 2 {
		t.Fatalf("%d %q after %d dials", res.StatusCode, body, dials.Load())
	}
}

func TestHopByHopHeadersStayOnTheirHopAndTrailersGoThrough(t *testing.T) {
	seen := make(chan http.Header, 1)
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got := r.Header.Clone()
		got["Trailer-X-Sum"] = r.Trailer["X-Sum"]
		seen <- got
		h := w.Header()
		h.Set("Connection", "X-Internal")
		h.Set("X-Internal", "node detail")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("X-Public", "yes")
		h.Set("Trailer", "X-Digest")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "body")
		h.Set("X-Digest", "abc")
	}))
	addr, _ := frontServing(t, dialUnix(socket))
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", io.MultiReader(strings.NewReader("payload")))
	req.ContentLength = -1 // chunked, so the trailer can follow
	req.Header.Set("Connection", "X-Secret, keep-alive")
	req.Header.Set("X-Secret", "for the front only")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic Zm9vOmJhcg==")
	req.Header.Set("Te", "deflate, trailers")
	req.Header.Set("X-Kept", "1")
	req.Trailer = http.Header{"X-Sum": {"42"}}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	got := receive(t, seen, "the request at the worker")
	for _, name := range []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "Connection"} {
		if _, ok := got[name]; ok {
			t.Errorf("the worker got %s: %q", name, got[name])
		}
	}
	if got.Get("X-Kept") != "1" || got.Get("Te") != "trailers" || got.Get("Trailer-X-Sum") != "42" {
		t.Errorf("the worker got X-Kept %q, Te %q, trailer X-Sum %q", got.Get("X-Kept"), got.Get("Te"), got.Get("Trailer-X-Sum"))
	}
	for _, name := range []string{"X-Internal", "Keep-Alive"} {
		if _, ok := res.Header[name]; ok {
			t.Errorf("the client got %s: %q", name, res.Header[name])
		}
	}
	if string(body) != "body" || res.Header.Get("X-Public") != "yes" || res.Trailer.Get("X-Digest") != "abc" {
		t.Errorf("the client got %q, X-Public %q, trailers %v", body, res.Header.Get("X-Public"), res.Trailer)
	}
}

// exchange writes a raw request on a new connection and reads the answer.
func exchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func TestAMalformedBodyIsTheClientsFault(t *testing.T) {
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	addr, logged := frontServing(t, dialUnix(socket))
	res, body := exchange(t, addr, "POST / HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
	if res.StatusCode != 400 || !strings.HasPrefix(body, "The request body is malformed: ") || res.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("%d %v %q", res.StatusCode, res.Header, body)
	}
	if len(*logged) != 0 {
		t.Fatalf("a client's bad body was logged as the deployment's failure: %q", *logged)
	}
}

func TestConnectIsNotImplemented(t *testing.T) {
	addr, _ := frontServing(t, dialUnix(standInWorkerd(t, echo)))
	res, body := exchange(t, addr, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	if res.StatusCode != 501 || body != "CONNECT is not supported: the application serves HTTP requests, not tunnels\n" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
}

// answerTo serves one GET through `p` in the background; answers the recorder when done.
func answerTo(p *Proxy) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/page", nil))
		done <- rec
	}()
	return done
}

func TestARequestWaitsForADeploymentThatIsStarting(t *testing.T) {
	cfg := testConfig()
	f := NewFollower(cfg, nil, func(string) {}, func(*Instance) {}, func() {})
	p := NewProxy(cfg, f, func(string) {})
	p.hold = time.Hour // the takeover, not the bound, must end the wait
	held := answerTo(p)
	select {
	case rec := <-held:
		t.Fatalf("answered %d %q while the deployment was starting", rec.Code, rec.Body.String())
	default:
	}
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "served")
	}))
	f.promote(&Instance{Prepared: Prepared{Label: "hello/abc"}, transport: newTransport(dialUnix(socket)), exited: make(chan struct{})})
	if rec := receive(t, held, "the held request's answer"); rec.Code != 200 || rec.Body.String() != "served" {
		t.Fatalf("after the takeover: %d %q", rec.Code, rec.Body.String())
	}
}

func TestARequestIsHeldOnlyWhileADeploymentStartsAndOnlySoLong(t *testing.T) {
	cfg := testConfig()
	f := NewFollower(cfg, nil, func(string) {}, func(*Instance) {}, func() {})
	p := NewProxy(cfg, f, func(string) {})
	p.hold = 50 * time.Millisecond
	rec := receive(t, answerTo(p), "the answer once the hold is over")
	if rec.Code != 503 || rec.Body.String() != "The deployment is starting\n" {
		t.Fatalf("after the hold: %d %q", rec.Code, rec.Body.String())
	}
	// Nothing published, or a start that failed: nothing to wait for, the answer is at once.
	p.hold = time.Hour
	for status, why := range map[string]string{statusNoDeployment: "No deployment has been published yet\n", statusFailed: "The deployment is starting\n"} {
		f.setStatus(status, "")
		if rec := receive(t, answerTo(p), "the answer with status "+status); rec.Code != 503 || rec.Body.String() != why {
			t.Fatalf("%s: %d %q", status, rec.Code, rec.Body.String())
		}
	}
	// A stopping front holds nothing.
	f.setStatus(statusStarting, "")
	f.Stop()
	if rec := receive(t, answerTo(p), "the answer while stopping"); rec.Code != 503 {
		t.Fatalf("stopping: %d %q", rec.Code, rec.Body.String())
	}
}

func TestARequestWhoseWorkerdDiedWaitsForTheNextOne(t *testing.T) {
	cfg := testConfig()
	f := NewFollower(cfg, nil, func(string) {}, func(*Instance) {}, func() {})
	p := NewProxy(cfg, f, func(string) {})
	p.hold = time.Hour
	// The serving workerd has exited; the follower has not put it aside yet.
	var deadDials atomic.Int32
	dead := &Instance{Prepared: Prepared{Label: "hello/abc"}, exited: make(chan struct{}),
		transport: newTransport(func(context.Context) (net.Conn, error) {
			deadDials.Add(1)
			return nil, errors.New("connect: connection refused")
		})}
	close(dead.exited)
	f.promote(dead)
	held := answerTo(p)
	deadline := time.Now().Add(5 * time.Second)
	for p.holding.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the request was not held after the dead workerd failed it (%d dials)", deadDials.Load())
		}
		time.Sleep(time.Millisecond) // a poll with a deadline
	}
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "served again")
	}))
	f.promote(&Instance{Prepared: Prepared{Label: "hello/abc"}, transport: newTransport(dialUnix(socket)), exited: make(chan struct{})})
	if rec := receive(t, held, "the answer from the next workerd"); rec.Code != 200 || rec.Body.String() != "served again" || deadDials.Load() != 1 {
		t.Fatalf("%d %q after %d dials of the dead workerd", rec.Code, rec.Body.String(), deadDials.Load())
	}
}

// The ingress names the application it routed to; a front serving another one refuses with 421
// and its marker, before anything reaches the worker, and the worker never sees the header.
func TestARequestMeantForAnotherApplicationIsRefusedAndNeverReachesTheWorker(t *testing.T) {
	var reached atomic.Int32
	var seen atomic.Value
	addr, _ := frontServing(t, dialUnix(standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		seen.Store(fmt.Sprint(r.Header.Values(ApplicationHeader)))
		_, _ = io.WriteString(w, "hello's body")
	}))))
	send := func(method string, header []string, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+"/x", strings.NewReader(body))
		for _, v := range header {
			req.Header.Add(ApplicationHeader, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		text, _ := io.ReadAll(res.Body)
		return res, string(text)
	}
	for _, c := range []struct {
		method string
		header []string
		meant  string
	}{
		{http.MethodGet, []string{"other"}, "other"},
		{http.MethodPost, []string{"other"}, "other"},
		{http.MethodGet, []string{""}, ""},
		{http.MethodGet, []string{"hello", "other"}, "hello, other"},
	} {
		res, body := send(c.method, c.header, "a body")
		want := fmt.Sprintf("This port serves the application \"hello\", not %q: the routing that sent it here is out of date\n", c.meant)
		if res.StatusCode != http.StatusMisdirectedRequest || body != want || res.Header.Get(MisdirectedHeader) != "hello" {
			t.Fatalf("%s %v: got %d %q (%s %q), want 421 %q", c.method, c.header, res.StatusCode, body, MisdirectedHeader, res.Header.Get(MisdirectedHeader), want)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("a misdirected request reached the worker %d times", n)
	}
	res, body := send(http.MethodGet, []string{"hello"}, "")
	if res.StatusCode != 200 || body != "hello's body" || res.Header.Get(MisdirectedHeader) != "" {
		t.Fatalf("a request meant for this application: %d %q", res.StatusCode, body)
	}
	if got := seen.Load(); got != "[]" {
		t.Fatalf("the worker saw %s %s; want none", ApplicationHeader, got)
	}
	if res, body := send(http.MethodGet, nil, ""); res.StatusCode != 200 || body != "hello's body" {
		t.Fatalf("a request naming no application (the supervisor, a direct client): %d %q", res.StatusCode, body)
	}
}

func TestAnUpgradeMeantForAnotherApplicationIsRefused(t *testing.T) {
	addr, _ := frontServing(t, dialUnix(standInWorkerd(t, echo)))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: app\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSvc-Application: other\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusMisdirectedRequest || res.Header.Get(MisdirectedHeader) != "hello" {
		t.Fatalf("got %d, want 421 with %s", res.StatusCode, MisdirectedHeader)
	}
}

// A worker that answers before the client's body ended leaves the rest unread; the client is told
// the connection closes after this answer, so it never sends its next request into a closing one.
func TestAnAnswerBeforeTheBodyEndedSaysTheConnectionCloses(t *testing.T) {
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // answers at once, as workerd does
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	addr, _ := frontServing(t, dialUnix(socket))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// The headers only: the one byte of body is never sent before the answer is read.
	if _, err := io.WriteString(conn, "POST /form HTTP/1.1\r\nHost: app\r\nContent-Length: 1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || !res.Close {
		t.Fatalf("%d, Connection: %q", res.StatusCode, res.Header.Get("Connection"))
	}

	// A body the worker read to its end keeps the connection.
	reader := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	addr, _ = frontServing(t, dialUnix(reader))
	res, _ = exchange(t, addr, "POST /form HTTP/1.1\r\nHost: app\r\nContent-Length: 1\r\n\r\nx")
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("%d, Connection: %q", res.StatusCode, res.Header.Get("Connection"))
	}
}

// workerd's assets answer a POST with 405 without reading its body and close the connection:
// the answer reaches the client even though the rest of the body could not be written.
func TestAnAnswerGivenBeforeTheBodyWasWrittenIsNotLost(t *testing.T) {
	socket := standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buffered, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = buffered.WriteString("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		_ = buffered.Flush()
		conn.Close() // the unread body makes the close a reset
	}))
	addr, logged := frontServing(t, dialUnix(socket))
	for range 20 { // each time on a new connection, since the answer closes the one it came on
		body := strings.Repeat("x", 1<<20)
		res, _ := exchange(t, addr, fmt.Sprintf("POST /form HTTP/1.1\r\nHost: app\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%d, logged %q", res.StatusCode, *logged)
		}
	}
}
