// Queues (docs/bindings.md "Queues"): how long a message takes from `send()` to the consumer's
// `queue` handler, what it costs in bucket requests, and what idle queues cost.
//   Latency:  a worker in real workerd sends through its queue binding (the runtime host's
//             bindings socket) and consumes the queue (the host's consumer loop, `FrontQueues`,
//             through the queue trigger worker); the handler records when it ran. Idle: one
//             message every 500 ms (the consumer waits between them); loaded: 100 messages/s for
//             10 s. p50/p99 from the client's send to the handler's start.
//   Drain:    a backlog of 1,000 messages written straight to the bucket, then consumed with
//             max_concurrency 1 and as configured: messages/s from the loop's start to the last
//             handler, so the consumer's rate is seen apart from the producers'; then the same
//             with a handler that takes 200 ms a batch (queues `slow-*`).
//   Cost:     bucket requests on the queue's keys (messages and lease), counted by a proxy in
//             front of MinIO, per 1,000 messages of the loaded run.
//   Idle:     100 consumed queues with nothing in them, after their backoff reached its most:
//             bucket requests over a measured window, scaled to an hour.
// Run: scripts/with-node node bench/queues.bench.ts [idle seconds] [max_batch_size] [max_concurrency]
//      (default 120, 10, unset: up to 10 batches at once)
// Real parts: MinIO behind a counting proxy (test/helpers/s3-proxy.ts), workerd, the runtime
// host's bindings socket and consumer loop.

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { listenKvSocket } from '../runtime/src/bindings/kv-socket.ts';
import { newMessageId, putMessage } from '../runtime/src/bindings/queue.ts';
import { FrontQueues, QUEUE_POLL_MAX_MS, QueueWakers } from '../runtime/src/bindings/queue-runner.ts';
import { renderWorkerdConfig, workerdBinary } from '../runtime/src/workerd.ts';
import { keys } from '../src/registry/keys.ts';
import type { QueueConsumer } from '../src/runtime-tools/layout.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { startS3Proxy } from '../test/helpers/s3-proxy.ts';
import { tempDir, waitFor } from '../test/helpers/svc.ts';

const idleSeconds = Number(process.argv[2] ?? 120);
const batchSize = Number(process.argv[3] ?? 10);
const concurrency = process.argv[4] === undefined ? null : Number(process.argv[4]);

const WORKER = `export default {
  async fetch(request, env) {
    const i = Number(new URL(request.url).searchParams.get('i'));
    await env.JOBS.send({ i });
    return new Response('sent');
  },
  async queue(batch, env) {
    // One KV write per batch records it, so the observer costs the bucket one PUT a batch.
    const delivered = Date.now();
    // The slow drains' handler waits 200 ms, as one calling another service would.
    if (batch.queue.startsWith('slow-')) await new Promise((resolve) => setTimeout(resolve, 200));
    await env.SEEN.put(crypto.randomUUID(), JSON.stringify(batch.messages.map((m) => ({ i: m.body.i, delivered }))));
  },
};
`;

const consumer = (queue: string): QueueConsumer => ({
  queue,
  max_batch_size: batchSize,
  max_batch_timeout: 0,
  max_retries: 3,
  dead_letter_queue: null,
  retry_delay: 0,
  max_concurrency: concurrency,
});

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
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

/** Every delivery the handler recorded so far: message number → when its handler ran (each record read once). */
const recorded = new Map<string, { i: number; delivered: number }[]>();
async function deliveries(store: Store): Promise<Map<number, number>> {
  const { objects } = await store.list(keys.runtimeKvNamespacePrefix('bench', 'seen'), { recursive: true });
  await Promise.all(
    objects
      .filter((o) => !recorded.has(o.key))
      .map(async (o) => {
        const text = Buffer.from((await store.get(o.key))!.body).toString('utf8');
        // A KV entry is a JSON header line, then the value.
        recorded.set(
          o.key,
          JSON.parse(text.slice(text.indexOf('\n') + 1)) as { i: number; delivered: number }[],
        );
      }),
  );
  return new Map([...recorded.values()].flat().map((r) => [r.i, r.delivered]));
}

/** Whether a request's path (its query included: a LIST's prefix) reaches keys under `prefix`. */
function on(path: string, prefix: string): boolean {
  return decodeURIComponent(path).includes(prefix);
}

