// The figures for bench/RESULTS.md, Application limits: one application over its limits leaves
// another's latency unchanged (docs/supervisor.md "Limits"). Real parts: a `svc sail` node with
// the real runtime on a local-directory bucket, examples/hello deployed as `quiet` and a hostile
// worker that loops forever on /loop and allocates without bound on /leak, both with `svc deploy`.
// Two keep-alive GET loops ask `quiet` for its page throughout; after a warm-up phase that is not
// reported, each phase lasts PHASE_MS:
//   idle  — the hostile application serves nothing;
//   loop  — one /loop request at a time to the hostile application, sent again when it dies;
//   leak  — the same with /leak (only with limits on: without them it would take the machine's memory).
// Run with the limits on (default settings, but --app-cpu-ms 5000 so that several kills fall in a
// phase), the same with a quota of one core per application (--app-cpus 1), and off
// (--app-memory-mb 0 --app-cpu-ms 0). Also reports the most memory
// each application's cgroup held (memory.max_usage_in_bytes, cgroup v1) under the quiet load.
// Run: scripts/with-node node bench/app-limits.bench.ts [phaseSeconds=15]

import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { detectControllers } from '../src/node/fleet/limits.ts';
import { type Bucket, call, keyArg, openBucket, type Signer } from '../test/helpers/applications.ts';
import { CELL_BIN, EXAMPLES } from '../test/helpers/cell.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond } from './wrk.ts';

const PHASE_MS = Number(process.argv[2] ?? 15) * 1000;
const LOOPS = 2;

const HOSTILE = `const kept = [];
export default {
  async fetch(request) {
    const { pathname } = new URL(request.url);
    if (pathname === '/leak') for (;;) kept.push(new Uint8Array(1 << 20).fill(7));
    if (pathname === '/loop') for (;;) {}
    return new Response('hostile\\n');
  },
};
`;

function hostileProject(): string {
  const dir = join(tempDir('svc-limits-bench-'), 'hostile');
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'src', 'index.js'), HOSTILE);
  writeFileSync(
    join(dir, 'wrangler.jsonc'),
    JSON.stringify({ name: 'hostile', main: 'src/index.js', compatibility_date: '2025-06-01' }),
  );
  return dir;
}

function get(url: string, agent?: Agent, timeoutMs = 120_000): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { agent, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

async function portOf(node: SailProcess, admin: Signer, application: string): Promise<number> {
  const found = await waitFor(
    async () => {
      const state = await call(node.url, 'GET', '/v1/state', { signer: admin });
      const processes = (state.body as { processes: { application: string; ready: boolean; port: number }[] })
        .processes;
      return processes.find((p) => p.application === application && p.ready) ?? null;
    },
    `${application} ready`,
    90_000,
  );
  return found!.port;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** The most memory the application's cgroup held since it was made, in MiB, where readable. */
function peakMb(nodeId: string, application: string): string {
  return cgroupMb(nodeId, application, (dir) =>
    Number(readFileSync(join(dir, 'memory.max_usage_in_bytes'), 'utf8')),
  );
}

/** What the application's cgroup holds now that is not page cache (total_rss), in MiB. */
function rssMb(nodeId: string, application: string): string {
  return cgroupMb(nodeId, application, (dir) => {
    const stat = readFileSync(join(dir, 'memory.stat'), 'utf8');
    return Number(/^total_rss (\d+)$/m.exec(stat)?.[1] ?? Number.NaN);
  });
}

function cgroupMb(nodeId: string, application: string, read: (dir: string) => number): string {
  const memory = detectControllers(nodeId).memory;
  if (!memory) return 'n/a';
  try {
    return (read(join(memory.base, application)) / 1024 / 1024).toFixed(0);
  } catch {
    return 'n/a';
  }
}

async function phase(
  name: string,
  quietUrl: string,
  hostileUrl: string | null,
): Promise<{ line: string; p50: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: LOOPS });
  const samples: { status: number; ms: number }[] = [];
  let stop = false;
  const load = loadavg()[0]!.toFixed(1);
  const loops = Array.from({ length: LOOPS }, async () => {
    while (!stop) {
      const started = performance.now();
      const status = await get(quietUrl, agent, 10_000);
      samples.push({ status, ms: performance.now() - started });
    }
  });
  let attacks = 0;
  const attacker = (async () => {
    while (hostileUrl && !stop) {
      attacks += 1;
      await get(hostileUrl, undefined, PHASE_MS);
    }
  })();
  await new Promise((r) => setTimeout(r, PHASE_MS));
  stop = true;
  await Promise.all(loops);
  await attacker;
  agent.destroy();
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const failed = samples.filter((s) => s.status !== 200).length;
  const p50 = percentile(ms, 50);
  return {
    p50,
    line:
      `  ${name.padEnd(5)} quiet: ${samples.length} requests, ${failed} failed, p50 ${p50.toFixed(2)} ms, ` +
      `p99 ${percentile(ms, 99).toFixed(2)} ms, max ${(ms.at(-1) ?? 0).toFixed(1)} ms; ` +
      `hostile requests sent ${hostileUrl ? attacks : 0}; load ${load}`,
  };
}

