package main

import (
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestTuneGoRuntimeDefaultsAndOverrides(t *testing.T) {
	procs := goruntime.GOMAXPROCS(0)
	gc := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		goruntime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})

	goruntime.GOMAXPROCS(2)
	tuneGoRuntime(func(string) string { return "" })
	if got := goruntime.GOMAXPROCS(0); got != maxProcs {
		t.Fatalf("GOMAXPROCS = %d, want %d", got, maxProcs)
	}
	if got := debug.SetGCPercent(-1); got != gcPercent {
		t.Fatalf("GC percent = %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != memoryLimit {
		t.Fatalf("memory limit = %d, want %d", got, int64(memoryLimit))
	}

	// An operator's GOMAXPROCS (the Go runtime read it at start) is left as it is.
	goruntime.GOMAXPROCS(2)
	debug.SetGCPercent(100)
	tuneGoRuntime(func(name string) string {
		if name == "GOMAXPROCS" || name == "GOGC" {
			return "2"
		}
		return ""
	})
	if got := goruntime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS = %d with GOMAXPROCS set, want it left at 2", got)
	}
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Fatalf("GC percent = %d with GOGC set, want it left at 100", got)
	}
}

func TestServeStartsAgainWithOneProcessor(t *testing.T) {
	none := func(string) string { return "" }
	environ := []string{"PATH=/bin", "CELL_APP=hello"}
	env, again := startAgainWith([]string{"/x/cell-front", "serve", "hello"}, none, environ)
	if !again || strings.Join(env, " ") != "PATH=/bin CELL_APP=hello GOMAXPROCS=1" {
		t.Fatalf("startAgainWith = %q, %v; want the environment with GOMAXPROCS=1", env, again)
	}
	if len(environ) != 2 {
		t.Fatalf("the environment given was changed: %q", environ)
	}
	set := func(name string) string {
		if name == "GOMAXPROCS" {
			return "4"
		}
		return ""
	}
	if _, again := startAgainWith([]string{"/x/cell-front", "serve", "hello"}, set, environ); again {
		t.Fatal("started again although GOMAXPROCS was set")
	}
	if _, again := startAgainWith([]string{"/x/cell-front", "check"}, none, environ); again {
		t.Fatal("the load check (cell-front check) was started again")
	}
}
