// Runtime density and cost: what one node spends per deployed application when idle.
//   Memory: proportional set size (PSS, from /proc/<pid>/smaps_rollup) and resident set (RSS) of
//           every process the node started (the daemon itself apart), divided by the number of
//           applications, sampled every 5 s through the idle window and averaged (the runtime's
//           Node steward runs only while it has bucket work, at the time scale's pace).
//           Target: at most 25 MB PSS per application at 5 and at 50 applications.
//   CPU:    seconds of CPU per idle application per hour: the runtime's processes (cell-front and
//           workerd, everything below the daemon) over the idle window, plus the daemon's share
//           (its own CPU in the window minus what it used with no application, the `0` count,
//           divided by the applications), extrapolated from the window to an hour. Not scaled
//           back: the supervisor's health probes and the host socket's keepalive run at their own
//           pace whatever the time scale, so run it at time scale 1 (a faster schedule only
//           overstates it). Target: at most 0.2 s per application per hour.
//   Bucket: requests under the runtime's `fleets/` prefix per replica per hour while idle.
//           Target: at most 60, flat in the number of applications.
// Run: scripts/with-node node bench/density.bench.ts [counts] [window seconds] [time scale] [runtime]
//   counts        comma-separated numbers of applications (default 0,5,50), each on a fresh
//                 bucket and node; 0 measures the daemon alone, the baseline of its share
//   window        idle seconds during which bucket requests are counted (default 60)
//   time scale    k >= 1 (default 1): the runtime's idle schedule (selector poll and lease
//                 lifetime, from its own defaults) is run k times faster through --cell-env, so a
//                 window of W seconds stands for k*W seconds of the default schedule; requests per
//                 hour are scaled back. k = 1 measures the defaults as they are.
//   runtime       checkout (default): runtime/bin/cell, the .ts sources through type stripping;
//                 dist: dist/cell.mjs, the bundled runtime `make dist` writes (built first)
//
// Real parts: MinIO behind a counting proxy (test/helpers/s3-proxy.ts: every request seen), one
// `svc sail` on it with the real runtime (runtime/bin/cell, workerd), `svc deploy` of copies of
// examples/hello under names dens-<i>. Every wait has a deadline.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tuningFromEnv } from '../runtime/src/serve.ts';
import { buildDist, DIST_CELL } from '../scripts/build-dist.ts';
import { openStore } from '../src/store/open.ts';
import { call, keyArg } from '../test/helpers/applications.ts';
import { copyProject, EXAMPLES } from '../test/helpers/cell.ts';
import { signerFor, trustOperator } from '../test/helpers/in-process-node.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { startS3Proxy } from '../test/helpers/s3-proxy.ts';
import { runSvc, type SailProcess, startSail, waitFor } from '../test/helpers/svc.ts';
import { descendants, memoryOf, ownCpu, type ProcessMemory } from './idle-fleet.ts';

const counts = (process.argv[2] ?? '0,5,50').split(',').map(Number);
const windowSeconds = Number(process.argv[3] ?? 60);
const scale = Number(process.argv[4] ?? 1);
const runtime = process.argv[5] ?? 'checkout';
const DEPLOY_CONCURRENCY = 3;
const DEPLOY_DEADLINE_MS = 120_000;
const SETTLE_MS = 15_000;
const PORTS: [number, number] = [31_000, 31_199];
const MB = 1024 * 1024;
const SAMPLE_EVERY_MS = 5_000;
const cellBin: string[] = [];

interface Row {
  applications: number;
  pss: number;
  rss: number;
  processes: number;
  byKind: Map<string, { count: number; pss: number; rss: number }>;
  runtimeRequests: number;
  daemonRequests: number;
  /** How many times the node's processes were measured during the idle window. */
  samples: number;
  /** CPU time the runtime's processes (any that came and went included) used in the window. */
  cpuMs: number;
  /** CPU time the daemon itself used in the window. */
  daemonCpuMs: number;
}

