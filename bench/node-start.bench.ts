// Node start with many applications: how long a node that already runs N applications takes, from
// `svc sail` starting to every application answering through its own port, and the peak memory
// of its process tree while it starts.
//   Target (bench/RESULTS.md "Node start"): with 200 applications, every one answers within 60 s
//   of the start, and the peak PSS of the node's process tree (daemon included) is at most 1.2
//   times its idle total after the start.
// Run: scripts/with-node node bench/node-start.bench.ts [applications] [idle seconds]
//   applications  default 200 copies of examples/hello (bench/idle-fleet.ts seeds them)
//   idle seconds  default 30: after every application answered, PSS is sampled for this long and
//                 averaged, the idle total the peak is compared with
//
// Real parts: a local-directory bucket, one `svc sail` with the real runtime (runtime/bin/cell,
// cell-front, workerd). The node is started once and waited on until every application answers
// (its runtime processes started for the first time), stopped with SIGTERM (it stops its runtime
// processes), then started again on the same state directory: that second start is measured.
// PSS of the daemon and every process below it is sampled every second during the start. Every
// process the bench started is killed by PID if it fails.

import { readdirSync } from 'node:fs';
import { type SailProcess, startSail } from '../test/helpers/svc.ts';
import {
  cleanUpOnSignal,
  descendants,
  killLeftovers,
  loadAverage,
  mb,
  seededNodeFlags,
  seedHelloApplications,
  type TreeMemory,
  treeMemory,
  untilEveryAnswers,
} from './idle-fleet.ts';

const applications = Number(process.argv[2] ?? 200);
const idleSeconds = Number(process.argv[3] ?? 30);
const PORTS: [number, number] = [33_000, 34_199];
const START_DEADLINE_MS = 30 * 60_000;
const SAMPLE_EVERY_MS = 1_000;

async function main(): Promise<void> {
  console.log(
    `node start bench: ${applications} applications, node ${process.version}, load ${loadAverage()}`,
  );
  const seeded = await seedHelloApplications(applications, 'start-');
  console.log(`  seeded ${applications} applications in the bucket`);
  const flags = seededNodeFlags(seeded, PORTS);
  const seen = new Set<number>();
  const note = (node: SailProcess | null) => {
    if (node?.child.pid) for (const pid of descendants(node.child.pid)) seen.add(pid);
  };
  let node: SailProcess | null = null;
  let watcher: NodeJS.Timeout | undefined;
  cleanUpOnSignal(async () => {
    note(node);
    await node?.stop();
    killLeftovers([...seen]);
  });
  try {
    node = await startSail(flags, { timeoutMs: 120_000 });
    const stateDir = node.stateDir;
    watcher = setInterval(() => note(node), 2_000);
    const firstStarted = Date.now();
    await untilEveryAnswers(node.url, seeded.signer, seeded.names, START_DEADLINE_MS);
    console.log(
      `  first start (no runtime process yet): every application answered after ${secs(Date.now() - firstStarted)}, load ${loadAverage()}`,
    );
    note(node);
    const stopStarted = Date.now();
    await node.stop();
    node = null;
    const left = [...seen].filter((pid) => readdirSync('/proc').includes(String(pid)));
    console.log(
      `  stopped in ${secs(Date.now() - stopStarted)}; ${left.length} of its processes left behind`,
    );

    const started = Date.now();
    node = await startSail(flags, { stateDir, timeoutMs: 120_000 });
    const daemonPid = node.child.pid!;
    const listening = Date.now();
    let peak = treeMemory(daemonPid);
    let peakAtMs = 0;
    const sampler = setInterval(() => {
      const now = treeMemory(daemonPid);
      if (now.pss > peak.pss) {
        peak = now;
        peakAtMs = Date.now() - started;
      }
    }, SAMPLE_EVERY_MS);
    let lastShown = 0;
    const answeredAt = await untilEveryAnswers(
      node.url,
      seeded.signer,
      seeded.names,
      START_DEADLINE_MS,
      (n) => {
        if (n - lastShown >= 50) {
          lastShown = n;
          console.log(`    ${n} answering after ${secs(Date.now() - started)}`);
        }
      },
    );
    clearInterval(sampler);
    const samples: TreeMemory[] = [];
    const idleStarted = Date.now();
    while (Date.now() - idleStarted < idleSeconds * 1000) {
      samples.push(treeMemory(daemonPid));
      await new Promise((r) => setTimeout(r, SAMPLE_EVERY_MS * 2));
    }
    const idle = samples.reduce((s, m) => s + m.pss, 0) / samples.length;
    const idleDaemonRss = samples.reduce((s, m) => s + m.daemonRss, 0) / samples.length;
    console.log('');
    console.log(`applications                       ${applications}`);
    console.log(`svc sail start -> listening         ${secs(listening - started)}`);
    console.log(`svc sail start -> every one answers ${secs(answeredAt - started)}`);
    console.log(
      `peak PSS during the start          ${mb(peak.pss)} (${peak.processes} processes, ${secs(peakAtMs)} after the start; daemon RSS then ${mb(peak.daemonRss)})`,
    );
    console.log(
      `idle PSS after (mean of ${samples.length})         ${mb(idle)} (${samples.at(-1)!.processes} processes; daemon RSS ${mb(idleDaemonRss)})`,
    );
    console.log(`peak / idle                        ${(peak.pss / idle).toFixed(2)}`);
    console.log(`load average at the end            ${loadAverage()}`);
  } finally {
    clearInterval(watcher);
    note(node);
    await node?.stop();
    const killed = killLeftovers([...seen]);
    if (killed > 0) console.log(`  killed ${killed} leftover processes by PID`);
    await seeded.store.close();
  }
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

await main();
