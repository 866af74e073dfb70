// The S3 backend of the store (docs/architecture.md "How a request flows"; docs/cli.md
// "Flag groups", bucket flags): any S3-compatible bucket that honours conditional
// writes, with every key under an optional prefix.
//
// Retries are ours, not the SDK's (its maxAttempts is 1): a blind retry of a conditional
// write can report a conflict for a write that in fact landed. So every write carries a
// random nonce as object metadata (x-amz-meta-svc-nonce; the body is the caller's bytes
// and stays untouched), and an ambiguous outcome (a timeout or network error, a 5xx, a
// 409 ConditionalRequestConflict, or a 412 after one of our own retries) is settled by
// reading the object back: our nonce there means our write won. Reads and unconditional
// requests are retried with backoff; when the bucket keeps failing, the answer is
// `store-unavailable` naming the endpoint.
//
// Limits of the read-back (docs/decisions.md "Store: settling an ambiguous S3 write"): if our write landed
// and another writer replaced it before the read-back, we report CasConflict for a write that did land for a
// moment; the caller re-reads, as after any conflict. A conditional delete is checked with a HEAD first and
// then sent with If-Match: AWS S3 (since 2025-09) judges that header atomically, MinIO's community edition
// ignores it on DELETE, so there the check and the delete are two requests and a write landing between them
// is deleted.

import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { Problem } from '../problem.ts';
import { normalizePrefix } from './prefixed.ts';
import { S3Http } from './s3-http.ts';
import {
  CasConflict,
  checkCondition,
  checkKey,
  compareKeys,
  isValidKey,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStream,
  type Store,
  type StoredObject,
  type StreamingStore,
  type WriteCondition,
} from './store.ts';

export interface S3StoreOptions {
  endpoint: string;
  region?: string;
  bucket?: string;
  prefix?: string;
  accessKey?: string;
  secretKey?: string;
  /** Attempts for one operation before `store-unavailable`. Default 4. */
  attempts?: number;
  /** First backoff between attempts, doubled each time. Default 200 ms. */
  backoffMs?: number;
  /** Deadline of one HTTP request. Default 15 s. */
  requestTimeoutMs?: number;
  /**
   * Deadline of one store operation, every attempt and read-back included: past it the answer is
   * `store-unavailable`. Default 10 s (OPERATION_DEADLINE_MS).
   */
  operationDeadlineMs?: number;
}

/**
 * How long one store operation may take before it answers `store-unavailable`: a bucket that
 * stops answering (a stalled server, a dropped network) ends every request in bounded time.
 */
export const OPERATION_DEADLINE_MS = 10_000;

const NONCE_META = 'svc-nonce';
const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 15_000;

