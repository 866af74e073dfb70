package main

// The node lease (`nodes/<node>.json` in the application's runtime folder): "this node runs this
// application", renewed every third of its lifetime and at once when the served deployment
// changes. The runtime host writes it, conditional on the ETag this loop remembers, so a lease dropped
// or rewritten by someone else is noticed and taken again.

import (
	"sync/atomic"
	"time"
)

type leaseRequest struct {
	ETag      *string           `json:"etag"`
	Release   bool              `json:"release"`
	PID       int               `json:"pid"`
	StartedMs int64             `json:"startedMs"`
	TTLMs     int64             `json:"ttlMs"`
	Describe  map[string]string `json:"describe"`
}

// releaseWait bounds the wait for a host to take the lease's release at stop.
const releaseWait = 3 * time.Second

type leaseAnswer struct {
	ETag   *string `json:"etag"`
	Failed bool    `json:"failed"`
}

// Lease renews the node lease until Release.
type Lease struct {
	cfg      *Config
	host     *Host
	log      func(string)
	describe func() map[string]string
	pid      int
	started  time.Time

	etag *string
	// next is when the timer will renew the lease (unix ms).
	next  atomic.Int64
	renew chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// NewLease prepares the renewals; Run starts them.
func NewLease(cfg *Config, host *Host, pid int, log func(string), describe func() map[string]string) *Lease {
	return &Lease{
		cfg: cfg, host: host, log: log, describe: describe, pid: pid, started: time.Now(),
		renew: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
}

// RenewNow asks for a write at once (the served deployment changed).
func (l *Lease) RenewNow() {
	select {
	case l.renew <- struct{}{}:
	default:
	}
}

// RenewIfDueWithin renews now if the timer would anyway within `d`: the runtime joins the
// renewal to its safety look, so that the two go to the host together.
func (l *Lease) RenewIfDueWithin(d time.Duration) {
	if time.Until(time.UnixMilli(l.next.Load())) < d {
		l.RenewNow()
	}
}

// Run writes the lease now and then every third of its lifetime (2 s after a failure: the
// bucket may be back before the lease runs out).
func (l *Lease) Run() {
	defer close(l.done)
	for {
		delay := max(time.Second, ms(l.cfg.LeaseTTLMs/3))
		if !l.write(false) {
			delay = min(delay, 2*time.Second)
		}
		l.next.Store(time.Now().Add(delay).UnixMilli())
		timer := time.NewTimer(delay)
		select {
		case <-l.quit:
			timer.Stop()
			return
		case <-l.renew:
			timer.Stop()
		case <-timer.C:
		}
	}
}

func (l *Lease) write(release bool) bool {
	var answer leaseAnswer
	wait := hostWait
	if release {
		wait = releaseWait // at stop: a host that is away does not hold the stop up
	}
	err := l.host.CallWithin(wait, "lease", leaseRequest{
		ETag: l.etag, Release: release, PID: l.pid, StartedMs: l.started.UnixMilli(),
		TTLMs: l.cfg.LeaseTTLMs, Describe: l.describe(),
	}, &answer)
	if err != nil {
		l.log("cell: cannot renew the node lease: " + err.Error())
		return false
	}
	l.etag = answer.ETag
	return !answer.Failed
}

// Release stops renewing and deletes the lease if it is still the one this process wrote.
func (l *Lease) Release() {
	close(l.quit)
	<-l.done
	if l.etag != nil {
		l.write(true)
	}
}
