import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lastResortCollection, settleMemory } from './memory-settle.ts';

test('lastResortCollection: V8 collection without a gc on the global', () => {
  const collect = lastResortCollection();
  assert.equal(typeof collect, 'function');
  assert.equal((globalThis as { gc?: unknown }).gc, undefined);
  let kept: object[] | null = Array.from({ length: 200_000 }, (_, i) => ({ i }));
  assert.equal(kept.length, 200_000);
  kept = null;
  const before = process.memoryUsage().heapUsed;
  collect!();
  assert.ok(process.memoryUsage().heapUsed < before, 'the garbage was collected');
});

test('settleMemory: collects after growth, not twice within the gap, and measures from where it settled', () => {
  let rss = 100;
  let clock = 0;
  let collections = 0;
  const settler = settleMemory({
    collect: () => {
      collections++;
      rss = 110;
    },
    rss: () => rss,
    now: () => clock,
    growthBytes: 20,
    gapMs: 60,
    checkMs: 1_000_000,
  });
  try {
    rss = 119;
    assert.equal(settler.check(), false, 'growth under the threshold');
    rss = 130;
    assert.equal(settler.check(), true);
    assert.equal(collections, 1);
    rss = 200;
    clock = 30;
    assert.equal(settler.check(), false, 'within the gap');
    clock = 61;
    assert.equal(settler.check(), true, 'past the gap');
    assert.equal(collections, 2);
    rss = 125;
    clock = 200;
    assert.equal(settler.check(), false, '15 over where it settled (110)');
    rss = 131;
    assert.equal(settler.check(), true);
  } finally {
    settler.stop();
  }
});

test('settleMemory: does nothing where no collection can be had', () => {
  let rss = 0;
  const settler = settleMemory({
    collect: null,
    rss: () => rss,
    growthBytes: 1,
    gapMs: 0,
    checkMs: 1_000_000,
  });
  rss = 1e9;
  assert.equal(settler.check(), false);
  settler.stop();
});
