package main

// The runtime host (docs/runtime.md "The runtime host") does everything that needs the bucket:
// the selector and a deployment's files, the node lease, cron claims. It is the node daemon,
// reached on its Unix socket, or, for a `cell serve` run without one, a private `cell host
// --stdio` this front starts once. The messages are JSON lines defined once, by example, in
// runtime/protocol/host-protocol.json; a hello opens each connection and a host of another
// protocol version refuses it. A connection that breaks (the daemon restarting) is made again
// by the next call, which waits for it up to a bound.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"
)

// hostProtocolVersion is the protocol this front speaks; runtime/protocol/host-protocol.json
// says the same, and a test holds the two together.
const hostProtocolVersion = 1

// hostWait bounds how long a call waits for a host to connect to: long enough for a daemon to
// restart (a cron time due meanwhile then fires late, once), short enough that a front whose
// daemon stays away keeps retrying its own schedule.
const hostWait = 60 * time.Second

// hostHelloTimeout bounds the wait for the hello's answer on a fresh connection.
const hostHelloTimeout = 10 * time.Second

// Reconnection backs off from reconnectFirst, doubling up to reconnectMax.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 2 * time.Second
)

// helloRequest opens a connection: who this front is and what its host must know of it.
type helloRequest struct {
	Protocol    int             `json:"protocol"`
	Application string          `json:"application"`
	Node        string          `json:"node"`
	StateDir    string          `json:"stateDir"`
	Context     json.RawMessage `json:"context"`
}

type helloAnswer struct {
	Protocol int    `json:"protocol"`
	Host     string `json:"host"`
}

