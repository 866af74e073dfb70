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
// Storage: per object a record (JSON: size, etag, version, uploaded, checksums, HTTP and custom
// metadata) at src/registry/keys.ts `runtimeR2Record`, and the bytes at `runtimeR2Body` under the
// record's version. A put writes the body, then the record with a condition on the record it
// read (so two puts never lose a body), then deletes the body it replaced: the record is the
// one write that makes a put visible, whole. The record's key is the object key encoded as KV's
// keys are (kv.ts `encodeKey`, `segments`): no record is a prefix of another and every file name
// stays under 255 bytes.

import { createHash, randomBytes } from 'node:crypto';
import { keys } from '../../../src/registry/keys.ts';
import { isApplicationName, isR2BucketName } from '../../../src/registry/names.ts';
import { isCasConflict, type Store, type WriteCondition } from '../../../src/store/store.ts';
import { UPDATE_TRIES } from '../../../src/store/update.ts';
import { decodeKey, encodedOf, encodeKey, segments } from './kv.ts';
import { R2_APPLICATION_HEADER, R2_BUCKET_HEADER } from './r2-headers.ts';

/**
 * Cloudflare's R2 limits (developers.cloudflare.com/r2/platform/limits/, Miniflare's
 * constants.ts), with svc's own where it is smaller: keys to 512 bytes (their encoded record key
 * must fit S3's 1,024) and values to 100 MiB (a value passes through the host's memory whole).
 */
export const R2_LIMITS = {
  maxKeyBytes: 512,
  maxValueBytes: 100 * 1024 * 1024,
  maxMetadataSize: 2048,
  maxListKeys: 1000,
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
  body: Uint8Array;
}

export interface R2Response {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
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
}

interface Bucket {
  store: Store;
  application: string;
  bucket: string;
  nowMs: number;
}

/** Answers one R2 request against the bucket; `nowMs` is the upload time a put records. */
export async function handleR2(store: Store, request: R2Request, nowMs = Date.now()): Promise<R2Response> {
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
      const value = request.body.subarray(size);
      if (body.method === 'put') return answerObject(await put(space, objectKey(body), value, body), null);
      if (body.method === 'delete') {
        await remove(space, body);
        return { status: 200, headers: {}, body: new Uint8Array() };
      }
      if (typeof body.method === 'string' && body.method.includes('ultipart'))
        throw new R2Refusal(
          501,
          10001,
          'Multipart uploads are not provided by this runtime yet (svc docs/bindings.md "R2 buckets")',
        );
    }
    throw invalidMetadata();
  } catch (err) {
    if (err instanceof R2Refusal) return refusalAnswer(err);
    throw err;
  }
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

async function readRecord(
  space: Bucket,
  key: string,
): Promise<{ record: R2Record; storeEtag: string } | null> {
  const object = await space.store.get(recordKey(space, key));
  if (!object) return null;
  const record = parseRecord(object.body);
  return record ? { record, storeEtag: object.etag } : null;
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
  const found = await readRecord(space, key);
  if (!found) throw noSuchKey();
  return { ...found.record, key };
}

async function get(space: Bucket, key: string, body: Json): Promise<R2Response> {
  for (let attempt = 0; ; attempt++) {
    const found = await readRecord(space, key);
    if (!found) throw noSuchKey();
    const object = { ...found.record, key };
    if (body.onlyIf !== undefined && !conditionHolds(parseConditional(body.onlyIf), object)) {
      const refusal = preconditionFailed();
      refusal.object = object;
      throw refusal;
    }
    const range = rangeOf(body, object.size);
    // Ranges are cut from the whole body: the store reads objects whole.
    const bytes = await space.store.get(keys.runtimeR2Body(space.application, space.bucket, object.version));
    if (!bytes) {
      // Replaced or deleted between the two reads: the record now says which.
      if (attempt + 1 < GET_TRIES) continue;
      throw noSuchKey();
    }
    const value = bytes.body.subarray(range.offset, range.offset + range.length);
    return answerObject(object, range, value);
  }
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
  value: Uint8Array,
  body: Json,
): Promise<R2Record & { key: string }> {
  if (value.byteLength > R2_LIMITS.maxValueBytes) throw entityTooLarge();
  const customMetadata = parseCustomFields(body.customFields);
  const httpMetadata = parseHttpFields(body.httpFields);
  const onlyIf = body.onlyIf === undefined ? undefined : parseConditional(body.onlyIf);
  const checksums = verifyChecksums(value, body);
  const record: R2Record = {
    version: randomBytes(16).toString('hex'),
    size: value.byteLength,
    etag: createHash('md5').update(value).digest('hex'),
    uploaded: space.nowMs,
    checksums,
    httpMetadata,
    customMetadata,
  };
  const bodyKey = (version: string) => keys.runtimeR2Body(space.application, space.bucket, version);
  let written = false;
  try {
    for (let attempt = 0; attempt < UPDATE_TRIES; attempt++) {
      const current = await readRecord(space, key);
      if (onlyIf && !conditionHolds(onlyIf, current?.record ?? null)) throw preconditionFailed();
      if (!written) {
        await space.store.put(bodyKey(record.version), value);
        written = true;
      }
      const condition: WriteCondition = current ? { ifMatch: current.storeEtag } : { ifNoneMatch: '*' };
      try {
        await space.store.put(recordKey(space, key), JSON.stringify(record), condition);
      } catch (err) {
        if (isCasConflict(err)) continue;
        throw err;
      }
      written = false; // the body is the record's now
      if (current) await space.store.delete(bodyKey(current.record.version));
      return { ...record, key };
    }
    throw new Error(`${UPDATE_TRIES} puts of one R2 object in a row lost to other writers`);
  } finally {
    if (written) await space.store.delete(bodyKey(record.version));
  }
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
      const current = await readRecord(space, name);
      if (!current) break;
      try {
        await space.store.delete(recordKey(space, name), { ifMatch: current.storeEtag });
      } catch (err) {
        if (isCasConflict(err) && attempt + 1 < UPDATE_TRIES) continue;
        throw err;
      }
      await space.store.delete(keys.runtimeR2Body(space.application, space.bucket, current.record.version));
      break;
    }
  }
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
    const read = await Promise.all(batch.map((key) => readRecord(space, key)));
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
    const value = field === 'md5' ? (object.checksums.md5 ?? object.etag) : object.checksums[field];
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

/** An object's metadata, then its bytes when there are some; a put's answer has no range. */
function answerObject(
  object: R2Record & { key: string },
  range: { offset: number; length: number } | null = { offset: 0, length: object.size },
  value?: Uint8Array,
): R2Response {
  const metadata = Buffer.from(JSON.stringify(wireObject(object, range ?? undefined)));
  return {
    status: 200,
    headers: { [METADATA_SIZE_HEADER]: String(metadata.byteLength), 'content-type': 'application/json' },
    body: value ? Buffer.concat([metadata, value]) : metadata,
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
