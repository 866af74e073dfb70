package main

// One running deployment: a workerd serving the folder the runtime host materialized, on a Unix
// socket in the private folder, and the probe that says when it answers. The proxy switches
// between instances; an instance never listens on a port.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// A small worker listens 15-40 ms after workerd starts, and a probe made once the socket is
	// there is held until the worker answers: asked every 50 ms from the start, each start (the
	// load check's and the switch's) waited a median 27 ms more than it needed. So the probe
	// waits probeFirst plus a tenth of the time since workerd started, at most probeEvery: a
	// worker is seen at most about a tenth of its start late, with 45 probes in the first second
	// rather than 500 at a steady 2 ms (a node starting 200 applications at once pays for each).
	probeFirst     = 2 * time.Millisecond
	probeEvery     = 50 * time.Millisecond
	probeRequest   = 2 * time.Second
	stopGrace      = 5 * time.Second
	startupTailLen = 4096
)

// A module that throws while loading: workerd's line names the service.
var loadFailure = regexp.MustCompile(`service cell-user: Uncaught[^\n]*(\n[ \t]+[^\n]*)*`)

// Prepared is the runtime host's answer to a look that found a deployment to start (its folder
// materialized, workerd not started).
type Prepared struct {
	SeenEtag      string   `json:"seenEtag"`
	Script        string   `json:"script"`
	Deployment    string   `json:"deployment"`
	Label         string   `json:"label"`
	SecretsDigest string   `json:"secretsDigest"`
	Dir           string   `json:"dir"`
	Socket        string   `json:"socket"`
	CronSocket    *string  `json:"cronSocket"`
	Command       []string `json:"command"`
	Crons         []string `json:"crons"`
	// Exclusive: the deployment opens storage one workerd at a time may hold (its Durable
	// Objects), so every other workerd of the process stops before it starts.
	Exclusive bool `json:"exclusive,omitempty"`
}

// Instance is one workerd process and the requests in flight to it.
type Instance struct {
	Prepared
	transport *workerdLink
	// cache answers the instance's Cache API calls (cache.go): opened before workerd starts,
	// closed and removed once it has exited.
	cache *cacheServer

	cmd      *exec.Cmd
	exited   chan struct{}
	mu       sync.Mutex
	stopping bool
	inflight int
	waiters  []chan struct{}
	tail     []byte
}

// live holds every workerd started and not yet seen to exit: killed on the way out.
var live = struct {
	sync.Mutex
	set map[*exec.Cmd]struct{}
}{set: map[*exec.Cmd]struct{}{}}

// KillAllWorkerd SIGKILLs every workerd still running.
func KillAllWorkerd() {
	live.Lock()
	defer live.Unlock()
	for cmd := range live.set {
		_ = cmd.Process.Kill()
	}
}

// StartInstance spawns workerd in the prepared folder and waits until it answers. `lost` is
// called if workerd later exits on its own.
func StartInstance(p Prepared, stateDir string, timeout time.Duration, log func(string), lost func(*Instance)) (*Instance, error) {
	in := &Instance{Prepared: p, exited: make(chan struct{})}
	socket := p.Socket
	in.transport = newTransport(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	})
	cache, err := listenCache(p.Dir)
	if err != nil {
		in.Stop(false)
		return nil, fmt.Errorf("%s failed to start: %v", p.Label, err)
	}
	in.cache = cache
	if err := in.spawn(stateDir, log, lost); err != nil {
		in.Stop(false)
		return nil, err
	}
	if err := in.probe(timeout); err != nil {
		in.Stop(false)
		return nil, err
	}
	return in, nil
}

func (in *Instance) spawn(stateDir string, log func(string), lost func(*Instance)) error {
	if len(in.Command) == 0 {
		return errors.New("the runtime host gave no workerd command")
	}
	cmd := exec.Command(in.Command[0], verbose(in.Command[1:])...)
	cmd.Dir = in.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	output := &tailWriter{in: in, lines: workerdOutput{tail: theTail}}
	cmd.Stdout = output
	cmd.Stderr = output
	if err := cmd.Start(); err != nil {
		log("cell: cannot run workerd: " + err.Error())
		close(in.exited)
		return fmt.Errorf("%s failed to start: cannot run workerd: %v", in.Label, err)
	}
	in.cmd = cmd
	live.Lock()
	live.set[cmd] = struct{}{}
	live.Unlock()
	recordWorkerd(stateDir, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		output.flush()
		live.Lock()
		delete(live.set, cmd)
		live.Unlock()
		in.cache.close() // no cache socket outlives its workerd
		in.mu.Lock()
		stopping := in.stopping
		in.mu.Unlock()
		close(in.exited)
		if !stopping {
			log(fmt.Sprintf("cell: workerd for %s exited (%s)", in.Label, exitReason(cmd, err)))
			lost(in)
		}
	}()
	return nil
}

// tailWriter forwards workerd's output to ours (the live tail reading it on the way, tail.go) and
// keeps its last bytes for start failures.
type tailWriter struct {
	in    *Instance
	lines workerdOutput
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.pass(w.lines.Write(p))
	return len(p), nil
}

