// The D1 socket (docs/bindings.md "D1 databases"): the runtime host's listener for workerd's D1
// binding requests, owner-only with the runtime socket's rules (host/socket.ts
// `listenOwnerOnly`), beside the bindings socket. The application and database come from the
// headers workerd's config injects (r2-headers.ts), never from the worker.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeOwnerOnly, listenOwnerOnly } from '../host/socket.ts';
import type { D1Service } from './d1.ts';
import { D1_LIMITS } from './d1-sql.ts';
import { D1_APPLICATION_HEADER, D1_DATABASE_HEADER } from './r2-headers.ts';

/** The most one request's JSON may hold: a batch of statements at D1's size limits. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;

export interface D1Socket {
  path: string;
  close(): Promise<void>;
}

export async function listenD1Socket(
  path: string,
  d1: D1Service,
  log: (line: string) => void,
  /** Told of each request as it arrives (the node's metrics count binding calls: src/metrics/). */
  observe?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<D1Socket> {
  const server: Server = createServer((req, res) => {
    observe?.(req, res);
    const answer = async () => {
      const chunks: Buffer[] = [];
      let length = 0;
      for await (const chunk of req) {
        length += (chunk as Buffer).length;
        if (length <= MAX_REQUEST_BYTES) chunks.push(chunk as Buffer);
      }
      const url = new URL(req.url ?? '/', 'http://d1');
      const out =
        length > MAX_REQUEST_BYTES
          ? {
              status: 200,
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({
                success: false,
                error: `the request is larger than ${MAX_REQUEST_BYTES} bytes (statements up to ${D1_LIMITS.maxStatementBytes}): SQLITE_TOOBIG`,
              }),
            }
          : await d1.handle({
              application: String(req.headers[D1_APPLICATION_HEADER] ?? ''),
              database: String(req.headers[D1_DATABASE_HEADER] ?? ''),
              endpoint: url.pathname,
              format: url.searchParams.get('resultsFormat'),
              body: Buffer.concat(chunks).toString(),
            });
      res.writeHead(out.status, out.headers);
      res.end(out.body);
    };
    answer().catch((err: Error) => {
      log(`a D1 request failed: ${err.message}`);
      if (!res.headersSent) res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ success: false, error: `the database could not be reached: ${err.message}` }));
    });
  });
  await listenOwnerOnly(server, path, 'D1 host');
  return {
    path,
    async close() {
      await closeOwnerOnly(server, path);
    },
  };
}
