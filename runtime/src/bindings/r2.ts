// R2 buckets backed by the fleet's bucket (docs/bindings.md "R2 buckets"). workerd turns a
// worker's `env.BUCKET.head/get/put/delete/list` into HTTP requests to the service its `r2Bucket`
// binding names; the runtime host answers them on the bindings socket (kv-socket.ts), and
// workerd's config injects the headers naming the application and bucket (r2-headers.ts), so a
// worker can never name another application's objects.
//
// The wire contract is workerd's (src/workerd/api/r2-bucket.c++, r2-rpc.c++, r2-api.capnp): head,
// get and list are a GET whose `cf-r2-request` header holds the request as JSON; put and delete
// are a PUT whose body is the request's JSON (`cf-r2-metadata-size` bytes long) followed by the
// value. An answer is JSON (`cf-r2-metadata-size` bytes) followed by the object's bytes for a
// get. A refusal carries `cf-r2-error: {"version":1,"v4code":…,"message":…}`, which workerd
// shows the worker as `<operation>: <message> (<v4code>)`; codes and words are Miniflare's
// (workers-sdk packages/miniflare/src/workers/r2/errors.worker.ts). A 404 with 10007 is a null
// from head and get, a 412 with 10031 a null from put and the metadata alone from get.
//
// Storage (docs/bindings.md "Bucket layout"): each object at src/registry/keys.ts
// `runtimeR2Record`, the object key encoded as KV's keys are (kv.ts `encodeKey`, `segments`): no
// object key is a prefix of another and every file name stays under 255 bytes. On a store that
// keeps per-object metadata and streams (S3), a single put is one object: its bytes, the rest of
// its record in its metadata. Else, and for a record too large for S3's metadata, the object is a
// record (JSON: size, etag, version, uploaded, checksums, HTTP and custom metadata) and its bytes
// `runtimeR2Body` under the record's version: such a put writes the body, then the record with a
// condition on the object it read (so two puts never lose a body), then deletes the bodies it
// replaced. A multipart upload keeps a record of its own and one per part, each part's bytes a
// body; completing writes an object record that names the parts' bodies in order.

import { createHash, randomBytes } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import { keys } from '../../../src/registry/keys.ts';
import { isApplicationName, isR2BucketName } from '../../../src/registry/names.ts';
import {
  isCasConflict,
  type MetadataObject,
  type Store,
  type StreamingStore,
  type WriteCondition,
} from '../../../src/store/store.ts';
import { UPDATE_TRIES } from '../../../src/store/update.ts';
import { decodeKey, encodedOf, encodeKey, segments } from './kv.ts';
import { R2_APPLICATION_HEADER, R2_BUCKET_HEADER } from './r2-headers.ts';

/**
 * Cloudflare's R2 limits (developers.cloudflare.com/r2/platform/limits/, Miniflare's
 * constants.ts), with svc's own where it is smaller: keys to 512 bytes (their encoded record key
 * must fit S3's 1,024) and values to 100 MiB (a value checked before it is written, a part, and
 * every value on the local-directory bucket pass through the host's memory whole).
 */
export const R2_LIMITS = {
  maxKeyBytes: 512,
  maxValueBytes: 100 * 1024 * 1024,
  maxMetadataSize: 2048,
  maxListKeys: 1000,
  /** Every part of a multipart upload but the last is at least this, and all of one size. */
  minPartBytes: 5 * 1024 * 1024,
  maxPartNumber: 10_000,
} as const;

const REQUEST_HEADER = 'cf-r2-request';
const METADATA_SIZE_HEADER = 'cf-r2-metadata-size';
const ERROR_HEADER = 'cf-r2-error';
/** How many records a list reads at once. */
const LIST_READS_AT_ONCE = 16;
/** How often a get reads the record again when the body it named was replaced meanwhile. */
const GET_TRIES = 3;

/** One request as workerd sent it: headers in lower case, the body. */
export interface R2Request {
  method: string;
  headers: Record<string, string | undefined>;
  /** The whole body; or, with `value`, only the request's JSON (`cf-r2-metadata-size` bytes). */
  body: Uint8Array;
  /** A PUT's value still arriving, `length` bytes (the bindings socket streams a put's value). */
  value?: StreamedValue;
}

export interface StreamedValue {
  stream: Readable;
  length: number;
}

