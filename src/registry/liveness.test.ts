// The liveness tracker (docs/fleet.md "Liveness"): judgements from prompt listings only; an
// outage or a slow bucket is never taken for a death; a reader that just started waits a window.
// Driven with explicit clocks: each listing says when it was sent and answered.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isNodeLive, type ListedRecord, LivenessTracker, NODE_DEAD_AFTER_MS } from './liveness.ts';

const WINDOWS = { deadAfterMs: 9_000, lostAfterMs: 30_000 };
/** Wall time at monotonic 0: the clocks of the reader and of the bucket agree unless a test skews them. */
const WALL0 = 1_800_000_000_000;

/**
 * A fleet of node records as the bucket holds them; `beat` rewrites one (new ETag, new time on
 * the bucket's clock, `skewMs` off the reader's). The reader's own record is `self`.
 */
class Bucket {
  readonly records = new Map<string, { etag: string; modified: Date; landedMono: number }>();
  #n = 0;
  skewMs = 0;

  beat(id: string, atMono: number): void {
    // 37 ms past the tick: a time with milliseconds, as MinIO and a directory give.
    const modified = new Date(WALL0 + atMono + 37 + this.skewMs);
    this.records.set(id, { etag: `e${++this.#n}`, modified, landedMono: atMono + 37 });
  }

  listing(): ListedRecord[] {
    return [...this.records]
      .filter(([id]) => id !== 'self')
      .map(([id, r]) => ({ id, etag: r.etag, modified: r.modified }));
  }
}

/** One listing sent at `atMono` and answered `tookMs` later, with the reader's own record when it has one. */
function list(tracker: LivenessTracker, bucket: Bucket, atMono: number, tookMs = 20) {
  const own = bucket.records.get('self');
  return tracker.observe(bucket.listing(), {
    sentMono: atMono,
    doneMono: atMono + tookMs,
    sentWall: WALL0 + atMono,
    ...(own ? { own: { modified: own.modified, landedByMono: own.landedMono + 15 } } : {}),
  });
}

/**
 * Runs the fleet from `from` to `to`: each node in `beating` beats every 5 s (offset by its
 * index), the reader lists every 5 s at `phase`; answers every change the listings reported.
 */
function run(
  tracker: LivenessTracker,
  bucket: Bucket,
  from: number,
  to: number,
  beating: string[],
  options: { phase?: number; failing?: (t: number) => boolean } = {},
) {
  const changes: { at: number; dead: string[]; lost: string[]; back: string[] }[] = [];
  for (let t = from; t < to; t += 100) {
    for (const [i, id] of beating.entries()) if ((t - 1_300 * i) % 5_000 === 0) bucket.beat(id, t);
    if ((t - (options.phase ?? 700)) % 5_000 !== 0) continue;
    if (options.failing?.(t)) {
      tracker.trouble(t);
      continue;
    }
    const change = list(tracker, bucket, t);
    if (change.dead.length || change.lost.length || change.back.length) changes.push({ at: t, ...change });
  }
  return changes;
}

test('nodes that keep beating are never judged, whatever the listings phase', () => {
  for (const phase of [0, 100, 2_500, 4_900]) {
    const tracker = new LivenessTracker(WINDOWS);
    const bucket = new Bucket();
    assert.deepEqual(run(tracker, bucket, 0, 300_000, ['b', 'c'], { phase }), [], `phase ${phase}`);
    assert.equal(tracker.isDead('b') || tracker.isDead('c'), false);
  }
});

test('a node that stops beating is dead after the dead window and lost after the lost window, once', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 60_000, ['b', 'c']);
  // b's last beat lands at 55,000 (its beats: every 5 s from 0); from 60,000 only c beats.
  const changes = run(tracker, bucket, 60_000, 120_000, ['c']);
  assert.deepEqual(changes, [
    { at: 65_700, dead: ['b'], lost: [], back: [] },
    { at: 85_700, dead: [], lost: ['b'], back: [] },
  ]);
  assert.ok(tracker.isDead('b') && tracker.isLost('b'));
  assert.ok(!tracker.isDead('c'));
  // Dead after 65.7 - 55.0 = 10.7 s of silence: more than the window, less than window + a listing interval.
  // Beating again brings it back at the next listing.
  bucket.beat('b', 120_000);
  assert.deepEqual(list(tracker, bucket, 120_700), { dead: [], lost: [], back: ['b'] });
  assert.ok(!tracker.isDead('b') && !tracker.isLost('b'));
});

test('a bucket outage longer than every window judges nobody; a node that did not come back is judged a window after the return', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 60_000, ['b', 'c', 'd']);
  // 60 s without the bucket: nobody's beat lands, every listing fails.
  const outage = (t: number) => t < 120_000;
  assert.deepEqual(run(tracker, bucket, 60_000, 120_000, [], { failing: outage }), []);
  // The bucket is back; b and c beat again, d never does.
  const changes = run(tracker, bucket, 120_000, 200_000, ['b', 'c']);
  assert.deepEqual(changes, [
    { at: 130_700, dead: ['d'], lost: [], back: [] },
    { at: 155_700, dead: [], lost: ['d'], back: [] },
  ]);
  assert.ok(!tracker.isDead('b') && !tracker.isDead('c') && !tracker.isLost('c'));
});

