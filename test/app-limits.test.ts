// Per-application limits (docs/supervisor.md "Limits"), end to end with real parts: a real
// `svc sail` node with --observability on a local-directory bucket, the real runtime (cell serve,
// workerd), two applications deployed with the real `svc deploy`: a quiet one, and a hostile one
// that allocates without bound on /leak and loops forever on /loop. The kernel kills the leaking
// workerd at the memory limit and the node kills the looping one at the CPU-time limit; the
// front starts it again, each breach is an event `svc traces` shows, and the quiet application
// answers every request meanwhile. The memory part needs a memory cgroup controller the daemon
// can write (it says so in its log when it has none): without one that test fails, naming what is missing.

import assert from 'node:assert/strict';
import { mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { detectControllers } from '../src/node/fleet/limits.ts';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { CELL_BIN, isRunning } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const SERVE_MS = 90_000;
const BREACH_MS = 60_000;
const MEMORY_MB = 256;
const CPU_MS = 2_000;

/** What this machine offers, probed the way the daemon does (the probe's folder is removed). */
const probe = detectControllers(`limits-test-probe-${process.pid}`);
for (const h of [probe.memory, probe.cpu]) if (h) rmdirSync(h.base);
const noMemoryController =
  probe.memory === null ? `no writable memory cgroup: ${probe.missing.join('; ')}` : false;

const QUIET = `export default {
  async fetch() {
    return new Response('quiet\\n');
  },
};
`;

const HOSTILE = `const kept = [];
export default {
  async fetch(request) {
    const { pathname } = new URL(request.url);
    if (pathname === '/leak') {
      for (;;) kept.push(new Uint8Array(1 << 20).fill(7));
    }
    if (pathname === '/loop') {
      for (;;) {}
    }
    return new Response('hostile\\n');
  },
};
`;

function project(name: string, source: string): string {
  const dir = join(tempDir('svc-limits-'), name);
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'src', 'index.js'), source);
  writeFileSync(
    join(dir, 'wrangler.jsonc'),
    JSON.stringify({ name, main: 'src/index.js', compatibility_date: '2025-06-01' }),
  );
  return dir;
}

interface LimitEvent {
  kind: string;
  at: string;
  node: string;
  application: string;
  limitMb?: number;
  limitMs?: number;
  usedMs?: number;
}

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
const runtimePids: number[] = [];

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  node = await bucket.sail(
    [
      ...['--cell-bin', CELL_BIN, '--node-id', 'limits-node', '--observability'],
      ...[
        '--observability-flush-ms',
        '300',
        '--app-memory-mb',
        String(MEMORY_MB),
        '--app-cpu-ms',
        String(CPU_MS),
      ],
    ],
    { SVC_LOG_LEVEL: 'info' },
  );
  for (const [name, source] of [
    ['quiet', QUIET],
    ['hostile', HOSTILE],
  ] as const) {
    const deployed = await runSvc(
      ['deploy', project(name, source), '--name', name, '--node', node.url, '--key', keyArg(admin)],
      { timeoutMs: 120_000 },
    );
    assert.equal(deployed.code, 0, deployed.stderr);
  }
});

after(async () => {
  await node?.stop();
  await bucket?.close();
  for (const pid of runtimePids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
});

/** The port of the application's ready process. */
async function portOf(application: string): Promise<number> {
  const found = await waitFor(
    async () => {
      const state = await call(node.url, 'GET', '/v1/state', { signer: admin });
      const processes = (
        state.body as { processes: { application: string; ready: boolean; pid?: number; port: number }[] }
      ).processes;
      return processes.find((p) => p.application === application && p.ready) ?? null;
    },
    () => `${application} ready\n${node.log().slice(-3000)}`,
    SERVE_MS,
  );
  assert.ok(found);
  if (found.pid) runtimePids.push(found.pid);
  return found.port;
}

async function body(port: number, path: string): Promise<string | null> {
  const answer = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5_000) }).catch(
    () => null,
  );
  return answer?.status === 200 ? answer.text() : null;
}

async function limitEvents(kind: string, sinceMs: number): Promise<LimitEvent[]> {
  const run = await runSvc(['traces', '--endpoint', bucket.endpoint, '--name', 'hostile', '--json']);
  assert.equal(run.code, 0, run.stderr);
  return (JSON.parse(run.stdout).events as LimitEvent[]).filter(
    (e) => e.kind === kind && Date.parse(e.at) >= sinceMs,
  );
}

/**
 * Sends `path` to the hostile application (the request dies with its workerd) and, until the
 * breach event is in the bucket, asks the quiet one once at a time: each answer must be its body.
 */
async function breach(kind: string, path: string): Promise<LimitEvent> {
  const quiet = await portOf('quiet');
  const hostile = await portOf('hostile');
  assert.equal(await body(quiet, '/'), 'quiet\n');
  assert.equal(await body(hostile, '/'), 'hostile\n');
  const sinceMs = Date.now();
  const attack = fetch(`http://127.0.0.1:${hostile}${path}`, {
    signal: AbortSignal.timeout(BREACH_MS),
  }).catch(() => null);
  let asked = 0;
  const event = await waitFor(
    async () => {
      assert.equal(
        await body(quiet, '/'),
        'quiet\n',
        `quiet answered while ${path} ran\n${node.log().slice(-3000)}`,
      );
      asked += 1;
      return (await limitEvents(kind, sinceMs))[0] ?? null;
    },
    () => `a ${kind} event\n${node.log().slice(-4000)}`,
    BREACH_MS,
  );
  assert.ok(event);
  assert.ok(asked > 0);
  await attack;
  // The front started a new workerd: the hostile application serves again.
  assert.equal(
    await waitFor(
      () => body(hostile, '/'),
      () => `hostile serving again\n${node.log().slice(-3000)}`,
      SERVE_MS,
    ),
    'hostile\n',
  );
  assert.equal(await body(quiet, '/'), 'quiet\n');
  return event;
}

describe('application limits', () => {
  test('a workerd looping past the CPU-time limit is killed, restarted and reported', async () => {
    const event = await breach('limit.cpu', '/loop');
    assert.equal(event.node, 'limits-node');
    assert.equal(event.application, 'hostile');
    assert.equal(event.limitMs, CPU_MS);
    assert.ok((event.usedMs ?? 0) >= 0.9 * CPU_MS, `used ${event.usedMs} ms`);
    const logged = node
      .log()
      .split('\n')
      .find((l) => l.includes('over its CPU-time limit'));
    assert.match(logged ?? '', /"application":"hostile"/);
  });

  test('a workerd allocating past the memory limit is killed by the kernel, restarted and reported', async () => {
    assert.equal(noMemoryController, false, 'make test needs a memory cgroup controller the node can write');
    const event = await breach('limit.memory', '/leak');
    assert.equal(event.node, 'limits-node');
    assert.equal(event.application, 'hostile');
    assert.equal(event.limitMb, MEMORY_MB);
    const logged = node
      .log()
      .split('\n')
      .find((l) => l.includes('over its memory limit'));
    assert.match(logged ?? '', /"application":"hostile"/);
  });
});