export interface R2Response {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** An answer whose object bytes may still be arriving from the bucket: `body`, then `tail`. */
export interface R2StreamedResponse extends R2Response {
  tail?: StreamedValue;
}

/** A refusal with R2's status, v4 code and words; `object` rides along on a failed get condition. */
export class R2Refusal extends Error {
  readonly status: number;
  readonly v4code: number;
  object?: R2Record & { key: string };
  constructor(status: number, v4code: number, message: string) {
    super(message);
    this.status = status;
    this.v4code = v4code;
  }
}

// Miniflare's errors.worker.ts, word for word.
const noSuchKey = () => new R2Refusal(404, 10007, 'The specified key does not exist.');
const entityTooLarge = () =>
  new R2Refusal(400, 100100, 'Your proposed upload exceeds the maximum allowed object size.');
const metadataTooLarge = () =>
  new R2Refusal(400, 10012, 'Your metadata headers exceed the maximum allowed metadata size.');
const invalidObjectName = () => new R2Refusal(400, 10020, 'The specified object name is not valid.');
const invalidMaxKeys = () => new R2Refusal(400, 10022, 'MaxKeys params must be positive integer <= 1000.');
const preconditionFailed = () =>
  new R2Refusal(412, 10031, 'At least one of the pre-conditions you specified did not hold.');
const invalidRange = () => new R2Refusal(416, 10039, 'The requested range is not satisfiable');
const invalidMetadata = () => new R2Refusal(400, 10029, 'Metadata missing or invalid');
// Miniflare answers these two with 500; the worker sees only the words and code, and nothing here
// answers 500 to a request it refuses.
const internalError = () => new R2Refusal(400, 10001, 'We encountered an internal error. Please try again.');
const badUpload = () => new R2Refusal(400, 10048, 'There was a problem with the multipart upload.');
const noSuchUpload = () => new R2Refusal(400, 10024, 'The specified multipart upload does not exist.');
const invalidPart = () => new R2Refusal(400, 10025, 'One or more of the specified parts could not be found.');
const entityTooSmall = () =>
  new R2Refusal(400, 10011, 'Your proposed upload is smaller than the minimum allowed object size.');

export function valueTooLarge(): R2Refusal {
  return entityTooLarge();
}

/** R2's HTTP metadata; `cacheExpiry` in milliseconds since the epoch. */
export interface HttpFields {
  contentType?: string;
  contentLanguage?: string;
  contentDisposition?: string;
  contentEncoding?: string;
  cacheControl?: string;
  cacheExpiry?: number;
}

const HTTP_FIELDS = [
  'contentType',
  'contentLanguage',
  'contentDisposition',
  'contentEncoding',
  'cacheControl',
] as const;

/** Checksums as hex, by R2's field names. */
type Checksums = Partial<Record<'md5' | 'sha1' | 'sha256' | 'sha384' | 'sha512', string>>;
const HASHES = [
  { field: 'md5', algorithm: 'md5', name: 'MD5', wire: '0' },
  { field: 'sha1', algorithm: 'sha1', name: 'SHA-1', wire: '1' },
  { field: 'sha256', algorithm: 'sha256', name: 'SHA-256', wire: '2' },
  { field: 'sha384', algorithm: 'sha384', name: 'SHA-384', wire: '3' },
  { field: 'sha512', algorithm: 'sha512', name: 'SHA-512', wire: '4' },
] as const;

/** What the bucket keeps of one object besides its bytes. */
export interface R2Record {
  /** Random hex; also names the body. */
  version: string;
  size: number;
  /** The MD5 of the body in hex, as R2 gives it for a single put. */
  etag: string;
  /** Milliseconds since the epoch. */
  uploaded: number;
  checksums: Checksums;
  httpMetadata: HttpFields;
  customMetadata: Record<string, string>;
  /** A multipart object's bodies, in order; absent: the one body `bodies/<version>`. */
  parts?: { body: string; size: number }[];
}

interface Bucket {
  store: Store;
  application: string;
  bucket: string;
  nowMs: number;
}

/** Answers one R2 request against the bucket, whole; `nowMs` is the upload time a put records. */
export async function handleR2(store: Store, request: R2Request, nowMs = Date.now()): Promise<R2Response> {
  const answer = await handleR2Streamed(store, request, nowMs);
  if (!answer.tail) return answer;
  const tail = await collect(answer.tail);
  return { status: answer.status, headers: answer.headers, body: Buffer.concat([answer.body, tail]) };
}

/** As handleR2, a get's bytes passed on as the bucket sends them (the bindings socket's way). */
export async function handleR2Streamed(
  store: Store,
  request: R2Request,
  nowMs = Date.now(),
): Promise<R2StreamedResponse> {
  try {
    const application = request.headers[R2_APPLICATION_HEADER];
    const bucket = request.headers[R2_BUCKET_HEADER];
    if (!isApplicationName(application) || !isR2BucketName(bucket)) throw invalidMetadata();
    const space: Bucket = { store, application, bucket, nowMs };
    if (request.method === 'GET') {
      const header = request.headers[REQUEST_HEADER];
      if (header === undefined) throw invalidMetadata();
      // Node reads header bytes as Latin-1: the UTF-8 of the JSON comes back unchanged.
      const body = parseRequest(Buffer.from(header, 'latin1'));
      if (body.method === 'head') return answerObject(await head(space, objectKey(body)));
      if (body.method === 'get') return await get(space, objectKey(body), body);
      if (body.method === 'list') return answerJson(await list(space, body));
    } else if (request.method === 'PUT') {
      const size = Number(request.headers[METADATA_SIZE_HEADER]);
      if (!Number.isInteger(size) || size < 0 || size > request.body.byteLength) throw invalidMetadata();
      const body = parseRequest(request.body.subarray(0, size));
      const streamed = request.value;
      if (body.method === 'put') {
        const value = streamed ?? request.body.subarray(size);
        return answerObject(await put(space, objectKey(body), value, body), null);
      }
      const value = streamed ? await collect(streamed) : request.body.subarray(size);
      if (body.method === 'delete') {
        await remove(space, body);
        return { status: 200, headers: {}, body: new Uint8Array() };
      }
      if (body.method === 'createMultipartUpload')
        return answerJson(await createUpload(space, objectKey(body), body));
      if (body.method === 'uploadPart')
        return answerJson(await uploadPart(space, objectKey(body), body, value));
      if (body.method === 'completeMultipartUpload')
        return answerObject(await completeUpload(space, objectKey(body), body), null);
      if (body.method === 'abortMultipartUpload') {
        await abortUpload(space, objectKey(body), body);
        return { status: 200, headers: {}, body: new Uint8Array() };
      }
    }
    throw invalidMetadata();
  } catch (err) {
    // A value not read (a refused put, a write that failed) is drained, so that the socket can answer.
    request.value?.stream.unpipe().resume();
    if (err instanceof R2Refusal) return refusalAnswer(err);
    throw err;
  }
}

/** A streamed value's bytes, whole; refused when they are not `length` bytes. */
async function collect(value: StreamedValue): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of value.stream) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  if (bytes.byteLength !== value.length)
    throw new Error(`an R2 value of ${value.length} bytes came with ${bytes.byteLength}`);
  return bytes;
}

type Json = Record<string, unknown>;

function parseRequest(bytes: Uint8Array): Json {
  try {
    const parsed = JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json;
  } catch {
    // answered below
  }
  throw invalidMetadata();
}

function objectKey(body: Json): string {
  if (typeof body.object !== 'string') throw invalidMetadata();
  return checkKey(body.object);
}

