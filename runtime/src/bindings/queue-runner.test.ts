// Queue consumers kept running (docs/bindings.md "Queues", the parts on batches at once
// and on one node delivering a queue): in real workerd, a backlog is delivered in batches that run at once, up
// to `max_concurrency` and no more, each message in one batch only; two nodes consuming one queue
// on one bucket never run batches of it at the same time; and a node that finds the queue held by
// the other tells it (`QueueWakers.nudge`, here wired straight to the other node's wakers instead
// of through the node API), so a message sent beside an idle holder is delivered at once.
// Each "node" is a workerd of its own (its `NODE` var names it) with its own bindings socket and
// consumer loops (`FrontQueues`); the handler records each batch (node, start, end, messages) in KV.

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
import { FrontQueues, QUEUE_POLL_MAX_MS, type QueueNudge, QueueWakers } from './queue-runner.ts';

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/release') {
      await env.SEEN.put('release', '1');
      return new Response('released');
    }
    const first = Number(url.searchParams.get('first'));
    const count = Number(url.searchParams.get('count'));
    const queue = url.searchParams.get('queue') === 'slow' ? env.SLOW : env.JOBS;
    await queue.sendBatch(Array.from({ length: count }, (_, k) => ({ body: { i: first + k } })));
    return new Response('sent');
  },
  async queue(batch, env) {
    const start = Date.now();
    if (batch.queue === 'slow' && batch.messages.some((m) => m.body.i === 0)) {
      // Holds its batch, and so the queue's lease, until the test releases it (a minute at most).
      while (!(await env.SEEN.get('release')) && Date.now() - start < 60000) await scheduler.wait(100);
    } else {
      // A handler's own work: long enough for batches of a backlog to overlap.
      await scheduler.wait(400);
    }
    const record = { node: env.NODE, queue: batch.queue, start, end: Date.now(), ids: batch.messages.map((m) => m.body.i) };
    await env.SEEN.put(crypto.randomUUID(), JSON.stringify(record));
  },
};
`;

interface BatchRecord {
  node: string;
  queue: string;
  start: number;
  end: number;
  ids: number[];
}

const consumer = (queue: string, maxConcurrency: number | null, batchSize: number): QueueConsumer => ({
  queue,
  max_batch_size: batchSize,
  max_batch_timeout: 0,
  max_retries: 3,
  dead_letter_queue: null,
  retry_delay: 0,
  max_concurrency: maxConcurrency,
});

interface Node {
  name: string;
  wakers: QueueWakers;
  front: FrontQueues;
  send(queue: string, first: number, count: number): Promise<void>;
  /** Ends the batch that holds the slow queue. */
  release(): Promise<void>;
}

describe('queue consumers, several batches at once (docs/bindings.md "Queues")', () => {
  const dir = mkdtempSync(join(tmpdir(), 'queue-runner-'));
  const stops: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const stop of stops.reverse()) await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One node: a workerd named `name`, its bindings socket and its consumer loops on `store`. */
  async function startNode(
    store: Store,
    name: string,
    consumers: QueueConsumer[],
    nudge?: QueueNudge,
    loopStore: Store = store,
  ): Promise<Node> {
    const home = mkdtempSync(join(dir, `${name}-`));
    const wakers = new QueueWakers(nudge);
    const bindings = await listenKvSocket(join(home, 'b.sock'), store, () => {}, undefined, wakers.sent);
    stops.push(() => bindings.close());
    writeFileSync(join(home, 'worker.js'), WORKER);
    writeFileSync(join(home, 'node.txt'), name);
    const http = join(home, 'http.sock');
    const trigger = join(home, 'q.sock');
    writeFileSync(
      join(home, 'config.capnp'),
      renderWorkerdConfig({
        address: `unix:${http}`,
        modules: [{ name: 'worker.js', type: 'esm', file: 'worker.js' }],
        compatibilityDate: '2025-06-01',
        compatibilityFlags: [],
        vars: [{ name: 'NODE', kind: 'text', file: 'node.txt' }],
        assets: null,
        queues: {
          address: `unix:${bindings.path}`,
          application: 'shop',
          producers: [
            { binding: 'JOBS', queue: 'jobs' },
            { binding: 'SLOW', queue: 'slow' },
          ],
        },
        kv: {
          address: `unix:${bindings.path}`,
          application: 'shop',
          namespaces: [{ binding: 'SEEN', id: 'seen' }],
        },
        queueTriggerAddress: `unix:${trigger}`,
      }),
    );
    const workerd: ChildProcess = spawn(workerdBinary(), ['serve', '--experimental', 'config.capnp'], {
      cwd: home,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    await waitFor(() => existsSync(http) && existsSync(trigger), 'workerd to listen', 30_000);
    const front = new FrontQueues({
      store: loopStore,
      application: 'shop',
      node: name,
      log: () => {},
      wakers,
    });
    front.prepared('d1', consumers, trigger);
    stops.push(() => front.stop());
    // Stopped first: a handler still running ends with it, and its loop stops at once.
    stops.push(async () => {
      workerd.kill('SIGKILL');
    });
    return {
      name,
      wakers,
      front,
      send: (queue, first, count) => get(http, `/send?queue=${queue}&first=${first}&count=${count}`),
      release: () => get(http, '/release'),
    };
  }

  it('runs up to max_concurrency batches of a backlog at once, each message in one batch only', async () => {
    const store = await openDirStore(join(dir, 'bucket-one'));
    const node = await startNode(store, 'node-a', [consumer('jobs', 3, 5)]);
    for (let first = 0; first < 60; first += 20) await node.send('jobs', first, 20);
    node.front.serving('d1');
    const batches = await waitForBatches(store, 'jobs', 60);
    assertEachOnce(batches, 60);
    assert.ok(
      batches.every((b) => b.ids.length <= 5),
      'no batch past max_batch_size',
    );
    const most = mostAtOnce(batches);
    assert.ok(most >= 2, `batches ran at once (at most ${most} at a time seen)`);
    assert.ok(most <= 3, `${most} batches ran at once, past max_concurrency 3`);
  });

  it('two nodes on one bucket never run batches of one queue at the same time', async () => {
    const store = await openDirStore(join(dir, 'bucket-two'));
    const [a, b] = await Promise.all([
      startNode(store, 'node-a', [consumer('jobs', 4, 5)]),
      startNode(store, 'node-b', [consumer('jobs', 4, 5)]),
    ]);
    a.front.serving('d1');
    b.front.serving('d1');
    // Sent on both nodes in turns, so each node's loop is woken and tries for the queue.
    for (let first = 0; first < 120; first += 10) await (first % 20 === 0 ? a : b).send('jobs', first, 10);
    const batches = await waitForBatches(store, 'jobs', 120);
    assertEachOnce(batches, 120);
    for (const x of batches)
      for (const y of batches)
        if (x.node < y.node)
          assert.ok(
            x.end <= y.start || y.end <= x.start,
            `a batch on ${x.node} (${x.start}-${x.end}) ran while one on ${y.node} did (${y.start}-${y.end})`,
          );
  });

  it('a node that finds the queue held by another tells it, which delivers at once', async () => {
    const store = await openDirStore(join(dir, 'bucket-wake'));
    const nodes = new Map<string, Node>();
    // The node API's wake route, as the daemon answers it: the named node's wakers are told.
    const nudge: QueueNudge = (node, application, queue, visibleMs) => {
      nodes.get(node)?.wakers.sent(application, queue, visibleMs);
    };
    const listed = countingLists(store, keys.runtimeQueueMessagesPrefix('shop', 'slow'));
    const [a, b] = await Promise.all([
      startNode(store, 'node-a', [consumer('slow', 2, 1)], nudge, listed.store),
      startNode(store, 'node-b', [consumer('slow', 2, 1)], nudge),
    ]);
    nodes.set('node-a', a).set('node-b', b);
    a.front.serving('d1');
    // Message 0 holds its batch on node a until released, which keeps the queue's lease meanwhile.
    await a.send('slow', 0, 1);
    const lease = keys.runtimeQueueLease('shop', 'slow');
    await waitFor(async () => (await store.get(lease)) !== null, 'node a to take the queue', 20_000);
    // Node a's loop lists the queue again 1, 2, 4, 8 and 16 s after each empty look: after five
    // listings since the take, its next one is at least 16 s away.
    const before = listed.count();
    await waitFor(() => listed.count() >= before + 5, 'node a to be deep in its backoff', 60_000);
    // Node b starts consuming and a message is sent there: its loop finds the queue held by node
    // a, and tells node a.
    b.front.serving('d1');
    const sentMs = Date.now();
    await b.send('slow', 1, 1);
    const deadlineMs = 10_000;
    assert.ok(deadlineMs < QUEUE_POLL_MAX_MS);
    const batches = await waitForBatches(store, 'slow', 1, deadlineMs, (r) => r.ids.includes(1));
    const one = batches.find((r) => r.ids.includes(1))!;
    assert.equal(one.node, 'node-a', 'delivered by the node holding the queue');
    assert.ok(one.start - sentMs < deadlineMs);
    await a.release();
    await waitForBatches(store, 'slow', 2, deadlineMs);
  });
});

/** `store`, counting its listings under `prefix`. */
function countingLists(store: Store, prefix: string): { store: Store; count: () => number } {
  let listings = 0;
  const counted = new Proxy(store, {
    get(target, property) {
      if (property === 'list')
        return (listPrefix: string, options: Parameters<Store['list']>[1]) => {
          if (listPrefix.startsWith(prefix)) listings++;
          return target.list(listPrefix, options);
        };
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: counted, count: () => listings };
}

function get(socketPath: string, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, headers: { host: 'worker' } }, (res) => {
      res.resume();
      res.on('end', () =>
        res.statusCode === 200 ? resolve() : reject(new Error(`answered ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every batch of `queue` the handler recorded. */
