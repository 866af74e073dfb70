// The CLI's hold on the coordinator lease (`svc app delete` through the bucket): it takes the
// lease by the nodes' rules, fence floor included, holds it while the work runs and lets it go.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { LeaseKeeper } from '../node/fleet/lease.ts';
import { Problem } from '../problem.ts';
import { readCoordinatorLease } from '../registry/coordinator-lease.ts';
import { keys } from '../registry/keys.ts';
import type { CoordinatorLease, PlacementRecord } from '../registry/records.ts';
import { openDirStore } from '../store/dir.ts';
import { putJson } from '../store/store.ts';
import { withCliCoordinatorLease } from './cli-lease.ts';

async function tempStore(t: TestContext) {
  const dir = await mkdtemp(join(tmpdir(), 'svc-cli-lease-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return openDirStore(join(dir, 'bucket'));
}

test('with no lease object, the fence is taken above every placement, as a node would', async (t) => {
  const store = await tempStore(t);
  const placement: PlacementRecord = { v: 1, application: 'shop', nodes: ['n1'], fence: 7, decidedAt: '' };
  await putJson(store, keys.placement('shop'), placement);
  const during = await withCliCoordinatorLease(store, () => readCoordinatorLease(store));
  assert.equal(during!.lease.fence, 8, 'one above the placement written under fence 7');
  assert.match(during!.lease.node, /^cli-/);
  assert.ok(during!.lease.expiresMs > Date.now(), 'held while the work ran');
  const after = await readCoordinatorLease(store);
  assert.equal(after!.lease.fence, 8, 'released in place, fence kept');
  assert.ok(after!.lease.expiresMs <= Date.now(), 'and let go');
  // The next node takes a fence above the command's.
  const node = new LeaseKeeper({ store, nodeId: 'n1', ttlMs: 3_000 });
  assert.equal(await node.tryAcquire(), true);
  assert.equal(node.fence(), 9);
  await node.release();
});

test('a live coordinator refuses the command with lease-lost naming it; nothing runs', async (t) => {
  const store = await tempStore(t);
  const stamp = new Date().toISOString();
  const live: CoordinatorLease = {
    v: 1,
    node: 'node-live',
    fence: 3,
    acquiredAt: stamp,
    renewedAt: stamp,
    expiresMs: Date.now() + 600_000,
  };
  await putJson(store, keys.coordinatorLease, live);
  let ran = false;
  await assert.rejects(
    withCliCoordinatorLease(store, async () => {
      ran = true;
    }),
    (err: unknown) =>
      err instanceof Problem &&
      err.code === 'lease-lost' &&
      err.title === 'A node is coordinating' &&
      /node-live .*--node/.test(err.detail ?? ''),
  );
  assert.equal(ran, false);
  assert.deepEqual((await readCoordinatorLease(store))!.lease, live);
});
