// One node, 1,000 idle applications: what everything the node started costs in memory, and the
// daemon's own resident set.
//   Target (bench/RESULTS.md "1,000 idle applications on one node"): PSS of every process the
//   node started (cell-front and workerd of each application) at most 12 GB; daemon RSS at most
//   150 MB.
// Run: scripts/with-node node bench/thousand-apps.bench.ts [applications] [idle seconds] [checkout|dist]
//   applications  default 1000 copies of examples/hello (bench/idle-fleet.ts seeds them)
//   idle seconds  default 120: once every application answered through its port, memory is
//                 sampled every 10 s for this long and averaged; CPU of the tree is measured over
//                 the same window
//   checkout      default: the daemon (bin/svc) and runtime (runtime/bin/cell) from the checkout,
//                 TypeScript through type stripping, compiled through .state/compile-cache
//   dist          the release bundle operators run: the daemon from dist/svc.mjs and its runtime
//                 dist/cell.mjs (`make dist`, built first)
//
// Real parts: a local-directory bucket, one `svc sail` with the real runtime (runtime/bin/cell,
// cell-front, workerd) and a port range of 1,200 ports (the default 999 cannot hold 1,000).
// The daemon needs an open file limit of several per application (docs/operations.md "Running
// 1,000 applications on one node"); the bench prints the one it runs under. It takes tens of
// minutes; every process it started is killed by PID if it fails.

import { readdirSync, readFileSync } from 'node:fs';
import { buildDist, DIST_CELL } from '../scripts/build-dist.ts';
import { type SailProcess, startSail } from '../test/helpers/svc.ts';
import {
  descendants,
  loadAverage,
  mb,
  ownCpu,
  seededNodeFlags,
  seedHelloApplications,
  type TreeMemory,
  treeMemory,
  untilEveryAnswers,
  watchNodeTree,
} from './idle-fleet.ts';

const applications = Number(process.argv[2] ?? 1000);
const idleSeconds = Number(process.argv[3] ?? 120);
const build = process.argv[4] ?? 'checkout';
if (build !== 'checkout' && build !== 'dist') throw new Error(`unknown build ${build}: checkout or dist`);
const PORTS: [number, number] = [35_000, 36_199];
const START_DEADLINE_MS = 60 * 60_000;
const SETTLE_MS = 30_000;

async function main(): Promise<void> {
  const limits = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .filter((l) => /open files|processes/.test(l))
    .map((l) => l.replace(/\s+/g, ' ').trim());
  // The release bundle names its runtime explicitly, so the daemon cannot fall back to the checkout's.
  const dist = build === 'dist' ? { bin: await buildDist(), cellBin: ['--cell-bin', DIST_CELL] } : null;
  console.log(
    `thousand-apps bench: ${applications} applications, ${build}, node ${process.version}, load ${loadAverage()}`,
  );
  console.log(`  limits the daemon inherits: ${limits.join('; ')}`);
  const seedStarted = Date.now();
  const seeded = await seedHelloApplications(applications, 'k-');
  console.log(`  seeded ${applications} applications in the bucket in ${secs(Date.now() - seedStarted)}`);
  let node: SailProcess | null = null;
  const { note, cleanup } = watchNodeTree(() => node);
  try {
    const started = Date.now();
    node = await startSail([...seededNodeFlags(seeded, PORTS), ...(dist?.cellBin ?? [])], {
      timeoutMs: 120_000,
      bin: dist?.bin,
    });
    const daemonPid = node.child.pid!;
    let peakDaemonRss = 0;
    let lastShown = 0;
    const answeredAt = await untilEveryAnswers(
      node.url,
      seeded.signer,
      seeded.names,
      START_DEADLINE_MS,
      (n) => {
        if (n - lastShown >= 100) {
          lastShown = n;
          const m = treeMemory(daemonPid);
          peakDaemonRss = Math.max(peakDaemonRss, m.daemonRss);
          console.log(
            `    ${n} answering after ${secs(Date.now() - started)}: ${m.processes} processes, PSS ${mb(m.childrenPss)} ` +
              `+ daemon ${mb(m.daemonPss)} (RSS ${mb(m.daemonRss)}), load ${loadAverage()}`,
          );
        }
      },
    );
    console.log(`  every application answered ${secs(answeredAt - started)} after svc sail started`);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    note();
    const cpuBefore = treeCpu(daemonPid);
    const samples: TreeMemory[] = [];
    const idleStarted = Date.now();
    while (Date.now() - idleStarted < idleSeconds * 1000) {
      const m = treeMemory(daemonPid);
      peakDaemonRss = Math.max(peakDaemonRss, m.daemonRss);
      samples.push(m);
      await new Promise((r) => setTimeout(r, 10_000));
    }
    const window = (Date.now() - idleStarted) / 1000;
    const cpuAfter = treeCpu(daemonPid);
    const mean = (f: (m: (typeof samples)[number]) => number) =>
      samples.reduce((s, m) => s + f(m), 0) / samples.length;
    const fds = readdirSync(`/proc/${daemonPid}/fd`).length;
    const perHour = 3600 / window;
    console.log('');
    console.log(`applications                               ${applications}`);
    console.log(`svc sail start -> every one answers        ${secs(answeredAt - started)}`);
    console.log(
      `PSS of everything the node started          ${mb(mean((m) => m.childrenPss))} (${mean((m) => m.processes).toFixed(0)} processes, mean of ${samples.length} samples over ${window.toFixed(0)} s)`,
    );
    console.log(
      `  per application                          ${mb(mean((m) => m.childrenPss) / applications)}`,
    );
    console.log(
      `daemon RSS (mean / peak seen)               ${mb(mean((m) => m.daemonRss))} / ${mb(peakDaemonRss)}; PSS ${mb(mean((m) => m.daemonPss))}`,
    );
    console.log(`daemon open files                          ${fds}`);
    console.log(
      `idle CPU per application per hour          runtime ${(((cpuAfter.children - cpuBefore.children) / 1000 / applications) * perHour).toFixed(2)} s, ` +
        `daemon ${(((cpuAfter.daemon - cpuBefore.daemon) / 1000 / applications) * perHour).toFixed(2)} s (whole daemon over ${window.toFixed(0)} s)`,
    );
    console.log(`load average at the end                    ${loadAverage()}`);
  } finally {
    await cleanup();
    await seeded.store.close();
  }
}

/** CPU (ms) of the daemon itself and of everything below it (with what they reaped). */
function treeCpu(daemonPid: number): { daemon: number; children: number } {
  let children = 0;
  for (const pid of descendants(daemonPid)) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      children += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
    } catch {
      // Gone meanwhile.
    }
  }
  return { daemon: ownCpu(daemonPid), children };
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

await main();