function checkKey(key: string): string {
  const length = Buffer.byteLength(key);
  if (length > R2_LIMITS.maxKeyBytes) throw invalidObjectName();
  return key;
}

function recordKey(space: Bucket, key: string): string {
  return keys.runtimeR2Record(space.application, space.bucket, segments(encodeKey(Buffer.from(key))));
}

/** The object at a key as the bucket holds it: its record, and whether its bytes are inline. */
interface Found {
  record: R2Record;
  /** The bucket's ETag of the object at the record's key, for conditional writes. */
  storeEtag: string;
  /** true: the object at the key holds the bytes, its record in its metadata (one-object layout). */
  inline: boolean;
}

/**
 * The object at `key`: with a streaming store a HEAD, which answers an inline object whole; a
 * record (an object written by a store without metadata, a multipart object, one whose metadata
 * did not fit, or one written before the one-object layout) is then read too.
 */
async function readCurrent(space: Bucket, key: string): Promise<Found | null> {
  const at = recordKey(space, key);
  if (space.store.streaming) {
    const head = await space.store.streaming.head(at);
    if (!head) return null;
    const record = inlineRecord(head);
    if (record) return { record, storeEtag: head.etag, inline: true };
  }
  const object = await space.store.get(at);
  if (!object) return null;
  const record = parseRecord(object.body);
  return record ? { record, storeEtag: object.etag, inline: false } : null;
}

/** The user-metadata key holding an inline object's record. */
const INLINE_METADATA_KEY = 'svc-r2';
/**
 * S3 allows 2 KB of user metadata per object (keys and values, in UTF-8 bytes); the store's own
 * nonce takes 41 of them. A record whose encoding passes this is kept as a separate record.
 */
const INLINE_METADATA_BYTES = 2048 - 64;

/**
 * The record as one user-metadata value, or null when it would pass S3's bound. Size and etag are
 * the bucket's own (Content-Length, and the ETag, which is the MD5 of a single PUT's bytes). A
 * header value is printable ASCII: anything else, and `%`, is percent-encoded.
 */
type InlineFields = Pick<R2Record, 'version' | 'uploaded' | 'checksums' | 'httpMetadata' | 'customMetadata'>;

function inlineMetadata(record: InlineFields): Record<string, string> | null {
  const { version, uploaded, checksums, httpMetadata, customMetadata } = record;
  const json = JSON.stringify({ version, uploaded, checksums, httpMetadata, customMetadata });
  const value = json.replace(/[^\x21-\x7e]|%/gu, (c) => encodeURIComponent(c));
  return INLINE_METADATA_KEY.length + value.length > INLINE_METADATA_BYTES
    ? null
    : { [INLINE_METADATA_KEY]: value };
}

function inlineRecord(object: MetadataObject): R2Record | null {
  const value = object.metadata[INLINE_METADATA_KEY];
  if (value === undefined) return null;
  try {
    const r = JSON.parse(decodeURIComponent(value)) as R2Record;
    if (typeof r.version !== 'string' || !/^[0-9a-f]{32}$/.test(r.version)) return null;
    return {
      version: r.version,
      size: object.size,
      etag: unquote(object.etag),
      uploaded: r.uploaded,
      checksums: r.checksums ?? {},
      httpMetadata: r.httpMetadata ?? {},
      customMetadata: r.customMetadata ?? {},
    };
  } catch {
    return null;
  }
}

function unquote(etag: string): string {
  return etag.replace(/^"(.*)"$/, '$1');
}

function parseRecord(body: Uint8Array): R2Record | null {
  try {
    const r = JSON.parse(Buffer.from(body).toString('utf8')) as R2Record;
    // An object not written by this module is no R2 object.
    return typeof r.version === 'string' && /^[0-9a-f]{32}$/.test(r.version) && typeof r.size === 'number'
      ? r
      : null;
  } catch {
    return null;
  }
}

async function head(space: Bucket, key: string): Promise<R2Record & { key: string }> {
  const found = await readCurrent(space, key);
  if (!found) throw noSuchKey();
  return { ...found.record, key };
}

async function get(space: Bucket, key: string, body: Json): Promise<R2StreamedResponse> {
  const onlyIf = body.onlyIf === undefined ? undefined : parseConditional(body.onlyIf);
  const ranged = (body.range !== undefined && body.range !== null) || typeof body.rangeHeader === 'string';
  const streaming = space.store.streaming;
  // What the first GET found when it was a record, not an inline object.
  let known: Found | null | undefined;
  // The whole of an inline object is one GET, its bytes passed on as they arrive.
  if (streaming && !ranged) {
    const read = await streaming.read(recordKey(space, key));
    if (!read) throw noSuchKey();
    const record = inlineRecord(read);
    if (record) {
      const object = { ...record, key };
      if (onlyIf && !conditionHolds(onlyIf, object)) {
        read.body.destroy();
        throw failedCondition(object);
      }
      return answerObject(object, { offset: 0, length: object.size }, undefined, {
        stream: read.body,
        length: read.size,
      });
    }
    const parsed = parseRecord(await collect({ stream: read.body, length: read.size }));
    known = parsed && { record: parsed, storeEtag: read.etag, inline: false };
  }
  for (let attempt = 0; ; attempt++) {
    const found = attempt === 0 && known !== undefined ? known : await readCurrent(space, key);
    if (!found) throw noSuchKey();
    const object = { ...found.record, key };
    if (onlyIf && !conditionHolds(onlyIf, object)) throw failedCondition(object);
    const range = rangeOf(body, object.size);
    if (found.inline) {
      // A ranged read of the object the HEAD saw: a different ETag means it was replaced between.
      const whole = range.offset === 0 && range.length === object.size;
      const read = await streaming!.read(recordKey(space, key), whole ? undefined : range);
      if (read && read.etag === found.storeEtag)
        return answerObject(object, range, undefined, { stream: read.body, length: read.size });
      read?.body.destroy();
      if (attempt + 1 < GET_TRIES) continue;
      throw noSuchKey();
    }
    const value = await readValue(space, object, range);
    if (!value) {
      // Replaced or deleted between the two reads: the record now says which.
      if (attempt + 1 < GET_TRIES) continue;
      throw noSuchKey();
    }
    return answerObject(object, range, value);
  }
}

