// Fencing on real processes: the coordinator is stopped with SIGSTOP past
// its lease lifetime, another node takes over under a higher fence, and the old coordinator,
// resumed with SIGCONT, makes no write under its stale fence. While it is stopped an application
// is created and another's replicas changed, so on resuming it has assignment work it would do if
// it still believed itself coordinator. Writes are read from the bucket and from the node's log.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { setReplicas } from '../src/registry/applications.ts';
import { keys } from '../src/registry/keys.ts';
import type { PlacementRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, putJson, type Store } from '../src/store/store.ts';
import { call, ensureDeployedApplication } from './helpers/applications.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TTL_MS = 3_000;
const WAIT_MS = 4 * PASS_INTERVAL_MS + 4_000;

const minioStarting = useMinio();
let store: Store;
let admin: Signer;
const nodes: SailProcess[] = [];

before(async () => {
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'));
  await ensureDeployedApplication(store, 'steady', { replicas: 1 });
  for (const id of ['node-a', 'node-b']) {
    nodes.push(
      await startSail(
        [
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
          '--node-id',
          id,
          '--cell-bin',
          CELL_STANDIN,
          '--coordinator-lease-ttl-ms',
          String(TTL_MS),
          '--registry-resync-ms',
          '500',
          '--registry-node-refresh-ms',
          '500',
        ],
        { env: { SVC_LOG_LEVEL: 'info' } },
      ),
    );
  }
});

after(async () => {
  for (const node of nodes) if (node.child.signalCode === null) node.child.kill('SIGCONT');
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: tests read the state document member by member.
async function state(node: SailProcess): Promise<any> {
  const answer = await call(node.url, 'GET', '/v1/state', { signer: admin });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

async function placements(): Promise<PlacementRecord[]> {
  const listing = await store.list(keys.appsPrefix, { recursive: true });
  const found = await Promise.all(
    listing.objects
      .filter((o) => o.key.endsWith('/placement.json'))
      .map((o) => getJson<PlacementRecord>(store, o.key)),
  );
  return found.filter((f) => f !== null).map((f) => f.value);
}

/** The placement writes a node logged (event `placement.written`), with their fences. */
function loggedWrites(node: SailProcess, from: number): { application: string; fence: number }[] {
  return node
    .log()
    .slice(from)
    .split('\n')
    .filter((line) => line.includes('"placement.written"'))
    .map((line) => JSON.parse(line) as { application: string; fence: number });
}

test('a coordinator stopped past its lease makes no write under its stale fence once resumed', async () => {
  const first = await waitFor(
    async () => {
      const states = await Promise.all(nodes.map(state));
      const self = states.find((s) => s.coordinator?.self);
      const placed = states[0].placements.find((p: { application: string }) => p.application === 'steady');
      return self && placed?.state === 'placed' ? self.coordinator : null;
    },
    'a coordinator that placed the first application',
    WAIT_MS,
  );
  const stale = nodes.find((n) => n.nodeId === first.node)!;
  const other = nodes.find((n) => n !== stale)!;

  stale.child.kill('SIGSTOP');
  const takeover = await waitFor(
    async () => {
      const view = (await state(other)).coordinator;
      return view?.self && view.fence > first.fence ? view : null;
    },
    'the other node coordinating under a higher fence',
    TTL_MS + PASS_INTERVAL_MS + 4_000,
  );
  // Work the stale coordinator would do on resuming: a new application and a changed one.
  await ensureDeployedApplication(store, 'fresh', { replicas: 2 });
  await setReplicas(store, 'steady', 2);
  await waitFor(
    async () => {
      const all = await placements();
      return all.length === 2 && all.every((p) => p.fence === takeover.fence && p.nodes.length === 2);
    },
    'the new coordinator placing both under its fence',
    WAIT_MS,
  );

  // A placement the resumed node would "correct" at once if it still acted as coordinator (the
  // new coordinator corrects it too, on its own next pass, under its own fence).
  const fresh = (await getJson<PlacementRecord>(store, keys.placement('fresh')))!;
  await putJson(store, keys.placement('fresh'), { ...fresh.value, nodes: [] });
  const logFrom = stale.log().length;
  const resumedAt = Date.now();
  stale.child.kill('SIGCONT');
  // Two full passes of the resumed node, so it had every chance to write.
  const passesAt = (await state(stale)).reconcile.passes;
  const after = await waitFor(
    async () => {
      const s = await state(stale);
      return s.reconcile.passes >= passesAt + 2 ? s : null;
    },
    'two passes of the resumed node',
    WAIT_MS,
  );
  assert.equal(after.coordinator.self, false);
  assert.equal(after.coordinator.node, other.nodeId);
  assert.equal(after.coordinator.fence, takeover.fence);
  for (const placement of await placements()) {
    const late = Date.parse(placement.decidedAt) >= resumedAt;
    assert.ok(!(late && placement.fence <= first.fence), `stale write: ${JSON.stringify(placement)}`);
    assert.equal(placement.fence, takeover.fence);
  }
  assert.deepEqual(
    loggedWrites(stale, logFrom).filter((w) => w.fence <= first.fence),
    [],
    'the resumed node logged no write under its old fence',
  );
  assert.match(stale.log().slice(logFrom), /"coordinator\.lost"/);
});
