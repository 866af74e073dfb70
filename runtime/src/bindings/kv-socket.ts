// The bindings socket (docs/bindings.md "KV namespaces"): the runtime host's HTTP listener for
// workerd's KV calls, owner-only, with the runtime socket's rules (host/socket.ts
// `listenOwnerOnly`). What each request means is kv.ts's; this module only carries them.

import { rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Store } from '../../../src/store/store.ts';
import { listenOwnerOnly } from '../host/socket.ts';
import { type Entry, handleKv, KV_LIMITS, valueTooLong } from './kv.ts';
import { KvCache } from './kv-cache.ts';

export interface KvSocket {
  path: string;
  close(): Promise<void>;
}

/**
 * Serves KV for every application of the node on the owner-only Unix socket at `path`, with the
 * runtime socket's rules (runtime/src/host/socket.ts `listenOwnerOnly`). The value is read whole
 * (up to the 25 MiB limit, refused past it without reading on), then handed to `handleKv`.
 */
export async function listenKvSocket(
  path: string,
  store: Store,
  log: (line: string) => void,
): Promise<KvSocket> {
  // One cache for every application of the node: the bucket keys it holds name the application.
  const cache = new KvCache<Entry>();
  const server: Server = createServer((req, res) => {
    serve(store, cache, req, res).catch((err: unknown) => {
      log(`a KV request failed: ${(err as Error).message}`);
      if (!res.headersSent) {
        // The bucket failed, not the request: the worker sees `KV <METHOD> failed: 503 ...`.
        res.statusCode = 503;
        res.statusMessage = 'the bucket did not answer the KV request';
      }
      res.end();
    });
  });
  await listenOwnerOnly(server, path, 'KV bindings host');
  return {
    path,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      await rm(path, { force: true });
    },
  };
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
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.headers))
    headers[name] = Array.isArray(value) ? value[0] : value;
  const answer = await handleKv(
    store,
    { method: req.method ?? 'GET', target: req.url ?? '/', headers, body: Buffer.concat(chunks) },
    Date.now(),
    cache,
  );
  // A status text is one line of visible ASCII; the body carries the same words whole.
  res.writeHead(answer.status, answer.statusText?.replace(/[^\x20-\x7e]/g, '?'), answer.headers);
  res.end(answer.body ?? '');
}