function bodiesOf(space: Bucket, record: R2Record): { key: string; size: number }[] {
  const at = (body: string) => keys.runtimeR2Body(space.application, space.bucket, body);
  return record.parts
    ? record.parts.map((part) => ({ key: at(part.body), size: part.size }))
    : [{ key: at(record.version), size: record.size }];
}

function failedCondition(object: R2Record & { key: string }): R2Refusal {
  const refusal = preconditionFailed();
  refusal.object = object;
  return refusal;
}

/**
 * The bytes of `range`; null when a body is gone (the object was replaced meanwhile). A range is
 * cut from whole bodies, the store reading objects whole; of a multipart object only the parts
 * the range touches are read.
 */
async function readValue(
  space: Bucket,
  record: R2Record,
  range: { offset: number; length: number },
): Promise<Uint8Array | null> {
  const pieces: Uint8Array[] = [];
  let start = 0;
  for (const body of bodiesOf(space, record)) {
    const end = start + body.size;
    if (end > range.offset && start < range.offset + range.length) {
      const object = await space.store.get(body.key);
      if (!object) return null;
      pieces.push(
        object.body.subarray(Math.max(0, range.offset - start), range.offset + range.length - start),
      );
    }
    start = end;
  }
  return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
}

async function deleteBodies(space: Bucket, record: R2Record): Promise<void> {
  for (const body of bodiesOf(space, record)) await space.store.delete(body.key);
}

/** `range` ({offset, length, suffix}) or `rangeHeader`, as Miniflare's validator.worker.ts reads them. */
function rangeOf(body: Json, size: number): { offset: number; length: number } {
  const whole = { offset: 0, length: size };
  if (typeof body.rangeHeader === 'string') return rangeHeader(body.rangeHeader, size) ?? whole;
  if (body.range === undefined || body.range === null || typeof body.range !== 'object') return whole;
  const raw = body.range as Json;
  const number = (v: unknown) => (v === undefined ? undefined : Number(v));
  let offset = number(raw.offset);
  let length = number(raw.length);
  let suffix = number(raw.suffix);
  if (suffix !== undefined) {
    if (!(suffix > 0)) throw invalidRange();
    if (suffix > size) suffix = size;
    offset = size - suffix;
    length = suffix;
  }
  offset ??= 0;
  length ??= size - offset;
  if (!(offset >= 0) || offset > size || !(length > 0)) throw invalidRange();
  if (offset + length > size) length = size - offset;
  return { offset, length };
}

/** One `bytes=` range; null (the whole object) for anything else, as Miniflare does. */
function rangeHeader(header: string, size: number): { offset: number; length: number } | null {
  const match = /^bytes=\s*(\d*)-(\d*)\s*$/.exec(header);
  if (!match) return null;
  const [, from, to] = match;
  if (from === '' && to === '') return null;
  if (from === '') {
    const suffix = Math.min(Number(to), size);
    return suffix > 0 ? { offset: size - suffix, length: suffix } : null;
  }
  const start = Number(from);
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  if (start > end || start >= size) return null;
  return { offset: start, length: end - start + 1 };
}

interface Etag {
  type: 'strong' | 'weak' | 'wildcard';
  value?: string;
}

interface Conditional {
  etagMatches?: Etag[];
  etagDoesNotMatch?: Etag[];
  uploadedBefore?: number;
  uploadedAfter?: number;
  secondsGranularity?: boolean;
}

function parseConditional(raw: unknown): Conditional {
  if (!raw || typeof raw !== 'object') throw invalidMetadata();
  const r = raw as Json;
  const etags = (v: unknown): Etag[] | undefined => {
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) throw invalidMetadata();
    return v as Etag[];
  };
  const date = (v: unknown) => (v === undefined ? undefined : Number(v));
  return {
    etagMatches: etags(r.etagMatches),
    etagDoesNotMatch: etags(r.etagDoesNotMatch),
    uploadedBefore: date(r.uploadedBefore),
    uploadedAfter: date(r.uploadedAfter),
    secondsGranularity: r.secondsGranularity === true,
  };
}

function includesEtag(conditions: Etag[], etag: string, comparison: 'strong' | 'weak'): boolean {
  return conditions.some(
    (c) => c.type === 'wildcard' || (c.value === etag && (c.type === 'strong' || comparison === 'weak')),
  );
}

/**
 * RFC 7232's order of conditions as R2 applies them (Miniflare's validator.worker.ts
 * `_testR2Conditional`): an absent object meets only a condition without etagMatches and
 * uploadedAfter; If-None-Match outranks If-Modified-Since and If-Match If-Unmodified-Since.
 */
export function conditionHolds(
  cond: Conditional,
  object: Pick<R2Record, 'etag' | 'uploaded'> | null,
): boolean {
  if (object === null) return cond.etagMatches === undefined && cond.uploadedAfter === undefined;
  const ifMatch = cond.etagMatches === undefined || includesEtag(cond.etagMatches, object.etag, 'strong');
  const ifNoneMatch =
    cond.etagDoesNotMatch === undefined || !includesEtag(cond.etagDoesNotMatch, object.etag, 'weak');
  const cut = (ms: number) => (cond.secondsGranularity ? Math.floor(ms / 1000) * 1000 : ms);
  const modified = cut(object.uploaded);
  const ifModifiedSince =
    cond.uploadedAfter === undefined ||
    cut(cond.uploadedAfter) < modified ||
    (cond.etagDoesNotMatch !== undefined && ifNoneMatch);
  const ifUnmodifiedSince =
    cond.uploadedBefore === undefined ||
    modified < cut(cond.uploadedBefore) ||
    (cond.etagMatches !== undefined && ifMatch);
  return ifMatch && ifNoneMatch && ifModifiedSince && ifUnmodifiedSince;
}

