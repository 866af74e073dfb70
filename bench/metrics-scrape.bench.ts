// What one Prometheus scrape of a node costs (docs/observability.md "Prometheus metrics"): the
// daemon's CPU and wall time to answer GET /metrics, and the size of the answer, with N
// applications each running as a real process group of two processes (a leader and its child, as
// cell-front and its workerd are) and each having served requests (so every per-application
// series exists: requests by status class, the latency histogram, bytes, processes).
//   CPU:  process.cpuUsage() around one exposition, median and max of 20 scrapes; wall likewise.
//   /proc: every process of the machine is read once per scrape, so the figure grows with the
//          machine's process count, printed beside it.
// Run: scripts/with-node node bench/metrics-scrape.bench.ts [applications] [--no-proc]   (default 500)
//   --no-proc: the processes have no pid, so /proc is not read: the cost of the rest alone.
// Real parts: the node's registry (src/metrics/node-metrics.ts) and the kernel's /proc; the
// processes are `sleep`, which stand for runtime processes only in holding a process group.

import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { NodeMetrics } from '../src/metrics/node-metrics.ts';

const applications = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 500);
const readProc = !process.argv.includes('--no-proc');
const SCRAPES = 20;

const leaders: ChildProcess[] = [];
try {
  for (let i = 0; i < (readProc ? applications : 0); i++)
    leaders.push(spawn('sh', ['-c', 'sleep 3600 & exec sleep 3600'], { detached: true, stdio: 'ignore' }));
  const processes = Array.from({ length: applications }, (_, i) => ({
    application: `app-${i}`,
    ready: true,
    ...(readProc ? { pid: leaders[i]!.pid! } : {}),
  }));
  const metrics = new NodeMetrics('bench-node', () => ({
    fleet: { coordinator: () => ({ fence: 1 }), processes: () => processes },
  }));
  for (const { application } of processes) {
    for (const status of [200, 200, 404, 500])
      metrics.served(application, { status, durationMs: 12, bytesIn: 10, bytesOut: 100 });
  }
  const machineProcesses = () => readdirSync('/proc').filter((name) => /^\d+$/.test(name)).length;
  // Until every group has its second process (the shell forks it, then becomes the first).
  const deadline = Date.now() + 60_000;
  while (readProc && machineProcesses() < applications * 2 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 200));
  const cpu: number[] = [];
  const wall: number[] = [];
  let bytes = 0;
  let lines = 0;
  for (let i = 0; i < SCRAPES + 1; i++) {
    const startedCpu = process.cpuUsage();
    const started = performance.now();
    const text = await metrics.exposition();
    const used = process.cpuUsage(startedCpu);
    if (i === 0) continue; // the first warms the code up
    wall.push(performance.now() - started);
    cpu.push((used.user + used.system) / 1000);
    bytes = Buffer.byteLength(text);
    lines = text.split('\n').length - 1;
  }
  const sorted = (values: number[]) => values.sort((a, b) => a - b);
  const median = (values: number[]) => sorted(values)[Math.floor(values.length / 2)]!;
  console.log(
    JSON.stringify(
      {
        applications,
        readProc,
        machineProcesses: machineProcesses(),
        load: loadavg().map((l) => l.toFixed(1)),
        cpuMs: { median: +median(cpu).toFixed(1), max: +sorted(cpu).at(-1)!.toFixed(1) },
        wallMs: { median: +median(wall).toFixed(1), max: +sorted(wall).at(-1)!.toFixed(1) },
        bytes,
        lines,
      },
      null,
      2,
    ),
  );
} finally {
  for (const leader of leaders) {
    try {
      process.kill(-leader.pid!, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
