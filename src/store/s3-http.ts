// Two S3 requests of R2's hot path (docs/bindings.md "R2 buckets"): HEAD and PUT of one object,
// signed with AWS Signature Version 4 and sent with Node's `http`/`https` on one keep-alive agent,
// without the AWS SDK's middleware stack. s3.ts keeps its retries, deadlines, nonces and error
// handling and uses these for the streaming store's HEAD and PUT. Measured in one process against
// MinIO on loopback: a HEAD cost 1.8-3.3 ms of CPU through the SDK and 0.6 ms this way; a 1-byte
// PUT 2.5 ms and 0.9 ms.
//
// The streaming GET stays with the SDK. Made here, a GET of 1 MiB cost the runtime host more, not
// less: it leaves almost no garbage on V8's heap, so the young-generation collections that free
// the body's buffers cheaply almost stopped (1-2 per 100 GETs), the buffers piled up outside the
// heap, and V8 answered with full collections every five or six GETs (18-20 per 100, against 1
// with the SDK, whose garbage keeps the young collections coming): 12-13 ms of the host's CPU per
// GET against 6-9 ms (a host with --max-semi-space-size=1, as svc sail's daemon runs).
//
// Answers and failures are shaped as the SDK's are where s3.ts reads them: an answer's `ETag`,
// `ContentLength`, `LastModified` and `Metadata` (the `x-amz-meta-*` headers, lower case);
// a refusal is an Error whose `name` is S3's error code (from the XML answer; for a HEAD, which
// has none, the SDK's `BadRequest`, `Forbidden`, `NotFound`, `PreconditionFailed`, else
// `Http<status>`) with `$metadata.httpStatusCode`.
// A network failure or timeout is an Error without a status, as the SDK's are.
//
// Payload: a body given whole is signed by its SHA-256; a streamed body is sent as
// `UNSIGNED-PAYLOAD`, as the SDK does for a stream (it cannot hash bytes it has not read). The
// signature itself is the SDK's own signer (`@smithy/signature-v4`), given Node's hashes.

import { createHash, createHmac } from 'node:crypto';
import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SignatureV4 } from '@smithy/signature-v4';
import type { SourceData } from '@smithy/types';

export interface S3HttpOptions {
  endpoint: string;
  region: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  /** How long a connection may take to open. */
  connectTimeoutMs: number;
  /** How long a socket may stay silent during a request (headers or body). */
  idleTimeoutMs: number;
}

export interface S3Head {
  ETag: string;
  ContentLength: number;
  LastModified: Date;
  Metadata: Record<string, string>;
}

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const UNSIGNED = 'UNSIGNED-PAYLOAD';
const META = 'x-amz-meta-';

export class S3Http {
  readonly #options: S3HttpOptions;
  readonly #url: URL;
  readonly #basePath: string;
  readonly #host: string;
  readonly #agent: HttpAgent;
  readonly #request: typeof httpRequest;
  readonly #signer: SignatureV4;

