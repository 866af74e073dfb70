// Three S3 requests of R2's hot path (docs/bindings.md "R2 buckets"): HEAD, PUT and GET of one
// object, signed with AWS Signature Version 4 without the AWS SDK's middleware stack. s3.ts keeps
// its retries, deadlines, nonces and error handling and uses these for the streaming store's
// calls. Measured in one process against MinIO on loopback: a HEAD cost 1.8-3.3 ms of CPU through
// the SDK and 0.6 ms this way; a 1-byte PUT 2.5 ms and 0.9 ms.
//
// HEAD and PUT go through Node's `http`/`https` on one keep-alive agent. The GET does not: made
// that way, a GET of 1 MiB cost the runtime host more than the SDK's (Node allocates a buffer per
// socket read and its HTTP parser copies the body out of it; with the SDK's own garbage gone, V8's
// young collections nearly stopped, the buffers piled up outside the heap and full collections
// came every five or six GETs). So the GET is a request of its own on a raw keep-alive connection
// (GetConnection) that parses the answer's head itself (http-head.ts) and hands the body on as it
// was read (S3Body, `sendBody`): over plain TCP read into a few buffers of its own, so no memory is
// allocated per byte; over TLS one Buffer per read, with no parser's copy. Only an answer framed
// by its Content-Length is read so; else `get` answers null and s3.ts asks the SDK.
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
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { connect as tlsConnect } from 'node:tls';
import type { SignatureV4 } from '@smithy/signature-v4';
import type { SourceData } from '@smithy/types';
import { type HttpHead, MAX_HEAD_BYTES, parseHttpHead } from './http-head.ts';

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
  /**
   * The SDK's signer, loaded at the first request: the runtime host imports this file for
   * `sendBody` whatever its bucket, and a node on a local-directory bucket never signs.
   */
  #signer: Promise<SignatureV4> | null = null;

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
  }

  close(): void {
    this.#closed = true;
    this.#agent.destroy();
    for (const connection of this.#idle.splice(0)) connection.socket.destroy();
  }

  /** Connections of the GET kept open between requests (at most IDLE_CONNECTIONS). */
  readonly #idle: GetConnection[] = [];

  /**
   * One object (or `range` of it) as it arrives (see GetConnection); a refusal as #send's. Null
   * when this GET cannot be made here: a 2xx answer not framed by a Content-Length (chunked, or
   * ended by closing), or one other than 200 and 206; the caller then asks another client.
   */
  async get(
    key: string,
    range: { offset: number; length: number } | undefined,
    signal: AbortSignal,
  ): Promise<S3Object | null> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const path = `${this.#basePath}/${encodePath(this.#options.bucket)}/${encodePath(key)}`;
    const headers = await this.#sign('GET', path, {
      ...(range ? { range: `bytes=${range.offset}-${range.offset + range.length - 1}` } : {}),
      'x-amz-content-sha256': EMPTY_SHA256,
    });
    let text = `GET ${path} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
    text += '\r\n';
    let connection = this.#idle.pop();
    while (connection && !connection.reusable) connection = this.#idle.pop();
    const tls = this.#url.protocol === 'https:';
    connection ??= new GetConnection(
      {
        hostname: this.#url.hostname,
        port: Number(this.#url.port || (tls ? 443 : 80)),
        tls,
        host: this.#host,
      },
      this.#options,
      (done) => {
        if (this.#idle.length < IDLE_CONNECTIONS && !this.#closed) this.#idle.push(done);
        else done.socket.destroy();
      },
    );
    return connection.get(text, signal);
  }

  #closed = false;

  async head(key: string, signal: AbortSignal): Promise<S3Head> {
    const answer = await this.#send('HEAD', key, {}, null, 0, signal);
    answer.resume();
    return facts(answer.headers);
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
    const { region, accessKey, secretKey } = this.#options;
    this.#signer ??= import('@smithy/signature-v4').then(
      ({ SignatureV4 }) =>
        new SignatureV4({
          service: 's3',
          region,
          credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
          sha256: NodeSha256,
          // S3 signs the path as sent, without encoding it a second time.
          uriEscapePath: false,
        }),
    );
    const signed = await (await this.#signer).sign({
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

export interface S3Object extends S3Head {
  /** The bytes, `ContentLength` of them. */
  Body: S3Body;
}

/** Bytes of one read; a GET's connection reads into PIECES of them in turn. */
const PIECE = 64 * 1024;
const PIECES = 4;
/** Connections of the GET kept open while idle; more are closed once their answer is read. */
const IDLE_CONNECTIONS = 8;
/** An error document is small; one longer (or of no stated length) is not read. */
const MAX_ERROR_BYTES = 64 * 1024;

/**
 * One keep-alive connection of the GET, one request at a time, over plain TCP or TLS; only how
 * the bytes arrive differs. Over TCP the socket reads (Node's `onread`) into PIECES buffers of the
 * connection's own in turn, never into memory allocated per read. Over TLS each read is a Buffer
 * of its own (`data` events): a TLS socket does not keep to `onread` while paused (it decrypts
 * into a buffer still held), and one Buffer per read is still far less than an HTTP client's
 * parser and body copy. Either way the head is copied out and parsed (http-head.ts), and each read
 * of the body is handed on as it is (S3Body) and counted as held until the writer it went to has
 * let it go (its write callback); while the connection holds as much as it may (`#room`), the
 * socket stops reading. Only a body framed by its Content-Length is read here. A connection whose
 * answer was not read whole, or whose reads may still be held by a writer that went away, is
 * closed, never reused.
 */
