package main

// The front's connections to one workerd. Requests without a body share kept-alive
// connections; each request with a body gets a connection of its own, written and read at the
// same time, so that an answer workerd gives before it read the body is never lost.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// workerdLink is the http.RoundTripper to one workerd.
type workerdLink struct {
	pooled *http.Transport
	bodies earlyAnswers
}

// newTransport makes the link; a failed dial is marked as such (nothing reached the worker, so
// the request may be sent again).
func newTransport(dial func(context.Context) (net.Conn, error)) *workerdLink {
	marked := func(ctx context.Context) (net.Conn, error) {
		conn, err := dial(ctx)
		if err != nil {
			return nil, dialError{err}
		}
		return conn, nil
	}
	return &workerdLink{
		pooled: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return marked(ctx) },
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     60 * time.Second,
			DisableCompression:  true,
		},
		bodies: earlyAnswers{dial: marked},
	}
}

// RoundTrip sends one request.
func (l *workerdLink) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return l.pooled.RoundTrip(req)
	}
	return l.bodies.RoundTrip(req)
}

// CloseIdleConnections closes the kept-alive connections (the others end with their answer).
func (l *workerdLink) CloseIdleConnections() { l.pooled.CloseIdleConnections() }

// earlyAnswers sends a request with a body on a connection of its own. Go's http.Transport
// gives up the exchange when writing the body fails, even when the answer already waits to be
// read: workerd's assets answer a POST with 405 (a redirect, an auth refusal alike) without
// reading the body and close, and the client got a 503 instead. Here the answer is read
// whatever becomes of the body; the connection ends with the answer, so a half-written one is
// never used again.
type earlyAnswers struct {
	dial func(context.Context) (net.Conn, error)
}

// informationalLimit bounds the 1xx answers skipped before the final one, as Go's transport does.
const informationalLimit = 5

func (t earlyAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	conn, err := t.dial(req.Context())
	if err != nil {
		return nil, err
	}
	var once sync.Once
	end := func() { once.Do(func() { _ = conn.Close() }) }
	stop := context.AfterFunc(req.Context(), end)
	body := &watchedBody{ReadCloser: req.Body}
	req = req.WithContext(req.Context()) // a copy: its body is the watched one
	req.Body = body
	written := make(chan error, 1)
	go func() {
		err := req.Write(streamingWriter{conn})
		if err != nil {
			// Nothing more goes out: workerd sees the request end, answers or gives up, and the
			// read below ends either way.
			if half, ok := conn.(interface{ CloseWrite() error }); ok {
				_ = half.CloseWrite()
			} else {
				end()
			}
		}
		written <- err
	}()
	reader := bufio.NewReader(conn)
	for range informationalLimit + 1 {
		res, err := http.ReadResponse(reader, req)
		if broken := body.broken(); err == nil && broken != nil {
			// The client's body broke; workerd answered the cut-off request it saw. That answer
			// is not the client's: its request was malformed, or it left.
			res.Body.Close()
			err = broken
		}
		if err != nil {
			stop()
			end()
			return nil, readError(err, written)
		}
		if res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != http.StatusSwitchingProtocols {
			continue // 100 Continue and the like: the final answer follows
		}
		res.Body = &answerBody{ReadCloser: res.Body, end: func() { stop(); end() }}
		return res, nil
	}
	stop()
	end()
	return nil, errors.New("workerd sent too many informational answers")
}

// readError is why no answer came: the write's error when writing failed first (it says more:
// EPIPE, a broken client body), else the read's.
func readError(read error, written <-chan error) error {
	select {
	case err := <-written:
		if err != nil {
			return err
		}
	default:
	}
	if errors.Is(read, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return read
}

// watchedBody keeps the error that broke the client's body, if one did.
type watchedBody struct {
	io.ReadCloser
	err atomic.Pointer[error]
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err.Store(&err)
	}
	return n, err
}

func (b *watchedBody) broken() error {
	if err := b.err.Load(); err != nil {
		return *err
	}
	return nil
}

// streamingWriter sends each piece of the body as the client's read gives it. Request.Write
// buffers what it writes unless the writer takes a reader whole (as Go's transport's does): a
// small body would otherwise wait in the buffer until it ends, and the answer that echoes it
// with it.
type streamingWriter struct{ conn net.Conn }

func (w streamingWriter) Write(p []byte) (int, error) { return w.conn.Write(p) }

func (w streamingWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w.conn}, r)
}

// answerBody closes the connection when the answer's body is closed.
type answerBody struct {
	io.ReadCloser
	end func()
}

func (b *answerBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}
