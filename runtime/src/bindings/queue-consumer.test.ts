// Queue consumers, one batch (docs/bindings.md "Queues"): in real workerd, a worker sends through
// its producer binding, `deliverBatch` hands what is due to the same worker's `queue` handler
// through the queue trigger worker, and settles each message by the handler's answer: acked
// messages leave the queue, `retry({ delaySeconds })` brings one back at its new time with
// `attempts` counted, a message past `max_retries` moves to the dead-letter queue, a handler that
// throws has its whole batch retried, and a delayed message is not taken before its time.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import type { QueueConsumer } from '../../../src/runtime-tools/layout.ts';
import { openDirStore } from '../../../src/store/dir.ts';
import type { Store } from '../../../src/store/store.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { renderWorkerdConfig, workerdBinary } from '../workerd.ts';
import { listenKvSocket } from './kv-socket.ts';
import { decodeMessage } from './queue.ts';
import { deliverBatch, postBatch, visibleMsOf } from './queue-consumer.ts';

const WORKER = `export default {
  async fetch(request, env) {
    for (const m of await request.json()) {
      const body = m.bytes ? new Uint8Array(m.bytes) : m.map ? new Map(m.map) : m.body;
      await env.JOBS.send(body, m.options);
    }
    return new Response('sent');
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      const body = m.body instanceof Map ? { map: [...m.body] } : m.body instanceof ArrayBuffer ? { bytes: [...new Uint8Array(m.body)] } : m.body;
      await env.SEEN.send({ queue: batch.queue, id: m.id, attempts: m.attempts, body, timestamp: m.timestamp.getTime() });
      if (body === 'throw') throw new Error('the handler failed');
      if (body?.kind === 'retry') m.retry();
      else if (body?.kind === 'retry-late' && m.attempts === 1) m.retry({ delaySeconds: 30 });
      else m.ack();
    }
  },
};
`;

