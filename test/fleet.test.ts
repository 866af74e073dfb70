// The fleet on real parts: three `svc sail` nodes on 127.0.0.x sharing
// one MinIO bucket, runtime processes from the cell stand-in (test/helpers/cell-standin.ts, named
// as such: it honours the runtime contract's `serve`). Short lease and cache intervals keep the
// waits short; every wait is a poll with a deadline.
//
// In order: exactly one coordinator; replicas 2, `all`, a selector and an unsatisfiable selector;
// a crashed runtime process restarted; GET /v1/state narrowed for a non-admin operator; a drained
// node's processes leave the fleet's state; `svc fleet nodes`; kill -9 of the coordinator and
// another takes over with a higher fence within the lease lifetime plus one pass.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, putJson, type Store } from '../src/store/store.ts';
import { assertProblem, call, ensureDeployedApplication } from './helpers/applications.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TTL_MS = 3_000;
/** Room for a pass that is slow on a loaded machine, on top of the spec's bound. */
const SLACK_MS = 4_000;
const PASS_WAIT_MS = 4 * PASS_INTERVAL_MS + SLACK_MS;

let store: Store;
let bucketFlags: string[];
let admin: Signer;
let narrow: Signer;
const nodes: SailProcess[] = [];
const ids = ['node-a', 'node-b', 'node-c'];

/** 127.0.0.x when this machine routes the whole loopback /8, else 127.0.0.1 for all. */
async function loopbackHost(index: number): Promise<string> {
  const host = `127.0.0.${index + 2}`;
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve('127.0.0.1'));
    server.listen(0, host, () => server.close(() => resolve(host)));
  });
}

// At the top level, so MinIO lives until the file ends.
const minioStarting = useMinio();

before(async () => {
  const minio = await minioStarting;
  const bucket = await minio.createBucket();
  const options = minio.bucketOptions(bucket);
  store = await openStore({ ...options, stateDir: tempDir() });
  bucketFlags = [
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
  ];
  admin = await operator('op-admin', 'admin', ['*']);
  narrow = await operator('op-narrow', 'operator', ['two']);
  for (const [index, id] of ids.entries()) {
    const host = await loopbackHost(index);
    nodes.push(
      await startSail([
        ...bucketFlags,
        '--node-id',
        id,
        '--node-labels',
        `role=${index === 0 ? 'edge' : 'core'}`,
        '--node-labels',
        `name=${id}`,
        '--cell-bin',
        CELL_STANDIN,
        '--bind-host',
        host,
        '--port-range-start',
        String(31000 + index * 100),
        '--port-range-end',
        String(31099 + index * 100),
        '--coordinator-lease-ttl-ms',
        String(TTL_MS),
        '--registry-resync-ms',
        '1000',
        '--registry-node-refresh-ms',
        '1000',
      ]),
    );
  }
});

after(async () => {
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
});

function operator(id: string, role: 'admin' | 'operator', applications: string[]): Promise<Signer> {
  return trustOperator(store, signerFor(id), role, applications);
}

