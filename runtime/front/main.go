// Command cell-front is the resident part of `cell serve` (docs/runtime.md "cell serve"): the
// Node shim checks the environment, makes the private folder and replaces itself with this
// program, which owns the application's port, answers its health, runs one workerd per
// deployment and switches between them. Whatever needs the bucket it asks of the runtime host:
// the node daemon, on its socket, or a private `cell host --stdio` (host.go).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// hostGrace bounds the wait for a private host's last answers at stop.
const hostGrace = 10 * time.Second

func main() {
	if env, again := startAgainWith(os.Args, os.Getenv, os.Environ()); again {
		startAgain(env)
	}
	os.Exit(run())
}

// startAgainWith answers the environment `cell-front serve` starts again with, GOMAXPROCS set
// (maxProcs), when it was started without one. The Go runtime sets up its processors before main
// runs, and an idle front set up with two keeps about 0.3 MB more than one set up with one, even
// after runtime.GOMAXPROCS(1) (bench/RESULTS.md "Density").
func startAgainWith(args []string, getenv func(string) string, environ []string) ([]string, bool) {
	if len(args) < 2 || args[1] != "serve" || getenv("GOMAXPROCS") != "" {
		return nil, false
	}
	return append(environ[:len(environ):len(environ)], "GOMAXPROCS="+strconv.Itoa(maxProcs)), true
}

// startAgain replaces the process with the same program (execve: same pid, same stdio, same
// arguments) in `env`. SIGHUP is ignored across the exec, so one that comes meanwhile does not end
// the process (run listens for it from then on). Should the exec fail, the front goes on as it is,
// tuneGoRuntime setting its processors.
func startAgain(env []string) {
	self, err := os.Executable()
	if err != nil {
		return
	}
	signal.Ignore(syscall.SIGHUP)
	_ = syscall.Exec(self, os.Args, env)
}

// The front is on every request's path and its live heap is small: a collection at 5x the live
// heap instead of 2x costs a few MB under load and a quarter of the front's CPU per request
// (bench/RESULTS.md "Runtime throughput"); the limit keeps a burst from holding memory.
// One processor: the workerd behind the front runs its worker on one thread and needs about twice
// the CPU per request the front does, so a second processor never carries more requests; each
// processor costs an idle front its own allocation caches and threads (1.33 instead of 1.64 MB
// of private memory on 2 cores, more with more cores; bench/RESULTS.md "Density").
const (
	gcPercent   = 400
	memoryLimit = 64 << 20
	maxProcs    = 1
)

// tuneGoRuntime applies the settings above, each unless its Go variable (GOGC, GOMEMLIMIT,
// GOMAXPROCS, settable per fleet with `svc sail --cell-env`) is set.
func tuneGoRuntime(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	if getenv("GOMAXPROCS") == "" {
		goruntime.GOMAXPROCS(maxProcs)
	}
}

func run() int {
	// `cell publish`'s load check starts workerd through this program too (check.go).
	if len(os.Args) > 1 && os.Args[1] == "check" {
		return runCheck()
	}
	tuneGoRuntime(os.Getenv)
	// The daemon reading our output may be gone (killed, or restarted keeping its applications):
	// a broken pipe loses the output, never the process. SIGHUP must never end it either.
	signal.Ignore(syscall.SIGPIPE)
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	say := func(line string) {
		_, _ = os.Stderr.WriteString(line + "\n")
		theTail.Runtime(line)
	}
	cfg, err := ParseConfig(os.Getenv(ConfigVariable))
	if err != nil {
		say("cell: " + err.Error())
		return 1
	}
	healthPath = cfg.HealthPath
	geoip, err := OpenGeoIP(cfg.GeoIPDB)
	if err != nil {
		say("cell: " + err.Error())
		_ = os.RemoveAll(cfg.StateDir)
		return 1
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		say(fmt.Sprintf("cell: cannot listen on %s:%d: %s", cfg.Host, cfg.Port, errnoName(err)))
		_ = os.RemoveAll(cfg.StateDir)
		return 1
	}
	r := newRuntime(cfg, say)
	r.proxy.geoip = geoip
	server := &http.Server{
		Handler:           r.proxy,
		ReadHeaderTimeout: 60 * time.Second,
		IdleTimeout:       65 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = server.Serve(listener) }()
	say(fmt.Sprintf("%s serving %s on http://%s as node %q", cfg.VersionLine, cfg.Application,
		net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), cfg.Node))
	theTail.Listen(TailSocketPath(cfg), cfg.Node, cfg.Application, say)
	go r.lease.Run()
	go r.follower.Run()
	reason := r.waitForStop(signals)
	r.stop(reason, server)
	return 0
}

// runtime is one replica's parts, wired together.
type runtime struct {
	cfg      *Config
	say      func(string)
	host     *Host
	follower *Follower
	lease    *Lease
	crons    *Crons
	proxy    *Proxy
	health   *HealthTeller
	parent   int
}