async function put(
  space: Bucket,
  key: string,
  given: Uint8Array | StreamedValue,
  body: Json,
): Promise<R2Record & { key: string }> {
  const length = given instanceof Uint8Array ? given.byteLength : given.length;
  if (length > R2_LIMITS.maxValueBytes) throw entityTooLarge();
  const customMetadata = parseCustomFields(body.customFields);
  const httpMetadata = parseHttpFields(body.httpFields);
  const onlyIf = body.onlyIf === undefined ? undefined : parseConditional(body.onlyIf);
  const streaming = space.store.streaming;
  const asked = HASHES.some(({ field }) => body[field] !== undefined);
  const version = randomBytes(16).toString('hex');
  const fields = { version, uploaded: space.nowMs, httpMetadata, customMetadata, checksums: {} };
  // The fast way: the value goes on to the bucket as it arrives, in one PUT. A condition or a
  // checksum must hold before the object is written, so those wait for the whole value.
  const metadata = streaming && inlineMetadata(fields);
  if (streaming && metadata && !(given instanceof Uint8Array) && !onlyIf && !asked)
    return putStreamed(space, key, given, fields, metadata, streaming);
  const value = given instanceof Uint8Array ? given : await collect(given);
  const checksums = verifyChecksums(value, body);
  const verified = { ...fields, checksums };
  const verifiedMetadata = streaming && inlineMetadata(verified);
  if (streaming && verifiedMetadata)
    return putInline(space, key, value, onlyIf, verified, verifiedMetadata, streaming);
  const record: R2Record = {
    version,
    size: value.byteLength,
    etag: createHash('md5').update(value).digest('hex'),
    uploaded: space.nowMs,
    checksums,
    httpMetadata,
    customMetadata,
  };
  let written = false;
  try {
    await commitRecord(space, key, record, onlyIf, async () => {
      await space.store.put(keys.runtimeR2Body(space.application, space.bucket, record.version), value);
      written = true;
    });
    written = false; // the body is the record's now
    return { ...record, key };
  } finally {
    if (written)
      await space.store.delete(keys.runtimeR2Body(space.application, space.bucket, record.version));
  }
}

/**
 * A put in the one-object layout, its value passed on as it arrives: one PUT, with a HEAD beside
 * it to learn what it replaces. A record it replaced (written in the record layout) has bodies,
 * which are deleted after the PUT; the PUT alone decides, as R2's last writer wins. The read of
 * what it replaces must end before the PUT lands, or it would read the put's own object: the
 * value's last bytes wait for it (it ends long before a large value has been sent).
 */
async function putStreamed(
  space: Bucket,
  key: string,
  value: StreamedValue,
  fields: InlineFields,
  metadata: Record<string, string>,
  streaming: StreamingStore,
): Promise<R2Record & { key: string }> {
  const at = recordKey(space, key);
  const replaced = readCurrent(space, key);
  const read = replaced.then(
    () => {},
    () => {},
  );
  // With no bytes to hold back, the PUT would land as soon as it is sent.
  if (value.length === 0) await read;
  const [written, before] = await Promise.allSettled([
    streaming.write(at, holdingBack(value.stream, read), value.length, metadata),
    replaced,
  ]);
  if (written.status === 'rejected') throw written.reason;
  // A failed HEAD only leaves the bodies of a record it replaced unreclaimed.
  if (before.status === 'fulfilled' && before.value && !before.value.inline)
    await deleteBodies(space, before.value.record);
  return { ...fields, size: value.length, etag: unquote(written.value), key };
}

/** `stream` passed on with its last chunk held back until `until` settles. */
function holdingBack(stream: Readable, until: Promise<void>): Readable {
  let held: Buffer | null = null;
  const passing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const previous = held;
      held = chunk;
      done(null, previous ?? undefined);
    },
    flush(done) {
      until.then(() => done(null, held ?? undefined));
    },
  });
  stream.on('error', (err) => passing.destroy(err));
  return stream.pipe(passing);
}

/**
 * A put in the one-object layout with its value whole (checked against its checksums, or put
 * on a condition): written on condition that the object read is still there, else read again.
 */
async function putInline(
  space: Bucket,
  key: string,
  value: Uint8Array,
  onlyIf: Conditional | undefined,
  fields: InlineFields,
  metadata: Record<string, string>,
  streaming: StreamingStore,
): Promise<R2Record & { key: string }> {
  const at = recordKey(space, key);
  for (let attempt = 0; attempt < UPDATE_TRIES; attempt++) {
    const current = await readCurrent(space, key);
    if (onlyIf && !conditionHolds(onlyIf, current?.record ?? null)) throw preconditionFailed();
    const condition: WriteCondition = current ? { ifMatch: current.storeEtag } : { ifNoneMatch: '*' };
    let etag: string;
    try {
      etag = await streaming.write(at, value, value.byteLength, metadata, condition);
    } catch (err) {
      if (isCasConflict(err)) continue;
      throw err;
    }
    if (current && !current.inline) await deleteBodies(space, current.record);
    return { ...fields, size: value.byteLength, etag: unquote(etag), key };
  }
  throw new Error(`${UPDATE_TRIES} writes of one R2 object in a row lost to other writers`);
}

/**
 * Makes `record` the object at `key`: once `onlyIf` holds against the record there, `prepare`
 * runs (once: a put writes its body), then the record is written on condition that the one read
 * is still there (else all again), and the bodies of the object it replaced are deleted.
 */