async function recordedBatches(store: Store, queue: string): Promise<BatchRecord[]> {
  const { objects } = await store.list(keys.runtimeKvNamespacePrefix('shop', 'seen'), { recursive: true });
  const all = await Promise.all(
    objects.map(async (o) => {
      const text = Buffer.from((await store.get(o.key))!.body).toString('utf8');
      return JSON.parse(text.slice(text.indexOf('\n') + 1)) as BatchRecord;
    }),
  );
  return all.filter((r) => r.queue === queue);
}

/** The recorded batches of `queue` once `count` messages were delivered (or `done` holds). */
async function waitForBatches(
  store: Store,
  queue: string,
  count: number,
  deadlineMs = 60_000,
  done?: (r: BatchRecord) => boolean,
): Promise<BatchRecord[]> {
  let batches: BatchRecord[] = [];
  await waitFor(
    async () => {
      batches = await recordedBatches(store, queue);
      return done ? batches.some(done) : batches.reduce((n, b) => n + b.ids.length, 0) >= count;
    },
    `${count} message(s) of ${queue} delivered`,
    deadlineMs,
  );
  return batches;
}

/** Each of messages 0..count-1 delivered, in exactly one batch. */
function assertEachOnce(batches: BatchRecord[], count: number): void {
  const ids = batches.flatMap((b) => b.ids).sort((x, y) => x - y);
  assert.deepEqual(
    ids,
    Array.from({ length: count }, (_, i) => i),
  );
}

/** The most batches whose handlers ran at one time. */
function mostAtOnce(batches: BatchRecord[]): number {
  const edges = batches.flatMap((b) => [
    { at: b.start, step: 1 },
    { at: b.end, step: -1 },
  ]);
  edges.sort((x, y) => x.at - y.at || x.step - y.step);
  let now = 0;
  let most = 0;
  for (const e of edges) {
    now += e.step;
    most = Math.max(most, now);
  }
  return most;
}
