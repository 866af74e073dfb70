package main

// The front's own check on the Durable Objects' lease (docs/bindings.md "Durable Objects on the
// fleet"). The node's runtime host holds the application's objects lease and judges it on its
// monotonic clock; it kills the objects' workerd when the lease lapses. A host that is stopped
// (SIGSTOP) or dead cannot, so the front keeps a deadline of its own: the host tells it how long
// its right to serve the objects holds, and past that deadline, with no renewal heard, the front
// sends no request to the objects' workerd and stops it, until the host says again that it holds
// the objects.
//
// The validity crosses between processes as a duration, never as a time: the front asks (op
// `objects`), the host answers the validity left as of when it received the question, and the
// front counts it from when it sent the question. The deadline is thus never later than the
// host's own, whatever the delays between them (an answer read late, a process stopped in
// between). The host holds each question until its next renewal, so a holding front hears of each
// renewal once: one question and one answer per renewal (10 s lease, renewed every 3.3 to 4 s:
// at most 0.6 messages a second per front of an application with Durable Objects; none otherwise).

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// objectsWaitMs is how long the host may hold a question when nothing changes: longer than a
// renewal's interval, so it normally answers at the renewal.
const objectsWaitMs = 30_000

// objectsFirstAnswer bounds the wait for the host's first answer before an exclusive deployment
// starts: without it the deployment serves nothing until the answer comes.
const objectsFirstAnswer = 5 * time.Second

// Backoff between questions that got no answer (the host restarting).
const (
	objectsRetryFirst = 100 * time.Millisecond
	objectsRetryMax   = time.Second
)

type objectsRequest struct {
	// Renewal is the number of the host's last renewal this front heard of (0: none): the host
	// answers once its renewal is another, or after WaitMs.
	Renewal int64 `json:"renewal"`
	WaitMs  int64 `json:"waitMs"`
}

type objectsAnswer struct {
	// Result: "holding" (ValidMs and Renewal given), "standby" (this node does not hold the
	// objects now) or "unleased" (this host keeps no lease: serve without a deadline).
	Result  string `json:"result"`
	ValidMs int64  `json:"validMs,omitempty"`
	Renewal int64  `json:"renewal,omitempty"`
}

// noDeadline marks a front whose host keeps no lease (an older host, or `cell host --socket`).
const noDeadline = math.MaxInt64

// objectsGuard keeps the deadline and asks the host for renewals while an exclusive deployment
// is served or started.
type objectsGuard struct {
	host  *Host
	log   func(string)
	lapse func(reason string)
	base  time.Time // the deadline counts from here, on the monotonic clock
	// deadline is the time since base until which the objects may be served; 0 (none yet) or
	// noDeadline.
	deadline atomic.Int64

	mu      sync.Mutex
	running bool
	stopped bool
	timer   *time.Timer
}

func newObjectsGuard(host *Host, log func(string), lapse func(string)) *objectsGuard {
	return &objectsGuard{host: host, log: log, lapse: lapse, base: time.Now()}
}

// Serving says whether the objects may be served now: before the deadline.
func (g *objectsGuard) Serving() bool {
	return int64(time.Since(g.base)) < g.deadline.Load()
}

// Begin makes sure the host is asked for renewals, and waits (bounded) until the objects may be
// served or the host said they may not.
func (g *objectsGuard) Begin() {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	first := make(chan struct{})
	if g.running {
		close(first) // a watch already asks (after a lapse, a question may be on its way)
	} else {
		g.running = true
		go g.watch(first)
	}
	g.mu.Unlock()
	deadline := time.Now().Add(objectsFirstAnswer)
	select {
	case <-first:
	case <-time.After(objectsFirstAnswer):
	}
	for !g.Serving() && g.isRunning() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *objectsGuard) isRunning() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

// Stop ends the questions (the front is stopping).
func (g *objectsGuard) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
	}
}

func (g *objectsGuard) isStopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

// watch asks the host until it says this node does not hold the objects, or keeps no lease.
func (g *objectsGuard) watch(first chan struct{}) {
	answered := sync.OnceFunc(func() { close(first) })
	defer answered()
	defer func() {
		g.mu.Lock()
		g.running = false
		g.mu.Unlock()
	}()
	var renewal int64
	wait := objectsRetryFirst
	for !g.isStopped() {
		sent := time.Since(g.base)
		var answer objectsAnswer
		err := g.host.Call("objects", objectsRequest{Renewal: renewal, WaitMs: objectsWaitMs}, &answer)
		if err != nil {
			var refused *hostError
			if errors.As(err, &refused) && refused.Code == "bad-request" {
				// A host older than this question: it judges the lease alone, as before.
				g.log("cell: the runtime host keeps no deadline for this front's Durable Objects (" + err.Error() + ")")
				g.deadline.Store(noDeadline)
				return
			}
			if g.isStopped() {
				return
			}
			time.Sleep(wait)
			wait = min(wait*2, objectsRetryMax)
			continue
		}
		wait = objectsRetryFirst
		switch answer.Result {
		case "holding":
			renewal = answer.Renewal
			g.extend(sent + ms(answer.ValidMs))
			answered()
		case "unleased":
			g.deadline.Store(noDeadline)
			return
		default:
			g.expire("the runtime host says this node does not hold the Durable Objects now")
			return
		}
	}
}

// extend sets the deadline (the latest answer is the truth) and the timer that acts on it.
func (g *objectsGuard) extend(deadline time.Duration) {
	g.deadline.Store(int64(deadline))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.stopped {
		return
	}
	g.timer = time.AfterFunc(max(deadline-time.Since(g.base), 0)+time.Millisecond, func() {
		if !g.Serving() {
			g.lapse("no renewal of the Durable Objects' lease was heard from the runtime host within its validity")
		}
	})
}

// expire ends the right to serve now.
func (g *objectsGuard) expire(reason string) {
	g.deadline.Store(0)
	g.mu.Lock()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	g.lapse(reason)
}

// mayServe says whether an instance may take requests: one without Durable Objects always, one
// with them only before the deadline.
func (f *Follower) mayServe(in *Instance) bool {
	return in == nil || !in.Exclusive || f.objects.Serving()
}

// objectsLapsed stops serving the objects at once: the serving workerd and any draining one that
// opens them are killed (their requests cut, their alarms stopped), the replica says it is
// starting, and the loop looks again until the host says this node holds the objects.
func (f *Follower) objectsLapsed(reason string) {
	var stop []*Instance
	if in := f.active.Load(); in != nil && in.Exclusive && f.active.CompareAndSwap(in, nil) {
		stop = append(stop, in)
	}
	f.mu.Lock()
	for in := range f.draining {
		if in.Exclusive {
			stop = append(stop, in)
		}
	}
	if len(stop) == 0 {
		// Nothing served the objects (a lapse already stopped it): the health says why it waits.
		if f.active.Load() == nil && f.status == statusStarting {
			f.lastError = reason
		}
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.setStatus(statusStarting, reason)
	// Killed before anything is logged: a log line can wait on a stopped daemon's full pipe.
	for _, in := range stop {
		in.Stop(true)
	}
	for _, in := range stop {
		f.log(fmt.Sprintf("cell: stopped %s: %s", in.Label, reason))
	}
	select {
	case f.lapsed <- struct{}{}:
	default:
	}
}

// standBy is the loop's part after a lapse: nothing is taken as seen, and a look is owed (tried
// again within seconds) until one starts the deployment again.
func (f *Follower) standBy() {
	f.seenEtag = nil
	f.failedSelection = nil
	f.retryAt = time.Time{}
	f.asked = true
}
