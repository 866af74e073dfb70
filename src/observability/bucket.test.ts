// The recorder, meter, reaper and the readers against a local-directory bucket.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { keys } from '../registry/keys.ts';
import { openDirStore } from '../store/dir.ts';
import type { Store } from '../store/store.ts';
import { hourOf, RETENTION_MS } from './hours.ts';
import { Meter } from './meter.ts';
import { readMetrics } from './metrics.ts';
import { LEFTOVER_GRACE_MS, reapShards } from './reap.ts';
import { EventRecorder } from './recorder.ts';
import { readTraces } from './traces.ts';

const T0 = Date.parse('2026-11-23T14:00:00Z');

async function bucket(): Promise<Store> {
  return openDirStore(join(mkdtempSync(join(tmpdir(), 'svc-obs-')), 'bucket'));
}

test('events: one object per flush, nothing written when nothing happened, read back in order', async () => {
  const store = await bucket();
  let now = T0;
  const recorder = new EventRecorder({ store, nodeId: 'n1', now: () => now });
  recorder.emit({ kind: 'application.blocked', application: 'shop', actor: 'admin-key' });
  now += 1_000;
  recorder.emit({ kind: 'reconcile.pass', ms: 3, ok: true, desired: 0 });
  await recorder.flush();
  await recorder.flush();
  const listing = await store.list(keys.eventsPrefix, { recursive: true });
  assert.equal(listing.objects.length, 1);
  assert.match(listing.objects[0]!.key, /^_svc\/events\/2026-11-23-14\/n1\/\d{13}-000000\.json$/);
  const r = await readTraces(store, { sinceMs: T0 - 60_000, limit: 200, all: false });
  assert.deepEqual(
    r.events.map((e) => [e.kind, e.node, e.actor]),
    [['application.blocked', 'n1', 'admin-key']],
  );
  assert.equal(r.heldBack, 1);
});

test('metrics: a window subtracts snapshots; the three silences are told apart', async () => {
  const store = await bucket();
  const since = T0 + 30 * 60_000;
  assert.deepEqual((await readMetrics(store, { sinceMs: since })).silence, { kind: 'never-written' });

  let now = T0;
  const entry = (status: number) => ({
    host: 'shop.svc.test',
    uri: '/',
    status,
    bytesIn: 1,
    bytesOut: 10,
    durationMs: 4,
  });
  const meter = new Meter({
    store,
    nodeId: 'n1',
    applicationOf: (host) => host.split('.')[0],
    now: () => now,
  });
  meter.count(entry(200));
  meter.count(entry(200));
  await meter.flush(); // before the window: 2 requests
  assert.equal((await readMetrics(store, { sinceMs: since })).silence?.kind, 'outside-window');

  now = since + 60_000;
  await meter.flush(); // inside, nothing new
  const quiet = await readMetrics(store, { sinceMs: since });
  assert.deepEqual(quiet.silence, { kind: 'no-requests', nodes: ['n1'] });

  meter.count(entry(500));
  meter.count(entry(404));
  now += 60_000;
  await meter.flush();
  // A restarted node carries its totals on.
  const again = new Meter({
    store,
    nodeId: 'n1',
    applicationOf: (host) => host.split('.')[0],
    now: () => now,
  });
  await again.resume();
  again.count(entry(200));
  now += 60_000;
  await again.flush();
  const r = await readMetrics(store, { sinceMs: since });
  assert.equal(r.silence, undefined);
  assert.equal(r.applications.length, 1);
  const shop = r.applications[0]!;
  assert.equal(shop.requests, 3);
  assert.deepEqual([shop.status['2xx'], shop.status['4xx'], shop.status['5xx']], [1, 1, 1]);
  assert.equal(shop.bytesOut, 30);
  assert.equal(shop.latencyMs.p50, 5);
  assert.deepEqual((await readMetrics(store, { sinceMs: since, application: 'blog' })).silence, {
    kind: 'no-requests',
    nodes: ['n1'],
  });
});

test('reaping: each node its own expired hours; the coordinator sweeps leftovers a day later', async () => {
  const store = await bucket();
  const old = T0 - RETENTION_MS - 2 * 3_600_000;
  const older = T0 - RETENTION_MS - LEFTOVER_GRACE_MS - 2 * 3_600_000;
  await store.put(keys.eventBatch(hourOf(old), 'n1', old, 0), '{}');
  await store.put(keys.eventBatch(hourOf(old), 'gone', old, 0), '{}');
  await store.put(keys.eventBatch(hourOf(older), 'gone', older, 0), '{}');
  await store.put(keys.eventBatch(hourOf(T0), 'n1', T0, 1), '{}');
  assert.equal(await reapShards(store, keys.eventsPrefix, T0, { node: 'n1' }), 1);
  assert.equal(
    await reapShards(store, keys.eventsPrefix, T0, { retentionMs: RETENTION_MS + LEFTOVER_GRACE_MS }),
    1,
  );
  const left = await store.list(keys.eventsPrefix, { recursive: true });
  assert.deepEqual(
    left.objects.map((o) => o.key),
    [keys.eventBatch(hourOf(old), 'gone', old, 0), keys.eventBatch(hourOf(T0), 'n1', T0, 1)],
  );
});