func newRuntime(cfg *Config, say func(string)) *runtime {
	r := &runtime{cfg: cfg, say: say, parent: os.Getppid()}
	r.host = NewHost(cfg, hostEnvironment(), say)
	r.follower = NewFollower(cfg, r.host, say, func(in *Instance) {
		r.crons.SetSchedules(in.Crons)
		r.lease.RenewNow()
	}, func() {
		// With the default schedule (a look and a renewal every 5 minutes) the two reach the
		// host together; the lease is then renewed a little early.
		r.lease.RenewIfDueWithin(ms(cfg.PollMs))
	})
	r.lease = NewLease(cfg, r.host, os.Getpid(), say, func() map[string]string {
		if in := r.follower.Active(); in != nil {
			return map[string]string{"script": in.Script, "deployment": in.Deployment}
		}
		return map[string]string{}
	})
	r.crons = NewCrons(r.host, say, func() *Instance {
		if r.follower.Stopping() {
			return nil
		}
		return r.follower.Active()
	})
	r.proxy = NewProxy(cfg, r.follower, say)
	// The supervisor probes a ready front rarely; a change of its health is told to the host.
	r.health = NewHealthTeller(r.host, func() healthNotice { return currentHealth(r.follower) })
	r.follower.healthMoved = r.health.Changed
	// The daemon's supervisor asks a ready front for its health over the host connection, which
	// only the node's daemon holds: being asked counts as supervision, as its HTTP probe does.
	r.host.OnHealthAsked(func() {
		r.proxy.Supervised()
		r.health.Ask()
	})
	return r
}

// hostEnvironment is a private host's: ours, less the front's settings.
func hostEnvironment() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ConfigVariable+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// waitForStop serves SIGHUP until SIGTERM, SIGINT or the unsupervised bound; answers why it stops.
func (r *runtime) waitForStop(signals chan os.Signal) string {
	var watch <-chan time.Time
	var check *time.Timer
	if bound := r.cfg.UnsupervisedExitMs; bound != nil {
		check = time.NewTimer(unsupervisedCheckIn(ms(*bound), 0))
		defer check.Stop()
		watch = check.C
	}
	for {
		select {
		case s := <-signals:
			switch s {
			case syscall.SIGHUP:
				r.follower.SelectorMoved()
			case syscall.SIGTERM:
				return "SIGTERM"
			default:
				return "SIGINT"
			}
		case <-watch:
			unsupervised := r.unsupervisedFor()
			if unsupervised > ms(*r.cfg.UnsupervisedExitMs) {
				return fmt.Sprintf("no supervisor for %d ms", *r.cfg.UnsupervisedExitMs)
			}
			check.Reset(unsupervisedCheckIn(ms(*r.cfg.UnsupervisedExitMs), unsupervised))
		}
	}
}

// unsupervisedCheckIn is when to look at the supervision again, given the bound and how long the
// process has gone without it: a quarter of the bound while its parent lives (an idle front
// wakes for this only a few times per bound, not every few seconds), and once it is orphaned,
// just past the moment the bound would be reached. It stops the bound after the last
// supervisor's probe, or a quarter of the bound after its parent died when that is later.
func unsupervisedCheckIn(bound, unsupervised time.Duration) time.Duration {
	every := max(250*time.Millisecond, bound/4)
	if unsupervised > 0 {
		return max(time.Millisecond, min(every, bound-unsupervised+time.Millisecond))
	}
	return every
}

// unsupervisedFor is how long the process has gone without supervision; 0 while the process
// that started it lives.
func (r *runtime) unsupervisedFor() time.Duration {
	if os.Getppid() == r.parent {
		return 0
	}
	return time.Since(r.proxy.SupervisedAt())
}

// stop: no new connections, requests finish (bounded), every workerd stops, the lease goes,
// the host connection and the private folder go.
func (r *runtime) stop(reason string, server *http.Server) {
	r.say(fmt.Sprintf("cell: %s: stopping %s", reason, r.cfg.Application))
	instances := r.follower.Stop() // from here the health says stopping and no cron fires
	r.crons.Stop()
	bound := ms(min(r.cfg.DrainMs, r.cfg.StopDrainMs))
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	shut := make(chan struct{})
	go func() {
		_ = server.Shutdown(ctx)
		close(shut)
	}()
	var wg sync.WaitGroup
	for _, in := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.Drain(bound)
		}()
	}
	wg.Wait()
	// The bound is over: what still runs (WebSockets, long requests) is cut.
	r.proxy.CutUpgraded()
	_ = server.Close()
	<-shut
	KillAllWorkerd()
	for _, in := range instances {
		in.Stop(true)
	}
	r.lease.Release()
	r.host.Close(hostGrace)
	r.health.Stop()
	_ = os.RemoveAll(r.cfg.StateDir)
	r.say("cell: stopped " + r.cfg.Application)
	theTail.Close()
}