async function main(): Promise<void> {
  const defaults = tuningFromEnv({});
  if (runtime === 'dist') {
    await buildDist();
    cellBin.push('--cell-bin', DIST_CELL);
  }
  const cellEnv =
    scale === 1
      ? []
      : [
          '--cell-env',
          `CELL_SELECTOR_POLL_MS=${Math.max(50, Math.round(defaults.pollMs / scale))}`,
          '--cell-env',
          `CELL_LEASE_TTL_MS=${Math.max(3000, Math.round(defaults.leaseTtlMs / scale))}`,
        ];
  console.log(
    `density bench: ${counts.join(', ')} applications, idle window ${windowSeconds} s, time scale ${scale} ` +
      `(selector poll ${defaults.pollMs} ms, lease ${defaults.leaseTtlMs} ms by default), runtime ${runtime}, node ${process.version}`,
  );
  const minio = await startMinio();
  const rows: Row[] = [];
  try {
    for (const n of counts) rows.push(await measure(minio, n, cellEnv));
  } finally {
    await minio.stop();
  }
  console.log('');
  console.log(
    'apps  processes  PSS total  PSS / app  RSS total  RSS / app  fleets/ requests per replica per hour  daemon requests per hour  runtime CPU s per app per hour  daemon CPU s per hour  CPU s per app per hour (runtime + daemon share)',
  );
  const baseline = rows.find((r) => r.applications === 0);
  const perHour = 3600 / windowSeconds;
  for (const r of rows) {
    if (r.applications === 0) {
      console.log(`   0  daemon alone: ${((r.daemonCpuMs / 1000) * perHour).toFixed(1)} s CPU per hour`);
      continue;
    }
    const hour = 3600 / (windowSeconds * scale);
    const runtimeCpu = (r.cpuMs / 1000 / r.applications) * perHour;
    const daemonShare = baseline
      ? (((r.daemonCpuMs - baseline.daemonCpuMs) / 1000 / r.applications) * perHour).toFixed(2)
      : 'n/a (no 0 count)';
    console.log(
      `${String(r.applications).padStart(4)}  ${r.processes.toFixed(1).padStart(9)}  ${mb(r.pss).padStart(9)}  ` +
        `${mb(r.pss / r.applications).padStart(9)}  ${mb(r.rss).padStart(9)}  ${mb(r.rss / r.applications).padStart(9)}  ` +
        `${((r.runtimeRequests / r.applications) * hour).toFixed(0).padStart(38)}  ` +
        `${(r.daemonRequests * (3600 / windowSeconds)).toFixed(0).padStart(24)}  ` +
        `${runtimeCpu.toFixed(2).padStart(30)}  ${((r.daemonCpuMs / 1000) * perHour).toFixed(1).padStart(21)}  ` +
        `${baseline ? (runtimeCpu + Number(daemonShare)).toFixed(2) : '?'} (daemon share ${daemonShare})`,
    );
    for (const [kind, k] of r.byKind) {
      console.log(
        `      ${kind.padEnd(14)} ${(k.count / r.samples).toFixed(1).padStart(5)} processes on average, PSS ${mb(k.pss / k.count)} / RSS ${mb(k.rss / k.count)} each`,
      );
    }
  }
}

