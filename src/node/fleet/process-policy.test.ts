import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DEFAULT_RESTART_POLICY, judgeExit, PortPool, restartDelayMs } from './process-policy.ts';

test('ports are handed out lowest first and held until released', () => {
  const pool = new PortPool([24000, 24002], 1000);
  assert.equal(pool.take('a', 0), 24000);
  assert.equal(pool.take('b', 0), 24001);
  assert.equal(pool.take('c', 0), 24002);
  assert.equal(pool.take('d', 0), null);
});

test('a released port is quarantined from other applications until the quarantine ends', () => {
  const pool = new PortPool([24000, 24001], 1000);
  assert.equal(pool.take('a', 0), 24000);
  pool.release(24000, 100);
  assert.equal(pool.take('b', 500), 24001);
  assert.equal(pool.take('c', 1099), null, 'still quarantined one ms before the end');
  assert.equal(pool.take('c', 1100), 24000);
});

test('the releasing application takes its own port back first, even in quarantine', () => {
  const pool = new PortPool([24000, 24005], 1000);
  pool.take('a', 0);
  pool.take('b', 0);
  pool.release(24001, 10);
  assert.equal(pool.take('b', 20), 24001);
});

test('unusable ports are skipped; forget drops a hold without quarantine', () => {
  const pool = new PortPool([24000, 24002], 1000);
  assert.equal(pool.take('a', 0, new Set([24000])), 24001);
  const port = pool.take('b', 0)!;
  assert.equal(port, 24000);
  pool.forget(port);
  assert.equal(pool.take('c', 0), 24000, 'a forgotten port is not quarantined');
});

test('property: no port is ever held twice, and never given to another within the quarantine', () => {
  const ops = fc.array(
    fc.oneof(
      fc.record({ take: fc.constantFrom('a', 'b', 'c', 'd') }),
      fc.record({ release: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ advance: fc.integer({ min: 0, max: 600 }) }),
    ),
    { maxLength: 60 },
  );
  fc.assert(
    fc.property(ops, (steps) => {
      const pool = new PortPool([1, 4], 1000);
      const held = new Map<number, string>();
      const released = new Map<number, { app: string; at: number }>();
      let now = 0;
      for (const step of steps) {
        if ('advance' in step) now += step.advance;
        else if ('release' in step) {
          const port = [...held.keys()].sort()[step.release];
          if (port === undefined) continue;
          released.set(port, { app: held.get(port)!, at: now });
          held.delete(port);
          pool.release(port, now);
        } else {
          const port = pool.take(step.take, now);
          if (port === null) continue;
          assert.ok(!held.has(port), `port ${port} handed out twice`);
          const before = released.get(port);
          if (before && before.app !== step.take) assert.ok(now - before.at >= 1000, 'quarantine broken');
          held.set(port, step.take);
        }
      }
    }),
  );
});

test('backoff doubles from the base and is capped', () => {
  const policy = { ...DEFAULT_RESTART_POLICY, baseDelayMs: 100, maxDelayMs: 1000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 100].map((n) => restartDelayMs(policy, n)),
    [100, 200, 400, 800, 1000, 1000, 1000],
  );
  assert.equal(restartDelayMs(policy, 0), 100);
});

test('fast exits count up to crashloop; a stable run starts over', () => {
  const policy = { baseDelayMs: 100, maxDelayMs: 1000, stableMs: 5000, crashloopAfter: 3 };
  let fast = 0;
  const seen = [];
  for (let i = 0; i < 4; i++) {
    const judged = judgeExit(policy, fast, 10);
    fast = judged.fastExits;
    seen.push([judged.fastExits, judged.delayMs, judged.crashloop]);
  }
  assert.deepEqual(seen, [
    [1, 100, false],
    [2, 200, false],
    [3, 400, true],
    [4, 800, true],
  ]);
  assert.deepEqual(judgeExit(policy, fast, 5000), { fastExits: 0, delayMs: 100, crashloop: false });
});

test('a pool restored from a previous run gives each application its port back, quarantined from the rest', () => {
  const pool = new PortPool([24000, 24003], 1000, {
    restored: {
      nowMs: 5000,
      assignments: [
        { port: 24000, application: 'b' },
        { port: 24001, application: 'a', releasedAtMs: 4500 },
        { port: 23999, application: 'z' },
      ],
    },
  });
  assert.equal(pool.take('c', 5000), 24002, 'both restored ports are kept from a third application');
  assert.equal(pool.take('a', 5000), 24001, 'a takes back the port it had released');
  assert.equal(pool.take('b', 5000), 24000, 'b takes back the port it held when the run ended');
  assert.equal(pool.take('z', 5000), 24003, 'a port outside the range is not restored');
});

test('a restored held port is quarantined from the time it is restored, not from the last run', () => {
  const pool = new PortPool([24000, 24001], 1000, {
    restored: { nowMs: 100_000, assignments: [{ port: 24000, application: 'b' }] },
  });
  assert.equal(pool.take('c', 100_999), 24001);
  assert.equal(pool.take('d', 100_999), null, 'still kept from d one ms before the end');
  assert.equal(pool.take('d', 101_000), 24000);
});

test('every change is reported with all assignments', () => {
  const seen: unknown[] = [];
  const pool = new PortPool([24000, 24002], 1000, { onChange: (a) => seen.push(a) });
  pool.take('a', 0);
  pool.release(24000, 10);
  pool.claim(24001, 'b');
  pool.forget(24001);
  assert.deepEqual(seen, [
    [{ port: 24000, application: 'a' }],
    [{ port: 24000, application: 'a', releasedAtMs: 10 }],
    [
      { port: 24000, application: 'a', releasedAtMs: 10 },
      { port: 24001, application: 'b' },
    ],
    [{ port: 24000, application: 'a', releasedAtMs: 10 }],
  ]);
});