// flush passes on a last line without its end, once workerd has exited.
func (w *tailWriter) flush() { w.pass(w.lines.Flush()) }

func (w *tailWriter) pass(p []byte) {
	if len(p) == 0 {
		return
	}
	_, _ = os.Stderr.Write(p) // a broken pipe loses the output, never the instance
	w.in.mu.Lock()
	w.in.tail = append(w.in.tail, p...)
	if len(w.in.tail) > startupTailLen {
		w.in.tail = append([]byte(nil), w.in.tail[len(w.in.tail)-startupTailLen:]...)
	}
	w.in.mu.Unlock()
}

func (in *Instance) output() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return string(in.tail)
}

// probe asks the worker until it answers, workerd exits, the worker fails to load, or time runs out.
func (in *Instance) probe(timeout time.Duration) error {
	started := time.Now()
	deadline := started.Add(timeout)
	client := &http.Client{Transport: in.transport, Timeout: probeRequest}
	for time.Now().Before(deadline) {
		if failed := loadFailure.FindString(in.output()); failed != "" {
			return fmt.Errorf("%s failed to start: %s", in.Label, failed)
		}
		select {
		case <-in.exited:
			return fmt.Errorf("%s failed to start: workerd exited:\n%s", in.Label, strings.TrimRight(in.output(), " \t\r\n"))
		default:
		}
		if _, err := os.Stat(in.Socket); err == nil && answers(client) {
			return nil
		}
		time.Sleep(probeWait(time.Since(started)))
	}
	return fmt.Errorf("%s did not answer within %d ms", in.Label, timeout.Milliseconds())
}

// probeWait is how long the probe waits before it asks again, `elapsed` after workerd started.
func probeWait(elapsed time.Duration) time.Duration {
	return min(probeFirst+elapsed/10, probeEvery)
}

func answers(client *http.Client) bool {
	req, _ := http.NewRequest(http.MethodGet, "http://localhost"+healthPath, nil)
	req.Header.Set("cell-probe", "1")
	req.Header["User-Agent"] = []string{""}
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return true
}

// healthPath is set once from the configuration: the probe asks the worker for it.
var healthPath = "/.well-known/cell/health"

// Exited says whether the instance's workerd has exited.
func (in *Instance) Exited() bool {
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

// Enter counts one more request in flight.
func (in *Instance) Enter() {
	in.mu.Lock()
	in.inflight++
	in.mu.Unlock()
}

// Leave counts a finished request and wakes a drain waiting for the instance to fall idle.
func (in *Instance) Leave() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.inflight--
	if in.inflight == 0 {
		for _, w := range in.waiters {
			close(w)
		}
		in.waiters = nil
	}
}

// Drain returns once no request is in flight, or after `timeout`.
func (in *Instance) Drain(timeout time.Duration) {
	in.mu.Lock()
	if in.inflight == 0 {
		in.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	in.waiters = append(in.waiters, idle)
	in.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(timeout):
	}
}

// Stop ends workerd (SIGKILL at once with `now`, else SIGTERM and SIGKILL after a grace), closes
// its cache socket and removes the instance's files.
func (in *Instance) Stop(now bool) {
	in.mu.Lock()
	in.stopping = true
	in.mu.Unlock()
	in.transport.CloseIdleConnections()
	if in.cmd != nil {
		select {
		case <-in.exited:
		default:
			if now {
				_ = in.cmd.Process.Kill()
			} else {
				_ = in.cmd.Process.Signal(syscall.SIGTERM)
			}
			select {
			case <-in.exited:
			case <-time.After(stopGrace):
				_ = in.cmd.Process.Kill()
				<-in.exited
			}
		}
	}
	in.cache.close()
	_ = os.RemoveAll(in.Dir)
	_ = os.Remove(in.Socket)
	if in.CronSocket != nil {
		_ = os.Remove(*in.CronSocket)
	}
}

// recordWorkerd notes a workerd's pid in the private folder, so that if this process dies
// without stopping it, the next `cell serve` on the machine does (runtime/src/orphans.ts).
func recordWorkerd(stateDir string, pid int) {
	f, err := os.OpenFile(filepath.Join(stateDir, "workerd.pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d\n", pid)
}

func exitReason(cmd *exec.Cmd, err error) string {
	if status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return signalName(status.Signal())
	}
	if cmd.ProcessState != nil {
		return fmt.Sprintf("code %d", cmd.ProcessState.ExitCode())
	}
	return err.Error()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGHUP: "SIGHUP",
	syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT", syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1",
	syscall.SIGUSR2: "SIGUSR2", syscall.SIGTRAP: "SIGTRAP",
}

func signalName(s syscall.Signal) string {
	if name, ok := signalNames[s]; ok {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

// verbose adds --verbose after workerd's `serve`: its uncaught exceptions then carry their stack,
// for the live tail (tailWriter keeps what the flag adds from our output).
func verbose(args []string) []string {
	if len(args) == 0 || args[0] != "serve" {
		return args
	}
	return append([]string{"serve", "--verbose"}, args[1:]...)
}
