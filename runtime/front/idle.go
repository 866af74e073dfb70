// The front's own settings for an idle process (bench/RESULTS.md "Idle CPU"): Go's runtime by
// default looks at the cgroup's CPU limit again every time its monitor wakes (to follow a limit
// changed while running), a /proc read every few seconds of an otherwise idle front. The
// application's CPU quota is set when its process group is placed, before the front starts, so
// the value Go reads at start is the one that holds.

//go:debug updatemaxprocs=0

package main
