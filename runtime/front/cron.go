package main

// Cron triggers: a timer per schedule of the serving deployment. At a scheduled time the host
// tries to claim (schedule, time) in the bucket and, if its write lands, runs the worker's
// `scheduled` handler, so each time runs once across the fleet. The times themselves come from
// the host too: the expressions have one reading, in TypeScript. Each run this replica fired
// is reported to the node's daemon (docs/runtime.md "Cron triggers"), which records it as an
// event and logs it.

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// report writes one line on stdout for the node's daemon, as the request spans are: the front
// alone writes its stdout (workerd's output and the host's log lines go to stderr), so a worker
// cannot forge a report. A daemon that is gone (one restarted adopts the process without its
// pipes) loses it, never the process.
func report(value any) {
	line, err := json.Marshal(value)
	if err == nil {
		_, _ = os.Stdout.Write(append(line, '\n'))
	}
}

// cronRun reports one run this replica fired; the daemon adds the application and the node. Kind
// comes first, so the daemon tells a report from a span by the line's start.
type cronRun struct {
	Kind        string `json:"kind"`
	Cron        string `json:"cron"`
	ScheduledMs int64  `json:"scheduledMs"`
	Deployment  string `json:"deployment"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error,omitempty"`
	DurationMs  int64  `json:"durationMs"`
}

type cronNextRequest struct {
	Crons   []string `json:"crons"`
	AfterMs int64    `json:"afterMs"`
}

type cronFireAnswer struct {
	Outcome *string `json:"outcome"` // null: another replica fired this time
	Failure *string `json:"failure"` // the handler's exception (`error` is the request's own)
}

type cronNextAnswer struct {
	Next map[string]*int64 `json:"next"`
}

type cronFireRequest struct {
	Cron        string  `json:"cron"`
	ScheduledMs int64   `json:"scheduledMs"`
	Deployment  string  `json:"deployment"`
	CronSocket  *string `json:"cronSocket"`
}

// Crons keeps one timer per schedule; schedules kept across a switch keep their timers.
type Crons struct {
	host   *Host
	log    func(string)
	target func() *Instance

	mu      sync.Mutex
	timers  map[string]chan struct{}
	stopped bool
}

// NewCrons prepares the timers; `target` answers the instance that should run a time, if any.
func NewCrons(host *Host, log func(string), target func() *Instance) *Crons {
	return &Crons{host: host, log: log, target: target, timers: map[string]chan struct{}{}}
}

// SetSchedules replaces the schedules.
func (c *Crons) SetSchedules(crons []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	wanted := map[string]bool{}
	for _, cron := range crons {
		wanted[cron] = true
	}
	for cron, quit := range c.timers {
		if !wanted[cron] {
			close(quit)
			delete(c.timers, cron)
		}
	}
	for cron := range wanted {
		if _, ok := c.timers[cron]; !ok {
			quit := make(chan struct{})
			c.timers[cron] = quit
			go c.follow(cron, quit)
		}
	}
}

// Stop ends every timer.
func (c *Crons) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for cron, quit := range c.timers {
		close(quit)
		delete(c.timers, cron)
	}
}

// follow waits for each scheduled time of one schedule and fires it. The next time counts from
// the one fired, or from now when the process was held up past several: times missed while
// nothing ran are not made up.
func (c *Crons) follow(cron string, quit chan struct{}) {
	after := time.Now().UnixMilli()
	for {
		var answer cronNextAnswer
		if err := c.host.Call("cron-next", cronNextRequest{Crons: []string{cron}, AfterMs: after}, &answer); err != nil {
			select {
			case <-quit:
				return // stopped meanwhile: the failure is the stop's
			default:
			}
			c.log("cell: cron " + cron + ": cannot compute its next time: " + err.Error())
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Second):
				continue
			}
		}
		next := answer.Next[cron]
		if next == nil {
			return // an expression with no time left, or one the host refuses
		}
		timer := time.NewTimer(time.Until(time.UnixMilli(*next)))
		select {
		case <-quit:
			timer.Stop()
			return
		case <-timer.C:
		}
		after = max(*next, time.Now().UnixMilli()-1000)
		go c.fire(cron, *next)
	}
}

func (c *Crons) fire(cron string, scheduledMs int64) {
	in := c.target()
	if in == nil {
		return // no deployment ready here: a replica that has one claims it
	}
	in.Enter()
	defer in.Leave()
	var answer cronFireAnswer
	started := time.Now()
	err := c.host.Call("cron-fire", cronFireRequest{
		Cron: cron, ScheduledMs: scheduledMs, Deployment: in.Deployment, CronSocket: in.CronSocket,
	}, &answer)
	if err != nil {
		c.log("cell: cron " + cron + ": " + err.Error())
		return
	}
	if answer.Outcome == nil {
		return
	}
	run := cronRun{
		Kind: "cron.ran", Cron: cron, ScheduledMs: scheduledMs, Deployment: in.Deployment,
		Outcome: *answer.Outcome, DurationMs: time.Since(started).Milliseconds(),
	}
	if answer.Failure != nil {
		run.Error = *answer.Failure
	}
	report(run)
}
