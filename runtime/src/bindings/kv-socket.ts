// The bindings socket (docs/bindings.md "KV namespaces", "R2 buckets", "Queues"): the runtime
// host's one HTTP listener for workerd's KV, R2 and queue calls, owner-only, with the runtime
// socket's rules (host/socket.ts `listenOwnerOnly`). A request carrying the R2 headers workerd's
// config injects (r2-headers.ts) is R2's (r2.ts), one carrying the queue headers a queue
// producer's (queue.ts), any other KV's (kv.ts); this module only carries them.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { sendBody } from '../../../src/store/s3-http.ts';
import type { Store } from '../../../src/store/store.ts';
import { closeOwnerOnly, listenOwnerOnly } from '../host/socket.ts';
import { type Entry, handleKv, KV_LIMITS, valueTooLong } from './kv.ts';
import { KvCache } from './kv-cache.ts';
import { handleQueue, QUEUE_LIMITS, QUEUE_NAME_HEADER, type QueueSent } from './queue.ts';
import { handleR2Streamed, R2_LIMITS, type R2Request, refusalAnswer, valueTooLarge } from './r2.ts';
import { R2_BUCKET_HEADER } from './r2-headers.ts';

export interface KvSocket {
  path: string;
  close(): Promise<void>;
}

/** The most an R2 put's request JSON may add to its value. */
const R2_MAX_REQUEST_JSON_BYTES = 1024 * 1024;

/**
 * Serves KV and R2 for every application of the node on the owner-only Unix socket at `path`,
 * with the runtime socket's rules (runtime/src/host/socket.ts `listenOwnerOnly`). A body is read
 * whole (up to the KV value limit, or R2's), refused past it without reading on; but an R2 put's
 * value is handed to r2.ts as it arrives, and a get's bytes passed back as the bucket sends them.
 */
export async function listenKvSocket(
  path: string,
  store: Store,
  log: (line: string) => void,
  /** Told of each request as it arrives (the node's metrics count binding calls: src/metrics/). */
  observe?: (req: IncomingMessage, res: ServerResponse) => void,
  /** Told of each message a queue producer wrote (queue.ts `QueueSent`). */
  queueSent?: QueueSent,
): Promise<KvSocket> {
  // One cache for every application of the node: the bucket keys it holds name the application.
  const cache = new KvCache<Entry>();
  const server: Server = createServer((req, res) => {
    observe?.(req, res);
    if (req.headers[QUEUE_NAME_HEADER] !== undefined) {
      serveQueue(store, req, res, queueSent).catch((err: unknown) => {
        log(`a queue send failed: ${(err as Error).message}`);
        if (!res.headersSent) {
          // The worker sees `Queue send failed: <this>`: the bucket failed, not the message.
          res.writeHead(503, 'the bucket did not take the message', {
            'cf-queues-error-cause': 'the bucket did not take the message',
          });
        }
        res.end();
      });
      return;
    }
    const r2 = req.headers[R2_BUCKET_HEADER] !== undefined;
    (r2 ? serveR2(store, req, res) : serve(store, cache, req, res)).catch((err: unknown) => {
      log(`${r2 ? 'an R2' : 'a KV'} request failed: ${(err as Error).message}`);
      if (!res.headersSent) {
        // The bucket failed, not the request: the worker sees KV's `KV <METHOD> failed: 503 ...`,
        // or R2's internal error.
        res.statusCode = 503;
        res.statusMessage = `the bucket did not answer the ${r2 ? 'R2' : 'KV'} request`;
        if (r2)
          res.setHeader(
            'cf-r2-error',
            JSON.stringify({
              version: 1,
              v4code: 10001,
              message: 'We encountered an internal error. Please try again.',
            }),
          );
      }
      res.end();
    });
  });
  await listenOwnerOnly(server, path, 'bindings host');
  return {
    path,
    async close() {
      await closeOwnerOnly(server, path);
    },
  };
}

/** The bindings socket under the name of what it serves; the same listener. */
export const listenBindingsSocket = listenKvSocket;

/** The body whole, or null once it passes `limit` bytes (the rest is drained unread). */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    length += (chunk as Buffer).length;
    if (length <= limit) chunks.push(chunk as Buffer);
  }
  return length > limit ? null : Buffer.concat(chunks);
}

function lowerCaseHeaders(req: IncomingMessage): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.headers))
    headers[name] = Array.isArray(value) ? value[0] : value;
  return headers;
}

