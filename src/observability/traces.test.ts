import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FleetEvent } from './events.ts';
import { selectEvents } from './traces.ts';

const at = (s: number) => new Date(Date.UTC(2026, 10, 23, 14, 0, s)).toISOString();
const ev = (s: number, kind: string, application?: string): FleetEvent => ({
  at: at(s),
  node: 'n1',
  kind,
  ...(application ? { application } : {}),
});

const events = [
  ev(5, 'reconcile.pass'),
  ev(1, 'application.blocked', 'shop'),
  ev(2, 'reconcile.pass'),
  ev(3, 'deploy.accepted', 'blog'),
  ev(4, 'application.unblocked', 'shop'),
];
const since = Date.parse(at(0));

test('passes are held back and counted; order is by time', () => {
  const r = selectEvents(events, { sinceMs: since, limit: 200, all: false });
  assert.deepEqual(
    r.events.map((e) => e.kind),
    ['application.blocked', 'deploy.accepted', 'application.unblocked'],
  );
  assert.equal(r.heldBack, 2);
  const all = selectEvents(events, { sinceMs: since, limit: 200, all: true });
  assert.equal(all.events.length, 5);
  assert.equal(all.heldBack, 0);
});

test('the newest are kept under the limit, and how many were left out is told', () => {
  const r = selectEvents(events, { sinceMs: since, limit: 2, all: true });
  assert.deepEqual(
    r.events.map((e) => e.at),
    [at(4), at(5)],
  );
  assert.equal(r.beyondLimit, 3);
});

test('window and application filter', () => {
  const r = selectEvents(events, { sinceMs: Date.parse(at(2)), limit: 200, all: false, application: 'shop' });
  assert.deepEqual(
    r.events.map((e) => e.kind),
    ['application.unblocked'],
  );
});
