// The coordinator lease rules both holders share (the daemon's LeaseKeeper and the CLI's bucket
// path): a new fence lies above the lease's and above the floor, a live lease of another holder
// is never taken, renewals change the body and keep the fence, a release expires in place, a
// conditional write that lost answers null, and the placement fence floor is read from the bucket.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import fc from 'fast-check';
import { openDirStore } from '../store/dir.ts';
import { putJson } from '../store/store.ts';
import {
  expiredLease,
  highestPlacementFence,
  leaseToTake,
  nextFence,
  readCoordinatorLease,
  renewedLease,
  writeCoordinatorLease,
} from './coordinator-lease.ts';
import { keys } from './keys.ts';
import type { CoordinatorLease, PlacementRecord } from './records.ts';

const NOW = 1_800_000_000_000;
const TTL = 3_000;

function lease(node: string, fence: number, expiresMs: number): CoordinatorLease {
  const stamp = new Date(NOW).toISOString();
  return { v: 1, node, fence, acquiredAt: stamp, renewedAt: stamp, expiresMs };
}

async function tempStore(t: TestContext) {
  const dir = await mkdtemp(join(tmpdir(), 'svc-lease-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return openDirStore(join(dir, 'bucket'));
}

test('a new fence is one above both the lease and the floor, whichever is higher', () => {
  assert.equal(nextFence(null, 0), 1);
  assert.equal(nextFence(lease('a', 3, NOW), 0), 4);
  assert.equal(nextFence(lease('a', 3, NOW), 7), 8, 'a placement fence above the lease raises the floor');
  assert.equal(nextFence(null, 7), 8, 'a deleted lease object does not bring fences back to 1');
  fc.assert(
    fc.property(fc.option(fc.nat()), fc.nat(), (fence, floor) => {
      const next = nextFence(fence === null ? null : lease('a', fence, NOW), floor);
      assert.ok(next > floor && next > (fence ?? 0));
    }),
  );
});

test('a live lease of another holder is not taken; an expired one, or one left by the same holder, is', () => {
  assert.equal(leaseToTake(lease('a', 1, NOW + 1), 'b', 0, NOW, TTL), null);
  assert.deepEqual(leaseToTake(lease('a', 1, NOW), 'b', 0, NOW, TTL), lease('b', 2, NOW + TTL));
  assert.equal(leaseToTake(lease('b', 1, NOW + 1), 'b', 5, NOW, TTL)!.fence, 6, 'left by an earlier run');
  assert.equal(leaseToTake(null, 'b', 4, NOW, TTL)!.fence, 5);
});

test('renewal changes the body and keeps holder and fence; release expires in place', () => {
  const held = lease('a', 4, NOW + TTL);
  const renewed = renewedLease(held, NOW + 1_000, TTL);
  assert.deepEqual([renewed.node, renewed.fence, renewed.expiresMs], ['a', 4, NOW + 1_000 + TTL]);
  assert.notEqual(renewed.renewedAt, held.renewedAt);
  const released = expiredLease(held, NOW + 2_000);
  assert.deepEqual([released.node, released.fence, released.expiresMs], ['a', 4, NOW + 2_000]);
});

test('the lease is written on the ETag seen; a write that lost answers null', async (t) => {
  const store = await tempStore(t);
  assert.equal(await readCoordinatorLease(store), null);
  const first = await writeCoordinatorLease(store, lease('a', 1, NOW + TTL), null);
  assert.ok(first);
  assert.equal(await writeCoordinatorLease(store, lease('b', 1, NOW + TTL), null), null, 'it exists now');
  const second = await writeCoordinatorLease(store, lease('a', 1, NOW + 2 * TTL), first);
  assert.ok(second);
  assert.equal(await writeCoordinatorLease(store, lease('b', 2, NOW + TTL), first), null, 'stale ETag');
  assert.deepEqual(await readCoordinatorLease(store), { lease: lease('a', 1, NOW + 2 * TTL), etag: second });
});

test('the placement fence floor is the highest fence of any placement record', async (t) => {
  const store = await tempStore(t);
  assert.equal(await highestPlacementFence(store), 0);
  const placement = (application: string, fence: number): PlacementRecord => ({
    v: 1,
    application,
    nodes: ['n1'],
    fence,
    decidedAt: new Date(NOW).toISOString(),
  });
  await putJson(store, keys.placement('shop'), placement('shop', 3));
  await putJson(store, keys.placement('blog'), placement('blog', 7));
  await putJson(store, keys.application('bare'), { v: 1, name: 'bare' });
  await store.put(keys.placement('torn'), '{"fence": ');
  assert.equal(await highestPlacementFence(store), 7);
});
