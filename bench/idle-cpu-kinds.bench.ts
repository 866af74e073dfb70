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
// daemon's idle cost without applications is not subtracted here: run with 0, an empty bucket,
// for it).

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HEALTH_PATH, SUPERVISOR_HEADER } from '../src/runtime-contract/environment.ts';
import { openStore } from '../src/store/open.ts';
import type { Signer } from '../test/helpers/applications.ts';
import { signerFor, trustOperator } from '../test/helpers/in-process-node.ts';
import { type SailProcess, startSail, tempDir } from '../test/helpers/svc.ts';
import {
  descendants,
  loadAverage,
  processesOf,
  seededNodeFlags,
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

async function emptyBucket(): Promise<{ endpoint: string; signer: Signer; names: string[] }> {
  const dir = tempDir('svc-bench-bucket-');
  const endpoint = `file://${join(dir, 'bucket')}`;
  const store = await openStore({ endpoint, stateDir: join(dir, 'tool-state') });
  return { endpoint, signer: await trustOperator(store, signerFor('bench-admin')), names: [] };
}

/**
 * What one ready probe costs: PROBES health requests to one front as the supervisor makes them
 * (a fresh connection each, with its header), PROBE_GAP_MS apart; the front's CPU (schedstat)
 * and this process's own (a Node client like the daemon, process.cpuUsage) per probe.
 */
async function probeCost(
  node: SailProcess,
  signer: Signer,
  application: string,
  pids: number[],
): Promise<void> {
  const PROBES = 100;
  const PROBE_GAP_MS = 100;
  const port = (await processesOf(node.url, signer)).find((p) => p.application === application)?.port;
  const front = pids.find(
    (pid) =>
      kindOf(pid) === 'cell-front' &&
      readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`CELL_PORT=${port}\0`),
  );
  if (!port || !front) return;
  const frontBefore = threadCpuNs(front)!;
  const ownBefore = process.cpuUsage();
  for (let i = 0; i < PROBES; i++) {
    const response = await fetch(`http://127.0.0.1:${port}${HEALTH_PATH}`, {
      headers: { [SUPERVISOR_HEADER]: 'bench', connection: 'close' },
    });
    await response.text();
    // Paced as probes are: one at a time, apart.
    await new Promise((r) => setTimeout(r, PROBE_GAP_MS));
  }
  const own = process.cpuUsage(ownBefore);
  const frontMs = (threadCpuNs(front)! - frontBefore) / 1e6 / PROBES;
  const clientMs = (own.user + own.system) / 1000 / PROBES;
  console.log(
    `  one health probe: front ${frontMs.toFixed(3)} ms, a Node client ${clientMs.toFixed(3)} ms of CPU (${PROBES} probes ${PROBE_GAP_MS} ms apart, the client's timer wakes included)`,
  );
}

async function main(): Promise<void> {
  console.log(`idle CPU by kind: ${applications} applications, ${windowSeconds} s, load ${loadAverage()}`);
  // With 0, an empty bucket: the daemon alone, the baseline of its share.
  const seeded = applications > 0 ? await seedHelloApplications(applications, 'k-') : await emptyBucket();
  const names = seeded.names;
  let node: SailProcess | null = null;
  const { note, cleanup } = watchNodeTree(() => node);
  try {
    node = await startSail(seededNodeFlags(seeded, PORTS), { timeoutMs: 120_000 });
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
    if (names.length > 0) await probeCost(node, seeded.signer, names[0]!, pids);
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
