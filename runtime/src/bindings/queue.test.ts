// Queue producers (docs/bindings.md "Queues"): a worker in real workerd sends through its `queue`
// binding (send and sendBatch, every content type, delaySeconds, the producer's delivery_delay),
// the bindings socket stores each message in the bucket under the time it may be delivered, and
// workerd shows the worker the refusals (a message past 128 KB, a delay past 24 hours).

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { openDirStore } from '../../../src/store/dir.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { renderWorkerdConfig, workerdBinary } from '../workerd.ts';
import { listenKvSocket } from './kv-socket.ts';
import { backlog, decodeMessage, encodeMessage, handleQueue, type StoredMessage } from './queue.ts';

const WORKER = `export default {
  async fetch(request, env) {
    const out = {};
    const attempt = async (name, run) => {
      try { out[name] = await run(); } catch (err) { out[name] = { error: String(err.message) }; }
    };
    await attempt('json', () => env.Q.send({ a: 1 }));
    await attempt('text', () => env.Q.send('hi', { contentType: 'text' }));
    await attempt('bytes', () => env.Q.send(new Uint8Array([1, 2, 3]), { contentType: 'bytes' }));
    await attempt('v8', () => env.Q.send(new Map([[1, 2]]), { contentType: 'v8' }));
    await attempt('delayed', () => env.Q.send('later', { contentType: 'text', delaySeconds: 60 }));
    await attempt('batch', () => env.Q.sendBatch(
      [{ body: { b: 1 } }, { body: 'own delay', contentType: 'text', delaySeconds: 5 }],
      { delaySeconds: 2 },
    ));
    await attempt('producerDelay', () => env.SLOW.send('slow', { contentType: 'text' }));
    await attempt('tooLarge', () => env.Q.send('x'.repeat(130000), { contentType: 'text' }));
    await attempt('tooLate', () => env.Q.send('x', { contentType: 'text', delaySeconds: 86401 }));
    await attempt('metrics', () => env.Q.metrics());
    return Response.json(out);
  },
};
`;