async function commitRecord(
  space: Bucket,
  key: string,
  record: R2Record,
  onlyIf: Conditional | undefined,
  prepare: () => Promise<void> = async () => {},
): Promise<void> {
  let prepared = false;
  for (let attempt = 0; attempt < UPDATE_TRIES; attempt++) {
    // With no condition to check first, the body is written while the record is read: a put of
    // a large value then waits for one bucket write before its record, not a read and a write.
    const reading = readCurrent(space, key);
    if (!prepared && !onlyIf) {
      // Both settle before either's failure is thrown: a body still being written is never
      // left behind by the put's clean-up.
      const [, written] = await Promise.allSettled([reading, prepare()]);
      if (written.status === 'rejected') throw written.reason;
      prepared = true;
    }
    const current = await reading;
    if (onlyIf && !conditionHolds(onlyIf, current?.record ?? null)) throw preconditionFailed();
    if (!prepared) {
      await prepare();
      prepared = true;
    }
    const condition: WriteCondition = current ? { ifMatch: current.storeEtag } : { ifNoneMatch: '*' };
    try {
      await space.store.put(recordKey(space, key), JSON.stringify(record), condition);
    } catch (err) {
      if (isCasConflict(err)) continue;
      throw err;
    }
    if (current && !current.inline) await deleteBodies(space, current.record);
    return;
  }
  throw new Error(`${UPDATE_TRIES} writes of one R2 object in a row lost to other writers`);
}

function parseCustomFields(raw: unknown): Record<string, string> {
  if (raw === undefined) return {};
  if (!Array.isArray(raw)) throw invalidMetadata();
  const out: Record<string, string> = {};
  let length = 0;
  for (const field of raw as { k?: unknown; v?: unknown }[]) {
    if (typeof field?.k !== 'string' || typeof field.v !== 'string') throw invalidMetadata();
    out[field.k] = field.v;
    length += serialisedLength(field.k) + serialisedLength(field.v);
  }
  if (length > R2_LIMITS.maxMetadataSize) throw metadataTooLarge();
  return out;
}

/** R2's measure of custom metadata (Miniflare's validator.worker.ts `serialisedLength`). */
function serialisedLength(text: string): number {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 256) return text.length * 2;
  return text.length;
}

function parseHttpFields(raw: unknown): HttpFields {
  if (raw === undefined) return {};
  if (!raw || typeof raw !== 'object') throw invalidMetadata();
  const r = raw as Json;
  const out: HttpFields = {};
  for (const field of HTTP_FIELDS) if (typeof r[field] === 'string') out[field] = r[field] as string;
  if (r.cacheExpiry !== undefined) out.cacheExpiry = Number(r.cacheExpiry);
  return out;
}

/** Each checksum the put names must match the value (md5 comes in base64, the rest in hex). */
function verifyChecksums(value: Uint8Array, body: Json): Checksums {
  const checksums: Checksums = {};
  for (const { field, algorithm, name } of HASHES) {
    const given = body[field];
    if (given === undefined) continue;
    if (typeof given !== 'string') throw invalidMetadata();
    const provided = Buffer.from(given, field === 'md5' ? 'base64' : 'hex');
    const actual = createHash(algorithm).update(value).digest();
    if (!provided.equals(actual))
      throw new R2Refusal(
        400,
        10037,
        [
          `The ${name} checksum you specified did not match what we received.`,
          `You provided a ${name} checksum with value: ${provided.toString('hex')}`,
          `Actual ${name} was: ${actual.toString('hex')}`,
        ].join('\n'),
      );
    checksums[field] = actual.toString('hex');
  }
  return checksums;
}

async function remove(space: Bucket, body: Json): Promise<void> {
  const names = Array.isArray(body.objects) ? body.objects : [body.object];
  if (!names.every((name): name is string => typeof name === 'string')) throw invalidMetadata();
  for (const name of names) checkKey(name);
  for (const name of names) {
    for (let attempt = 0; ; attempt++) {
      const current = await readCurrent(space, name);
      if (!current) break;
      try {
        await space.store.delete(recordKey(space, name), { ifMatch: current.storeEtag });
      } catch (err) {
        if (isCasConflict(err) && attempt + 1 < UPDATE_TRIES) continue;
        throw err;
      }
      if (!current.inline) await deleteBodies(space, current.record);
      break;
    }
  }
}

interface Upload {
  key: string;
  httpMetadata: HttpFields;
  customMetadata: Record<string, string>;
  state: 'in-progress' | 'completed' | 'aborted';
}

interface Part {
  etag: string;
  /** The part's MD5 in hex: the multipart object's etag is made of them. */
  md5: string;
  size: number;
  body: string;
}

const UPLOAD_ID = /^[0-9a-f]{32}$/;

async function createUpload(space: Bucket, key: string, body: Json): Promise<{ uploadId: string }> {
  const upload: Upload = {
    key,
    httpMetadata: parseHttpFields(body.httpFields),
    customMetadata: parseCustomFields(body.customFields),
    state: 'in-progress',
  };
  const uploadId = randomBytes(16).toString('hex');
  await space.store.put(
    keys.runtimeR2Upload(space.application, space.bucket, uploadId),
    JSON.stringify(upload),
    {
      ifNoneMatch: '*',
    },
  );
  return { uploadId };
}

/** The upload `body.uploadId` names, for `key`; null when there is none such. */
async function readUpload(
  space: Bucket,
  key: string,
  body: Json,
): Promise<{ id: string; upload: Upload; storeEtag: string } | null> {
  const id = body.uploadId;
  if (typeof id !== 'string' || !UPLOAD_ID.test(id)) return null;
  const object = await space.store.get(keys.runtimeR2Upload(space.application, space.bucket, id));
  if (!object) return null;
  const upload = JSON.parse(Buffer.from(object.body).toString('utf8')) as Upload;
  return upload.key === key ? { id, upload, storeEtag: object.etag } : null;
}

