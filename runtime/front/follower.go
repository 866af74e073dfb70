package main

// Following the selector: which deployment this replica serves. When the fleet-wide selector
// moves (or this node's secrets change), the new deployment starts in its own workerd beside the
// serving one and takes over only once it answers; the previous one then drains and stops, so a
// switch fails no request. The runtime host does the looking (the bucket is its business); this
// loop keeps the state between looks, so the host can restart in between.

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Where a replica stands: nothing published, its first deployment starting, serving, or failed.
const (
	statusNoDeployment = "no-deployment"
	statusStarting     = "starting"
	statusReady        = "ready"
	statusFailed       = "failed"
)

type activeDescription struct {
	Script        string `json:"script"`
	Deployment    string `json:"deployment"`
	SecretsDigest string `json:"secretsDigest"`
}

type lookRequest struct {
	Active          *activeDescription `json:"active"`
	SeenEtag        *string            `json:"seenEtag"`
	FailedSelection *string            `json:"failedSelection"`
	RetryAtMs       int64              `json:"retryAtMs"`
	Sequence        int                `json:"sequence"`
}

// A look that was asked for (a SIGHUP, or the first at start) and could not read the selector
// (the bucket or the host failed) is tried again after unreadRetryFirst, doubling up to
// unreadRetryMax, one reconcile pass of the daemon, until one reads it: a move the daemon told of
// is served within a pass of the bucket's return, not at the next safety look. A safety look that
// fails waits for the next one, so a long outage does not cost the host a look per application
// every few seconds.
const (
	unreadRetryFirst = time.Second
	unreadRetryMax   = 5 * time.Second
)

type lookAnswer struct {
	Prepared
	Result    string  `json:"result"`
	Message   string  `json:"message"`
	Selection *string `json:"selection"`
}

// Follower owns the serving instance and the switch to the next.
type Follower struct {
	cfg  *Config
	host *Host
	log  func(string)
	// onServing is told of every deployment that takes over (the lease and cron follow it).
	onServing func(*Instance)
	// onPoll is told of each safety look the poll interval brings (not those a SIGHUP asks for),
	// so that other periodic bucket work can be done with it.
	onPoll func()
	// healthMoved is told whenever what the health answers may have changed (health_notice.go);
	// set before Run.
	healthMoved func()

	active   atomic.Pointer[Instance]
	stopping atomic.Bool
	// objects keeps the deadline of a deployment with Durable Objects (objects.go).
	objects *objectsGuard
	lapsed  chan struct{}

	mu        sync.Mutex
	takenOver chan struct{} // closed, and replaced, when a deployment takes over
	status    string
	lastError string
	draining  map[*Instance]struct{}

	// The loop's own state: touched only by run.
	seenEtag        *string
	failedSelection *string
	failures        int
	retryAt         time.Time
	lastLogged      string
	sequence        int
	// asked: a look was asked for and none has read the selector since; unread counts the looks
	// that failed to read it, lookAgainAt is when the next is due.
	asked       bool
	unread      int
	lookAgainAt time.Time

	wake chan struct{}
	lost chan *Instance
	quit chan struct{}
	done chan struct{}
}

// NewFollower prepares the loop; Run starts it.
func NewFollower(cfg *Config, host *Host, log func(string), onServing func(*Instance), onPoll func()) *Follower {
	f := &Follower{
		cfg: cfg, host: host, log: log, onServing: onServing, onPoll: onPoll,
		status:    statusStarting, // until a look says whether anything was published
		draining:  map[*Instance]struct{}{},
		takenOver: make(chan struct{}),
		wake:      make(chan struct{}, 1),
		lapsed:    make(chan struct{}, 1),
		lost:      make(chan *Instance, 4),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	f.objects = newObjectsGuard(host, log, f.objectsLapsed)
	return f
}

// Stopping is true once Stop was called: the replica is on its way out.
func (f *Follower) Stopping() bool { return f.stopping.Load() }

// Active is the instance new requests go to; nil before the first deployment is ready, and
// while one with Durable Objects is past its deadline (objects.go).
func (f *Follower) Active() *Instance {
	if in := f.active.Load(); f.mayServe(in) {
		return in
	}
	return nil
}

// TakenOver answers a channel closed when a deployment next takes over. Asked for before
// Active, it cannot miss a takeover between the two.
func (f *Follower) TakenOver() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takenOver
}

