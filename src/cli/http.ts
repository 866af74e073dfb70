// One HTTP exchange of the command line with a node, over node:http(s) rather than fetch: fetch
// refuses the ports browsers block (6000, 6665-6669, ...), and a node may listen on any port.

import type { IncomingMessage } from 'node:http';

// Node's http and https modules are taken as the modules themselves, not through their ES module
// bindings: binding them reads every export once, and some of those load Node's fetch (undici),
// 50-60 ms of a command's start (docs/decisions.md "Start-up"). For the same reason the answer's
// headers are no fetch Headers.
const { request: httpRequest } = process.getBuiltinModule('node:http');
const { request: httpsRequest } = process.getBuiltinModule('node:https');

/** An answer's headers, read by name as fetch's Headers reads them (repeats joined with ", "). */
export class AnswerHeaders {
  readonly #values = new Map<string, string>();

  constructor(raw: readonly string[] = []) {
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!.toLowerCase();
      const before = this.#values.get(name);
      this.#values.set(name, before === undefined ? raw[i + 1]! : `${before}, ${raw[i + 1]!}`);
    }
  }

  get(name: string): string | null {
    return this.#values.get(name.toLowerCase()) ?? null;
  }
}

export interface HttpAnswer {
  status: number;
  headers: Pick<Headers, 'get'>;
  text: string;
  /** The body's bytes, for an answer that is no text (`svc kv key get`). */
  bytes: Buffer;
}

export interface HttpOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Deadline for the whole exchange; none when absent. */
  timeoutMs?: number;
}

/** Thrown when nothing answered in time; `code` reads like a socket error's. */
export class HttpTimeout extends Error {
  readonly code = 'timed out';
}

export function httpExchange(url: URL, options: HttpOptions): Promise<HttpAnswer> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(url, { method: options.method, headers: options.headers });
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => request.destroy(new HttpTimeout('timed out')), options.timeoutMs);
    request.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    request.on('response', (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      response.on('end', () => {
        clearTimeout(timer);
        const headers = new AnswerHeaders(response.rawHeaders);
        const bytes = Buffer.concat(chunks);
        resolve({ status: response.statusCode ?? 0, headers, text: bytes.toString('utf8'), bytes });
      });
    });
    request.end(options.body);
  });
}