/** Opens a bucket on an S3-compatible service; refuses missing settings with `invalid-input`. */
export function openS3Store(options: S3StoreOptions): Store {
  if (!options.bucket) {
    throw new Problem(
      'invalid-input',
      'Invalid setting bucket.bucket',
      `an S3 endpoint (${options.endpoint}) needs a bucket name; pass --bucket or set SVC_S3_BUCKET`,
    );
  }
  if (Boolean(options.accessKey) !== Boolean(options.secretKey)) {
    // Half a key pair would silently fall back to the SDK's credential chain.
    const [given, missing] = options.accessKey ? ['accessKey', 'secretKey'] : ['secretKey', 'accessKey'];
    throw new Problem(
      'invalid-input',
      `Invalid setting bucket.${missing}`,
      `bucket.${given} is set but bucket.${missing} is not; give both, or neither to use the AWS credential chain`,
    );
  }
  return new S3Store({ ...options, bucket: options.bucket });
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

class S3Store implements Store {
  readonly description: string;
  readonly #client: S3Client;
  /**
   * The streaming HEAD, PUT and GET as signed requests of their own (s3-http.ts), without the
   * SDK's per-request cost; null without a key pair (the SDK's credential chain is used then).
   */
  readonly #http: S3Http | null;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #endpoint: string;
  readonly #attempts: number;
  readonly #backoffMs: number;
  readonly #deadlineMs: number;

  constructor(options: S3StoreOptions & { bucket: string }) {
    this.#bucket = options.bucket;
    this.#prefix = normalizePrefix(options.prefix);
    this.#endpoint = options.endpoint;
    this.#attempts = Math.max(1, options.attempts ?? 4);
    this.#backoffMs = options.backoffMs ?? 200;
    this.#deadlineMs = options.operationDeadlineMs ?? OPERATION_DEADLINE_MS;
    this.description = `s3://${this.#bucket}/${this.#prefix} at ${this.#endpoint}`;
    const credentials =
      options.accessKey && options.secretKey
        ? { accessKeyId: options.accessKey, secretAccessKey: options.secretKey }
        : undefined;
    this.#http = credentials
      ? new S3Http({
          endpoint: options.endpoint,
          region: options.region || 'us-east-1',
          bucket: this.#bucket,
          accessKey: credentials.accessKeyId,
          secretKey: credentials.secretAccessKey,
          connectTimeoutMs: CONNECT_TIMEOUT_MS,
          idleTimeoutMs: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
        })
      : null;
    this.#client = new S3Client({
      endpoint: options.endpoint,
      region: options.region || 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      // Checksum headers only where an operation requires them: S3-compatible servers
      // (and proxies) differ in which flexible checksums they accept.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...(credentials ? { credentials } : {}),
      requestHandler: new NodeHttpHandler({
        connectionTimeout: CONNECT_TIMEOUT_MS,
        // Without throwOnRequestTimeout the handler only logs a breach and keeps waiting.
        requestTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
        throwOnRequestTimeout: true,
        socketTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
      }),
    });
  }

  async get(key: string): Promise<StoredObject | null> {
    checkKey(key);
    return this.#bounded(`read ${key}`, (signal) => this.#getWithin(key, signal));
  }

  #getWithin(key: string, signal: AbortSignal): Promise<StoredObject | null> {
    return this.#retrying(`read ${key}`, signal, async () => {
      try {
        const answer = await this.#client.send(
          new GetObjectCommand({ Bucket: this.#bucket, Key: this.#full(key) }),
          { abortSignal: signal },
        );
        const body = answer.Body ? await answer.Body.transformToByteArray() : new Uint8Array();
        return {
          key,
          etag: answer.ETag ?? '',
          size: body.byteLength,
          modified: answer.LastModified ?? new Date(0),
          body,
        };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  /** Objects with their metadata, streamed (R2's one-object layout, docs/bindings.md "R2 buckets"). */
  readonly streaming: StreamingStore = {
    head: async (key) => {
      checkKey(key);
      const head = await this.#bounded(`read ${key}`, (signal) => this.#head(key, signal, true));
      return (
        head && { key, etag: head.etag, size: head.size, modified: head.modified, metadata: head.metadata }
      );
    },
    read: (key, range) => {
      checkKey(key);
      return this.#bounded(`read ${key}`, (signal) => this.#readWithin(key, range, signal));
    },
    write: (key, body, length, metadata, condition) => {
      checkKey(key);
      checkCondition(key, condition);
      return this.#bounded(`write ${key}`, (signal) =>
        this.#putWithin(key, body, condition, signal, { length, metadata, lean: true }),
      );
    },
  };

  /** The object's bytes as they arrive: the deadline covers the answer's headers, not the body. */
  #readWithin(
    key: string,
    range: { offset: number; length: number } | undefined,
    signal: AbortSignal,
  ): Promise<ObjectStream | null> {
    return this.#retrying(`read ${key}`, signal, async () => {
      try {
        // s3-http.ts's own GET, its bytes through reused memory; the SDK where that GET cannot go
        // (no key pair, an answer not framed by its length).
        const own = this.#http && (await this.#http.get(this.#full(key), range, signal));
        if (own)
          return {
            key,
            etag: own.ETag,
            size: own.ContentLength,
            modified: own.LastModified,
            metadata: ownMetadata(own.Metadata),
            body: own.Body,
          };
        const answer = await this.#client.send(
          new GetObjectCommand({
            Bucket: this.#bucket,
            Key: this.#full(key),
            ...(range ? { Range: `bytes=${range.offset}-${range.offset + range.length - 1}` } : {}),
          }),
          { abortSignal: signal },
        );
        return {
          key,
          etag: answer.ETag ?? '',
          size: answer.ContentLength ?? 0,
          modified: answer.LastModified ?? new Date(0),
          metadata: ownMetadata(answer.Metadata),
          body: answer.Body as Readable,
        };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    checkKey(key);
    const head = await this.#bounded(`read ${key}`, (signal) => this.#head(key, signal));
    return head && { key, etag: head.etag, size: head.size, modified: head.modified };
  }

  async put(key: string, body: Uint8Array | string, condition?: WriteCondition): Promise<string> {
    checkKey(key);
    checkCondition(key, condition);
    return this.#bounded(`write ${key}`, (signal) => this.#putWithin(key, body, condition, signal));
  }

  async #putWithin(
    key: string,
    body: Uint8Array | string | Readable,
    condition: WriteCondition | undefined,
    signal: AbortSignal,
    streamed?: { length: number; metadata: Record<string, string>; lean?: boolean },
  ): Promise<string> {
    const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
    // A stream is consumed by the first attempt: an ambiguous failure is settled, never resent.
    const once = !(bytes instanceof Uint8Array);
    const nonce = randomBytes(16).toString('hex');
    const command = () =>
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: this.#full(key),
        Body: bytes,
        ContentLength: bytes instanceof Uint8Array ? bytes.byteLength : streamed?.length,
        Metadata: { ...streamed?.metadata, [NONCE_META]: nonce },
        ...(condition?.ifMatch !== undefined ? { IfMatch: quoteEtag(condition.ifMatch) } : {}),
        ...(condition?.ifNoneMatch ? { IfNoneMatch: '*' } : {}),
      });
    const http = streamed?.lean ? this.#http : null;
    const send: () => Promise<{ ETag?: string }> = http
      ? () =>
          http.put(
            this.#full(key),
            bytes,
            bytes instanceof Uint8Array ? bytes.byteLength : (streamed?.length ?? 0),
            { ...streamed?.metadata, [NONCE_META]: nonce },
            {
              ...(condition?.ifMatch !== undefined ? { ifMatch: quoteEtag(condition.ifMatch) } : {}),
              ...(condition?.ifNoneMatch ? { ifNoneMatch: true } : {}),
            },
            signal,
          )
      : () => this.#client.send(command(), { abortSignal: signal });
    const lean = http !== null;
    let ambiguous = false;
    for (let attempt = 1; ; attempt++) {
      const outcome = await settle(send);
      if (outcome.ok) return outcome.value.ETag ?? (await this.#head(key, signal, lean))?.etag ?? '';
      const { error } = outcome;
      if (signal.aborted) throw error;
      // S3 answers If-Match on a missing key with 404 NoSuchKey: the condition failed.
      const refused = isPreconditionFailed(error) || (condition?.ifMatch !== undefined && isNotFound(error));
      if (refused && !ambiguous) throw new CasConflict(key);
      if (!refused && !isAmbiguous(error)) throw this.#unavailable(`write ${key}`, error);
      // The write may have landed: only the nonce on the stored object can say.
      ambiguous = true;
      const stored = await this.#head(key, signal, lean);
      if (stored?.nonce === nonce) return stored.etag;
      if (refused) throw new CasConflict(key);
      if (once || attempt >= this.#attempts) throw this.#unavailable(`write ${key}`, error);
      await this.#pause(attempt, signal);
    }
  }

  async delete(key: string, condition?: Pick<WriteCondition, 'ifMatch'>): Promise<boolean> {
    checkKey(key);
    checkCondition(key, condition);
    return this.#bounded(`delete ${key}`, (signal) => this.#deleteWithin(key, condition, signal));
  }

  async #deleteWithin(
    key: string,
    condition: Pick<WriteCondition, 'ifMatch'> | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    const current = await this.#head(key, signal);
    if (!current) {
      if (condition?.ifMatch !== undefined) throw new CasConflict(key);
      return false;
    }
    if (condition?.ifMatch !== undefined && current.etag !== quoteEtag(condition.ifMatch)) {
      throw new CasConflict(key);
    }
    const ifMatch = condition?.ifMatch !== undefined ? quoteEtag(condition.ifMatch) : undefined;
    for (let attempt = 1; ; attempt++) {
      const outcome = await settle(() =>
        this.#client.send(
          new DeleteObjectCommand({
            Bucket: this.#bucket,
            Key: this.#full(key),
            ...(ifMatch ? { IfMatch: ifMatch } : {}),
          }),
          { abortSignal: signal },
        ),
      );
      if (outcome.ok) return true;
      const { error } = outcome;
      if (signal.aborted) throw error;
      if (isPreconditionFailed(error) || (ifMatch && isNotFound(error))) {
        // Settled by reading: gone means some delete (perhaps our earlier attempt) won.
        const after = await this.#head(key, signal);
        if (!after && attempt > 1) return true;
        throw new CasConflict(key);
      }
      if (!isAmbiguous(error) || attempt >= this.#attempts) throw this.#unavailable(`delete ${key}`, error);
      await this.#pause(attempt, signal);
    }
  }

  list(prefix: string, options: ListOptions): Promise<ListResult> {
    return this.#bounded(`list ${prefix}`, (signal) => this.#listWithin(prefix, options, signal));
  }

  async #listWithin(prefix: string, options: ListOptions, signal: AbortSignal): Promise<ListResult> {
    const objects: ObjectInfo[] = [];
    const prefixes: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.#retrying(`list ${prefix}`, signal, () =>
        this.#client.send(
          new ListObjectsV2Command({
            Bucket: this.#bucket,
            Prefix: this.#prefix + prefix,
            ...(options.recursive ? {} : { Delimiter: '/' }),
            ...(token ? { ContinuationToken: token } : {}),
          }),
          { abortSignal: signal },
        ),
      );
      for (const item of page.Contents ?? []) {
        // Objects other tools wrote under keys the interface refuses (`a//b`, folder
        // markers ending in `/`) are not ours, as in the directory backend.
        if (!item.Key || !isValidKey(item.Key.slice(this.#prefix.length))) continue;
        objects.push({
          key: item.Key.slice(this.#prefix.length),
          etag: item.ETag ?? '',
          size: item.Size ?? 0,
          modified: item.LastModified ?? new Date(0),
        });
      }
      for (const common of page.CommonPrefixes ?? []) {
        if (common.Prefix) prefixes.push(common.Prefix.slice(this.#prefix.length));
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    objects.sort((a, b) => compareKeys(a.key, b.key));
    prefixes.sort(compareKeys);
    return { objects, prefixes };
  }

  async close(): Promise<void> {
    this.#http?.close();
    this.#client.destroy();
  }

  #full(key: string): string {
    return this.#prefix + key;
  }

  /** The object's facts; `lean`: through s3-http.ts when it has a key pair (the streaming calls). */
  async #head(key: string, signal: AbortSignal, lean = false) {
    return this.#retrying(`read ${key}`, signal, async () => {
      try {
        const answer =
          lean && this.#http
            ? await this.#http.head(this.#full(key), signal)
            : await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: this.#full(key) }), {
                abortSignal: signal,
              });
        return {
          etag: answer.ETag ?? '',
          size: answer.ContentLength ?? 0,
          modified: answer.LastModified ?? new Date(0),
          nonce: answer.Metadata?.[NONCE_META],
          metadata: ownMetadata(answer.Metadata),
        };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    });
  }

  /** Runs an idempotent request, retrying what may pass on a second try. */
  async #retrying<T>(what: string, signal: AbortSignal, run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const outcome = await settle(run);
      if (outcome.ok) return outcome.value;
      if (signal.aborted) throw outcome.error;
      if (!isAmbiguous(outcome.error) || attempt >= this.#attempts) {
        throw this.#unavailable(what, outcome.error);
      }
      await this.#pause(attempt, signal);
    }
  }

  /** Backoff between attempts; cut short when the operation's deadline passes. */
  #pause(attempt: number, signal: AbortSignal): Promise<void> {
    const ms = this.#backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Runs one store operation under its deadline: every request it sends is aborted when the
   * deadline passes, and the answer is then `store-unavailable` saying so. A write cut short this
   * way was not acknowledged; if the server had already received it, it may still land.
   */
  async #bounded<T>(what: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#deadlineMs);
    try {
      return await work(controller.signal);
    } catch (err) {
      if (!controller.signal.aborted || err instanceof CasConflict) throw err;
      throw new Problem(
        'store-unavailable',
        'Bucket is unavailable',
        `could not ${what} at ${this.#endpoint} (bucket ${this.#bucket}): no answer within ${this.#deadlineMs / 1000} s`,
        { cause: err },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  #unavailable(what: string, error: unknown): Problem {
    if (error instanceof Problem) return error;
    const name = (error as { name?: string })?.name ?? '';
    if (CREDENTIAL_REFUSALS.has(name) || (name === 'AccessDenied' && statusOf(error) === 403)) {
      // Not an outage: retrying or checking the network will not help, the key will.
      return new Problem(
        'store-unavailable',
        'Bucket refused the credentials',
        `${this.#endpoint} (bucket ${this.#bucket}) answered ${name} to ${what}: check the access key and secret (--access-key and --secret-key, or SVC_S3_ACCESS_KEY and SVC_S3_SECRET_KEY)`,
        { cause: error },
      );
    }
    return new Problem(
      'store-unavailable',
      'Bucket is unavailable',
      `could not ${what} at ${this.#endpoint} (bucket ${this.#bucket}): ${describe(error)}`,
      { cause: error },
    );
  }
}

