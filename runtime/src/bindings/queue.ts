// Queue producers (docs/bindings.md "Queues"): what a worker's `env.<QUEUE>.send()` and
// `sendBatch()` reach. workerd's `queue` binding sends `POST /message` (one body, its format in
// `X-Msg-Fmt`, its delay in `X-Msg-Delay-Secs`), `POST /batch` (JSON: each message's base64 body,
// `contentType` and `delaySecs`; the batch's delay in `X-Msg-Delay-Secs`) and `GET /metrics`
// (workerd's src/workerd/api/queue.c++; Miniflare's broker answers the same shapes). The runtime
// host answers them on the bindings socket, from the headers workerd's config injects: the
// application, the queue, and the producer's `delivery_delay`.
//
// Each message becomes one object in the fleet's bucket, named by the time it may be delivered and
// its id (src/registry/keys.ts `runtimeQueueMessage`): a JSON line (id, timestamp, format,
// attempts), then the body's bytes as workerd serialized them. A send is answered once every
// message of it is in the bucket, so an acknowledged message survives any node.

import { randomBytes } from 'node:crypto';
import { keys } from '../../../src/registry/keys.ts';
import { isQueueName } from '../../../src/registry/names.ts';
import type { Store } from '../../../src/store/store.ts';

/** The headers workerd's config injects into every call of a queue binding (runtime/src/workerd.ts). */
export const QUEUE_APPLICATION_HEADER = 'cell-queue-application';
export const QUEUE_NAME_HEADER = 'cell-queue-name';
/** The producer's `delivery_delay` (seconds), when it has one. */
export const QUEUE_DELIVERY_DELAY_HEADER = 'cell-queue-delivery-delay';

/** The message formats workerd sends (`contentType` of `send()`); `v8` is the structured clone. */
export const QUEUE_CONTENT_TYPES = ['text', 'bytes', 'json', 'v8'] as const;
export type QueueContentType = (typeof QUEUE_CONTENT_TYPES)[number];

/** Cloudflare Queues' limits (developers.cloudflare.com/queues/platform/limits/), as Miniflare checks them. */
export const QUEUE_LIMITS = {
  messageBytes: 128_000,
  batchMessages: 100,
  batchBytes: 256_000,
  /** `delaySeconds`, `delivery_delay` and `retry_delay`: at most 24 hours. */
  delaySeconds: 86_400,
} as const;

/** One message as it waits in the bucket. */
export interface StoredMessage {
  id: string;
  /** When it was first sent (ms since the epoch): the consumer's `message.timestamp`. */
  timestamp_ms: number;
  content_type: QueueContentType;
  /** Deliveries so far; the next delivery's `message.attempts` is this plus one. */
  attempts: number;
  body: Uint8Array;
}

/** The object's bytes: one JSON line, then the body. */
export function encodeMessage(message: StoredMessage): Buffer {
  const { body, ...head } = message;
  return Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), body]);
}

/** The message an object holds; null when it is not one (written by something else). */
export function decodeMessage(bytes: Uint8Array): StoredMessage | null {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = data.indexOf(0x0a);
  if (end < 0) return null;
  try {
    const head = JSON.parse(data.subarray(0, end).toString('utf8')) as Partial<StoredMessage>;
    if (
      typeof head.id !== 'string' ||
      typeof head.timestamp_ms !== 'number' ||
      typeof head.attempts !== 'number' ||
      !QUEUE_CONTENT_TYPES.includes(head.content_type as QueueContentType)
    )
      return null;
    return {
      id: head.id,
      timestamp_ms: head.timestamp_ms,
      content_type: head.content_type as QueueContentType,
      attempts: head.attempts,
      body: data.subarray(end + 1),
    };
  } catch {
    return null;
  }
}

/** A message id as Cloudflare's look: 32 hex digits. */
export function newMessageId(): string {
  return randomBytes(16).toString('hex');
}

/** Writes one message to wait in `queue` until `visibleMs`. */
export async function putMessage(
  store: Store,
  application: string,
  queue: string,
  visibleMs: number,
  message: StoredMessage,
): Promise<void> {
  await store.put(
    keys.runtimeQueueMessage(application, queue, visibleMs, message.id),
    encodeMessage(message),
  );
}

/** What a producer call is answered: a status, and for a refusal the reason workerd shows the worker. */
export interface QueueAnswer {
  status: number;
  /** Becomes `Queue send failed: <reason>`, or with `queue_expose_error_codes` `<reason> (15000)`. */
  reason?: string;
  body?: unknown;
}

