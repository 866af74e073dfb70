// A runtime's reports (src/observability/runtime-reports.ts): each cron run line becomes one
// `cron.ran` event for the process's application and one log line, however the lines are cut
// into chunks; spans and other lines on the same stdout are passed over, and a report with a bad
// field is refused whole and logged, never recorded.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventInput } from './events.ts';
import { MAX_ERROR_CHARS, MAX_REPORT_BYTES, runtimeReportReader } from './runtime-reports.ts';

const SCHEDULED_MS = Date.UTC(2026, 10, 25, 17, 30);

function reader() {
  const events: EventInput[] = [];
  const logged: { level: string; fields: Record<string, unknown>; message: string }[] = [];
  const log = {
    info: (fields: Record<string, unknown>, message: string) =>
      logged.push({ level: 'info', fields, message }),
    warn: (fields: Record<string, unknown>, message: string) =>
      logged.push({ level: 'warn', fields, message }),
  };
  // biome-ignore lint/suspicious/noExplicitAny: pino's overloads, called as the reader calls them.
  const feed = runtimeReportReader('shop', { emit: (event) => events.push(event) }, log as any);
  return { feed: (text: string) => feed(Buffer.from(text)), events, logged };
}

const run = (fields: Record<string, unknown> = {}) =>
  `${JSON.stringify({ kind: 'cron.ran', cron: '*/5 * * * *', scheduledMs: SCHEDULED_MS, deployment: 'd1', outcome: 'ok', durationMs: 12, ...fields })}\n`;

test('a run that ended well is one event and one info line', () => {
  const { feed, events, logged } = reader();
  feed(run());
  assert.deepEqual(events, [
    {
      kind: 'cron.ran',
      application: 'shop',
      cron: '*/5 * * * *',
      scheduled: '2026-11-25T17:30:00.000Z',
      deployment: 'd1',
      outcome: 'ok',
      durationMs: 12,
    },
  ]);
  assert.equal(logged.length, 1);
  assert.equal(logged[0]?.level, 'info');
  assert.equal(logged[0]?.message, 'cron ran');
  assert.equal(logged[0]?.fields.application, 'shop');
  assert.equal(logged[0]?.fields.scheduled, '2026-11-25T17:30:00.000Z');
});

test('an exception carries its message, clipped, and is logged as a warning', () => {
  const { feed, events, logged } = reader();
  feed(run({ outcome: 'exception', error: `Error: ${'x'.repeat(3 * MAX_ERROR_CHARS)}` }));
  assert.equal(events[0]?.outcome, 'exception');
  assert.equal(String(events[0]?.error).length, MAX_ERROR_CHARS);
  assert.match(events[0]?.error as string, /^Error: x+$/);
  assert.equal(logged[0]?.level, 'warn');
  assert.equal(logged[0]?.message, 'cron ran and failed');
});

test('lines cut across chunks, and several in one chunk, are read whole', () => {
  const two = run({ scheduledMs: SCHEDULED_MS }) + run({ scheduledMs: SCHEDULED_MS + 300_000 });
  for (const cuts of [[40, 130], [two.length - 1], [5, 6, 7]]) {
    const { feed, events } = reader();
    let from = 0;
    for (const cut of [...cuts, two.length]) {
      feed(two.slice(from, cut));
      from = cut;
    }
    assert.deepEqual(
      events.map((e) => e.scheduled),
      ['2026-11-25T17:30:00.000Z', '2026-11-25T17:35:00.000Z'],
      `cut at ${cuts.join(', ')}`,
    );
  }
});

test('the application is the process’s, whatever the line says; bad fields are refused, other lines passed over', () => {
  const { feed, events, logged } = reader();
  feed(run({ application: 'bank', node: 'elsewhere' }));
  assert.equal(events[0]?.application, 'shop');
  assert.equal(events[0]?.node, undefined, 'the recorder adds the node, not the runtime');
  for (const other of [
    'not json\n',
    '{"kind":"span","name":"http.request","status":200}\n',
    '{"kind":"application.blocked","application":"shop"}\n',
  ])
    feed(other);
  assert.equal(events.length, 1);
  assert.equal(logged.length, 1, 'only the run is logged');
  for (const bad of [
    run({ outcome: '' }),
    run({ scheduledMs: 'soon' }),
    run({ error: 42 }),
    run({ cron: null }),
    '{"kind":"cron.ran", not json\n',
  ])
    feed(bad);
  assert.equal(events.length, 1);
  assert.equal(
    logged.filter(
      (l) => l.level === 'warn' && l.message === 'unreadable cron run report from the runtime, ignored',
    ).length,
    5,
  );
});

test('a line longer than a report can be is dropped whole, and the next one read', () => {
  const { feed, events } = reader();
  feed('{"kind":"cron.ran","cron":"');
  feed('y'.repeat(MAX_REPORT_BYTES + 1));
  feed('"}\n');
  feed(run());
  assert.equal(events.length, 1);
  assert.equal(events[0]?.cron, '*/5 * * * *');
});
