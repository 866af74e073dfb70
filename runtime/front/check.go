package main

// `cell-front check`, `cell publish`'s load check (docs/runtime.md "The worker config"): the
// publisher materializes the built worker into a private folder as the runtime host would and
// hands over the same Prepared description; the check starts it with StartInstance, exactly as
// the front starts a deployment it serves (same workerd command, same probe, same judgement of a
// load failure, same pid record), stops it, and answers one JSON line: so there is one workerd
// lifecycle, and what publish accepts is what serve would start.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// CheckRequest is what `cell-front check` reads on its stdin.
type CheckRequest struct {
	Prepared Prepared `json:"prepared"`
	// StateDir is the check's private folder: workerd's pid is recorded there.
	StateDir string `json:"stateDir"`
	// TimeoutMs bounds the wait for the first answer to the probe.
	TimeoutMs  int64  `json:"timeoutMs"`
	HealthPath string `json:"healthPath"`
}

// CheckResult is the one line `cell-front check` writes on its stdout.
type CheckResult struct {
	OK bool `json:"ok"`
	// Error says why the worker did not answer, led by its label (`<script>/<deployment> failed
	// to start: ...`); empty when it answered.
	Error string `json:"error,omitempty"`
}

// Exit codes of `cell-front check`: the worker answered, it did not, the request was unusable.
const (
	checkLoaded      = 0
	checkRefused     = 1
	checkBadRequest  = 2
	checkInterrupted = 130
)

// runCheck is the check mode's main: stdin to stdout, workerd's output and log lines to stderr.
func runCheck() int {
	say := func(line string) { _, _ = os.Stderr.WriteString(line + "\n") }
	// The publisher interrupted (Ctrl-C, or it exits): no workerd may outlive the check.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-signals
		KillAllWorkerd()
		os.Exit(checkInterrupted)
	}()
	request, err := readCheckRequest(os.Stdin)
	if err != nil {
		say("cell-front check: " + err.Error())
		return checkBadRequest
	}
	result := Check(request, say)
	line, _ := json.Marshal(result)
	_, _ = os.Stdout.Write(append(line, '\n'))
	if !result.OK {
		return checkRefused
	}
	return checkLoaded
}

func readCheckRequest(r io.Reader) (CheckRequest, error) {
	var request CheckRequest
	decoder := json.NewDecoder(r)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&request); err != nil {
		return request, fmt.Errorf("its request on stdin is no check request: %v", err)
	}
	p := request.Prepared
	switch {
	case p.Label == "" || p.Dir == "" || p.Socket == "" || len(p.Command) == 0:
		return request, errors.New("its request names no label, folder, socket or workerd command")
	case request.StateDir == "":
		return request, errors.New("its request names no private folder")
	case request.TimeoutMs <= 0:
		return request, errors.New("its request gives no timeout")
	case request.HealthPath == "":
		return request, errors.New("its request names no health path")
	}
	return request, nil
}

// Check starts the prepared deployment as the front would, waits for it to answer, and stops it;
// the instance's folder and sockets are removed whatever the outcome.
func Check(request CheckRequest, say func(string)) CheckResult {
	healthPath = request.HealthPath
	timeout := time.Duration(request.TimeoutMs) * time.Millisecond
	in, err := StartInstance(request.Prepared, request.StateDir, timeout, say, func(*Instance) {})
	if err != nil {
		return CheckResult{Error: err.Error()}
	}
	in.Stop(false)
	return CheckResult{OK: true}
}
