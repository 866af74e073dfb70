// Idle CPU by kind of process, precisely: what the daemon, each cell-front and each workerd use
// while N applications sit idle (bench/RESULTS.md "Idle CPU").
//   /proc/<pid>/stat counts CPU in 10 ms ticks, so a minute of a few idle processes is mostly
//   rounding. This reads the scheduler's own nanosecond count instead, per thread
//   (/proc/<pid>/task/<tid>/schedstat, first field), summed over each process's threads at the
//   start and the end of the window (a thread that ends inside the window loses its share; the
//   daemon's and the front's threads live as long as they do).
// Run: scripts/with-node node bench/idle-cpu-kinds.bench.ts [applications] [window seconds] [hold seconds]
//   applications   default 5, copies of examples/hello (bench/idle-fleet.ts seeds them)
//   window         default 300: idle seconds measured, after every application answered and 15 s
//   hold           default 0: seconds to keep the node up after the window (for strace by hand)
// Answers per kind: CPU seconds per application per hour, and the node's daemon in all (the
// daemon's idle cost without applications is not subtracted here: run with 0 for it).

import { readdirSync, readFileSync } from 'node:fs';
import { type SailProcess, startSail } from '../test/helpers/svc.ts';
import {
  descendants,
  loadAverage,
  seedHelloApplications,
  untilEveryAnswers,
  watchNodeTree,
} from './idle-fleet.ts';

const applications = Number(process.argv[2] ?? 5);
const windowSeconds = Number(process.argv[3] ?? 300);
const holdSeconds = Number(process.argv[4] ?? 0);
const PORTS: [number, number] = [36_300, 36_499];
const SETTLE_MS = 15_000;

/** Nanoseconds of CPU of every live thread of `pid`; null when it is gone. */
function threadCpuNs(pid: number): number | null {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let total = 0;
  for (const tid of tids) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // Ended meanwhile.
    }
  }
  return total;
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

function kindOf(pid: number): string {
  const name = comm(pid);
  return name === 'workerd' ? 'workerd' : name.startsWith('cell-front') ? 'cell-front' : name;
}

async function main(): Promise<void> {
  console.log(`idle CPU by kind: ${applications} applications, ${windowSeconds} s, load ${loadAverage()}`);
  const seeded = await seedHelloApplications(Math.max(applications, 1), 'k-');
  const names = seeded.names.slice(0, applications);
  let node: SailProcess | null = null;
  const { note, cleanup } = watchNodeTree(() => node);
  try {
    node = await startSail(
      [
        '--endpoint',
        seeded.endpoint,
        '--port-range-start',
        String(PORTS[0]),
        '--port-range-end',
        String(PORTS[1]),
      ],
      { timeoutMs: 120_000 },
    );
    const daemon = node.child.pid!;
    if (applications > 0) await untilEveryAnswers(node.url, seeded.signer, names, 600_000);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    note();
    const pids = [daemon, ...descendants(daemon)];
    const before = new Map(pids.map((pid) => [pid, threadCpuNs(pid)]));
    const started = performance.now();
    console.log(
      `  window starts, load ${loadAverage()}; daemon ${daemon}; ${pids.length - 1} runtime processes`,
    );
    // A timing window, not a readiness wait.
    await new Promise((r) => setTimeout(r, windowSeconds * 1000));
    const seconds = (performance.now() - started) / 1000;
    const byKind = new Map<string, { ns: number; count: number }>();
    for (const pid of pids) {
      const a = before.get(pid);
      const b = threadCpuNs(pid);
      if (a === null || a === undefined || b === null) continue;
      const kind = pid === daemon ? 'daemon' : kindOf(pid);
      const k = byKind.get(kind) ?? { ns: 0, count: 0 };
      k.ns += b - a;
      k.count += 1;
      byKind.set(kind, k);
    }
    const per = Math.max(applications, 1);
    for (const [kind, k] of byKind) {
      const perHour = (k.ns / 1e9) * (3600 / seconds);
      console.log(
        `  ${kind.padEnd(10)} ${String(k.count).padStart(4)} processes  ${(k.ns / 1e6).toFixed(1).padStart(9)} ms in ${seconds.toFixed(0)} s` +
          `  = ${(perHour / per).toFixed(3)} s per application per hour (${perHour.toFixed(2)} s/h in all)`,
      );
    }
    console.log(`  load at the end ${loadAverage()}`);
    if (holdSeconds > 0) {
      console.log(`  holding ${holdSeconds} s: daemon ${daemon}, runtime ${pids.slice(1).join(' ')}`);
      await new Promise((r) => setTimeout(r, holdSeconds * 1000));
    }
  } finally {
    await cleanup();
  }
}

await main();
process.exit(0);