  constructor(options: S3HttpOptions) {
    this.#options = options;
    this.#url = new URL(options.endpoint);
    this.#basePath = this.#url.pathname.replace(/\/+$/, '');
    this.#host = this.#url.host;
    const https = this.#url.protocol === 'https:';
    // As the SDK's handler: keep-alive, at most 50 connections.
    this.#agent = https
      ? new HttpsAgent({ keepAlive: true, maxSockets: 50 })
      : new HttpAgent({ keepAlive: true, maxSockets: 50 });
    this.#request = https ? httpsRequest : httpRequest;
    this.#signer = new SignatureV4({
      service: 's3',
      region: options.region,
      credentials: { accessKeyId: options.accessKey, secretAccessKey: options.secretKey },
      sha256: NodeSha256,
      // S3 signs the path as sent, without encoding it a second time.
      uriEscapePath: false,
    });
  }

  close(): void {
    this.#agent.destroy();
  }

  async head(key: string, signal: AbortSignal): Promise<S3Head> {
    const answer = await this.#send('HEAD', key, {}, null, 0, signal);
    answer.resume();
    return facts(answer);
  }

  async put(
    key: string,
    body: Uint8Array | Readable,
    length: number,
    metadata: Record<string, string>,
    condition: { ifMatch?: string; ifNoneMatch?: boolean },
    signal: AbortSignal,
  ): Promise<{ ETag?: string }> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(metadata)) headers[META + name.toLowerCase()] = value;
    if (condition.ifMatch !== undefined) headers['if-match'] = condition.ifMatch;
    if (condition.ifNoneMatch) headers['if-none-match'] = '*';
    const answer = await this.#send('PUT', key, headers, body, length, signal);
    answer.resume();
    return { ETag: answer.headers.etag };
  }

  /** One signed request; resolves with a 2xx answer (its body unread), rejects with S3's refusal. */
  async #send(
    method: 'HEAD' | 'PUT',
    key: string,
    extra: Record<string, string>,
    body: Uint8Array | Readable | null,
    length: number,
    signal: AbortSignal,
  ): Promise<IncomingMessage> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const path = `${this.#basePath}/${encodePath(this.#options.bucket)}/${encodePath(key)}`;
    const payload = body === null ? EMPTY_SHA256 : body instanceof Uint8Array ? sha256Hex(body) : UNSIGNED;
    const headers: OutgoingHttpHeaders = await this.#sign(method, path, {
      ...extra,
      ...(body !== null ? { 'content-length': String(length) } : {}),
      'x-amz-content-sha256': payload,
    });
    return new Promise<IncomingMessage>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', abort);
        reject(err);
      };
      const call = this.#request({
        protocol: this.#url.protocol,
        hostname: this.#url.hostname,
        port: this.#url.port,
        method,
        path,
        headers,
        agent: this.#agent,
      });
      const abort = () => call.destroy(signal.reason as Error);
      signal.addEventListener('abort', abort, { once: true });
      call.setTimeout(this.#options.idleTimeoutMs, () =>
        call.destroy(
          Object.assign(new Error(`no answer from ${this.#host} within ${this.#options.idleTimeoutMs} ms`), {
            name: 'TimeoutError',
          }),
        ),
      );
      call.on('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(
          () =>
            call.destroy(
              Object.assign(new Error(`could not connect to ${this.#host}`), { name: 'TimeoutError' }),
            ),
          this.#options.connectTimeoutMs,
        );
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      call.on('error', fail);
      call.on('response', (answer) => {
        const status = answer.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          if (settled) return answer.resume();
          settled = true;
          // The deadline covers the answer's headers; the body is the caller's to read or destroy.
          signal.removeEventListener('abort', abort);
          resolve(answer);
          return;
        }
        refusal(method, answer).then(fail, fail);
      });
      if (body === null) call.end();
      else if (body instanceof Uint8Array) call.end(body);
      // A body that fails midway destroys the request: the bucket never sees a whole object.
      else pipeline(body, call).catch((err: unknown) => fail(err));
    });
  }

  /** The request's headers with `host`, `x-amz-date` and the SigV4 `authorization`. */
  async #sign(method: string, path: string, given: Record<string, string>): Promise<Record<string, string>> {
    const signed = await this.#signer.sign({
      method,
      protocol: this.#url.protocol,
      hostname: this.#url.hostname,
      path,
      query: {},
      headers: { ...given, host: this.#host },
    });
    return signed.headers;
  }
}

/** SHA-256 and HMAC-SHA256 from node:crypto in the shape the signer asks for. */
class NodeSha256 {
  readonly #hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(secret?: SourceData) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Uint8Array): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return this.#hash.digest();
  }
}

function bytes(data: SourceData): string | Uint8Array {
  if (typeof data === 'string' || data instanceof Uint8Array) return data;
  return ArrayBuffer.isView(data)
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : new Uint8Array(data);
}

function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** S3's URI encoding of a path: every byte but the unreserved ones and `/`, as %XX. */
function encodePath(path: string): string {
  return encodeURIComponent(path)
    .replace(/%2F/g, '/')
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function facts(answer: IncomingMessage): S3Head {
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(answer.headers))
    if (name.startsWith(META) && typeof value === 'string') metadata[name.slice(META.length)] = value;
  const modified = answer.headers['last-modified'];
  return {
    ETag: answer.headers.etag ?? '',
    ContentLength: Number(answer.headers['content-length'] ?? 0),
    LastModified: modified ? new Date(modified) : new Date(0),
    Metadata: metadata,
  };
}

/** The names the SDK gives a HEAD's refusals, which carry no error document. */
const HEAD_ERRORS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  412: 'PreconditionFailed',
};

/** S3's refusal as an Error named by its code, with the status where the SDK keeps it. */
async function refusal(method: string, answer: IncomingMessage): Promise<Error> {
  const status = answer.statusCode ?? 0;
  let text = '';
  if (method !== 'HEAD') {
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of answer) {
      // An error document is small; nothing past 64 KiB is kept.
      if (length < 65536) chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
    }
    text = Buffer.concat(chunks).toString('utf8');
  } else answer.resume();
  const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1];
  const name = code ?? HEAD_ERRORS[status] ?? `Http${status}`;
  return Object.assign(new Error(message ?? `${method} answered ${status}`), {
    name,
    $metadata: { httpStatusCode: status },
  });
}