// Status answers where the replica stands and why it does not serve, if it does not.
func (f *Follower) Status() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status == statusReady && !f.mayServe(f.active.Load()) {
		return statusStarting, "the Durable Objects' lease is past its deadline"
	}
	return f.status, f.lastError
}

// SelectorMoved asks for a look. A look under way may have read the selector before it moved,
// so at most one more follows it.
func (f *Follower) SelectorMoved() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run looks at once, then on every SIGHUP, after each poll interval, and when a failed start may
// be tried again.
func (f *Follower) Run() {
	defer close(f.done)
	f.SelectorMoved() // the first look, at once; it is no safety look
	timer := time.NewTimer(ms(f.cfg.PollMs))
	defer timer.Stop()
	for {
		select {
		case <-f.quit:
			return
		case in := <-f.lost:
			f.forget(in)
		case <-f.lapsed:
			f.standBy()
		case <-f.wake:
			f.asked = true
		case <-timer.C:
			if !f.asked {
				f.onPoll() // an owed look tried again is no safety look
			}
		}
		f.look()
		if f.stopping.Load() {
			return
		}
		timer.Reset(f.nextLookIn())
	}
}

func (f *Follower) nextLookIn() time.Duration {
	wait := ms(f.cfg.PollMs)
	if f.failedSelection != nil {
		if until := time.Until(f.retryAt); until < wait {
			wait = max(until, 0)
		}
	}
	if !f.lookAgainAt.IsZero() {
		if until := time.Until(f.lookAgainAt); until < wait {
			wait = max(until, 0)
		}
	}
	return wait
}

// Stop ends the loop (a look under way is abandoned after it answers) and answers every
// instance still running.
func (f *Follower) Stop() []*Instance {
	f.stopping.Store(true)
	f.tellHealth()
	f.objects.Stop()
	close(f.quit)
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*Instance
	if a := f.active.Load(); a != nil {
		all = append(all, a)
	}
	for in := range f.draining {
		all = append(all, in)
	}
	return all
}

func (f *Follower) look() {
	request := lookRequest{SeenEtag: f.seenEtag, FailedSelection: f.failedSelection, Sequence: f.sequence + 1}
	if !f.retryAt.IsZero() {
		request.RetryAtMs = f.retryAt.UnixMilli()
	}
	if a := f.active.Load(); a != nil {
		request.Active = &activeDescription{Script: a.Script, Deployment: a.Deployment, SecretsDigest: a.SecretsDigest}
	}
	var answer lookAnswer
	if err := f.host.Call("look", request, &answer); err != nil {
		f.unreadable(err.Error())
		return
	}
	if answer.Result == "failed" && answer.Selection == nil {
		f.unreadable(answer.Message)
		return
	}
	// The selector was read (whatever came of it): no look is owed any more.
	f.asked = false
	f.unread = 0
	f.lookAgainAt = time.Time{}
	switch answer.Result {
	case "none":
		if f.active.Load() == nil && f.failedSelection == nil {
			f.setStatus(statusNoDeployment, "")
		}
	case "same":
		if answer.SeenEtag != "" {
			etag := answer.SeenEtag
			f.seenEtag = &etag
		}
	case "failed":
		f.failed(answer.Selection, answer.Message)
	case "start":
		f.sequence = request.Sequence
		f.start(answer)
	default:
		f.unreadable(fmt.Sprintf("the runtime host answered a look with %q", answer.Result))
	}
}

// unreadable: a look could not read the selector. One that was asked for is owed: it is tried
// again soon (see unreadRetryFirst).
func (f *Follower) unreadable(message string) {
	if f.asked {
		f.unread++
		wait := min(unreadRetryFirst<<min(f.unread-1, 8), unreadRetryMax)
		f.lookAgainAt = time.Now().Add(wait)
	}
	f.failed(nil, message)
}

func (f *Follower) start(answer lookAnswer) {
	if f.stopping.Load() {
		_ = os.RemoveAll(answer.Dir)
		return
	}
	if answer.Exclusive {
		f.stopAllBefore(answer.Label)
		f.objects.Begin()
	}
	if f.active.Load() == nil {
		f.setStatus(statusStarting, "")
	}
	next, err := StartInstance(answer.Prepared, f.cfg.StateDir, ms(f.cfg.StartTimeoutMs), f.log, f.instanceLost)
	if err != nil {
		f.failed(answer.Selection, err.Error())
		return
	}
	if f.stopping.Load() {
		next.Stop(true)
		return
	}
	if !f.mayServe(next) {
		next.Stop(true)
		f.standBy()
		f.unreadable("this node's right to serve the Durable Objects ran out while the deployment started")
		return
	}
	etag := answer.SeenEtag
	f.seenEtag = &etag
	f.failedSelection = nil
	f.failures = 0
	f.retryAt = time.Time{}
	f.lastLogged = ""
	f.promote(next)
}

