package main

// Telling the runtime host when the health changes (docs/runtime.md "The runtime host", the
// `health` op): the node's supervisor probes a ready front only rarely, as a safety net, and
// learns of a change from this notice instead, at once: it then probes the health and acts on
// what it answers, as on any probe. Nothing ticks while the health stays the same: the teller
// waits on a channel, and the follower kicks it whenever something that the health answer shows
// may have moved (a status, the deployment served).

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// healthNoticeWait bounds how long a notice waits for a connection to the host: a daemon that
// restarts adopts its processes and probes them itself, so a notice that cannot be delivered
// soon is not worth more.
const healthNoticeWait = 10 * time.Second

// healthNotice is the `health` request: what the health answer says now, and whether the host
// asked for it (the `health` push) rather than it having changed.
type healthNotice struct {
	Status     string  `json:"status"`
	Deployment *string `json:"deployment"`
	Asked      bool    `json:"asked,omitempty"`
}

// HealthTeller sends a `health` notice each time the health answer's status or deployment differs
// from the one last told, and each time the host asks; a notice the host does not know (an older
// host answers bad-request) counts as told.
type HealthTeller struct {
	host  *Host
	now   func() healthNotice
	kick  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	asked atomic.Bool
	mu    sync.Mutex
	told  healthNotice
	calls int
}

// NewHealthTeller starts telling; `now` answers the health as the health endpoint would.
func NewHealthTeller(host *Host, now func() healthNotice) *HealthTeller {
	t := &HealthTeller{
		host: host, now: now,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		told: now(),
	}
	go t.run()
	return t
}

// Changed says the health may have moved; it never blocks.
func (t *HealthTeller) Changed() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Ask says the host asked for the health: it is told whether it changed or not. Never blocks.
func (t *HealthTeller) Ask() {
	t.asked.Store(true)
	t.Changed()
}

// Stop ends the teller; a notice under way is abandoned.
func (t *HealthTeller) Stop() {
	select {
	case <-t.quit:
	default:
		close(t.quit)
	}
	<-t.done
}

// Sent answers how many notices were sent (tests).
func (t *HealthTeller) Sent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls
}

func (t *HealthTeller) run() {
	defer close(t.done)
	for {
		select {
		case <-t.quit:
			return
		case <-t.kick:
		}
		asked := t.asked.Swap(false)
		now := t.now()
		if !asked && sameHealth(now, t.told) {
			continue
		}
		t.mu.Lock()
		t.calls++
		t.mu.Unlock()
		notice := now
		notice.Asked = asked
		var answer struct{}
		err := t.host.CallWithin(healthNoticeWait, "health", notice, &answer)
		var refused *hostError
		if err == nil || (errors.As(err, &refused) && refused.Code == "bad-request") {
			t.told = now
		}
		// Not delivered: the next change tries again, and the supervisor's own probe is the
		// safety net meanwhile.
	}
}

func sameHealth(a, b healthNotice) bool {
	if a.Status != b.Status || (a.Deployment == nil) != (b.Deployment == nil) {
		return false
	}
	return a.Deployment == nil || *a.Deployment == *b.Deployment
}

// currentHealth is the health answer's status and deployment (Proxy.health says the same).
func currentHealth(f *Follower) healthNotice {
	status, _, active := healthNow(f)
	notice := healthNotice{Status: status}
	if active != nil {
		deployment := active.Deployment
		notice.Deployment = &deployment
	}
	return notice
}

// healthNow is what the health answers: its status, why it does not serve, and the instance
// serving (nil when none may).
func healthNow(f *Follower) (string, string, *Instance) {
	active := f.Active()
	stopping := f.Stopping()
	status, lastError := f.Status()
	if stopping {
		status = "stopping"
	} else if active != nil {
		status = statusReady
	}
	return status, lastError, active
}