export interface QueueCall {
  method: string;
  /** The request's path: `/message`, `/batch` or `/metrics`. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** Told of each message a producer wrote, so a consumer on this node can take it at once. */
export type QueueSent = (application: string, queue: string, visibleMs: number) => void;

/** Answers one call of a queue binding. */
export async function handleQueue(
  store: Store,
  call: QueueCall,
  sent: QueueSent = () => {},
  now: () => number = Date.now,
): Promise<QueueAnswer> {
  const application = header(call, QUEUE_APPLICATION_HEADER);
  const queue = header(call, QUEUE_NAME_HEADER);
  if (!application || !isQueueName(queue)) return refuse(400, 'the call names no queue');
  const producerDelay = Number(header(call, QUEUE_DELIVERY_DELAY_HEADER) ?? 0);
  if (call.method === 'GET' && call.path === '/metrics')
    return { status: 200, body: await backlog(store, application, queue) };
  if (call.method !== 'POST' || (call.path !== '/message' && call.path !== '/batch'))
    return refuse(404, `no queue operation ${call.method} ${call.path}`);
  const callDelay = delayOf(header(call, 'x-msg-delay-secs'));
  if (callDelay === 'bad')
    return refuse(
      400,
      `message delay ${header(call, 'x-msg-delay-secs')} is invalid: a whole number of seconds from 0 to ${QUEUE_LIMITS.delaySeconds}`,
    );
  let messages: { body: Buffer; contentType: QueueContentType; delay: number | null }[];
  if (call.path === '/message') {
    const format = header(call, 'x-msg-fmt') ?? 'v8';
    if (!QUEUE_CONTENT_TYPES.includes(format as QueueContentType))
      return refuse(
        400,
        `message content type ${format} is invalid; if specified, must be one of 'text', 'json', 'bytes', or 'v8'`,
      );
    messages = [{ body: call.body, contentType: format as QueueContentType, delay: null }];
  } else {
    const parsed = parseBatch(call.body);
    if (typeof parsed === 'string') return refuse(400, parsed);
    messages = parsed;
    if (messages.length > QUEUE_LIMITS.batchMessages)
      return refuse(
        413,
        `batch message count of ${messages.length} exceeds limit of ${QUEUE_LIMITS.batchMessages}`,
      );
    const total = messages.reduce((sum, m) => sum + m.body.length, 0);
    if (total > QUEUE_LIMITS.batchBytes)
      return refuse(413, `batch size of ${total} bytes exceeds limit of ${QUEUE_LIMITS.batchBytes}`);
  }
  for (const m of messages)
    if (m.body.length > QUEUE_LIMITS.messageBytes)
      return refuse(
        413,
        `message length of ${m.body.length} bytes exceeds limit of ${QUEUE_LIMITS.messageBytes}`,
      );
  const sentMs = now();
  await Promise.all(
    messages.map(async (m) => {
      // A message's own delay, else the call's, else the producer's `delivery_delay`.
      const delay = m.delay ?? callDelay ?? (Number.isFinite(producerDelay) ? producerDelay : 0);
      const visibleMs = sentMs + delay * 1000;
      const message = {
        id: newMessageId(),
        timestamp_ms: sentMs,
        content_type: m.contentType,
        attempts: 0,
        body: m.body,
      };
      await putMessage(store, application, queue, visibleMs, message);
      sent(application, queue, visibleMs);
    }),
  );
  // The backlog is not counted on a send (it would cost a listing per send): 0 is the metrics'
  // "no data", which workerd turns into an absent oldest timestamp.
  return {
    status: 200,
    body: { metadata: { metrics: { backlogCount: 0, backlogBytes: 0, oldestMessageTimestamp: 0 } } },
  };
}

/** A queue's waiting messages, as `queue.metrics()` answers: one listing per 1,000 messages. */
export async function backlog(
  store: Store,
  application: string,
  queue: string,
): Promise<{ backlogCount: number; backlogBytes: number; oldestMessageTimestamp: number }> {
  const { objects } = await store.list(keys.runtimeQueueMessagesPrefix(application, queue), {
    recursive: true,
  });
  let oldest = 0;
  for (const o of objects) {
    const visible = Number(o.key.slice(o.key.lastIndexOf('/') + 1).split('-')[0]);
    if (oldest === 0 || visible < oldest) oldest = visible;
  }
  return {
    backlogCount: objects.length,
    backlogBytes: objects.reduce((sum, o) => sum + o.size, 0),
    oldestMessageTimestamp: oldest,
  };
}

function parseBatch(
  body: Buffer,
): { body: Buffer; contentType: QueueContentType; delay: number | null }[] | string {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return 'the batch is not JSON';
  }
  const list = (doc as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(list)) return 'the batch has no "messages" list';
  const out: { body: Buffer; contentType: QueueContentType; delay: number | null }[] = [];
  for (const m of list as Record<string, unknown>[]) {
    if (typeof m?.body !== 'string') return 'a message of the batch has no base64 "body"';
    const contentType = (m.contentType ?? 'v8') as QueueContentType;
    if (!QUEUE_CONTENT_TYPES.includes(contentType))
      return `message content type ${String(m.contentType)} is invalid; if specified, must be one of 'text', 'json', 'bytes', or 'v8'`;
    const delay = m.delaySecs === undefined ? null : delayOf(String(m.delaySecs));
    if (delay === 'bad')
      return `message delay ${String(m.delaySecs)} is invalid: a whole number of seconds from 0 to ${QUEUE_LIMITS.delaySeconds}`;
    out.push({ body: Buffer.from(m.body, 'base64'), contentType, delay });
  }
  return out;
}

/** A delay header's seconds; null when absent, 'bad' when not a whole number within the limit. */
function delayOf(value: string | undefined): number | null | 'bad' {
  if (value === undefined) return null;
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 && n <= QUEUE_LIMITS.delaySeconds && value.trim() !== '' ? n : 'bad';
}

function header(call: QueueCall, name: string): string | undefined {
  const v = call.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function refuse(status: number, reason: string): QueueAnswer {
  return { status, reason };
}