async function measure(
  minio: Awaited<ReturnType<typeof startMinio>>,
  applications: number,
  cellEnv: string[],
): Promise<Row> {
  const bucketName = await minio.createBucket();
  const proxy = await startS3Proxy(minio.endpoint);
  const options = { ...minio.bucketOptions(bucketName), endpoint: proxy.endpoint };
  const store = await openStore(options);
  const signer = await trustOperator(store, signerFor('bench-admin'));
  let node: SailProcess | null = null;
  try {
    node = await startSail([
      '--endpoint',
      options.endpoint,
      '--region',
      options.region,
      '--bucket',
      options.bucket,
      '--access-key',
      options.accessKey,
      '--secret-key',
      options.secretKey,
      '--port-range-start',
      String(PORTS[0]),
      '--port-range-end',
      String(PORTS[1]),
      ...cellEnv,
      ...cellBin,
    ]);
    const project = copyProject(join(EXAMPLES, 'hello'));
    const names = Array.from({ length: applications }, (_, i) => `dens-${i}`);
    let next = 0;
    const deployer = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        const config = join(project, 'cell.jsonc');
        const run = await runSvc(
          [
            'deploy',
            project,
            '--name',
            name,
            '--node',
            node!.url,
            '--key',
            keyArg(signer),
            '--var',
            `GREETING:Hello from ${name}`,
          ],
          { timeoutMs: DEPLOY_DEADLINE_MS },
        );
        if (run.code !== 0)
          throw new Error(
            `svc deploy ${name} exited ${run.code}:\n${run.stderr}\n${readFileSync(config, 'utf8')}`,
          );
      }
    };
    const deployStarted = Date.now();
    await Promise.all(Array.from({ length: DEPLOY_CONCURRENCY }, deployer));
    const url = node.url;
    await waitFor(
      async () => {
        const state = (await call(url, 'GET', '/v1/state', { signer })).body as {
          processes?: { application: string; ready: boolean }[];
        };
        return (state.processes ?? []).filter((p) => p.ready).length === applications;
      },
      `${applications} ready runtime processes`,
      DEPLOY_DEADLINE_MS + applications * 5_000,
    );
    console.log(
      `  ${applications} applications deployed and ready in ${((Date.now() - deployStarted) / 1000).toFixed(1)} s`,
    );
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    // Memory is sampled through the whole idle window and averaged: the runtime's steward (Node)
    // runs only while it has bucket work, so one snapshot could catch it or miss it.
    const samples: ProcessMemory[][] = [];
    const sample = () =>
      samples.push(
        descendants(node!.child.pid!)
          .map(memoryOf)
          .filter((p) => p !== null),
      );
    sample();
    const seenBefore = proxy.seen.length;
    const cpuBefore = cpuOfTree(node.child.pid!);
    const daemonCpuBefore = ownCpu(node.child.pid!);
    const sampling = setInterval(sample, SAMPLE_EVERY_MS);
    await new Promise((r) => setTimeout(r, windowSeconds * 1000));
    clearInterval(sampling);
    const cpuMs = cpuOfTree(node.child.pid!) - cpuBefore;
    const daemonCpuMs = ownCpu(node.child.pid!) - daemonCpuBefore;
    sample();
    const byKind = new Map<string, { count: number; pss: number; rss: number }>();
    for (const p of samples.flat()) {
      const kind = kindOf(p.command);
      const k = byKind.get(kind) ?? { count: 0, pss: 0, rss: 0 };
      k.count++;
      k.pss += p.pss;
      k.rss += p.rss;
      byKind.set(kind, k);
    }
    const all = samples.flat();
    const window = proxy.seen.slice(seenBefore);
    const runtimeRequests = window.filter((r) => r.path.includes('/fleets/')).length;
    const row: Row = {
      applications,
      pss: all.reduce((s, p) => s + p.pss, 0) / samples.length,
      rss: all.reduce((s, p) => s + p.rss, 0) / samples.length,
      processes: all.length / samples.length,
      byKind,
      samples: samples.length,
      runtimeRequests,
      daemonRequests: window.length - runtimeRequests,
      cpuMs,
      daemonCpuMs,
    };
    console.log(
      `  ${applications} applications: ${row.processes.toFixed(1)} processes, PSS ${mb(row.pss)}, RSS ${mb(row.rss)} ` +
        `(mean of ${samples.length} samples); ` +
        `${runtimeRequests} fleets/ and ${row.daemonRequests} other bucket requests in ${windowSeconds} s; ` +
        `the runtime's processes used ${(cpuMs / 1000).toFixed(2)} s of CPU, the daemon ${(daemonCpuMs / 1000).toFixed(2)} s`,
    );
    return row;
  } finally {
    await node?.stop();
    await store.close();
    await proxy.close();
  }
}

/** What a process of the node is: the runtime's front (cell serve after its start), its steward, workerd. */
function kindOf(command: string): string {
  if (command.includes('workerd')) return 'workerd';
  if (command.includes('steward')) return 'cell steward';
  if (command.includes('cell')) return 'cell serve';
  return 'other';
}

/**
 * CPU time (ms) used by the processes below `root`, the daemon itself apart: each one's own time
 * plus that of its children it has reaped, so a steward that ran and exited is counted in its front.
 */
function cpuOfTree(root: number): number {
  let ticks = 0;
  for (const pid of descendants(root)) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // Gone meanwhile: its time is in its parent's once reaped.
    }
  }
  return ticks * 10;
}

function mb(bytes: number): string {
  return `${(bytes / MB).toFixed(1)} MB`;
}

await main();