async function uploadPart(
  space: Bucket,
  key: string,
  body: Json,
  value: Uint8Array,
): Promise<{ etag: string }> {
  const number = body.partNumber;
  if (
    typeof number !== 'number' ||
    !Number.isInteger(number) ||
    number < 1 ||
    number > R2_LIMITS.maxPartNumber
  )
    throw invalidMetadata();
  if (value.byteLength > R2_LIMITS.maxValueBytes) throw entityTooLarge();
  const found = await readUpload(space, key, body);
  if (found?.upload.state !== 'in-progress') throw noSuchUpload();
  const partKey = keys.runtimeR2UploadPart(space.application, space.bucket, found.id, number);
  const previous = await space.store.get(partKey);
  const part: Part = {
    etag: randomBytes(16).toString('hex'),
    md5: createHash('md5').update(value).digest('hex'),
    size: value.byteLength,
    body: randomBytes(16).toString('hex'),
  };
  await space.store.put(keys.runtimeR2Body(space.application, space.bucket, part.body), value);
  await space.store.put(partKey, JSON.stringify(part));
  // The part it replaced: its body is no object's.
  if (previous)
    await space.store.delete(
      keys.runtimeR2Body(space.application, space.bucket, parsePart(previous.body).body),
    );
  return { etag: part.etag };
}

function parsePart(body: Uint8Array): Part {
  return JSON.parse(Buffer.from(body).toString('utf8')) as Part;
}

/** Every part record of an upload, by part number. */
async function partsOf(space: Bucket, id: string): Promise<Map<number, { key: string; part: Part }>> {
  const prefix = `${keys.runtimeR2UploadPrefix(space.application, space.bucket, id)}parts/`;
  const { objects } = await space.store.list(prefix, { recursive: true });
  const parts = new Map<number, { key: string; part: Part }>();
  for (const object of objects) {
    const read = await space.store.get(object.key);
    if (read)
      parts.set(Number(object.key.slice(prefix.length, -'.json'.length)), {
        key: object.key,
        part: parsePart(read.body),
      });
  }
  return parts;
}

/**
 * Completes an upload with Miniflare's checks, in its order (bucket.worker.ts
 * `completeMultipartUpload`): the parts named exist with those etags, every part but the last
 * is at least 5 MiB, and in part order all but the last are one size, the last no larger. The
 * object's record names the parts' bodies in order; its etag is R2's for multipart objects: the
 * MD5 of the parts' MD5s, then `-<number of parts>`.
 */
async function completeUpload(space: Bucket, key: string, body: Json): Promise<R2Record & { key: string }> {
  const found = await readUpload(space, key, body);
  if (!found) throw internalError();
  if (found.upload.state !== 'in-progress') throw noSuchUpload();
  if (!Array.isArray(body.parts)) throw invalidMetadata();
  const selected = body.parts as { etag?: unknown; part?: unknown }[];
  const numbers = new Set<number>();
  for (const { part } of selected) {
    if (typeof part !== 'number' || numbers.has(part)) throw internalError();
    numbers.add(part);
  }
  const uploaded = await partsOf(space, found.id);
  const parts = selected.map((s) => {
    const part = uploaded.get(s.part as number);
    if (!part || part.part.etag !== s.etag) throw invalidPart();
    return { number: s.part as number, ...part.part };
  });
  for (const part of parts.slice(0, -1)) if (part.size < R2_LIMITS.minPartBytes) throw entityTooSmall();
  parts.sort((a, b) => a.number - b.number);
  const first = parts[0];
  for (const part of parts.slice(0, -1))
    if (part.size < R2_LIMITS.minPartBytes || part.size !== first!.size) throw badUpload();
  if (parts.length > 1 && parts.at(-1)!.size > first!.size) throw badUpload();
  const etag = createHash('md5');
  for (const part of parts) etag.update(Buffer.from(part.md5, 'hex'));
  const record: R2Record = {
    version: randomBytes(16).toString('hex'),
    size: parts.reduce((total, part) => total + part.size, 0),
    etag: `${etag.digest('hex')}-${parts.length}`,
    uploaded: space.nowMs,
    checksums: {},
    httpMetadata: found.upload.httpMetadata,
    customMetadata: found.upload.customMetadata,
    parts: parts.map((part) => ({ body: part.body, size: part.size })),
  };
  await commitRecord(space, key, record, undefined);
  await finishUpload(space, found, 'completed', uploaded, new Set(parts.map((part) => part.body)));
  return { ...record, key };
}

/** Marks the upload done and drops its part records, and the bodies of parts no object holds. */
async function finishUpload(
  space: Bucket,
  found: { id: string; upload: Upload; storeEtag: string },
  state: Upload['state'],
  parts: Map<number, { key: string; part: Part }>,
  kept: Set<string>,
): Promise<void> {
  await space.store.put(
    keys.runtimeR2Upload(space.application, space.bucket, found.id),
    JSON.stringify({ ...found.upload, state }),
  );
  for (const { key, part } of parts.values()) {
    if (!kept.has(part.body))
      await space.store.delete(keys.runtimeR2Body(space.application, space.bucket, part.body));
    await space.store.delete(key);
  }
}

/** Aborts an upload in progress; one already completed or aborted stays as it is. */
async function abortUpload(space: Bucket, key: string, body: Json): Promise<void> {
  const found = await readUpload(space, key, body);
  if (!found) throw internalError();
  if (found.upload.state !== 'in-progress') return;
  await finishUpload(space, found, 'aborted', await partsOf(space, found.id), new Set());
}

interface ListAnswer {
  objects: ReturnType<typeof wireObject>[];
  truncated: boolean;
  cursor?: string;
  delimitedPrefixes: string[];
}

/**
 * One page in UTF-8 byte order (Miniflare's bucket.worker.ts `#list`): the bucket is listed from
 * the prefix's encoded floor, keys after the cursor (and `startAfter`) kept; with a delimiter,
 * keys sharing the text up to it become one delimited prefix, which counts towards the limit.
 * The cursor is the base64 of the last key the page covered, so keys written between pages are
 * seen. Each object of the page costs its record's read.
 */