function post(socketPath: string, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: '/', method: 'POST', headers: { host: 'worker' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function waiting(store: Store, queue: string) {
  const { objects } = await store.list(keys.runtimeQueueMessagesPrefix('shop', queue), { recursive: true });
  return Promise.all(
    objects.map(async (o) => {
      const m = decodeMessage((await store.get(o.key))!.body)!;
      return { ...m, visibleMs: visibleMsOf(o.key), text: Buffer.from(m.body).toString('utf8') };
    }),
  );
}

/** What the handler saw, in the order it saw it, and empties the record. */
async function seen(store: Store) {
  const all = await waiting(store, 'seen');
  for (const m of all) await store.delete(keys.runtimeQueueMessage('shop', 'seen', m.visibleMs, m.id));
  return all
    .sort((a, b) => a.visibleMs - b.visibleMs || a.timestamp_ms - b.timestamp_ms)
    .map(
      (m) =>
        JSON.parse(m.text) as {
          queue: string;
          id: string;
          attempts: number;
          body: unknown;
          timestamp: number;
        },
    );
}

describe('queue consumers, one batch (docs/bindings.md "Queues")', () => {
  const dir = mkdtempSync(join(tmpdir(), 'queue-consumer-'));
  const started: ChildProcess[] = [];
  after(() => {
    for (const p of started) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers due messages to the worker's queue handler and settles each by its answer", async () => {
    const store = await openDirStore(join(dir, 'bucket'));
    const bindings = await listenKvSocket(join(dir, 'bindings.sock'), store, () => {});
    try {
      writeFileSync(join(dir, 'worker.js'), WORKER);
      const httpSocket = join(dir, 'http.sock');
      const triggerSocket = join(dir, 'queues.sock');
      writeFileSync(
        join(dir, 'config.capnp'),
        renderWorkerdConfig({
          address: `unix:${httpSocket}`,
          modules: [{ name: 'worker.js', type: 'esm', file: 'worker.js' }],
          compatibilityDate: '2025-01-01',
          compatibilityFlags: [],
          vars: [],
          assets: null,
          queues: {
            address: `unix:${bindings.path}`,
            application: 'shop',
            producers: [
              { binding: 'JOBS', queue: 'jobs' },
              { binding: 'SEEN', queue: 'seen' },
            ],
          },
          queueTriggerAddress: `unix:${triggerSocket}`,
        }),
      );
      const workerd = spawn(workerdBinary(), ['serve', '--experimental', 'config.capnp'], {
        cwd: dir,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      started.push(workerd);
      await waitFor(() => existsSync(httpSocket) && existsSync(triggerSocket), 'workerd to listen');
      const consumer: QueueConsumer = {
        queue: 'jobs',
        max_batch_size: 10,
        max_batch_timeout: 0,
        max_retries: 2,
        dead_letter_queue: 'jobs-dead',
        retry_delay: 0,
        max_concurrency: null,
      };
      const run = postBatch(triggerSocket);
      const status = await post(httpSocket, [
        { body: { kind: 'ack' } },
        { body: 'hello', options: { contentType: 'text' } },
        { bytes: [1, 2, 255], options: { contentType: 'bytes' } },
        { map: [[1, 'one']], options: { contentType: 'v8' } },
        { body: { kind: 'retry' } },
        { body: { kind: 'retry-late' } },
        { body: { kind: 'later' }, options: { delaySeconds: 60 } },
      ]);
      assert.equal(status, 200);

      // First batch: everything due, each seen once with attempts 1; two retried.
      const sentMs = Date.now();
      const { settled, ...firstReport } = (await deliverBatch(store, 'shop', consumer, run))!;
      assert.ok(settled, 'the settlement is reported, and was awaited');
      assert.deepEqual(firstReport, {
        delivered: 6,
        acked: 4,
        retried: 2,
        deadLettered: 0,
        dropped: [],
        outcome: 'ok',
      });
      const first = await seen(store);
      const expected = [
        ['jobs', 1, 'hello'],
        ['jobs', 1, { bytes: [1, 2, 255] }],
        ['jobs', 1, { kind: 'ack' }],
        ['jobs', 1, { kind: 'retry' }],
        ['jobs', 1, { kind: 'retry-late' }],
        ['jobs', 1, { map: [[1, 'one']] }],
      ];
      assert.deepEqual(
        first.map((s) => JSON.stringify([s.queue, s.attempts, s.body])).sort(),
        expected.map((e) => JSON.stringify(e)).sort(),
      );
      assert.ok(first.every((s) => /^[0-9a-f]{32}$/.test(s.id) && Math.abs(s.timestamp - sentMs) < 30_000));
      const left = await waiting(store, 'jobs');
      assert.deepEqual(left.map((m) => [m.text, m.attempts]).sort(), [
        ['{"kind":"later"}', 0],
        ['{"kind":"retry"}', 1],
        ['{"kind":"retry-late"}', 1],
      ]);
      const late = left.find((m) => m.text === '{"kind":"retry-late"}')!;
      assert.ok(
        late.visibleMs - Date.now() > 25_000,
        'retry({ delaySeconds: 30 }) brings it back 30 s later',
      );

      // Now: only the plain retry is due; the delayed ones are not taken early.
      const second = await deliverBatch(store, 'shop', consumer, run);
      assert.equal(second?.retried, 1, JSON.stringify(second));
      assert.deepEqual(
        (await seen(store)).map((s) => [s.attempts, s.body]),
        [[2, { kind: 'retry' }]],
      );
      // Its third delivery is past max_retries 2: it moves to the dead-letter queue, whole.
      assert.equal((await deliverBatch(store, 'shop', consumer, run))?.deadLettered, 1);
      assert.deepEqual(
        (await seen(store)).map((s) => [s.attempts, s.body]),
        [[3, { kind: 'retry' }]],
      );
      const dead = await waiting(store, 'jobs-dead');
      assert.deepEqual(
        dead.map((m) => [m.text, m.attempts, m.id]),
        [['{"kind":"retry"}', 0, first.find((s) => JSON.stringify(s.body) === '{"kind":"retry"}')!.id]],
      );
      assert.equal(await deliverBatch(store, 'shop', consumer, run), null, 'nothing else is due yet');

      // 31 s on, the late retry is due (attempts 2) and acked; the 60 s message still waits.
      const later = () => Date.now() + 31_000;
      assert.equal((await deliverBatch(store, 'shop', consumer, run, later))?.acked, 1);
      assert.deepEqual(
        (await seen(store)).map((s) => [s.attempts, s.body]),
        [[2, { kind: 'retry-late' }]],
      );
      assert.deepEqual(
        (await waiting(store, 'jobs')).map((m) => m.text),
        ['{"kind":"later"}'],
      );

      // A handler that throws has its whole batch retried.
      assert.equal(await post(httpSocket, [{ body: 'throw', options: { contentType: 'text' } }]), 200);
      const thrown = await deliverBatch(store, 'shop', consumer, run);
      assert.deepEqual([thrown?.outcome, thrown?.retried, thrown?.acked], ['exception', 1, 0]);
      assert.deepEqual((await waiting(store, 'jobs')).map((m) => [m.text, m.attempts]).sort(), [
        ['throw', 1],
        ['{"kind":"later"}', 0],
      ]);
      workerd.kill('SIGTERM');
    } finally {
      await bindings.close();
      await store.close();
    }
  });

  it('drops a message past max_retries when there is no dead-letter queue, and names it', async () => {
    const store = await openDirStore(join(dir, 'bucket-drop'));
    try {
      const { putMessage } = await import('./queue.ts');
      await putMessage(store, 'shop', 'jobs', Date.now() - 1, {
        id: 'f'.repeat(32),
        timestamp_ms: Date.now(),
        content_type: 'text',
        attempts: 0,
        body: Buffer.from('x'),
      });
      const consumer: QueueConsumer = {
        queue: 'jobs',
        max_batch_size: 10,
        max_batch_timeout: 0,
        max_retries: 0,
        dead_letter_queue: null,
        retry_delay: 0,
        max_concurrency: null,
      };
      const report = await deliverBatch(store, 'shop', consumer, async (_queue, messages) => ({
        outcome: 'ok',
        retryBatch: { retry: false },
        retryMessages: messages.map((m) => ({ msgId: m.id })),
      }));
      assert.deepEqual(report?.dropped, ['f'.repeat(32)]);
      assert.deepEqual(
        (await store.list(keys.runtimeQueuePrefix('shop', 'jobs'), { recursive: true })).objects,
        [],
      );
    } finally {
      await store.close();
    }
  });
});
