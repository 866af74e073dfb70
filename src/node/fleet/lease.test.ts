// The coordinator lease on a real local-directory bucket with driven clocks: taken when absent or
// expired, never while held, fence grows on every change of holder and is never reused, the body
// changes on every renewal, a holder past its margin stops acting, and fenced writes are refused
// with `lease-lost` once a newer fence exists.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { refuses, tempStore } from '../../../test/helpers/temp-store.ts';
import { keys } from '../../registry/keys.ts';
import type { CoordinatorLease } from '../../registry/records.ts';
import { getJson, putJson } from '../../store/store.ts';
import { type LeaseClock, LeaseKeeper } from './lease.ts';

const TTL = 3_000;

/** One clock per node: wall shared (a fleet's clocks agree here), monotonic per process. */
function clocks() {
  let wall = 1_000_000;
  const monos = new Map<string, number>();
  return {
    advance(ms: number) {
      wall += ms;
      for (const [k, v] of monos) monos.set(k, v + ms);
    },
    /** A stopped process: the wall moves, and so does its monotonic clock (SIGSTOP does not pause it). */
    clockFor(name: string): LeaseClock {
      monos.set(name, 0);
      return { wall: () => wall, mono: () => monos.get(name)! };
    },
  };
}

test('one holder at a time; a takeover after expiry raises the fence', async () => {
  const store = await tempStore();
  const time = clocks();
  const a = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a') });
  const b = new LeaseKeeper({ store, nodeId: 'b', ttlMs: TTL, clock: time.clockFor('b') });
  assert.equal(await a.tryAcquire(), true);
  assert.equal(a.fence(), 1);
  assert.equal(await b.tryAcquire(), false, 'held and unexpired: not taken');
  assert.deepEqual(b.view(), { node: 'a', fence: 1 });
  assert.equal(b.isCoordinator(), false);

  time.advance(TTL + 1);
  assert.equal(a.isCoordinator(), false, 'past its lifetime the holder stops acting');
  assert.equal(b.view(), null, 'an expired lease gives no coordinator');
  assert.equal(await b.tryAcquire(), true);
  assert.equal(b.fence(), 2);
  assert.equal(await a.tryAcquire(), false);
  assert.deepEqual(a.view(), { node: 'b', fence: 2 });
});

test('renewal changes the body and keeps the fence; a holder that cannot renew stops before expiry', async () => {
  const store = await tempStore();
  const time = clocks();
  const a = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a') });
  await a.tryAcquire();
  const before = await store.get(keys.coordinatorLease);
  time.advance(1);
  assert.equal(await a.renew(), true);
  const after = await store.get(keys.coordinatorLease);
  assert.notEqual(after!.etag, before!.etag, 'a renewal must change the ETag');
  assert.equal(a.fence(), 1);
  // No renewal for the lifetime minus the margin: the holder stops acting while the lease is
  // still unexpired for everyone else.
  time.advance(TTL - a.marginMs);
  assert.equal(a.isCoordinator(), false);
  const stored = (await getJson<CoordinatorLease>(store, keys.coordinatorLease))!.value;
  assert.ok(stored.expiresMs > 1_000_000 + 1 + TTL - a.marginMs, 'others still see it held');
});

test('release expires the lease in place; the next holder gets a higher fence, never a reused one', async () => {
  const store = await tempStore();
  const time = clocks();
  const a = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a') });
  const b = new LeaseKeeper({ store, nodeId: 'b', ttlMs: TTL, clock: time.clockFor('b') });
  await a.tryAcquire();
  await a.release();
  assert.equal(a.isCoordinator(), false);
  assert.equal(await b.tryAcquire(), true, 'a released lease is taken at once');
  assert.equal(b.fence(), 2);
  // Someone deletes the object: a fence seen elsewhere (a placement) still keeps the next one above it.
  await store.delete(keys.coordinatorLease);
  const c = new LeaseKeeper({ store, nodeId: 'c', ttlMs: TTL, clock: time.clockFor('c') });
  c.noteFence(7);
  assert.equal(await c.tryAcquire(), true);
  assert.equal(c.fence(), 8);
});

test('a fenced write is refused with lease-lost once a newer fence exists', async () => {
  const store = await tempStore();
  const time = clocks();
  let lost = '';
  const a = new LeaseKeeper({
    store,
    nodeId: 'a',
    ttlMs: TTL,
    clock: time.clockFor('a'),
    onLost: (why) => {
      lost = why;
    },
  });
  await a.tryAcquire();
  assert.equal(await a.assertFence(0), 1);
  // Another writer takes the lease behind a's back (a clock far ahead, a manual edit): a's local
  // clock still says it may act, but the bucket names a newer fence.
  const current = (await getJson<CoordinatorLease>(store, keys.coordinatorLease))!;
  await putJson(
    store,
    keys.coordinatorLease,
    { ...current.value, node: 'z', fence: 2 },
    { ifMatch: current.etag },
  );
  await refuses(() => a.assertFence(0), 'lease-lost', 'Coordinator lease lost');
  assert.equal(a.isCoordinator(), false);
  assert.match(lost, /fence 2/);
  // And the renewal of a lease someone else wrote is lost, not forced through.
  assert.equal(await a.renew(), false);
  assert.equal((await getJson<CoordinatorLease>(store, keys.coordinatorLease))!.value.node, 'z');
});

test('a holder stopped past its lifetime makes no fenced write when it resumes', async () => {
  const store = await tempStore();
  const time = clocks();
  const a = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a') });
  const b = new LeaseKeeper({ store, nodeId: 'b', ttlMs: TTL, clock: time.clockFor('b') });
  await a.tryAcquire();
  await a.assertFence(0);
  time.advance(TTL + 1); // a is stopped meanwhile
  await b.tryAcquire();
  // a resumes: its last bucket check is recent in count of calls, but not in time.
  await refuses(() => a.assertFence(), 'lease-lost', 'Coordinator lease lost');
  assert.equal(await a.renew(), false);
  assert.deepEqual(b.view(), { node: 'b', fence: 2 });
});

test('a lease left by an earlier run of this node is taken back under a new fence', async () => {
  const store = await tempStore();
  const time = clocks();
  const first = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a1') });
  await first.tryAcquire();
  const second = new LeaseKeeper({ store, nodeId: 'a', ttlMs: TTL, clock: time.clockFor('a2') });
  assert.equal(await second.tryAcquire(), true);
  assert.equal(second.fence(), 2);
  await refuses(() => first.assertFence(0), 'lease-lost', 'Coordinator lease lost');
});
