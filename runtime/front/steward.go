package main

// The steward is `cell steward`, the Node half of the runtime: everything that reads or writes
// the bucket (the selector, a deployment's files, the node lease, cron claims). It runs only
// while there is such work and is let go once idle, so an idle application costs no Node
// process. Requests and answers are JSON lines on its stdin and stdout; its stderr is ours.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Steward starts the Node steward on demand and lets it go after a quiet spell.
type Steward struct {
	argv []string
	env  []string
	idle time.Duration
	log  func(string)

	mu      sync.Mutex
	current *stewardProcess
	nextID  int
	closed  bool
}

type stewardProcess struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	pending map[int]chan stewardAnswer
	idle    *time.Timer
	done    chan struct{}
}

type stewardAnswer struct {
	body json.RawMessage
	err  error
}

// NewSteward prepares the steward's command line; nothing runs until the first call.
func NewSteward(argv, env []string, idle time.Duration, log func(string)) *Steward {
	return &Steward{argv: argv, env: env, idle: idle, log: log}
}

// Call sends one request (`op` and the fields of `request`) and decodes the answer into `answer`.
func (s *Steward) Call(op string, request any, answer any) error {
	line, err := requestLine(op, request)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("the runtime is stopping")
	}
	proc, err := s.process()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.nextID++
	id := s.nextID
	reply := make(chan stewardAnswer, 1)
	proc.pending[id] = reply
	if proc.idle != nil {
		proc.idle.Stop()
		proc.idle = nil
	}
	_, err = proc.stdin.Write(append(withID(line, id), '\n'))
	s.mu.Unlock()
	var got stewardAnswer
	if err != nil {
		got = stewardAnswer{err: fmt.Errorf("cannot reach the steward: %v", err)}
	} else {
		select {
		case got = <-reply:
		case <-proc.done:
			select {
			case got = <-reply:
			default:
				got = stewardAnswer{err: errors.New("the steward exited before it answered")}
			}
		}
	}
	s.settle(proc, id)
	if got.err != nil {
		return got.err
	}
	var failure struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(got.body, &failure) == nil && failure.Error != "" {
		return errors.New(failure.Error)
	}
	return json.Unmarshal(got.body, answer)
}

// settle forgets a request and, once nothing is pending, lets the steward go after the quiet spell.
func (s *Steward) settle(proc *stewardProcess, id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(proc.pending, id)
	if len(proc.pending) > 0 || s.current != proc || proc.idle != nil {
		return
	}
	proc.idle = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.current == proc && len(proc.pending) == 0 {
			s.current = nil
			proc.stdin.Close() // the steward finishes and exits on the end of its input
		}
	})
}

// process answers the running steward, starting one if none runs. Called with mu held.
func (s *Steward) process() (*stewardProcess, error) {
	if s.current != nil {
		select {
		case <-s.current.done:
			s.current = nil
		default:
			return s.current, nil
		}
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env = s.env
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
		return nil, fmt.Errorf("cannot start the steward %s: %v", s.argv[0], err)
	}
	proc := &stewardProcess{cmd: cmd, stdin: stdin, pending: map[int]chan stewardAnswer{}, done: make(chan struct{})}
	s.current = proc
	go s.read(proc, stdout)
	return proc, nil
}

// read delivers answers until the steward's stdout ends, then reaps it.
func (s *Steward) read(proc *stewardProcess, stdout io.Reader) {
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for lines.Scan() {
		var head struct {
			ID int `json:"id"`
		}
		body := append(json.RawMessage(nil), lines.Bytes()...)
		if json.Unmarshal(body, &head) != nil {
			s.log(fmt.Sprintf("cell: the steward wrote a line that is not an answer: %.200s", body))
			continue
		}
		s.mu.Lock()
		reply := proc.pending[head.ID]
		s.mu.Unlock()
		if reply != nil {
			reply <- stewardAnswer{body: body}
		}
	}
	err := proc.cmd.Wait()
	s.mu.Lock()
	if s.current == proc {
		s.current = nil
	}
	unanswered := len(proc.pending)
	s.mu.Unlock()
	if err != nil && unanswered > 0 {
		s.log(fmt.Sprintf("cell: the steward exited with %d requests unanswered (%v)", unanswered, err))
	}
	close(proc.done)
}

// Close lets the running steward finish what it was asked and waits for it (SIGKILL after `grace`).
func (s *Steward) Close(grace time.Duration) {
	s.mu.Lock()
	s.closed = true
	proc := s.current
	s.current = nil
	if proc != nil {
		if proc.idle != nil {
			proc.idle.Stop()
		}
		proc.stdin.Close()
	}
	s.mu.Unlock()
	if proc == nil {
		return
	}
	select {
	case <-proc.done:
	case <-time.After(grace):
		_ = proc.cmd.Process.Kill()
		<-proc.done
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
