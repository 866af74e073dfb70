package main

import (
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"
)

// workerdForTest is the workerd the runtime ships (the `workerd` npm package), or CELL_WORKERD.
func workerdForTest(t *testing.T) string {
	t.Helper()
	if path := os.Getenv("CELL_WORKERD"); path != "" {
		return path
	}
	arch := map[string]string{"amd64": "64", "arm64": "arm64"}[goruntime.GOARCH]
	path, err := filepath.Abs("../../node_modules/@cloudflare/workerd-" + goruntime.GOOS + "-" + arch + "/bin/workerd")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the check tests run a real workerd: %s is missing (run make setup, or set CELL_WORKERD)", path)
	}
	return path
}

// prepareWorker lays a one-module worker out as the runtime host does (runtime/src/instance.ts
// `materialize`): its folder d1 holding config.capnp and the module, its socket w1.sock beside
// it, the user worker's service named cell-user.
func prepareWorker(t *testing.T, stateDir, source string) Prepared {
	t.Helper()
	dir := filepath.Join(stateDir, "d1")
	socket := filepath.Join(stateDir, "w1.sock")
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules", "w.js"), []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	config := `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "cell-user", worker = .userWorker) ],
  sockets = [ (name = "http", address = "unix:` + socket + `", http = (), service = "cell-user") ],
);
const userWorker :Workerd.Worker = (
  modules = [ (name = "w.js", esModule = embed "modules/w.js") ],
  compatibilityDate = "2025-06-01",
);
`
	if err := os.WriteFile(filepath.Join(dir, "config.capnp"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return Prepared{
		Script: "web", Deployment: "v1", Label: "web/v1", Dir: dir, Socket: socket,
		Command: []string{workerdForTest(t), "serve", "config.capnp"},
	}
}

func checkRequest(p Prepared, stateDir string) CheckRequest {
	return CheckRequest{Prepared: p, StateDir: stateDir, TimeoutMs: 30_000, HealthPath: "/.well-known/cell/health"}
}

// recordedPids answers the workerd pids the check recorded in its private folder.
func recordedPids(t *testing.T, stateDir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "workerd.pids"))
	if err != nil {
		t.Fatalf("no workerd pid was recorded: %v", err)
	}
	return strings.Fields(string(data))
}

// assertStopped fails unless every recorded workerd is gone and the instance's files removed.
func assertStopped(t *testing.T, stateDir string, p Prepared) {
	t.Helper()
	for _, pid := range recordedPids(t, stateDir) {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("workerd %s still runs after the check", pid)
		}
	}
	for _, path := range []string{p.Dir, p.Socket} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s is left behind", path)
		}
	}
}

func TestTheCheckPassesAWorkerThatAnswersAndStopsIt(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareWorker(t, stateDir, `export default { fetch() { return new Response("ok"); } };`)
	result := Check(checkRequest(p, stateDir), func(string) {})
	if !result.OK || result.Error != "" {
		t.Fatalf("a worker that loads was refused: %+v", result)
	}
	if pids := recordedPids(t, stateDir); len(pids) != 1 {
		t.Fatalf("recorded %v, want one workerd pid", pids)
	}
	assertStopped(t, stateDir, p)
}

func TestTheCheckRefusesAWorkerThatThrowsWhileLoadingNamingWhere(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareWorker(t, stateDir,
		"const url = globalThis.DATABASE_URL;\nif (!url) throw new Error('DATABASE_URL is not set');\nexport default { fetch() { return new Response(url); } };\n")
	result := Check(checkRequest(p, stateDir), func(string) {})
	if result.OK {
		t.Fatal("a worker that throws while loading passed the check")
	}
	want := regexp.MustCompile(`(?s)^web/v1 failed to start: service cell-user: Uncaught Error: DATABASE_URL is not set.*at w\.js:2:\d+`)
	if !want.MatchString(result.Error) {
		t.Fatalf("the refusal %q does not name the error and its module:line:column", result.Error)
	}
	assertStopped(t, stateDir, p)
}

func TestTheCheckRefusesAWorkerdThatExitsWithItsOutput(t *testing.T) {
	stateDir := t.TempDir()
	p := prepareWorker(t, stateDir, `export default {};`)
	if err := os.WriteFile(filepath.Join(p.Dir, "config.capnp"), []byte("this is no capnp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	result := Check(checkRequest(p, stateDir), func(string) {})
	if result.OK || !strings.HasPrefix(result.Error, "web/v1 failed to start: workerd exited:\n") ||
		!strings.Contains(result.Error, "config.capnp") {
		t.Fatalf("a workerd that cannot read its config gave %+v", result)
	}
	assertStopped(t, stateDir, p)
}

func TestTheCheckRequestMustNameWhatItStarts(t *testing.T) {
	good := `{"prepared":{"label":"web/v1","dir":"/s/d1","socket":"/s/w1.sock","cronSocket":null,"command":["workerd","serve","config.capnp"]},"stateDir":"/s","timeoutMs":1000,"healthPath":"/h"}`
	if _, err := readCheckRequest(strings.NewReader(good)); err != nil {
		t.Fatalf("a complete request was refused: %v", err)
	}
	for _, bad := range []string{
		``,
		`{"prepared":{}}`,
		strings.Replace(good, `"stateDir":"/s",`, ``, 1),
		strings.Replace(good, `"timeoutMs":1000`, `"timeoutMs":0`, 1),
		strings.Replace(good, `,"healthPath":"/h"`, ``, 1),
		strings.Replace(good, `"stateDir"`, `"stateFolder"`, 1),
	} {
		if _, err := readCheckRequest(strings.NewReader(bad)); err == nil {
			t.Errorf("the request %q was accepted", bad)
		}
	}
}

// A small worker answers 15-40 ms after workerd starts: the probe asks 2 ms after the start,
// then waits 2 ms plus a tenth of the time since, at most 50 ms (docs/runtime.md, readiness).
func TestTheProbeAsksSoonAfterTheStartThenLessOften(t *testing.T) {
	for _, c := range []struct{ elapsed, want time.Duration }{
		{0, 2 * time.Millisecond},
		{40 * time.Millisecond, 6 * time.Millisecond},
		{200 * time.Millisecond, 22 * time.Millisecond},
		{480 * time.Millisecond, 50 * time.Millisecond},
		{30 * time.Second, 50 * time.Millisecond},
	} {
		if got := probeWait(c.elapsed); got != c.want {
			t.Errorf("%v after workerd started the probe waits %v, want %v", c.elapsed, got, c.want)
		}
	}
}
