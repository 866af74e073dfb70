// the targets in bench/RESULTS.md, Daemon memory: under 100 MB resident with 1,000 applications in the
// registry. A real `svc sail` (one node, the coordinator) on a local-directory bucket seeded with
// the application records straight in the bucket (ensureApplicationForDeploy, as a first deploy
// creates them), its resident set read from /proc/<pid>/status.
// Run: scripts/with-node node bench/memory.bench.ts [applications] [seconds] [modes] [runners]
//   runners, comma-separated (default both):
//     checkout  bin/svc from this checkout: .ts sources through Node's type stripping
//     bundle    dist/svc.mjs, the release bundle (`make dist`, scripts/build-dist.ts), run as a
//               release runs it: executed directly, so its shebang's V8 flags apply
//   modes, comma-separated (default all three, each on a fresh bucket and node):
//     empty     no application: the baseline the other two are compared with
//     blocked   every application blocked: the coordinator writes an explicit empty placement
//     unplaced  every application with a node selector no node matches: placed nowhere, reported
//               unplaced on every pass
// Neither loaded mode starts a runtime process: 1,000 `cell serve` processes (or stand-ins) do not
// fit on one machine, and the target is about the registry in the daemon, not its children.
//
// Each mode waits (deadline, polling /v1/state) until the node knows every application and has
// made at least MIN_PASSES reconcile passes, then samples VmRSS every second for `seconds`
// (default 60 s; the node is ~15 s old when sampling starts, so its first full registry re-read at
// the default 60 s schedule falls inside), while an ingress asks for the routing document every 5 s
// as Caddy's default poll would.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

import { buildDist, DIST_SVC } from '../scripts/build-dist.ts';
import { ensureApplicationForDeploy, setBlocked } from '../src/registry/applications.ts';
import type { Store } from '../src/store/store.ts';
import { call, openBucket, type Signer } from '../test/helpers/applications.ts';
import { CELL_REAL } from '../test/helpers/deploys.ts';
import { IngressClient } from '../test/helpers/ingress-client.ts';
import { freePort, type SailProcess, tempDir, waitFor } from '../test/helpers/svc.ts';

type Mode = 'empty' | 'blocked' | 'unplaced';
type Runner = 'checkout' | 'bundle';

const applications = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 60);
const modes = (process.argv[4] ?? 'empty,blocked,unplaced').split(',') as Mode[];
const runners = (process.argv[5] ?? 'checkout,bundle').split(',') as Runner[];
const START_DEADLINE_MS = 30_000;
const TOKEN = 'bench-ingress-token-0123456789';
const MIN_PASSES = 3;
const READY_DEADLINE_MS = 120_000;
const SEED_CONCURRENCY = 16;
const INGRESS_POLL_MS = 5_000;
const TARGET_BYTES = 100 * 1024 * 1024;

interface Sample {
  runner: Runner;
  mode: Mode;
  applications: number;
  maxRss: number;
  finalRss: number;
  /** VmHWM: the peak resident set since the process started, startup and seeding included. */
  peakRss: number;
  passes: number;
}

async function main(): Promise<void> {
  console.log(
    `memory bench: ${applications} applications, ${seconds} s of samples per mode, modes ${modes.join(', ')}, ` +
      `runners ${runners.join(', ')}, node ${process.version}`,
  );
  if (runners.includes('bundle')) await bundle();
  const results: Sample[] = [];
  for (const runner of runners) for (const mode of modes) results.push(await measure(runner, mode));
  console.log('');
  console.log('runner    mode      applications  max VmRSS  final VmRSS  VmHWM (peak)  passes');
  for (const r of results) {
    console.log(
      `${r.runner.padEnd(9)} ${r.mode.padEnd(9)} ${String(r.applications).padStart(12)}  ` +
        `${mb(r.maxRss).padStart(9)}  ${mb(r.finalRss).padStart(11)}  ${mb(r.peakRss).padStart(12)}  ` +
        `${String(r.passes).padStart(6)}`,
    );
  }
  for (const r of results.filter((x) => x.mode !== 'empty')) {
    const base = results.find((x) => x.runner === r.runner && x.mode === 'empty');
    const ratio = base
      ? `, ${(r.maxRss / base.maxRss).toFixed(2)}x the empty node (+${mb(r.maxRss - base.maxRss)})`
      : '';
    console.log(
      `${r.runner} ${r.mode}: max ${mb(r.maxRss)}${ratio}; target < ${mb(TARGET_BYTES)}: ` +
        `${r.maxRss < TARGET_BYTES ? 'met' : 'NOT met'}`,
    );
  }
}

