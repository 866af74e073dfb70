// Queue consumers, one batch (docs/bindings.md "Queues"): take the messages of a queue whose time
// has come, hand them to the worker's `queue(batch, env, ctx)` handler through the queue trigger
// worker, and settle each by the handler's answer, as Miniflare's broker does: a message retried
// (`retry()`, `retryAll()`, or the handler threw) is written back under its new time with one more
// delivery counted, or past `max_retries` moved to the dead-letter queue or dropped; every other
// message is acked. An object is deleted only after the handler answered, so delivery is at least
// once. Who may run a batch (one holder per queue in the fleet) is not decided here; several
// batches of one listing may run at once (`max_concurrency`), never sharing a message.

import { keys } from '../../../src/registry/keys.ts';
import type { QueueConsumer } from '../../../src/runtime-tools/layout.ts';
import type { Store } from '../../../src/store/store.ts';
import { decodeMessage, putMessage, type StoredMessage } from './queue.ts';

// Taken as the module itself, not bound as an ES module: binding it reads every export once, and
// some of those load Node's fetch (undici), 50-60 ms of `cell publish`'s start, which loads this
// module for its trigger worker's source (docs/decisions.md "Start-up").
const { request } = process.getBuiltinModule('node:http');

/**
 * The queue trigger worker: cell posts it one batch (JSON, bodies in base64) over its own socket,
 * and it calls the user worker's `queue` handler through a service binding (workerd's
 * `Fetcher.queue`, which needs `service_binding_extra_handlers`, as the cron trigger does), then
 * answers the handler's result (outcome, ackAll, retryBatch, explicitAcks, retryMessages).
 */
export const QUEUE_TRIGGER_MODULE = 'cell-queue-trigger.js';
export const QUEUE_TRIGGER_SOURCE = `const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
export default {
  async fetch(request, env) {
    const { queue, messages } = await request.json();
    const batch = messages.map((m) => {
      const raw = bytes(m.body);
      const message = { id: m.id, timestamp: new Date(m.timestamp_ms), attempts: m.attempts };
      if (m.content_type === 'v8') message.serializedBody = raw;
      else if (m.content_type === 'bytes') message.body = raw.buffer;
      else if (m.content_type === 'text') message.body = new TextDecoder().decode(raw);
      else message.body = JSON.parse(new TextDecoder().decode(raw));
      return message;
    });
    try {
      return Response.json(await env.USER.queue(queue, batch));
    } catch (err) {
      return Response.json({ outcome: 'exception', error: String((err && err.stack) || err) });
    }
  },
};
`;

/** What `Fetcher.queue` answers: the handler's outcome and its calls on the batch and messages. */
export interface QueueResult {
  outcome: string;
  ackAll?: boolean;
  retryBatch?: { retry: boolean; delaySeconds?: number };
  explicitAcks?: string[];
  retryMessages?: { msgId: string; delaySeconds?: number }[];
  error?: string;
}

/** Runs one batch in the worker: the messages as they wait, each with this delivery's `attempts`. */
export type RunBatch = (
  queue: string,
  messages: (StoredMessage & { attempts: number })[],
) => Promise<QueueResult>;

/** What became of one batch, for the log and events. */
export interface BatchReport {
  delivered: number;
  acked: number;
  retried: number;
  deadLettered: number;
  dropped: string[];
  outcome: string;
  /** The handler's exception, when it threw. */
  error?: string;
  /** Resolves once every message of the batch is settled in the bucket (rejects if a write failed). */
  settled?: Promise<void>;
}

/**
 * The keys of the queue's last listing not taken yet: the next batches come from it while it holds
 * a full batch of due messages and is younger than `LISTING_REUSE_MS`, so a backlog is listed once
 * per many batches rather than once per batch.
 */
export interface Listing {
  keys: string[];
  listedMs: number;
  /** Keys of batches under way (handler running or settlement not done): not taken again meanwhile. */
  settling: Set<string>;
  /** Answer a batch once the handler answered, its settlement going on (`BatchReport.settled`). */
  pipeline?: boolean;
}
export const LISTING_REUSE_MS = 2_000;

/**
 * Delivers the next batch of `consumer.queue`, if one is due: up to `max_batch_size` messages
 * whose time has come, oldest first, once the batch is full or its oldest message has waited
 * `max_batch_timeout`. Null when none is due; then `pending.nextMs` says when one will be, as far
 * as this listing knows (null: the queue is empty). `now` is read once, so a message whose time is
 * later is never taken. `mayDeliver` is asked before the handler runs (the queue's lease): false
 * leaves the batch to whoever holds it. `taken` is called once the batch's keys are set aside in
 * `listing`, before they are read: from then on another call may take the next batch.
 */