async function list(space: Bucket, body: Json): Promise<ListAnswer> {
  const limit = body.limit === undefined ? R2_LIMITS.maxListKeys : Number(body.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > R2_LIMITS.maxListKeys) throw invalidMaxKeys();
  const prefix = typeof body.prefix === 'string' ? body.prefix : '';
  const delimiter = typeof body.delimiter === 'string' && body.delimiter !== '' ? body.delimiter : null;
  const include = Array.isArray(body.include) ? body.include.map(Number) : [];
  let after: Buffer | null = typeof body.startAfter === 'string' ? Buffer.from(body.startAfter) : null;
  if (typeof body.cursor === 'string' && body.cursor !== '') {
    const cursor = Buffer.from(body.cursor, 'base64');
    if (after === null || Buffer.compare(cursor, after) > 0) after = cursor;
  }
  const prefixBytes = Buffer.from(prefix);
  // No key is longer than the limit, so no key begins with a longer prefix; and the bucket's own
  // list would refuse the encoded prefix past its 1,024-byte key limit.
  if (prefixBytes.length > R2_LIMITS.maxKeyBytes)
    return { objects: [], truncated: false, delimitedPrefixes: [] };
  const floor = encodeKey(prefixBytes).slice(0, Math.floor((prefixBytes.length * 8) / 5));
  const base = keys.runtimeR2RecordsPrefix(space.application, space.bucket);
  const { objects } = await space.store.list(base + segments(floor), { recursive: true });
  const names = objects
    .map((object) => {
      const below = object.key.slice(base.length);
      return below === '-' ? '' : encodedOf(below);
    })
    .filter((encoded): encoded is string => encoded !== null)
    .map((encoded) => decodeKey(encoded))
    .filter((name) => name.subarray(0, prefixBytes.length).equals(prefixBytes))
    .filter((name) => after === null || Buffer.compare(name, after) > 0);
  // Rows of the page: a key, or a delimited prefix with the last key it covers.
  const rows: { key?: string; prefix?: string; last: Buffer }[] = [];
  for (const name of names) {
    const text = name.toString('utf8');
    const cut = delimiter === null ? -1 : text.indexOf(delimiter, prefix.length);
    if (cut < 0) {
      rows.push({ key: text, last: name });
      continue;
    }
    const group = text.slice(0, cut + delimiter!.length);
    const previous = rows.at(-1);
    if (previous?.prefix === group) previous.last = name;
    else rows.push({ prefix: group, last: name });
  }
  const page = rows.slice(0, limit);
  const truncated = rows.length > limit;
  const keysOfPage = page.flatMap((row) => (row.key === undefined ? [] : [row.key]));
  const found: (R2Record & { key: string })[] = [];
  for (let i = 0; i < keysOfPage.length; i += LIST_READS_AT_ONCE) {
    const batch = keysOfPage.slice(i, i + LIST_READS_AT_ONCE);
    const read = await Promise.all(batch.map((key) => readCurrent(space, key)));
    read.forEach((r, j) => {
      // A record deleted since the listing is left out.
      if (r) found.push({ ...r.record, key: batch[j]! });
    });
  }
  return {
    objects: found.map((object) => wireObject(object, undefined, include.includes(0), include.includes(1))),
    truncated,
    ...(truncated ? { cursor: page.at(-1)!.last.toString('base64') } : {}),
    delimitedPrefixes: page.flatMap((row) => (row.prefix === undefined ? [] : [row.prefix])),
  };
}

/** An object as workerd's R2HeadResponse reads it. */
function wireObject(
  object: R2Record & { key: string },
  range?: { offset: number; length: number },
  withHttp = true,
  withCustom = true,
) {
  const checksums: Record<string, string> = {};
  for (const { field, wire } of HASHES) {
    // A single put's etag is its MD5; a multipart object's is not (Miniflare's r2Object.worker.ts).
    const md5 = object.parts ? undefined : object.etag;
    const value = field === 'md5' ? (object.checksums.md5 ?? md5) : object.checksums[field];
    if (value !== undefined) checksums[wire] = value;
  }
  return {
    name: object.key,
    version: object.version,
    size: object.size,
    etag: object.etag,
    uploaded: object.uploaded,
    ...(withHttp ? { httpFields: object.httpMetadata } : {}),
    ...(withCustom
      ? { customFields: Object.entries(object.customMetadata).map(([k, v]) => ({ k, v })) }
      : {}),
    ...(range ? { range } : {}),
    checksums,
    storageClass: 'Standard',
  };
}

/**
 * An object's metadata, then its bytes when there are some (`value` whole, or `tail` as the
 * bucket sends them); a put's answer has no range.
 */
function answerObject(
  object: R2Record & { key: string },
  range: { offset: number; length: number } | null = { offset: 0, length: object.size },
  value?: Uint8Array,
  tail?: StreamedValue,
): R2StreamedResponse {
  const metadata = Buffer.from(JSON.stringify(wireObject(object, range ?? undefined)));
  return {
    status: 200,
    headers: { [METADATA_SIZE_HEADER]: String(metadata.byteLength), 'content-type': 'application/json' },
    body: value ? Buffer.concat([metadata, value]) : metadata,
    ...(tail ? { tail } : {}),
  };
}

function answerJson(value: unknown): R2Response {
  const metadata = Buffer.from(JSON.stringify(value));
  return {
    status: 200,
    headers: { [METADATA_SIZE_HEADER]: String(metadata.byteLength), 'content-type': 'application/json' },
    body: metadata,
  };
}

export function refusalAnswer(refusal: R2Refusal): R2Response {
  const error = JSON.stringify({ version: 1, v4code: refusal.v4code, message: refusal.message });
  // A header is one line of Latin-1: the message's newlines (BadDigest) travel escaped in the JSON.
  const headers: Record<string, string> = { [ERROR_HEADER]: error };
  if (!refusal.object) return { status: refusal.status, headers, body: new Uint8Array() };
  const answer = answerObject(refusal.object);
  return { status: refusal.status, headers: { ...answer.headers, ...headers }, body: answer.body };
}
