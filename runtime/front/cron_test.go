package main

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// reportsOf runs fire against a stand-in host that answers `answer` to cron-fire and returns
// the lines the front wrote on its stdout meanwhile (the reports the node's daemon reads).
func reportsOf(t *testing.T, answer string) []map[string]any {
	t.Helper()
	host, _ := fakeHost(t, "answer:"+answer)
	read, write, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = write
	in := &Instance{Prepared: Prepared{Deployment: "d1"}}
	crons := NewCrons(host, func(string) {}, func() *Instance { return in })
	crons.fire("*/5 * * * *", 1_795_627_800_000)
	os.Stdout = stdout
	_ = write.Close()
	var lines []map[string]any
	scanner := bufio.NewScanner(read)
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("a report that is not one JSON object a line: %q", scanner.Text())
		}
		lines = append(lines, line)
	}
	return lines
}

func TestACronRunThisReplicaFiredIsReportedOnStdout(t *testing.T) {
	lines := reportsOf(t, `{"outcome":"exception","failure":"TypeError: no stock"}`)
	if len(lines) != 1 {
		t.Fatalf("want one report, got %v", lines)
	}
	run := lines[0]
	for field, want := range map[string]any{
		"kind": "cron.ran", "cron": "*/5 * * * *", "scheduledMs": float64(1_795_627_800_000),
		"deployment": "d1", "outcome": "exception", "error": "TypeError: no stock",
	} {
		if run[field] != want {
			t.Errorf("%s: want %v, got %v", field, want, run[field])
		}
	}
	if _, ok := run["durationMs"].(float64); !ok {
		t.Errorf("durationMs missing: %v", run)
	}
}

func TestAnOkRunHasNoErrorAndAnotherReplicasRunNoReport(t *testing.T) {
	lines := reportsOf(t, `{"outcome":"ok"}`)
	if len(lines) != 1 || lines[0]["outcome"] != "ok" {
		t.Fatalf("want one ok report, got %v", lines)
	}
	if _, has := lines[0]["error"]; has {
		t.Errorf("an ok run carries an error: %v", lines[0])
	}
	if lines := reportsOf(t, `{"outcome":null}`); len(lines) != 0 {
		t.Fatalf("a time another replica claimed is reported: %v", lines)
	}
}