// hostLine is any line a host writes: an answer (id and result, or id and error) or a push.
type hostLine struct {
	ID     *int            `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *hostError      `json:"error,omitempty"`
	Push   string          `json:"push,omitempty"`
	Line   string          `json:"line,omitempty"`
}

type hostError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *hostError) Error() string { return e.Message }

// Host is this front's connection to its runtime host.
type Host struct {
	socket  string   // the node's host socket, or
	command []string // the private host to start
	env     []string
	hello   helloRequest
	log     func(string)

	mu      sync.Mutex
	conn    *hostConn
	nextID  int
	closed  bool
	closing chan struct{}
	// failing: the last connection attempt failed and said so; the next success says so too.
	failing bool
	// healthAsked is called when the host asks for this front's health (the `health` push).
	healthAsked func()
}

type hostConn struct {
	w       io.WriteCloser
	closer  io.Closer // the socket, or nil for a private host (its stdin is w)
	proc    *exec.Cmd
	exited  chan struct{} // a private host's: closed once it is reaped
	pending map[int]chan hostLine
	done    chan struct{}
	ending  sync.Once
}

// NewHost prepares the connection to the host; nothing connects until the first call.
func NewHost(cfg *Config, env []string, log func(string)) *Host {
	return &Host{
		socket: cfg.HostSocket, command: cfg.PrivateHost, env: env, log: log,
		hello: helloRequest{
			Protocol: hostProtocolVersion, Application: cfg.Application, Node: cfg.Node,
			StateDir: cfg.StateDir, Context: cfg.HostContext,
		},
		closing: make(chan struct{}),
	}
}

// OnHealthAsked sets what to do when the host asks for this front's health (the `health` push,
// which only the node daemon's host sends: its supervisor asks a ready front over this
// connection rather than opening one to its health endpoint). `asked` must not block.
func (h *Host) OnHealthAsked(asked func()) {
	h.mu.Lock()
	h.healthAsked = asked
	h.mu.Unlock()
}

// Call sends one request (`op` and the fields of `request`) and decodes its result into
// `answer`, waiting up to hostWait for a host to take it.
func (h *Host) Call(op string, request any, answer any) error {
	return h.CallWithin(hostWait, op, request, answer)
}

// CallWithin is Call with its own bound on the wait for a connection.
func (h *Host) CallWithin(wait time.Duration, op string, request any, answer any) error {
	line, err := requestLine(op, request)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	var conn *hostConn
	var reply chan hostLine
	for {
		if conn, err = h.connection(deadline); err != nil {
			return err
		}
		h.mu.Lock()
		h.nextID++
		id := h.nextID
		reply = make(chan hostLine, 1)
		conn.pending[id] = reply
		_, err = conn.w.Write(append(withID(line, id), '\n'))
		if err != nil {
			delete(conn.pending, id)
		}
		h.mu.Unlock()
		if err == nil {
			break
		}
		// A connection that broke before its reader noticed: the request was never sent, so it
		// goes on the next connection.
		h.drop(conn)
	}
	var got hostLine
	select {
	case got = <-reply:
	case <-conn.done:
		select {
		case got = <-reply:
		default:
			return errors.New("the runtime host went away before it answered")
		}
	}
	if got.Error != nil {
		return got.Error
	}
	return json.Unmarshal(got.Result, answer)
}

// connection answers the open connection, making one if there is none, until `deadline`.
func (h *Host) connection(deadline time.Time) (*hostConn, error) {
	wait := reconnectFirst
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, errors.New("the runtime is stopping")
		}
		if h.conn != nil {
			conn := h.conn
			h.mu.Unlock()
			return conn, nil
		}
		conn, err := h.connect()
		if err == nil {
			h.conn = conn
			if h.failing {
				h.failing = false
				h.log("cell: connected to the runtime host again")
			}
			h.mu.Unlock()
			return conn, nil
		}
		if !h.failing {
			h.failing = true
			h.log(fmt.Sprintf("cell: cannot reach the runtime host: %v; trying again", err))
		}
		h.mu.Unlock()
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("no runtime host: %v", err)
		}
		select {
		case <-h.closing:
			return nil, errors.New("the runtime is stopping")
		case <-time.After(wait):
		}
		wait = min(wait*2, reconnectMax)
	}
}

// connect opens a connection and says hello. Called with mu held: one attempt at a time.
func (h *Host) connect() (*hostConn, error) {
	conn := &hostConn{pending: map[int]chan hostLine{}, done: make(chan struct{})}
	var r io.Reader
	if h.socket != "" {
		socket, err := net.DialTimeout("unix", h.socket, hostHelloTimeout)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", h.socket, errnoName(err))
		}
		conn.w, conn.closer, r = socket, socket, socket
	} else {
		cmd := exec.Command(h.command[0], h.command[1:]...)
		cmd.Env = h.env
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("cannot start %s: %v", h.command[0], err)
		}
		conn.w, conn.proc, r = stdin, cmd, stdout
		conn.exited = make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(conn.exited)
		}()
	}
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 64*1024), 16*1024*1024)
	if err := h.greet(conn, lines); err != nil {
		h.end(conn)
		return nil, err
	}
	go h.readLines(conn, lines)
	return conn, nil
}

// greet sends the hello and reads its answer, bounded by hostHelloTimeout.
func (h *Host) greet(conn *hostConn, lines *bufio.Scanner) error {
	line, err := requestLine("hello", h.hello)
	if err != nil {
		return err
	}
	if _, err := conn.w.Write(append(withID(line, 0), '\n')); err != nil {
		return fmt.Errorf("cannot say hello: %v", err)
	}
	answered := make(chan error, 1)
	go func() {
		if !lines.Scan() {
			answered <- errors.New("the runtime host closed the connection before it answered hello")
			return
		}
		var got hostLine
		if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
			answered <- fmt.Errorf("the runtime host answered hello with %.200q", lines.Bytes())
			return
		}
		if got.Error != nil {
			answered <- got.Error
			return
		}
		var hello helloAnswer
		if err := json.Unmarshal(got.Result, &hello); err != nil || hello.Protocol != hostProtocolVersion {
			answered <- fmt.Errorf("the runtime host %q speaks protocol %d and this front speaks %d", hello.Host, hello.Protocol, hostProtocolVersion)
			return
		}
		answered <- nil
	}()
	select {
	case err := <-answered:
		return err
	case <-time.After(hostHelloTimeout):
		return errors.New("the runtime host did not answer hello")
	}
}

// readLines delivers answers and pushes until the connection ends, then lets it go.
func (h *Host) readLines(conn *hostConn, lines *bufio.Scanner) {
	for lines.Scan() {
		var got hostLine
		if json.Unmarshal(lines.Bytes(), &got) != nil {
			h.log(fmt.Sprintf("cell: the runtime host wrote a line that is no message: %.200s", lines.Bytes()))
			continue
		}
		if got.Push == "log" {
			h.log(got.Line)
			continue
		}
		if got.Push == "health" {
			h.mu.Lock()
			asked := h.healthAsked
			h.mu.Unlock()
			if asked != nil {
				asked()
			}
			continue
		}
		if got.ID == nil {
			continue
		}
		h.mu.Lock()
		reply := conn.pending[*got.ID]
		delete(conn.pending, *got.ID)
		h.mu.Unlock()
		if reply != nil {
			reply <- got
		}
	}
	h.drop(conn)
}

// drop forgets a broken connection; the next call makes a new one.
func (h *Host) drop(conn *hostConn) {
	h.mu.Lock()
	lost := h.conn == conn && !h.closed
	if h.conn == conn {
		h.conn = nil
	}
	h.mu.Unlock()
	if lost {
		h.log("cell: the runtime host closed the connection; the next request connects again")
	}
	h.end(conn)
}

// end closes a connection; it is safe to call twice, and with mu held or not.
func (h *Host) end(conn *hostConn) {
	conn.ending.Do(func() {
		close(conn.done)
		_ = conn.w.Close() // a private host exits on the end of its input
		if conn.closer != nil {
			_ = conn.closer.Close()
		}
	})
}

// Close ends the connection. A private host finishes what it was asked and exits on the end of
// its input; it is killed after `grace`.
func (h *Host) Close(grace time.Duration) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	conn := h.conn
	h.conn = nil
	h.mu.Unlock()
	if conn == nil {
		return
	}
	h.end(conn)
	if conn.proc == nil {
		return
	}
	select {
	case <-conn.exited:
	case <-time.After(grace):
		_ = conn.proc.Process.Kill()
		<-conn.exited
	}
}

func requestLine(op string, request any) ([]byte, error) {
	fields := map[string]any{}
	if request != nil {
		raw, err := json.Marshal(request)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, err
		}
	}
	fields["op"] = op
	return json.Marshal(fields)
}

// withID puts the request's id in front of its other fields.
func withID(line []byte, id int) []byte {
	return append([]byte(fmt.Sprintf(`{"id":%d,`, id)), line[1:]...)
}
