// One HTTP exchange of the command line with a node, over node:http(s) rather than fetch: fetch
// refuses the ports browsers block (6000, 6665-6669, ...), and a node may listen on any port.

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface HttpAnswer {
  status: number;
  headers: Headers;
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
        const headers = new Headers();
        for (let i = 0; i + 1 < response.rawHeaders.length; i += 2)
          headers.append(response.rawHeaders[i]!, response.rawHeaders[i + 1]!);
        const bytes = Buffer.concat(chunks);
        resolve({ status: response.statusCode ?? 0, headers, text: bytes.toString('utf8'), bytes });
      });
    });
    request.end(options.body);
  });
}