async function main(): Promise<void> {
  const minio = await startMinio();
  const proxy = await startS3Proxy(minio.endpoint);
  const stopping: (() => Promise<unknown>)[] = [];
  let workerd: ChildProcess | null = null;
  try {
    const options = minio.bucketOptions(await minio.createBucket());
    const store = await openStore({
      ...options,
      endpoint: proxy.endpoint,
      stateDir: tempDir('queues-bench-store-'),
    });
    stopping.push(() => store.close());
    const dir = tempDir('queues-bench-');
    const wakers = new QueueWakers();
    const bindings = await listenKvSocket(
      join(dir, 'bindings.sock'),
      store,
      () => {},
      undefined,
      wakers.sent,
    );
    stopping.push(() => bindings.close());
    writeFileSync(join(dir, 'worker.js'), WORKER);
    const http = join(dir, 'http.sock');
    const trigger = join(dir, 'queues.sock');
    writeFileSync(
      join(dir, 'config.capnp'),
      renderWorkerdConfig({
        address: `unix:${http}`,
        modules: [{ name: 'worker.js', type: 'esm', file: 'worker.js' }],
        compatibilityDate: '2025-06-01',
        compatibilityFlags: [],
        vars: [],
        assets: null,
        queues: {
          address: `unix:${bindings.path}`,
          application: 'bench',
          producers: [{ binding: 'JOBS', queue: 'jobs' }],
        },
        kv: {
          address: `unix:${bindings.path}`,
          application: 'bench',
          namespaces: [{ binding: 'SEEN', id: 'seen' }],
        },
        queueTriggerAddress: `unix:${trigger}`,
      }),
    );
    workerd = spawn(workerdBinary(), ['serve', '--experimental', 'config.capnp'], {
      cwd: dir,
      stdio: 'inherit',
    });
    await waitFor(() => existsSync(http) && existsSync(trigger), 'workerd to listen', 30_000);
    const log: string[] = [];
    const front = new FrontQueues({
      store,
      application: 'bench',
      node: 'bench',
      log: (l) => log.push(l),
      wakers,
    });
    front.prepared('d1', [consumer('jobs')], trigger);
    front.serving('d1');
    stopping.push(() => front.stop());

    const sentAt = new Map<number, number>();
    const send = async (i: number) => {
      sentAt.set(i, Date.now());
      await get(http, `/send?i=${i}`);
    };
    const latencies = async (from: number, to: number) => {
      let found = new Map<number, number>();
      await waitFor(
        async () => {
          found = await deliveries(store);
          for (let i = from; i < to; i++) if (!found.has(i)) return false;
          return true;
        },
        'every delivery',
        120_000,
      );
      const times: number[] = [];
      for (let i = from; i < to; i++) times.push(found.get(i)! - sentAt.get(i)!);
      return times.sort((a, b) => a - b);
    };

    // Idle: one message every 500 ms.
    const IDLE_MESSAGES = 100;
    for (let i = 0; i < IDLE_MESSAGES; i++) {
      await send(i);
      await new Promise((r) => setTimeout(r, 500));
    }
    const idle = await latencies(0, IDLE_MESSAGES);

    // Loaded: 100 messages/s for 10 s, sent on a fixed schedule.
    const LOADED = 1000;
    const startIndex = proxy.seen.length;
    const started = Date.now();
    const sends: Promise<void>[] = [];
    for (let n = 0; n < LOADED; n++) {
      const at = started + n * 10;
      const wait = at - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      sends.push(send(IDLE_MESSAGES + n));
    }
    await Promise.all(sends);
    const sendsDoneMs = Date.now() - started;
    const loaded = await latencies(IDLE_MESSAGES, IDLE_MESSAGES + LOADED);
    const lastDeliveredMs = Math.max(...[...(await deliveries(store)).values()]) - started;
    const firstLoaded = (await deliveries(store)).get(IDLE_MESSAGES)! - sentAt.get(IDLE_MESSAGES)!;
    const loadedSeen = proxy.seen.slice(startIndex).filter((r) => on(r.path, 'fleets/bench/queues/jobs/'));
    const kinds = new Map<string, number>();
    for (const r of loadedSeen) {
      const kind = r.method === 'GET' && r.path.includes('list-type') ? 'LIST' : r.method;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }

    // Drain: 1,000 messages waiting, consumed one batch at a time and then as configured.
    await front.stop();
    const drains: string[] = [];
    for (const [n, limit, queue] of [
      [1, 1, 'drain-1'],
      [2, concurrency, 'drain-2'],
      [3, 1, 'slow-1'],
      [4, concurrency, 'slow-2'],
    ] as const) {
      const base = n * 100_000;
      const now = Date.now();
      for (let k = 0; k < 1000; k += 50)
        await Promise.all(
          Array.from({ length: 50 }, (_, j) =>
            putMessage(store, 'bench', queue, now, {
              id: newMessageId(),
              timestamp_ms: now,
              content_type: 'json',
              attempts: 0,
              body: Buffer.from(JSON.stringify({ i: base + k + j })),
            }),
          ),
        );
      const drainFront = new FrontQueues({
        store,
        application: 'bench',
        node: 'bench',
        log: () => {},
        wakers,
      });
      drainFront.prepared(`drain-${n}`, [{ ...consumer(queue), max_concurrency: limit }], trigger);
      const startMs = Date.now();
      drainFront.serving(`drain-${n}`);
      let found = new Map<number, number>();
      await waitFor(
        async () => {
          found = await deliveries(store);
          for (let i = base; i < base + 1000; i++) if (!found.has(i)) return false;
          return true;
        },
        'the backlog drained',
        300_000,
      );
      await drainFront.stop();
      let last = 0;
      for (let i = base; i < base + 1000; i++) last = Math.max(last, found.get(i)!);
      drains.push(
        `drain of 1,000 waiting messages${queue.startsWith('slow') ? ', handler 200 ms a batch' : ''}, max_concurrency ${limit ?? 'unset'}: last handler ${last - startMs} ms after the loop started = ${((1000 / (last - startMs)) * 1000).toFixed(0)} messages/s`,
      );
    }

    // Idle cost: 100 consumed queues with nothing in them, once their backoff reached its most.
    const idleFront = new FrontQueues({ store, application: 'bench', node: 'bench', log: () => {}, wakers });
    idleFront.prepared(
      'd2',
      Array.from({ length: 100 }, (_, i) => consumer(`idle-${i}`)),
      trigger,
    );
    idleFront.serving('d2');
    stopping.push(() => idleFront.stop());
    const idleRequests = () => proxy.seen.filter((r) => on(r.path, 'fleets/bench/queues/idle-')).length;
    await new Promise((r) => setTimeout(r, QUEUE_POLL_MAX_MS + 10_000)); // past 1+2+4+…+32 s of backoff
    const idleBefore = idleRequests();
    const idleStart = Date.now();
    await new Promise((r) => setTimeout(r, idleSeconds * 1000));
    const idleCount = idleRequests() - idleBefore;
    const perHour = (idleCount / ((Date.now() - idleStart) / 1000)) * 3600;

    console.log(
      `Queues: send to handler, MinIO behind a counting proxy, max_batch_size ${batchSize}, max_batch_timeout 0, max_concurrency ${concurrency ?? 'unset'}`,
    );
    console.log(
      `idle (1 message / 500 ms, ${IDLE_MESSAGES}): p50 ${percentile(idle, 50)} ms  p99 ${percentile(idle, 99)} ms`,
    );
    console.log(
      `loaded (100 messages/s, ${LOADED}): p50 ${percentile(loaded, 50)} ms  p99 ${percentile(loaded, 99)} ms`,
    );
    console.log(
      `loaded run: every send acknowledged ${sendsDoneMs} ms after the first was sent, the last delivered at ${lastDeliveredMs} ms; the first waited ${firstLoaded} ms`,
    );
    console.log(
      `bucket requests per 1,000 messages (loaded run): ${((loadedSeen.length / LOADED) * 1000).toFixed(0)} (${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')})`,
    );
    console.log(
      `idle: 100 queues, ${idleCount} requests in ${idleSeconds} s = ${perHour.toFixed(0)} per hour`,
    );
    for (const line of drains) console.log(line);
    if (log.length > 0) console.log(`consumer log:\n${log.join('\n')}`);
  } finally {
    workerd?.kill('SIGTERM');
    for (const stop of stopping.reverse()) await stop().catch(() => {});
    await proxy.close();
    await minio.stop();
  }
}

await main();