/** The daemon as a release runs it: dist/svc.mjs, built afresh. */
async function bundle(): Promise<void> {
  await buildDist();
}

async function measure(runner: Runner, mode: Mode): Promise<Sample> {
  const bucket = await openBucket();
  let node: SailProcess | undefined;
  try {
    const admin = await bucket.operator('bench-admin', 'admin', ['*']);
    const count = mode === 'empty' ? 0 : applications;
    const seeded = performance.now();
    await seed(bucket.store, mode, count);
    console.log(
      `${runner} ${mode}: seeded ${count} applications in ${Math.round(performance.now() - seeded)} ms`,
    );
    const flags = ['--ingress-token', TOKEN];
    node = runner === 'checkout' ? await bucket.sail(flags) : await startBundled(bucket.endpoint, flags);
    const { url } = node;
    const pid = node.child.pid!;
    await waitFor(
      () => ready(url, admin, count),
      `${mode}: the node to know ${count} applications`,
      READY_DEADLINE_MS,
    );
    const ingress = new IngressClient(url, TOKEN);
    let nextRoutes = 0;
    let maxRss = 0;
    let finalRss = 0;
    const started = performance.now();
    for (let i = 0; i < seconds; i++) {
      if (performance.now() - started >= nextRoutes) {
        await ingress.routes('self');
        nextRoutes += INGRESS_POLL_MS;
      }
      finalRss = status(pid, 'VmRSS');
      maxRss = Math.max(maxRss, finalRss);
      // A timing loop, not a readiness wait: one sample a second.
      await new Promise((r) => setTimeout(r, started + (i + 1) * 1000 - performance.now()));
    }
    const peakRss = status(pid, 'VmHWM');
    const passes = (await call(url, 'GET', '/v1/state', { signer: admin })).body.reconcile.passes as number;
    console.log(
      `${runner} ${mode}: max VmRSS ${mb(maxRss)}, final ${mb(finalRss)}, VmHWM ${mb(peakRss)} after ${passes} passes`,
    );
    return { runner, mode, applications: count, maxRss, finalRss, peakRss, passes };
  } finally {
    await node?.stop();
    await bucket.close();
  }
}

/**
 * `node tmp/svc-memory-bench.mjs sail`, started as test/helpers/svc.ts starts bin/svc: ready at
 * its listening line. The bundle's own default --cell-bin would point outside the checkout, so it
 * is given (no runtime process starts in these modes anyway).
 */
async function startBundled(endpoint: string, flags: string[]): Promise<SailProcess> {
  const listen = `127.0.0.1:${await freePort()}`;
  const stateDir = tempDir('svc-node-');
  const args = [
    'sail',
    '--listen',
    listen,
    '--state-dir',
    stateDir,
    '--endpoint',
    endpoint,
    '--cell-bin',
    CELL_REAL,
  ];
  const child = spawn(DIST_SVC, [...args, ...flags], {
    env: { ...process.env, SVC_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`bundled svc sail exited ${child.exitCode}:\n${stderr}`);
      return /listening on (\S+) as node/.exec(stdout)?.[1];
    },
    'the bundled svc sail to listen',
    START_DEADLINE_MS,
  );
  return {
    url: url!,
    nodeId: '',
    listen,
    stateDir,
    child,
    log: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/** Writes `count` application records (bench-00000 ...), a few at a time. */
async function seed(store: Store, mode: Mode, count: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const name = `bench-${String(next++).padStart(5, '0')}`;
      const intent = mode === 'unplaced' ? { nodeSelector: { zone: 'nowhere' } } : {};
      await ensureApplicationForDeploy(store, name, intent, 'bench');
      if (mode === 'blocked') await setBlocked(store, name, true);
    }
  };
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, worker));
}

/** The node's state names every application and it has made MIN_PASSES passes. */
async function ready(url: string, admin: Signer, count: number): Promise<boolean> {
  const { status: code, body } = await call(url, 'GET', '/v1/state', { signer: admin });
  return code === 200 && body.placements.length === count && body.reconcile?.passes >= MIN_PASSES;
}

/** One `kB` field of /proc/<pid>/status, in bytes. */
function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

await main();
