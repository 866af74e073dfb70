// The supervisor's and the coordinator's fleet events (docs/observability.md), against the
// runtime stand-in (test/helpers/cell-standin.ts `serve`, a named stand-in honouring the runtime
// contract). No sleeps: every wait polls with a deadline.

import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { freePort, tempDir, waitFor } from '../../../test/helpers/svc.ts';
import type { EventInput } from '../../observability/events.ts';
import { NODE_DEAD_AFTER_MS } from '../../registry/liveness.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { DeathWatch } from './service.ts';
import { Supervisor } from './supervisor.ts';

const STANDIN = resolve(import.meta.dirname, '..', '..', '..', 'test', 'helpers', 'cell-standin.ts');
const supervisors: Supervisor[] = [];
after(() => Promise.all(supervisors.map((s) => s.stop())));

async function supervised(
  cellEnv: Record<string, string>,
  neverReadyMs = 30_000,
): Promise<{ s: Supervisor; events: EventInput[] }> {
  const events: EventInput[] = [];
  const port = await freePort();
  const s = new Supervisor({
    cellBin: STANDIN,
    cellEnv,
    bindHost: '127.0.0.1',
    portRange: [port, port],
    portQuarantineMs: 600_000,
    outputBytes: 64 * 1024,
    nodeId: 'node-1',
    bucketEnv: { SVC_S3_ENDPOINT: 'file:///nowhere' },
    log: pino({ level: 'silent' }),
    healthPollMs: 50,
    healthCheckMs: 100,
    stopGraceMs: 10_000,
    restart: { baseDelayMs: 20, maxDelayMs: 200, stableMs: 30_000, crashloopAfter: 3 },
    events: { emit: (e) => events.push(e) },
    neverReadyMs,
  });
  supervisors.push(s);
  return { s, events };
}

const kinds = (events: EventInput[]) => events.map((e) => e.kind);

test('started, ready and stopped', async () => {
  const { s, events } = await supervised({});
  await s.apply([{ application: 'shop' }]);
  await waitFor(() => kinds(events).includes('process.ready'), 'process.ready');
  await s.apply([]);
  await waitFor(() => kinds(events).includes('process.stopped'), 'process.stopped');
  assert.deepEqual(kinds(events), ['process.started', 'process.ready', 'process.stopped']);
  assert.ok(events.every((e) => e.application === 'shop'));
  assert.equal(typeof events[0]!.pid, 'number');
});

test('a process that exits at start: exited, then crash-looping, each with its output', async () => {
  const { s, events } = await supervised({ STANDIN_SERVE_CRASH_APPS: 'broken' });
  await s.apply([{ application: 'broken' }]);
  await waitFor(() => kinds(events).includes('process.crash-looping'), 'process.crash-looping');
  const exited = events.find((e) => e.kind === 'process.exited')!;
  assert.equal(exited.why, 'cell serve exited with 3');
  assert.match(String(exited.tail), /standin: crashing\n\[svc\] cell serve exited with 3/);
  const looping = events.find((e) => e.kind === 'process.crash-looping')!;
  assert.match(String(looping.tail), /standin: crashing/);
  assert.ok(!kinds(events).includes('process.ready'));
});

test('a process that never turns ready is reported once per start, with its output', async () => {
  const readyDir = tempDir('svc-ready-');
  // Long enough for the stand-in (a Node process) to have printed its first line on a loaded
  // machine: the event carries the output as it is when the bound passes.
  const { s, events } = await supervised({ STANDIN_SERVE_READY_DIR: readyDir }, 5_000);
  await s.apply([{ application: 'slow' }]);
  await waitFor(() => kinds(events).includes('process.never-ready'), 'process.never-ready');
  const never = events.find((e) => e.kind === 'process.never-ready')!;
  assert.match(String(never.tail), /cell \(stand-in\) serving slow/);
  assert.ok(Number(never.afterMs) >= 5_000);
  mkdirSync(readyDir, { recursive: true });
  writeFileSync(join(readyDir, 'slow'), '');
  await waitFor(() => kinds(events).includes('process.ready'), 'process.ready once healthy');
  assert.equal(kinds(events).filter((k) => k === 'process.never-ready').length, 1);
});

test('the coordinator declares a node dead once, when it stops beating after being seen live', () => {
  const watch = new DeathWatch();
  const record = (beatMs: number) => ({ value: { id: 'n2', beatMs } as NodeRecord });
  const t = 1_800_000_000_000;
  assert.deepEqual(watch.seen([record(t)], t), []);
  const dead = watch.seen([record(t)], t + NODE_DEAD_AFTER_MS + 1);
  assert.deepEqual(
    dead.map((e) => [e.kind, e.peer]),
    [['node.declared-dead', 'n2']],
  );
  assert.deepEqual(watch.seen([record(t)], t + NODE_DEAD_AFTER_MS + 5_000), [], 'once');
  const never = new DeathWatch();
  assert.deepEqual(
    never.seen([record(t)], t + NODE_DEAD_AFTER_MS + 1),
    [],
    'never seen live: nothing declared',
  );
});