function get(socketPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: '/', headers: { host: 'worker' } }, (res) => {
      let body = '';
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('queue producers (docs/bindings.md "Queues")', () => {
  const dir = mkdtempSync(join(tmpdir(), 'queue-'));
  const started: ChildProcess[] = [];
  after(() => {
    for (const p of started) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('stores what a worker in workerd sends, under the time each message may be delivered', async () => {
    const store = await openDirStore(join(dir, 'bucket'));
    const bindings = await listenKvSocket(join(dir, 'bindings.sock'), store, () => {});
    const sent: [string, string, number][] = [];
    const socketWithSent = await listenKvSocket(
      join(dir, 'queues.sock'),
      store,
      () => {},
      undefined,
      (a, q, v) => sent.push([a, q, v]),
    );
    try {
      writeFileSync(join(dir, 'worker.js'), WORKER);
      const httpSocket = join(dir, 'http.sock');
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
            address: `unix:${socketWithSent.path}`,
            application: 'shop',
            producers: [
              { binding: 'Q', queue: 'orders' },
              { binding: 'SLOW', queue: 'orders', delivery_delay: 30 },
            ],
          },
        }),
      );
      const workerd = spawn(workerdBinary(), ['serve', 'config.capnp'], {
        cwd: dir,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      started.push(workerd);
      await waitFor(() => existsSync(httpSocket), 'workerd to listen');
      const before = Date.now();
      const answer = await get(httpSocket);
      const after = Date.now();
      assert.equal(answer.status, 200, answer.body);
      const out = JSON.parse(answer.body) as Record<string, { error?: string } | undefined>;
      for (const name of ['json', 'text', 'bytes', 'v8', 'delayed', 'batch', 'producerDelay'])
        assert.deepEqual(out[name], { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } }, name);
      assert.deepEqual(out.tooLarge, {
        error: 'Queue send failed: message length of 130000 bytes exceeds limit of 128000',
      });
      assert.equal(out.tooLate?.error?.startsWith('Queue send failed: message delay 86401 is invalid'), true);
      // metrics() lists the queue: the 8 messages stored so far.
      assert.equal((out.metrics as unknown as { backlogCount: number }).backlogCount, 8);

      const { objects } = await store.list(keys.runtimeQueueMessagesPrefix('shop', 'orders'), {
        recursive: true,
      });
      const messages: (StoredMessage & { delayMs: number })[] = [];
      for (const o of objects) {
        const m = decodeMessage((await store.get(o.key))!.body)!;
        assert.match(m.id, /^[0-9a-f]{32}$/);
        assert.ok(m.timestamp_ms >= before && m.timestamp_ms <= after);
        assert.equal(m.attempts, 0);
        const visible = Number(o.key.slice(o.key.lastIndexOf('/') + 1).split('-')[0]);
        messages.push({ ...m, delayMs: visible - m.timestamp_ms });
      }
      const seen = messages.map((m) => [
        m.content_type,
        m.content_type === 'v8'
          ? 'v8'
          : Buffer.from(m.body).toString(m.content_type === 'bytes' ? 'hex' : 'utf8'),
        m.delayMs,
      ]);
      seen.sort((a, b) => Number(a[2]) - Number(b[2]) || String(a[1]).localeCompare(String(b[1])));
      assert.deepEqual(seen, [
        ['json', '{"a":1}', 0],
        ['bytes', '010203', 0],
        ['text', 'hi', 0],
        ['v8', 'v8', 0],
        ['json', '{"b":1}', 2000], // the batch's delay
        ['text', 'own delay', 5000], // its own delay wins over the batch's
        ['text', 'slow', 30000], // the producer's delivery_delay
        ['text', 'later', 60000],
      ]);
      assert.equal(sent.length, 8);
      assert.ok(sent.every(([a, q]) => a === 'shop' && q === 'orders'));
      workerd.kill('SIGTERM');
    } finally {
      await bindings.close();
      await socketWithSent.close();
      await store.close();
    }
  });

  it('refuses what workerd never sends: no queue named, an unknown operation, a bad batch', async () => {
    const store = await openDirStore(join(dir, 'bucket-refusals'));
    try {
      const names = { 'cell-queue-application': 'shop', 'cell-queue-name': 'orders' };
      const call = (method: string, path: string, headers: Record<string, string>, body = '') =>
        handleQueue(store, { method, path, headers, body: Buffer.from(body) });
      assert.deepEqual(await call('POST', '/message', { 'cell-queue-application': 'shop' }), {
        status: 400,
        reason: 'the call names no queue',
      });
      assert.deepEqual(await call('DELETE', '/message', names), {
        status: 404,
        reason: 'no queue operation DELETE /message',
      });
      assert.deepEqual(await call('POST', '/batch', names, '{'), {
        status: 400,
        reason: 'the batch is not JSON',
      });
      assert.deepEqual(await call('POST', '/message', { ...names, 'x-msg-fmt': 'xml' }), {
        status: 400,
        reason:
          "message content type xml is invalid; if specified, must be one of 'text', 'json', 'bytes', or 'v8'",
      });
      const many = JSON.stringify({ messages: Array.from({ length: 101 }, () => ({ body: 'AA==' })) });
      assert.deepEqual(await call('POST', '/batch', names, many), {
        status: 413,
        reason: 'batch message count of 101 exceeds limit of 100',
      });
      assert.deepEqual(await backlog(store, 'shop', 'orders'), {
        backlogCount: 0,
        backlogBytes: 0,
        oldestMessageTimestamp: 0,
      });
    } finally {
      await store.close();
    }
  });

  it('keeps a message whole in one object: a JSON line, then the bytes', () => {
    const message: StoredMessage = {
      id: 'a'.repeat(32),
      timestamp_ms: 1,
      content_type: 'bytes',
      attempts: 2,
      body: new Uint8Array([10, 0, 10]),
    };
    const back = decodeMessage(encodeMessage(message))!;
    assert.deepEqual({ ...back, body: [...back.body] }, { ...message, body: [10, 0, 10] });
    assert.equal(decodeMessage(Buffer.from('no line')), null);
    assert.equal(decodeMessage(Buffer.from('{"id":1}\n')), null);
  });
});