async function run(label: string, flags: string[], phases: string[]): Promise<void> {
  const bucket: Bucket = await openBucket();
  const nodeId = `limits-bench-${label}`;
  try {
    const admin = await bucket.operator('op-admin', 'admin', ['*']);
    const node = await bucket.sail(['--cell-bin', CELL_BIN, '--node-id', nodeId, ...flags]);
    for (const [dir, name] of [
      [join(EXAMPLES, 'hello'), 'quiet'],
      [hostileProject(), 'hostile'],
    ] as const) {
      const deployed = await runSvc(
        ['deploy', dir, '--name', name, '--node', node.url, '--key', keyArg(admin)],
        {
          timeoutMs: 120_000,
        },
      );
      if (deployed.code !== 0) throw new Error(deployed.stderr);
    }
    const quiet = `http://127.0.0.1:${await portOf(node, admin, 'quiet')}/`;
    const hostilePort = await portOf(node, admin, 'hostile');
    console.log(`limits ${label} (${flags.join(' ')}):`);
    // The first seconds of load are the runtime warming up (JIT, connections), not the limits.
    await phase('warm', quiet, null);
    for (const name of phases) {
      const hostile = name === 'idle' ? null : `http://127.0.0.1:${hostilePort}/${name}`;
      console.log((await phase(name, quiet, hostile)).line);
    }
    if (label !== 'off') {
      // A busy quiet application: does it stay inside the default memory limit?
      const rps = await wrkRequestsPerSecond(quiet, { seconds: PHASE_MS / 1000, connections: 64 });
      console.log(
        `  busy  quiet under wrk -c64: ${rps.toFixed(0)} requests/s; its cgroup now holds ${rssMb(nodeId, 'quiet')} MiB ` +
          `not page cache, peak ${peakMb(nodeId, 'quiet')} MiB with page cache`,
      );
    }
    const breaches = node
      .log()
      .split('\n')
      .filter((l) => l.includes('over its'));
    console.log(
      `  breaches logged: ${breaches.filter((l) => l.includes('CPU-time')).length} cpu, ` +
        `${breaches.filter((l) => l.includes('memory limit')).length} memory ` +
        `(${breaches.filter((l) => l.includes('"application":"quiet"')).length} of them quiet's); ` +
        `peak cgroup memory: quiet ${peakMb(nodeId, 'quiet')} MiB, hostile ${peakMb(nodeId, 'hostile')} MiB`,
    );
  } finally {
    await bucket.close();
    const probe = detectControllers(nodeId);
    for (const h of [probe.memory, probe.cpu]) if (h) rmdirSync(h.base, { recursive: false });
  }
}

async function main(): Promise<void> {
  console.log(
    `app-limits bench: ${PHASE_MS / 1000} s phases, ${LOOPS} loops on quiet, node ${process.version}, ` +
      `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
  );
  await run('on', ['--app-cpu-ms', '5000'], ['idle', 'loop', 'leak', 'idle']);
  await run('quota', ['--app-cpu-ms', '5000', '--app-cpus', '1'], ['idle', 'loop', 'leak', 'idle']);
  await run('off', ['--app-memory-mb', '0', '--app-cpu-ms', '0'], ['idle', 'loop', 'idle']);
}

await main();