// biome-ignore lint/suspicious/noExplicitAny: tests read the state document member by member.
async function state(node: SailProcess, signer: Signer = admin): Promise<any> {
  const answer = await call(node.url, 'GET', '/v1/state', { signer });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

function live(): SailProcess[] {
  return nodes.filter((node) => node.child.exitCode === null && node.child.signalCode === null);
}

async function coordinators(among: SailProcess[]): Promise<{ node: string; fence: number } | null> {
  const states = await Promise.all(among.map((node) => state(node)));
  const selves = states.filter((s) => s.coordinator?.self === true);
  const agreed = states.every((s) => s.coordinator && s.coordinator.node === selves[0]?.coordinator.node);
  if (selves.length !== 1 || !agreed) return null;
  return { node: selves[0].coordinator.node, fence: selves[0].coordinator.fence };
}

test('exactly one coordinator, and every node says which', async () => {
  const found = (await waitFor(
    () => coordinators(nodes),
    'one coordinator all nodes agree on',
    PASS_WAIT_MS,
  ))!;
  assert.ok(ids.includes(found.node));
  assert.ok(found.fence >= 1);
  const lease = (await getJson<{ node: string; fence: number }>(store, keys.coordinatorLease))!.value;
  assert.deepEqual({ node: lease.node, fence: lease.fence }, found);
  // Node records are written and ready once the first pass is done.
  for (const node of nodes) {
    const s = await state(node);
    assert.equal(s.node.state, 'ready');
    assert.equal(s.node.versions.svc.length > 0, true);
    assert.ok(s.reconcile.passes >= 1);
  }
});

test('placement: replicas 2, all, a selector, and an unsatisfiable selector reported unplaced', async () => {
  await ensureDeployedApplication(store, 'two', { replicas: 2 });
  await ensureDeployedApplication(store, 'every', { replicas: 'all' });
  await ensureDeployedApplication(store, 'picky', { nodeSelector: { role: 'edge' } });
  await ensureDeployedApplication(store, 'nowhere', { nodeSelector: { role: 'gpu' } });
  const placed = (await waitFor(
    async () => {
      const s = await state(nodes[0]!);
      const byName = new Map<string, string[]>(
        s.placements
          .filter((p: { state: string }) => p.state === 'placed')
          .map((p: { application: string; nodes: string[] }) => [p.application, p.nodes]),
      );
      return byName.size >= 4 ? byName : null;
    },
    'placements of all four applications',
    PASS_WAIT_MS,
  ))!;
  assert.equal(placed.get('two')!.length, 2);
  assert.deepEqual(placed.get('every'), ids);
  assert.deepEqual(placed.get('picky'), ['node-a']);
  assert.deepEqual(placed.get('nowhere'), []);
  const holder = await coordinators(nodes);
  const coordinatorNode = nodes.find((n) => n.nodeId === holder!.node)!;
  const view = (await state(coordinatorNode)).coordinator;
  assert.deepEqual(
    view.unplaced.map((u: { application: string }) => u.application),
    ['nowhere'],
  );
  assert.match(view.unplaced[0].reason, /selector/);
  for (const other of nodes.filter((n) => n !== coordinatorNode)) {
    assert.equal((await state(other)).coordinator.unplaced, undefined, 'unplaced only on the coordinator');
  }
  // Every node runs what is placed on it, and reports it ready.
  for (const node of nodes) {
    const wanted = [...placed]
      .filter(([, on]) => on.includes(node.nodeId))
      .map(([name]) => name)
      .sort();
    await waitFor(
      async () => {
        const s = await state(node);
        const ready = s.processes
          .filter((p: { ready: boolean }) => p.ready)
          .map((p: { application: string }) => p.application);
        return JSON.stringify(ready.sort()) === JSON.stringify(wanted);
      },
      `${node.nodeId} running ${wanted.join(', ')}`,
      PASS_WAIT_MS,
    );
  }
});

test('a crashed runtime process is restarted', async () => {
  const node = nodes[1]!;
  const before = (await state(node)).processes.find(
    (p: { application: string }) => p.application === 'every',
  );
  assert.ok(before?.pid);
  process.kill(before.pid, 'SIGKILL');
  await waitFor(
    async () => {
      const p = (await state(node)).processes.find((x: { application: string }) => x.application === 'every');
      return p && p.pid !== before.pid && p.ready && p.restarts > before.restarts;
    },
    'the process restarted and ready again',
    PASS_WAIT_MS,
  );
});

test('GET /v1/state: a non-admin operator sees only its applications, scoped', async () => {
  const s = await state(nodes[0]!, narrow);
  assert.equal(s.scoped, true);
  assert.deepEqual(
    s.placements.map((p: { application: string }) => p.application),
    ['two'],
  );
  for (const p of [...s.processes, ...s.node.processes]) assert.equal(p.application, 'two');
  const whole = await state(nodes[0]!);
  assert.equal(whole.scoped, undefined);
  assert.equal(whole.placements.length, 4);
  const refused = await call(nodes[0]!.url, 'GET', '/v1/state');
  assertProblem(refused, 401, 'auth-invalid', 'Token rejected');
});

test('a drained node marks itself draining and its processes leave the fleet state', async () => {
  const holder = (await coordinators(nodes))!;
  const victim = nodes.find((n) => n.nodeId !== holder.node)!;
  const code = await victim.stop('SIGTERM');
  assert.equal(code, 0);
  const record = (await getJson<NodeRecord>(store, keys.nodeRecord(victim.nodeId)))!.value;
  assert.equal(record.state, 'draining');
  assert.deepEqual(record.processes, []);
  // The others place around it: `every` is no longer placed on it.
  const survivor = live()[0]!;
  await waitFor(
    async () => {
      const s = await state(survivor);
      const every = s.placements.find((p: { application: string }) => p.application === 'every');
      return every && !every.nodes.includes(victim.nodeId) && every.nodes.length === 2;
    },
    'placement without the drained node',
    PASS_WAIT_MS,
  );
});

test('svc fleet nodes reads the bucket: table, version lines, freeze line, --json', async () => {
  await putJson(store, keys.freeze, {
    v: 1,
    frozenAt: '2030-01-01T00:00:00.000Z',
    by: 'op-admin',
    reason: 'audit',
  });
  const table = await runSvc(['fleet', 'nodes', ...bucketFlags]);
  assert.equal(table.code, 0, table.stderr);
  const lines = table.stdout.trimEnd().split('\n');
  assert.match(lines.join('\n'), /^svc: \S+ \(3 nodes\)$/m);
  assert.match(lines.join('\n'), /^cell: \S+ \(3 nodes\)$/m);
  assert.match(lines.join('\n'), /^deploys frozen since 2030-01-01T00:00:00.000Z by op-admin: audit$/m);
  const header = lines.find((l) => l.startsWith('NODE'))!;
  assert.match(header, /^NODE\s+STATE\s+SEEN\s+API\s+CELL\s+SVC\s+LABELS$/);
  assert.ok(lines.some((l) => /^node-a\s+ready\s/.test(l)));
  assert.ok(lines.some((l) => /\sdraining\s/.test(l)));
  const json = await runSvc(['fleet', 'nodes', ...bucketFlags, '--json']);
  assert.equal(json.code, 0, json.stderr);
  const rows = JSON.parse(json.stdout);
  assert.equal(rows.nodes.length, 3);
  assert.equal(typeof rows.nodes[0].versions.svc, 'string');
  assert.equal(typeof rows.nodes[0].versions.cell, 'string');
  assert.equal(json.stdout.includes('audit'), false, 'no freeze line in JSON');
  await store.delete(keys.freeze);
});

test('kill -9 of the coordinator: another takes over with a higher fence within the lease lifetime plus one pass', async () => {
  const holder = (await coordinators(live()))!;
  const victim = nodes.find((n) => n.nodeId === holder.node)!;
  await victim.stop('SIGKILL');
  const killedAt = Date.now();
  const survivors = live();
  const next = (await waitFor(
    async () => {
      const found = await coordinators(survivors);
      return found && found.node !== holder.node ? found : null;
    },
    'a new coordinator',
    TTL_MS + PASS_INTERVAL_MS + SLACK_MS,
  ))!;
  assert.ok(next.fence > holder.fence, `fence ${next.fence} after ${holder.fence}`);
  assert.ok(Date.now() - killedAt >= 0);
});