test('the first listing after an outage shows every record stale: no judgement until a window has passed since', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 30_000, ['b']);
  tracker.trouble(30_000);
  // 40 s later the bucket answers; b has not beaten yet (its beat loop is still waiting on a request).
  assert.deepEqual(list(tracker, bucket, 70_000), { dead: [], lost: [], back: [] });
  assert.deepEqual(list(tracker, bucket, 75_000), { dead: [], lost: [], back: [] });
  bucket.beat('b', 78_500);
  assert.deepEqual(list(tracker, bucket, 79_000), { dead: [], lost: [], back: [] });
  assert.ok(!tracker.isDead('b'));
});

test('a slow listing is no evidence, and counts as trouble', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 30_000, ['b']);
  // The bucket answers in 8 s: b's beats do not land either.
  for (const t of [30_700, 38_700, 46_700]) assert.deepEqual(list(tracker, bucket, t, 8_000).dead, []);
  // Prompt again: a whole window from here before b can be judged.
  assert.deepEqual(list(tracker, bucket, 55_000).dead, []);
  assert.deepEqual(list(tracker, bucket, 60_000).dead, []);
  assert.deepEqual(list(tracker, bucket, 64_100).dead, ['b']);
});

test('trouble reported while a listing was in flight makes that listing no evidence', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 30_000, ['b']);
  tracker.trouble(41_000); // this node's own heartbeat failed during the listing below
  assert.deepEqual(list(tracker, bucket, 40_000).dead, []);
  assert.deepEqual(list(tracker, bucket, 45_000).dead, [], 'a window from the first prompt listing after it');
  assert.deepEqual(list(tracker, bucket, 54_100).dead, ['b']);
});

test('a node judged dead before an outage stays dead through it and after it', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 30_000, ['b', 'c']);
  run(tracker, bucket, 30_000, 50_000, ['c']);
  assert.ok(tracker.isDead('b') && !tracker.isLost('b'));
  run(tracker, bucket, 50_000, 90_000, [], { failing: (t) => t < 90_000 });
  run(tracker, bucket, 90_000, 100_000, ['c']);
  assert.ok(tracker.isDead('b'), 'no resurrection from an outage');
  assert.ok(!tracker.isLost('b'), 'the lost window starts again from the return');
  assert.ok(!tracker.isDead('c'));
});

test('a reader that just started judges nobody for a window, except records older than the fixed window', () => {
  const bucket = new Bucket();
  bucket.beat('long-gone', 0);
  bucket.beat('silent', 100_000);
  bucket.beat('beating', 108_000);
  const tracker = new LivenessTracker(WINDOWS);
  assert.deepEqual(list(tracker, bucket, 110_000), { dead: ['long-gone'], lost: [], back: [] });
  assert.ok(!tracker.isDead('silent'), 'a record 10 s old at first sight is not evidence yet');
  bucket.beat('beating', 113_000);
  assert.deepEqual(list(tracker, bucket, 115_000).dead, []);
  bucket.beat('beating', 118_000);
  assert.deepEqual(list(tracker, bucket, 119_100).dead, ['silent']);
  assert.ok(!tracker.isLost('long-gone'), 'placements wait the whole lost window');
  assert.deepEqual(list(tracker, bucket, 140_100).lost.sort(), ['long-gone', 'silent']);
});

test('the bucket clock off the reader clock: dated against the reader own record, judged as if in step', () => {
  for (const skewMs of [-30_000, -5_000, 0, 5_000, 30_000]) {
    const tracker = new LivenessTracker(WINDOWS);
    const bucket = new Bucket();
    bucket.skewMs = skewMs;
    assert.deepEqual(run(tracker, bucket, 0, 120_000, ['b', 'self']), [], `skew ${skewMs}`);
    // b's last beat lands at 115,037: dead at the first listing more than 9 s after it.
    const changes = run(tracker, bucket, 120_000, 160_000, ['self']);
    assert.deepEqual(changes[0], { at: 125_700, dead: ['b'], lost: [], back: [] }, `skew ${skewMs}`);
  }
});

test('without its own record, a reader dates beats by the wall clocks and never before the previous listing', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  bucket.skewMs = 60_000; // the bucket's clock a minute ahead: beats look newer than they are
  assert.deepEqual(run(tracker, bucket, 0, 60_000, ['b']), []);
  const changes = run(tracker, bucket, 60_000, 100_000, []);
  // Dated at the latest moment it can have landed (the listing that saw it, 55,720), not a minute on.
  assert.deepEqual(changes[0], { at: 65_700, dead: ['b'], lost: [], back: [] });
});

test('a node whose record leaves the listing is forgotten', () => {
  const tracker = new LivenessTracker(WINDOWS);
  const bucket = new Bucket();
  run(tracker, bucket, 0, 60_000, ['b']);
  bucket.records.delete('b');
  list(tracker, bucket, 60_700);
  assert.equal(tracker.isDead('b'), false);
});

test('readers without history: the record beat by the clock, with the fixed window', () => {
  const now = WALL0;
  assert.equal(isNodeLive({ beatMs: now - NODE_DEAD_AFTER_MS }, now), true);
  assert.equal(isNodeLive({ beatMs: now - NODE_DEAD_AFTER_MS - 1 }, now), false);
});
