import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  addTotals,
  countRequest,
  emptyTotals,
  encodeTotals,
  LATENCY_BOUNDS_MS,
  latencyQuantile,
  readTotals,
  subtractTotals,
} from './totals.ts';

const request = (status: number, durationMs: number) => ({ status, bytesIn: 3, bytesOut: 10, durationMs });

test('counting: statuses by class, bytes, latency buckets', () => {
  const t = emptyTotals();
  for (const [status, ms] of [
    [200, 0.4],
    [204, 4],
    [301, 9],
    [404, 40],
    [500, 400],
    [0, 40_000],
  ] as const)
    countRequest(t, request(status, ms));
  assert.equal(t.requests, 6);
  assert.equal(t.bytesIn, 18);
  assert.equal(t.bytesOut, 60);
  assert.deepEqual(t.status, { '1xx': 0, '2xx': 2, '3xx': 1, '4xx': 1, '5xx': 1, other: 1 });
  assert.equal(t.latency[0], 1, '0.4 ms in the first bucket');
  assert.equal(t.latency[LATENCY_BOUNDS_MS.length], 1, '40 s in the open bucket');
});

test('quantiles: the bound of the bucket holding the rank', () => {
  const t = emptyTotals();
  for (let i = 0; i < 90; i++) countRequest(t, request(200, 4));
  for (let i = 0; i < 9; i++) countRequest(t, request(200, 90));
  countRequest(t, request(200, 2_500));
  assert.equal(latencyQuantile(t.latency, 0.5), 5);
  assert.equal(latencyQuantile(t.latency, 0.9), 5);
  assert.equal(latencyQuantile(t.latency, 0.99), 100);
  assert.equal(latencyQuantile(t.latency, 1), 3_000);
  assert.equal(latencyQuantile(emptyTotals().latency, 0.5), null);
});

test('a window is a subtraction; a counter that went down was reset', () => {
  const a = emptyTotals();
  countRequest(a, request(200, 1));
  const b = readTotals(JSON.parse(JSON.stringify(encodeTotals(a))));
  countRequest(b, request(500, 1));
  const d = subtractTotals(b, a);
  assert.equal(d.requests, 1);
  assert.equal(d.status['5xx'], 1);
  assert.equal(d.status['2xx'], 0);
  const reset = subtractTotals(a, b);
  assert.equal(reset.requests, 1, 'after a reset the later value is all new');
  assert.equal(addTotals(emptyTotals(), d).requests, 1);
});

test('malformed stored totals read as zeros', () => {
  for (const junk of [null, 5, 'x', { requests: 1 }, [-1, 'a', 1.5, null]]) {
    const t = readTotals(junk);
    assert.ok(t.requests === 0 && t.bytesIn === 0 && t.latency.every((n) => Number.isSafeInteger(n)));
  }
});

test('the stored form round-trips', () => {
  const t = emptyTotals();
  for (const [status, ms] of [
    [200, 3],
    [503, 700],
    [404, 40_000],
  ] as const)
    countRequest(t, request(status, ms));
  assert.deepEqual(readTotals(encodeTotals(t)), t);
  assert.equal(encodeTotals(emptyTotals()).length, 9, 'no latency buckets when none counted');
});
