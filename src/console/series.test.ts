// The console's chart series (docs/console.md "One application"): differences of each node's
// monotonic snapshots, summed across nodes into steps; a node's first snapshot counts from zero,
// one before the window is its baseline; other applications are left out.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { hourOf } from '../observability/hours.ts';
import { countRequest, emptyTotals, encodeTotals } from '../observability/totals.ts';
import { keys } from '../registry/keys.ts';
import { putJson } from '../store/store.ts';
import { readSeries } from './series.ts';

const MINUTE = 60_000;
const NOW = Date.parse('2026-11-26T12:00:00Z');
const SINCE = NOW - 60 * MINUTE;

/** Totals of `ok` 2xx answers and `failed` 5xx ones, each taking `ms`. */
function totals(ok: number, failed: number, ms: number): number[] {
  const t = emptyTotals();
  for (let i = 0; i < ok; i++) countRequest(t, { status: 200, bytesIn: 0, bytesOut: 0, durationMs: ms });
  for (let i = 0; i < failed; i++) countRequest(t, { status: 500, bytesIn: 0, bytesOut: 0, durationMs: ms });
  return encodeTotals(t);
}

async function snapshot(store: MemoryStore, node: string, ms: number, apps: Record<string, number[]>) {
  await putJson(store, keys.metricsSnapshot(hourOf(ms), node, ms), { apps });
}

test('deltas per node summed into steps, baseline before the window, other applications left out', async () => {
  const store = new MemoryStore();
  // node-a: 100 requests before the window (its baseline), then 10 more, then 30 more (3 failed).
  await snapshot(store, 'node-a', SINCE - 5 * MINUTE, { shop: totals(100, 0, 4), blog: totals(50, 0, 4) });
  await snapshot(store, 'node-a', SINCE + 10.5 * MINUTE, { shop: totals(110, 0, 4), blog: totals(60, 0, 4) });
  await snapshot(store, 'node-a', SINCE + 30.5 * MINUTE, { shop: totals(137, 3, 4) });
  // node-b started inside the window: its first snapshot counts from zero.
  await snapshot(store, 'node-b', SINCE + 10.2 * MINUTE, { shop: totals(5, 0, 200) });
  const series = await readSeries(store, { application: 'shop', sinceMs: SINCE, nowMs: NOW, steps: 60 });
  assert.equal(series.stepMs, MINUTE);
  assert.equal(series.times.length, 60);
  assert.equal(series.times[0], SINCE / 1000);
  assert.deepEqual(series.nodes, ['node-a', 'node-b']);
  assert.equal(series.requests[10], 15);
  assert.equal(series.requests[30], 30);
  assert.equal(
    series.requests.reduce((a, b) => a + b, 0),
    45,
  );
  assert.equal(series.errorRate[30], 10);
  assert.equal(series.errorRate[0], null);
  assert.equal(series.p50[10], 5);
  assert.equal(series.p99[10], 200);
  assert.equal(series.p50[0], null);
});

test('no snapshots: empty steps, no nodes', async () => {
  const series = await readSeries(new MemoryStore(), {
    application: 'shop',
    sinceMs: SINCE,
    nowMs: NOW,
    steps: 6,
  });
  assert.deepEqual(series.requests, [0, 0, 0, 0, 0, 0]);
  assert.deepEqual(series.nodes, []);
});