export async function deliverBatch(
  store: Store,
  application: string,
  consumer: QueueConsumer,
  run: RunBatch,
  now: () => number = Date.now,
  pending: { nextMs: number | null } = { nextMs: null },
  mayDeliver: () => Promise<boolean> = async () => true,
  listing: Listing = { keys: [], listedMs: 0, settling: new Set() },
  taken: () => void = () => {},
): Promise<BatchReport | null> {
  const { queue } = consumer;
  const startMs = now();
  const dueNow = (k: string) => visibleMsOf(k) <= startMs && !listing.settling.has(k);
  const cachedDue = listing.keys.filter(dueNow);
  if (cachedDue.length < consumer.max_batch_size || startMs - listing.listedMs >= LISTING_REUSE_MS) {
    const { objects } = await store.list(keys.runtimeQueueMessagesPrefix(application, queue), {
      recursive: true,
    });
    listing.keys = objects.map((o) => o.key);
    listing.listedMs = startMs;
  }
  const due = listing.keys.filter(dueNow).slice(0, consumer.max_batch_size);
  const later = listing.keys.find((k) => visibleMsOf(k) > startMs);
  pending.nextMs = later ? visibleMsOf(later) : null;
  if (due.length === 0) return null;
  const fullAtMs = visibleMsOf(due[0]!) + consumer.max_batch_timeout * 1000;
  if (due.length < consumer.max_batch_size && startMs < fullAtMs) {
    pending.nextMs = Math.min(pending.nextMs ?? fullAtMs, fullAtMs);
    return null;
  }
  if (!(await mayDeliver())) {
    // Another node holds the queue: look again once its lease may have been given up.
    pending.nextMs = null;
    return null;
  }
  // Taken: whatever comes of them, the next batch is not made of these keys again, nor is a batch
  // running at the same time, even from a fresh listing, until they are settled.
  const mine = new Set(due);
  listing.keys = listing.keys.filter((k) => !mine.has(k));
  for (const key of mine) listing.settling.add(key);
  const forget = () => {
    for (const key of mine) listing.settling.delete(key);
    // Settled means deleted (a retry is written under a new key): a listing taken meanwhile that
    // still names them would only send the next batch to read objects that are gone.
    listing.keys = listing.keys.filter((k) => !mine.has(k));
  };
  taken();
  let report: BatchReport | null;
  try {
    report = await runTaken(store, application, consumer, run, now, due);
  } catch (err) {
    forget();
    throw err;
  }
  if (!report) {
    forget();
    return null;
  }
  report.settled = (report.settled ?? Promise.resolve()).finally(forget);
  if (!listing.pipeline) await report.settled;
  return report;
}

/** Reads the taken keys, runs them as one batch, and starts settling each by the handler's answer. */
async function runTaken(
  store: Store,
  application: string,
  consumer: QueueConsumer,
  run: RunBatch,
  now: () => number,
  due: string[],
): Promise<BatchReport | null> {
  const { queue } = consumer;
  // The reads, and below the settlements, go at once: a batch waits for one round trip each.
  const read = await Promise.all(
    due.map(async (key) => {
      const object = await store.get(key);
      const message = object && decodeMessage(object.body);
      return message ? { key, message } : null;
    }),
  );
  const batch = read.filter((t): t is { key: string; message: StoredMessage } => t !== null);
  if (batch.length === 0) return null;
  const delivery = batch.map((t) => ({ ...t.message, attempts: t.message.attempts + 1 }));
  let result: QueueResult;
  try {
    result = await run(queue, delivery);
  } catch (err) {
    result = { outcome: 'exception', error: (err as Error).message };
  }
  const retryAll = result.outcome !== 'ok' || result.retryBatch?.retry === true;
  const retryOne = new Map((result.retryMessages ?? []).map((r) => [r.msgId, r.delaySeconds]));
  const batchDelay = result.retryBatch?.delaySeconds ?? consumer.retry_delay;
  const report: BatchReport = {
    delivered: batch.length,
    acked: 0,
    retried: 0,
    deadLettered: 0,
    dropped: [],
    outcome: result.outcome,
    ...(result.error ? { error: result.error } : {}),
  };
  // Each message's fate is decided now; the writes that carry it out go at once. Written back (or
  // moved) first, then deleted: a failure between leaves a message twice, never lost.
  const writes = batch.map(({ key, message }) => {
    const attempts = message.attempts + 1;
    let write: (() => Promise<unknown>) | null = null;
    if (retryAll || retryOne.has(message.id)) {
      if (attempts <= consumer.max_retries) {
        const delay = retryOne.get(message.id) ?? batchDelay;
        write = () => putMessage(store, application, queue, now() + delay * 1000, { ...message, attempts });
        report.retried++;
      } else if (consumer.dead_letter_queue) {
        const dead = consumer.dead_letter_queue;
        // The dead-letter queue's consumer sees it as new: same id and first-send time.
        write = () => putMessage(store, application, dead, now(), { ...message, attempts: 0 });
        report.deadLettered++;
      } else {
        report.dropped.push(message.id);
      }
    } else {
      report.acked++;
    }
    return (async () => {
      if (write) await write();
      await store.delete(key);
    })();
  });
  // A listing's holder may go on to the next batch meanwhile: these keys stay set aside until
  // they are gone (the consumer's loop waits for them before it gives up the lease).
  report.settled = Promise.all(writes).then(() => {});
  return report;
}

/** The time a message's object is named by (its key's last segment, before the id). */
export function visibleMsOf(key: string): number {
  return Number(key.slice(key.lastIndexOf('/') + 1).split('-')[0]);
}

/** Runs one batch through the queue trigger worker listening on `socketPath`. */
export function postBatch(socketPath: string): RunBatch {
  return (queue, messages) =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({
        queue,
        messages: messages.map((m) => ({
          id: m.id,
          timestamp_ms: m.timestamp_ms,
          attempts: m.attempts,
          content_type: m.content_type,
          body: Buffer.from(m.body).toString('base64'),
        })),
      });
      const call = request(
        {
          socketPath,
          path: '/',
          method: 'POST',
          headers: { host: 'localhost', 'content-type': 'application/json' },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (c) => {
            text += c;
          });
          response.on('end', () => {
            try {
              resolve(JSON.parse(text) as QueueResult);
            } catch {
              resolve({ outcome: 'exception', error: `the queue trigger answered ${response.statusCode}` });
            }
          });
        },
      );
      call.on('error', reject);
      call.end(body);
    });
}