// stopAllBefore stops the serving workerd (after its requests, within the stop's bound) and any
// still draining before a deployment with Durable Objects starts: two workerd processes on one
// storage folder would each run an instance of the same object (docs/bindings.md "Durable
// Objects"). Requests meanwhile wait as they do while a deployment starts.
func (f *Follower) stopAllBefore(label string) {
	previous := f.active.Swap(nil)
	f.mu.Lock()
	draining := make([]*Instance, 0, len(f.draining))
	for in := range f.draining {
		draining = append(draining, in)
	}
	f.mu.Unlock()
	if previous != nil {
		f.setStatus(statusStarting, "")
		f.log(fmt.Sprintf("cell: stopping %s before %s starts: one workerd at a time opens the Durable Objects", previous.Label, label))
		previous.Drain(ms(min(f.cfg.DrainMs, f.cfg.StopDrainMs)))
		previous.Stop(false)
	}
	for _, in := range draining {
		in.Stop(false)
	}
}

// failed keeps a selection that failed to start from being tried again before a growing wait,
// and logs each failure once, not once a look.
func (f *Follower) failed(selection *string, message string) {
	if f.stopping.Load() {
		return // a start cut short by the stop is no failure to report
	}
	active := f.active.Load()
	if selection != nil {
		f.mu.Lock()
		f.lastError = message
		if active == nil {
			f.status = statusFailed
		}
		f.mu.Unlock()
		f.tellHealth()
		if f.failedSelection != nil && *f.failedSelection == *selection {
			f.failures++
		} else {
			f.failures = 1
		}
		f.failedSelection = selection
		wait := min(ms(f.cfg.RetryMs)<<min(f.failures-1, 20), ms(f.cfg.MaxRetryMs))
		f.retryAt = time.Now().Add(wait)
	}
	if message != f.lastLogged {
		f.lastLogged = message
		still := ""
		if active != nil {
			still = fmt.Sprintf(" (still serving %s)", active.Label)
		}
		f.log("cell: " + message + still)
	}
}

// promote makes `next` the instance new requests go to; the previous one drains, then stops.
func (f *Follower) promote(next *Instance) {
	previous := f.active.Swap(next)
	f.setStatus(statusReady, "")
	f.mu.Lock()
	close(f.takenOver)
	f.takenOver = make(chan struct{})
	f.mu.Unlock()
	was := ""
	if previous != nil {
		was = fmt.Sprintf(" (was %s)", previous.Label)
	}
	f.log(fmt.Sprintf("cell: serving %s%s", next.Label, was))
	f.onServing(next)
	if previous == nil {
		return
	}
	f.mu.Lock()
	f.draining[previous] = struct{}{}
	f.mu.Unlock()
	go func() {
		previous.Drain(ms(f.cfg.DrainMs))
		previous.Stop(false)
		f.mu.Lock()
		delete(f.draining, previous)
		f.mu.Unlock()
	}()
}

func (f *Follower) setStatus(status, lastError string) {
	f.mu.Lock()
	f.status = status
	f.lastError = lastError
	f.mu.Unlock()
	f.tellHealth()
}

// tellHealth kicks the health notice (health_notice.go), if any.
func (f *Follower) tellHealth() {
	if f.healthMoved != nil {
		f.healthMoved()
	}
}

// instanceLost is called when an instance's workerd exits on its own.
func (f *Follower) instanceLost(in *Instance) {
	select {
	case f.lost <- in:
	case <-f.quit:
	}
}

// forget drops a serving instance whose workerd died, so the next look starts it again.
func (f *Follower) forget(in *Instance) {
	if f.active.Load() != in {
		return
	}
	f.active.Store(nil)
	f.setStatus(statusStarting, "")
	f.seenEtag = nil
	f.failedSelection = nil
	f.retryAt = time.Time{}
	go in.Stop(false)
}