async function serveR2(store: Store, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const limit = R2_LIMITS.maxValueBytes + R2_MAX_REQUEST_JSON_BYTES;
  const tooLarge = () => {
    const answer = refusalAnswer(valueTooLarge());
    res.writeHead(answer.status, answer.headers);
    res.end();
  };
  if (Number(req.headers['content-length']) > limit) {
    tooLarge();
    req.resume();
    return;
  }
  const headers = lowerCaseHeaders(req);
  const request = (await streamedPut(req, headers)) ?? (await wholeRequest(req, headers, limit));
  if (request === null) return tooLarge();
  const answer = await handleR2Streamed(store, request);
  const length = answer.body.byteLength + (answer.tail?.length ?? 0);
  res.writeHead(answer.status, { ...answer.headers, 'content-length': String(length) });
  if (!answer.tail) {
    res.end(answer.body);
    return;
  }
  res.write(answer.body);
  // A bucket that fails midway cuts the answer short: workerd sees the body end early and the
  // worker's read of it fails. An S3 GET's bytes go out from the memory they were read into
  // (s3-http.ts `sendBody`).
  await sendBody(answer.tail.stream, res).catch(() => res.destroy());
}

/**
 * A put's request JSON read, its value left in `req` to pass on as it arrives: when workerd gives
 * the length (a put's value always has one) and says where the JSON ends. Else null.
 */
async function streamedPut(
  req: IncomingMessage,
  headers: Record<string, string | undefined>,
): Promise<R2Request | null> {
  const total = Number(headers['content-length']);
  const size = Number(headers['cf-r2-metadata-size']);
  if (req.method !== 'PUT' || !Number.isInteger(total) || !Number.isInteger(size) || size < 0 || size > total)
    return null;
  const body = await readPrefix(req, size);
  if (body === null) return null;
  return { method: 'PUT', headers, body, value: { stream: req, length: total - size } };
}

async function wholeRequest(
  req: IncomingMessage,
  headers: Record<string, string | undefined>,
  limit: number,
): Promise<R2Request | null> {
  const body = await readBody(req, limit);
  return body && { method: req.method ?? 'GET', headers, body };
}

/** The first `size` bytes of `stream`, the rest left in it; null when it ends before. */
async function readPrefix(stream: Readable, size: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let length = 0;
  while (length < size) {
    const chunk = stream.read() as Buffer | null;
    if (chunk === null) {
      if (stream.readableEnded || stream.destroyed) return null;
      await new Promise<void>((resolve, reject) => {
        const done = () => {
          stream.off('readable', done).off('end', done).off('error', failed);
          resolve();
        };
        const failed = (err: Error) => {
          stream.off('readable', done).off('end', done).off('error', failed);
          reject(err);
        };
        stream.on('readable', done).on('end', done).on('error', failed);
      });
      continue;
    }
    chunks.push(chunk);
    length += chunk.length;
  }
  const read = Buffer.concat(chunks);
  if (read.length > size) stream.unshift(read.subarray(size));
  return read.subarray(0, size);
}

async function serveQueue(
  store: Store,
  req: IncomingMessage,
  res: ServerResponse,
  sent: QueueSent | undefined,
): Promise<void> {
  // A batch's JSON carries its bodies in base64: a third more than the bytes, plus each message's fields.
  const limit = Math.ceil((QUEUE_LIMITS.batchBytes * 4) / 3) + QUEUE_LIMITS.batchMessages * 128 + 1024;
  const body = await readBody(req, limit);
  const url = new URL(req.url ?? '/', 'http://queue');
  const answer =
    body === null
      ? { status: 413, reason: `the call is larger than ${limit} bytes` }
      : await handleQueue(
          store,
          { method: req.method ?? 'GET', path: url.pathname, headers: req.headers, body },
          sent,
        );
  const text = answer.body === undefined ? '' : JSON.stringify(answer.body);
  const reason = answer.reason?.replace(/[^\x20-\x7e]/g, '?');
  res.writeHead(answer.status, reason, {
    'content-type': 'application/json',
    ...(reason ? { 'cf-queues-error-cause': reason } : {}),
  });
  res.end(text);
}

async function serve(
  store: Store,
  cache: KvCache<Entry>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const declared = Number(req.headers['content-length']);
  if (declared > KV_LIMITS.maxValueBytes) {
    const refusal = valueTooLong(declared);
    res.writeHead(refusal.status, refusal.message.replace(/[^\x20-\x7e]/g, '?'));
    res.end(refusal.message);
    req.resume();
    return;
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    length += (chunk as Buffer).length;
    if (length <= KV_LIMITS.maxValueBytes) chunks.push(chunk as Buffer);
  }
  if (length > KV_LIMITS.maxValueBytes) {
    const refusal = valueTooLong(length);
    res.writeHead(refusal.status, refusal.message);
    res.end(refusal.message);
    return;
  }
  const answer = await handleKv(
    store,
    {
      method: req.method ?? 'GET',
      target: req.url ?? '/',
      headers: lowerCaseHeaders(req),
      body: Buffer.concat(chunks),
    },
    Date.now(),
    cache,
  );
  // A status text is one line of visible ASCII; the body carries the same words whole.
  res.writeHead(answer.status, answer.statusText?.replace(/[^\x20-\x7e]/g, '?'), answer.headers);
  res.end(answer.body ?? '');
}