class GetConnection {
  readonly socket: Socket;
  /** The buffers a TCP socket reads into, in turn; null over TLS. */
  readonly #pieces: Buffer[] | null;
  /** The piece the next TCP read lands in. */
  #next = 0;
  /** Reads handed on and not yet let go, and their bytes; they are let go in the order given. */
  #held = 0;
  #heldBytes = 0;
  #paused = false;
  readonly #head = Buffer.allocUnsafe(MAX_HEAD_BYTES + 1);
  #headLength = 0;
  #state: 'idle' | 'head' | 'body' | 'error' | 'done' | 'dead' = 'idle';
  #keepAlive = true;
  #remaining = 0;
  #body: S3Body | null = null;
  #answer: { resolve: (answer: S3Object | null) => void; reject: (err: unknown) => void } | null = null;
  #refusal: { status: number; chunks: Buffer[] } | null = null;
  readonly #release: (connection: GetConnection) => void;

  readonly #idleTimeoutMs: number;

  constructor(
    endpoint: { hostname: string; port: number; tls: boolean; host: string },
    timeouts: { connectTimeoutMs: number; idleTimeoutMs: number },
    release: (connection: GetConnection) => void,
  ) {
    this.#release = release;
    this.#idleTimeoutMs = timeouts.idleTimeoutMs;
    const { hostname, port, host } = endpoint;
    if (endpoint.tls) {
      this.#pieces = null;
      // SNI names the host, never an address (which TLS does not allow).
      this.socket = tlsConnect({ host: hostname, port, ...(isIP(hostname) ? {} : { servername: hostname }) });
      this.socket.setNoDelay(true);
      this.socket.on('data', (bytes: Buffer) => {
        if (!this.#read(bytes)) this.socket.pause();
      });
    } else {
      const pieces = Array.from({ length: PIECES }, () => Buffer.allocUnsafe(PIECE));
      this.#pieces = pieces;
      this.socket = netConnect({
        host: hostname,
        port,
        noDelay: true,
        onread: {
          buffer: () => pieces[this.#next]!,
          callback: (length: number) => this.#read(pieces[this.#next]!.subarray(0, length)),
        },
      });
    }
    const timer = setTimeout(
      () =>
        this.socket.destroy(
          Object.assign(new Error(`could not connect to ${host}`), { name: 'TimeoutError' }),
        ),
      timeouts.connectTimeoutMs,
    );
    // Over TLS the handshake is part of connecting.
    this.socket.once(endpoint.tls ? 'secureConnect' : 'connect', () => clearTimeout(timer));
    // Armed by each request (`get`), disarmed once its answer was read.
    this.socket.on('timeout', () =>
      this.socket.destroy(
        Object.assign(new Error(`no answer from ${host} within ${timeouts.idleTimeoutMs} ms`), {
          name: 'TimeoutError',
        }),
      ),
    );
    this.socket.on('error', (err) => this.#fail(err));
    this.socket.on('close', () => {
      clearTimeout(timer);
      this.#fail(new Error(`the connection to ${host} closed before the answer ended`));
    });
  }

  /** Whether the bytes handed on are in memory the connection reads into again (TCP's pieces). */
  get reusesMemory(): boolean {
    return this.#pieces !== null;
  }

  /** Idle, open, nothing held: may carry another request. */
  get reusable(): boolean {
    return this.#state === 'idle' && !this.socket.destroyed;
  }

  get(request: string, signal: AbortSignal): Promise<S3Object | null> {
    return new Promise<S3Object | null>((resolve, reject) => {
      const abort = () => this.socket.destroy(signal.reason as Error);
      signal.addEventListener('abort', abort, { once: true });
      // The deadline covers the answer's head; the body is the caller's to read or destroy.
      const settled = () => signal.removeEventListener('abort', abort);
      this.#answer = {
        resolve: (answer) => {
          settled();
          resolve(answer);
        },
        reject: (err) => {
          settled();
          reject(err);
        },
      };
      this.#state = 'head';
      this.#headLength = 0;
      this.#keepAlive = true;
      this.socket.setTimeout(this.#idleTimeoutMs);
      this.socket.write(request, 'latin1');
    });
  }

  /** The bytes of one socket read; false stops reading. */
  #read(bytes: Buffer): boolean {
    if (this.#state === 'head') {
      const before = this.#headLength;
      const taken = Math.min(bytes.length, this.#head.length - before);
      bytes.copy(this.#head, before, 0, taken);
      this.#headLength += taken;
      let head: HttpHead | null;
      try {
        head = parseHttpHead(this.#head, this.#headLength);
      } catch (err) {
        this.socket.destroy(err as Error);
        return false;
      }
      // Not whole yet: the bytes were copied out (a TCP read lands in the same piece again).
      if (!head) return true;
      this.#answered(head);
      if ((this.#state as string) === 'dead') return false;
      const start = head.length - before;
      return start < bytes.length ? this.#received(bytes.subarray(start)) : true;
    }
    return this.#received(bytes);
  }

  #answered(head: HttpHead): void {
    const connection = head.headers.connection?.toLowerCase() ?? '';
    this.#keepAlive = !connection.split(/\s*,\s*/).includes('close');
    const framed = head.contentLength !== null && head.headers['transfer-encoding'] === undefined;
    const status = head.status;
    if (status >= 200 && status < 300) {
      const answer = this.#answer!;
      this.#answer = null;
      if (!framed || (status !== 200 && status !== 206)) {
        // Not this reader's to frame: another client asks again.
        this.#state = 'dead';
        this.socket.destroy();
        answer.resolve(null);
        return;
      }
      this.#state = 'body';
      this.#remaining = head.contentLength!;
      const body = new S3Body(this);
      this.#body = body;
      answer.resolve({ ...facts(head.headers), Body: body });
      if (this.#remaining === 0) this.#bodyEnded();
      return;
    }
    if (head.contentLength === null || head.contentLength > MAX_ERROR_BYTES || status < 200 || !framed) {
      // An error document of no stated length, or too long to read: the status names the refusal.
      const answer = this.#answer!;
      this.#answer = null;
      this.#state = 'dead';
      this.socket.destroy();
      answer.reject(refusalOf('GET', status, ''));
      return;
    }
    this.#state = 'error';
    this.#remaining = head.contentLength;
    this.#refusal = { status, chunks: [] };
    if (this.#remaining === 0) this.#refusalEnded();
  }

  /** An error document read whole: the GET is refused with it. */
  #refusalEnded(): void {
    const answer = this.#answer!;
    const refusal = this.#refusal!;
    this.#answer = null;
    this.#refusal = null;
    this.#done();
    answer.reject(refusalOf('GET', refusal.status, Buffer.concat(refusal.chunks).toString('utf8')));
  }

  /** Bytes of the answer's body (or error document) just read; false stops reading. */
  #received(bytes: Buffer): boolean {
    if ((this.#state !== 'body' && this.#state !== 'error') || bytes.length > this.#remaining) {
      this.socket.destroy(new Error('the bucket sent more bytes than its answer holds'));
      return false;
    }
    this.#remaining -= bytes.length;
    if (this.#state === 'error') {
      this.#refusal!.chunks.push(Buffer.from(bytes));
      if (this.#remaining === 0) this.#refusalEnded();
      return true;
    }
    this.#held++;
    this.#heldBytes += bytes.length;
    if (this.#pieces) this.#next = (this.#next + 1) % PIECES;
    this.#body!.arrived(bytes);
    if (this.#remaining === 0) this.#bodyEnded();
    if (this.#room()) return true;
    this.#paused = true;
    return false;
  }

  /**
   * Whether the socket may read again: over TCP while the piece it reads into next is free (they
   * are let go in order, so while not all are held); over TLS while less than as many bytes are
   * held.
   */
  #room(): boolean {
    return this.#pieces ? this.#held < PIECES : this.#heldBytes < PIECES * PIECE;
  }

  #bodyEnded(): void {
    this.#state = 'done';
    this.#body!.ended();
    this.#releaseIfFree();
  }

  /** The oldest read handed on (`length` bytes) was passed on and may be read into again. */
  free(length: number): void {
    this.#held--;
    this.#heldBytes -= length;
    if (this.#paused && this.#room() && this.#state !== 'dead') {
      this.#paused = false;
      this.socket.resume();
    }
    this.#releaseIfFree();
  }

  #releaseIfFree(): void {
    if (this.#state !== 'done' || this.#held > 0) return;
    this.#body = null;
    this.#done();
  }

  /** The answer was read whole and nothing holds its bytes: back to the pool, or closed. */
  #done(): void {
    if (!this.#keepAlive || this.socket.destroyed) {
      this.#state = 'dead';
      this.socket.destroy();
      return;
    }
    this.#state = 'idle';
    this.socket.setTimeout(0);
    if (this.#paused) {
      this.#paused = false;
      this.socket.resume();
    }
    this.#release(this);
  }

  /** `body` was given up before its end (or its reader failed): the connection is closed. */
  abandon(body: S3Body, err?: Error): void {
    if (this.#body !== body || this.#state === 'idle' || this.#state === 'dead') return;
    this.#state = 'dead';
    this.socket.destroy(err);
  }

  #fail(err: Error): void {
    const state = this.#state;
    this.#state = 'dead';
    if (state === 'idle' || state === 'dead') return;
    this.socket.destroy();
    const answer = this.#answer;
    this.#answer = null;
    answer?.reject(err);
    // Once the last byte arrived the pieces hold the whole body: only the connection is lost.
    if (state === 'body') this.#body?.destroy(err);
  }
}

/**
 * The body of a GET of s3-http.ts: the connection's reads, in its reused pieces over TCP. Read as
 * a stream, a piece is copied out as it is read (memory of its own per chunk, as any stream's); a
 * TLS read is already a Buffer of its own and is pushed as it is. `sendTo` writes the reads
 * themselves and lets each go once its write is done, so that the bytes pass through no memory
 * allocated for them (over TCP) and the connection reads no further ahead than the writer takes.
 */
export class S3Body extends Readable {
  readonly #connection: GetConnection;
  /** Pieces arrived and not yet passed on, in order. */
  readonly #queue: Buffer[] = [];
  #ended = false;
  #wanted = false;
  #sink: Writable | null = null;
  #sent: { resolve: () => void; reject: (err: unknown) => void } | null = null;

  constructor(connection: GetConnection) {
    super();
    this.#connection = connection;
  }

  arrived(bytes: Buffer): void {
    this.#queue.push(bytes);
    this.#pass();
  }

  ended(): void {
    this.#ended = true;
    this.#pass();
  }

  /**
   * Writes the bytes to `out` and ends it; resolves once `out` finished. A piece is read into
   * again only after its write's callback: never reused while `out` may still hold it.
   */
  sendTo(out: Writable): Promise<void> {
    if (this.#sink || this.#wanted || this.destroyed) return pipeline(this, out);
    this.#sink = out;
    return new Promise<void>((resolve, reject) => {
      this.#sent = { resolve, reject };
      const gone = () => {
        if (!out.writableFinished) this.destroy(new Error('the answer\u2019s reader went away'));
      };
      out.once('close', gone);
      out.once('error', (err) => this.destroy(err));
      this.once('error', reject);
      this.once('close', () => {
        if (!this.#ended || this.#queue.length > 0) reject(new Error('the bucket\u2019s answer ended early'));
      });
      this.#pass();
    });
  }

  override _read(): void {
    this.#wanted = true;
    this.#pass();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#queue.length = 0;
    this.#connection.abandon(this);
    // As Node's own answer bodies: a failure nobody listens for is not thrown at the process.
    callback(this.listenerCount('error') > 0 ? err : null);
  }

  #pass(): void {
    if (this.destroyed) return;
    const sink = this.#sink;
    if (sink) {
      while (this.#queue.length > 0) {
        const bytes = this.#queue.shift()!;
        sink.write(bytes, (err) => {
          if (err) this.destroy(err);
          else this.#connection.free(bytes.length);
        });
      }
      if (this.#ended && this.#sent) {
        const sent = this.#sent;
        this.#sent = null;
        sink.end(() => {
          sent.resolve();
          this.push(null);
          this.resume();
        });
      }
      return;
    }
    while (this.#wanted && this.#queue.length > 0) {
      const bytes = this.#queue.shift()!;
      const chunk = this.#connection.reusesMemory ? Buffer.from(bytes) : bytes;
      this.#connection.free(bytes.length);
      this.#wanted = this.push(chunk);
    }
    if (this.#ended && this.#queue.length === 0 && this.#wanted) this.push(null);
  }
}

/** Passes a store's object body on to `out`: an S3Body read by read (`sendTo`), else piped. */
export function sendBody(body: Readable, out: Writable): Promise<void> {
  return body instanceof S3Body ? body.sendTo(out) : pipeline(body, out);
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

function facts(headers: Record<string, string | string[] | undefined>): S3Head {
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    if (name.startsWith(META) && typeof value === 'string') metadata[name.slice(META.length)] = value;
  const modified = headers['last-modified'];
  const etag = headers.etag;
  return {
    ETag: typeof etag === 'string' ? etag : '',
    ContentLength: Number(headers['content-length'] ?? 0),
    LastModified: typeof modified === 'string' && modified ? new Date(modified) : new Date(0),
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
  let text = '';
  if (method !== 'HEAD') {
    const chunks: Buffer[] = [];
    let length = 0;
    for await (const chunk of answer) {
      // An error document is small; nothing past 64 KiB is kept.
      if (length < MAX_ERROR_BYTES) chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
    }
    text = Buffer.concat(chunks).toString('utf8');
  } else answer.resume();
  return refusalOf(method, answer.statusCode ?? 0, text);
}

/** The refusal named by the error document's code (`text`), else by the status as the SDK names it. */
function refusalOf(method: string, status: number, text: string): Error {
  const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1];
  const name = code ?? HEAD_ERRORS[status] ?? `Http${status}`;
  return Object.assign(new Error(message ?? `${method} answered ${status}`), {
    name,
    $metadata: { httpStatusCode: status },
  });
}