/** An object's user metadata without the store's own nonce. */
function ownMetadata(metadata: Record<string, string> | undefined): Record<string, string> {
  const { [NONCE_META]: _nonce, ...own } = metadata ?? {};
  return own;
}

/** S3 error codes that say the request's signature or key was refused. */
const CREDENTIAL_REFUSALS = new Set([
  'SignatureDoesNotMatch',
  'InvalidAccessKeyId',
  'InvalidToken',
  'ExpiredToken',
  'InvalidClientTokenId',
]);

async function settle<T>(run: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await run() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** S3 compares ETags in their quoted form; callers may hold either. */
function quoteEtag(etag: string): string {
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

function statusOf(error: unknown): number | undefined {
  if (error instanceof S3ServiceException) return error.$metadata?.httpStatusCode;
  return (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function isNotFound(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  if (name === 'NoSuchBucket') return false;
  return name === 'NoSuchKey' || name === 'NotFound' || statusOf(error) === 404;
}

function isPreconditionFailed(error: unknown): boolean {
  return statusOf(error) === 412 || (error as { name?: string })?.name === 'PreconditionFailed';
}

/** An answer that says nothing final: the request may or may not have taken effect. */
function isAmbiguous(error: unknown): boolean {
  const status = statusOf(error);
  if (status === undefined) return true; // no HTTP answer: a timeout or a broken connection
  if (status >= 500 || status === 429) return true;
  return status === 409 && (error as { name?: string })?.name === 'ConditionalRequestConflict';
}

function describe(error: unknown): string {
  const status = statusOf(error);
  const name = (error as { name?: string })?.name ?? 'Error';
  const message = error instanceof Error ? error.message : String(error);
  return status ? `${name} (HTTP ${status}): ${message}` : `${name}: ${message}`;
}
