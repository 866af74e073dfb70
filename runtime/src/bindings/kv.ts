// Workers KV backed by the fleet's bucket (docs/bindings.md "KV namespaces"). workerd turns a
// worker's `env.NS.get/put/delete/list` into HTTP requests to the service its `kvNamespace`
// binding names; the runtime host answers them here, on an owner-only Unix socket, and workerd's
// config injects the headers naming the application and namespace (instance.ts), so a worker can
// neither name another application's data nor reach the bucket's credentials.
//
// The wire contract is workerd's (src/workerd/api/kv.c++): GET /<key>?urlencoded=true answers the
// value with its metadata in `CF-KV-Metadata` (404: absent); PUT /<key> with `expiration` or
// `expiration_ttl` in the query and the metadata JSON in `CF-KV-Metadata`; DELETE /<key>; GET /
// lists (`prefix`, `key_count_limit`, `cursor`); POST /bulk/get reads up to 100 keys. A status
// outside 2xx reaches the worker as `KV <METHOD> failed: <status> <status text>`, so the status
// text carries Cloudflare's words (as Miniflare's KV gateway gives them).
//
// Storage: one object per KV key (src/registry/keys.ts `runtimeKvEntry`), a one-line JSON header
// (expiration, metadata) then the value's bytes, written with one PUT, so a put is seen whole or
// not at all. The object key is the KV key's UTF-8 bytes in base32hex (an alphabet in ASCII
// order, so the bucket's key order is the KV keys' byte order) cut into 200-character segments
// (the local-directory store's file names stay under 255 bytes), then a last segment `-`, which
// sorts below every base32hex character: a key sorts before every longer key it begins.

import { keys } from '../../../src/registry/keys.ts';
import { isApplicationName } from '../../../src/registry/names.ts';
import { KV_NAMESPACE_ID } from '../../../src/runtime-tools/layout.ts';
import { isCasConflict, type Store } from '../../../src/store/store.ts';
import { DEFAULT_CACHE_TTL_SECONDS, type KvCache } from './kv-cache.ts';

/** Cloudflare's Workers KV limits (developers.cloudflare.com/kv/platform/limits/). */
export const KV_LIMITS = {
  maxKeyBytes: 512,
  maxValueBytes: 25 * 1024 * 1024,
  maxMetadataBytes: 1024,
  minExpirationTtlSeconds: 60,
  minCacheTtlSeconds: 30,
  maxListKeys: 1000,
  maxBulkGetKeys: 100,
} as const;

/** The headers workerd's config injects on every KV request; a worker cannot set them. */
export const KV_APPLICATION_HEADER = 'cell-kv-application';
export const KV_NAMESPACE_HEADER = 'cell-kv-namespace';

const METADATA_HEADER = 'cf-kv-metadata';
const EXPIRATION_HEADER = 'cf-expiration';
const SEGMENT_CHARS = 200;
const BASE32HEX = '0123456789ABCDEFGHIJKLMNOPQRSTUV';
const ENCODED = /^[0-9A-V]*$/;
/** How many entries a list reads at once to learn their expiration and metadata. */
const LIST_READS_AT_ONCE = 16;

/** One request as workerd sent it: the raw request target, headers in lower case, the body. */
export interface KvRequest {
  method: string;
  target: string;
  headers: Record<string, string | undefined>;
  body: Uint8Array;
}

export interface KvResponse {
  status: number;
  /** Cloudflare's words for a refusal: workerd shows the worker the status text. */
  statusText?: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
}

/** A refusal with Cloudflare's status and words. */
export class KvRefusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface Entry {
  /** Seconds since the epoch, or null: never expires. */
  expiration: number | null;
  /** The metadata's JSON text, or null: none. */
  metadata: string | null;
  value: Uint8Array;
  etag: string;
}

/**
 * Answers one KV request against the bucket; `nowMs` is the clock expirations are judged by.
 * With a `cache` (one per node: kv-cache.ts), reads within their cache TTL cost no bucket request.
 */
export async function handleKv(
  store: Store,
  request: KvRequest,
  nowMs = Date.now(),
  cache?: KvCache<Entry>,
): Promise<KvResponse> {
  try {
    const application = request.headers[KV_APPLICATION_HEADER];
    const namespace = request.headers[KV_NAMESPACE_HEADER];
    if (!isApplicationName(application) || namespace === undefined || !KV_NAMESPACE_ID.test(namespace))
      throw new KvRefusal(400, 'the request names no application and KV namespace');
    const space: Namespace = { store, cache, application, namespace, nowMs, now: Math.floor(nowMs / 1000) };
    // The target is split by hand: a URL parser would resolve a key such as `..` away.
    const cut = request.target.indexOf('?');
    const url = {
      pathname: cut < 0 ? request.target : request.target.slice(0, cut),
      searchParams: new URLSearchParams(cut < 0 ? '' : request.target.slice(cut + 1)),
    };
    if (request.method === 'POST' && url.pathname === '/bulk/get') return await bulkGet(space, request.body);
    if (url.pathname === '/' && request.method === 'GET') return await list(space, url.searchParams);
    const key = decodeKeyName(url);
    if (request.method === 'GET') return await getOne(space, key, url.searchParams);
    if (request.method === 'PUT') return await putOne(space, key, url.searchParams, request);
    if (request.method === 'DELETE') {
      checkKeyName(key);
      const deleted = entryKey(space, key);
      await store.delete(deleted);
      cache?.remember(deleted, null, 0, nowMs);
      return { status: 200 };
    }
    throw new KvRefusal(405, `method ${request.method} is not part of the KV API`);
  } catch (err) {
    if (err instanceof KvRefusal) return { status: err.status, statusText: err.message, body: err.message };
    throw err;
  }
}

interface Namespace {
  store: Store;
  cache: KvCache<Entry> | undefined;
  application: string;
  namespace: string;
  /** Milliseconds since the epoch. */
  nowMs: number;
  /** Seconds since the epoch. */
  now: number;
}

function decodeKeyName(url: { pathname: string; searchParams: URLSearchParams }): string {
  const raw = url.pathname.slice(1);
  if (url.searchParams.get('urlencoded')?.toLowerCase() !== 'true') return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new KvRefusal(400, 'Could not URL-decode key name');
  }
}

function checkKeyName(key: string): void {
  if (key === '') throw new KvRefusal(400, 'Key names must not be empty');
  if (key === '.' || key === '..')
    throw new KvRefusal(400, `Illegal key name "${key}". Please use a different name.`);
  checkKeyLength(key);
}

function checkKeyLength(key: string): void {
  const length = Buffer.byteLength(key);
  if (length > KV_LIMITS.maxKeyBytes)
    throw new KvRefusal(
      414,
      `UTF-8 encoded length of ${length} exceeds key length limit of ${KV_LIMITS.maxKeyBytes}.`,
    );
}

/** The read's cache TTL in seconds: the worker's `cacheTtl`, else Cloudflare's default. */
function checkCacheTtl(raw: unknown): number {
  if (raw === undefined || raw === null) return DEFAULT_CACHE_TTL_SECONDS;
  const ttl = Number(raw);
  if (Number.isNaN(ttl) || ttl < KV_LIMITS.minCacheTtlSeconds)
    throw new KvRefusal(
      400,
      `Invalid cache_ttl of ${raw}. Cache TTL must be at least ${KV_LIMITS.minCacheTtlSeconds}.`,
    );
  return ttl;
}

async function getOne(space: Namespace, key: string, query: URLSearchParams): Promise<KvResponse> {
  checkKeyName(key);
  const ttl = checkCacheTtl(query.get('cache_ttl'));
  const entry = await readEntry(space, key, ttl);
  if (!entry) return { status: 404, statusText: 'Not Found' };
  const headers: Record<string, string> = {};
  if (entry.expiration !== null) headers[EXPIRATION_HEADER] = String(entry.expiration);
  // HTTP carries header bytes as Latin-1 in Node: the UTF-8 bytes of the JSON go out unchanged.
  if (entry.metadata !== null) headers[METADATA_HEADER] = Buffer.from(entry.metadata).toString('latin1');
  return { status: 200, headers, body: entry.value };
}

async function bulkGet(space: Namespace, body: Uint8Array): Promise<KvResponse> {
  let request: { keys?: unknown; type?: unknown; withMetadata?: unknown; cacheTtl?: unknown };
  try {
    request = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw new KvRefusal(400, 'the bulk get request is not JSON');
  }
  const names = request.keys;
  if (!Array.isArray(names) || !names.every((k) => typeof k === 'string'))
    throw new KvRefusal(400, 'the bulk get request names no keys');
  const type = request.type ?? 'text';
  if (type !== 'text' && type !== 'json')
    throw new KvRefusal(400, `"${type}" is not a valid type. Use "json" or "text"`);
  if (names.length > KV_LIMITS.maxBulkGetKeys)
    throw new KvRefusal(400, `You can request a maximum of ${KV_LIMITS.maxBulkGetKeys} keys`);
  if (names.length < 1) throw new KvRefusal(400, 'You must request a minimum of 1 key');
  for (const name of names) checkKeyName(name);
  const ttl = checkCacheTtl(request.cacheTtl);
  const answer: Record<string, unknown> = {};
  let total = 0;
  for (const name of names as string[]) {
    const entry = await readEntry(space, name, ttl);
    if (!entry) {
      answer[name] = null;
      continue;
    }
    total += entry.value.byteLength;
    const text = Buffer.from(entry.value).toString('utf8');
    let value: unknown = text;
    if (type === 'json') {
      try {
        value = JSON.parse(text);
      } catch {
        throw new KvRefusal(400, 'At least one of the requested keys corresponds to a non-json value');
      }
    }
    answer[name] =
      request.withMetadata === true
        ? { value, metadata: entry.metadata === null ? null : JSON.parse(entry.metadata) }
        : value;
  }
  if (total > KV_LIMITS.maxValueBytes)
    throw new KvRefusal(
      413,
      `Total size of request exceeds the limit of ${KV_LIMITS.maxValueBytes / 1024 / 1024}MB`,
    );
  return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(answer) };
}

async function putOne(
  space: Namespace,
  key: string,
  query: URLSearchParams,
  request: KvRequest,
): Promise<KvResponse> {
  checkKeyName(key);
  const expiration = putExpiration(space.now, query.get('expiration'), query.get('expiration_ttl'));
  const rawMetadata = request.headers[METADATA_HEADER];
  let metadata: string | null = null;
  if (rawMetadata !== undefined) {
    metadata = Buffer.from(rawMetadata, 'latin1').toString('utf8');
    const length = Buffer.byteLength(metadata);
    if (length > KV_LIMITS.maxMetadataBytes)
      throw new KvRefusal(
        413,
        `Metadata length of ${length} exceeds limit of ${KV_LIMITS.maxMetadataBytes}.`,
      );
    try {
      JSON.parse(metadata);
    } catch {
      throw new KvRefusal(400, 'the metadata is not JSON');
    }
  }
  if (request.body.byteLength > KV_LIMITS.maxValueBytes) throw valueTooLong(request.body.byteLength);
  const header = `${JSON.stringify({ expiration, metadata })}\n`;
  const written = entryKey(space, key);
  const etag = await space.store.put(written, Buffer.concat([Buffer.from(header), request.body]));
  const value = Buffer.from(request.body); // a copy: the cache outlives the request
  space.cache?.remember(written, { expiration, metadata, value, etag }, value.byteLength, space.nowMs);
  return { status: 200 };
}

export function valueTooLong(length: number): KvRefusal {
  return new KvRefusal(413, `Value length of ${length} exceeds limit of ${KV_LIMITS.maxValueBytes}.`);
}

/** A put's expiration in seconds, or null; `expiration_ttl` wins when both are given, as in Miniflare. */
function putExpiration(now: number, rawExpiration: string | null, rawTtl: string | null): number | null {
  const min = KV_LIMITS.minExpirationTtlSeconds;
  if (rawTtl !== null) {
    const ttl = Number.parseInt(rawTtl, 10);
    if (Number.isNaN(ttl) || ttl <= 0)
      throw new KvRefusal(400, `Invalid expiration_ttl of ${rawTtl}. Please specify integer greater than 0.`);
    if (ttl < min)
      throw new KvRefusal(
        400,
        `Invalid expiration_ttl of ${rawTtl}. Expiration TTL must be at least ${min}.`,
      );
    return now + ttl;
  }
  if (rawExpiration === null) return null;
  const expiration = Number.parseInt(rawExpiration, 10);
  if (Number.isNaN(expiration) || expiration <= now)
    throw new KvRefusal(
      400,
      `Invalid expiration of ${rawExpiration}. Please specify integer greater than the current number of seconds since the UNIX epoch.`,
    );
  if (expiration < now + min)
    throw new KvRefusal(
      400,
      `Invalid expiration of ${rawExpiration}. Expiration times must be at least ${min} seconds in the future.`,
    );
  return expiration;
}

/**
 * One page of keys in byte order. The bucket is listed from the prefix's encoded floor (every
 * key under the namespace when there is no prefix), then each key of the page is read for its
 * expiration and metadata: expired ones are deleted and left out.
 */
async function list(space: Namespace, query: URLSearchParams): Promise<KvResponse> {
  const rawLimit = query.get('key_count_limit');
  const limit = rawLimit === null ? KV_LIMITS.maxListKeys : Number.parseInt(rawLimit, 10);
  if (Number.isNaN(limit) || limit < 1)
    throw new KvRefusal(
      400,
      `Invalid key_count_limit of ${rawLimit}. Please specify an integer greater than 0.`,
    );
  if (limit > KV_LIMITS.maxListKeys)
    throw new KvRefusal(
      400,
      `Invalid key_count_limit of ${rawLimit}. Please specify an integer less than ${KV_LIMITS.maxListKeys}.`,
    );
  const prefix = query.get('prefix') ?? '';
  checkKeyLength(prefix);
  const cursor = query.get('cursor');
  if (cursor !== null && (!ENCODED.test(cursor) || cursor === '')) throw new KvRefusal(400, 'Invalid cursor');
  const prefixBytes = Buffer.from(prefix);
  const floor = encodeKey(prefixBytes).slice(0, Math.floor((prefixBytes.length * 8) / 5));
  const base = keys.runtimeKvNamespacePrefix(space.application, space.namespace);
  const { objects } = await space.store.list(base + segments(floor), { recursive: true });
  const candidates = objects
    .map((object) => encodedOf(object.key.slice(base.length)))
    .filter((encoded): encoded is string => encoded !== null && (cursor === null || encoded > cursor))
    .map((encoded) => ({ encoded, name: decodeKey(encoded) }))
    .filter((c) => c.name.subarray(0, prefixBytes.length).equals(prefixBytes));
  const page: { name: string; expiration?: number; metadata?: string }[] = [];
  let next = 0;
  let last: string | null = null;
  while (page.length < limit && next < candidates.length) {
    const batch = candidates.slice(next, next + Math.min(LIST_READS_AT_ONCE, limit - page.length));
    next += batch.length;
    const entries = await Promise.all(
      batch.map((c) => readEncoded(space, c.encoded, DEFAULT_CACHE_TTL_SECONDS)),
    );
    batch.forEach((c, i) => {
      const entry = entries[i];
      last = c.encoded;
      if (!entry) return;
      page.push({
        name: c.name.toString('utf8'),
        ...(entry.expiration !== null ? { expiration: entry.expiration } : {}),
        // workerd parses a key's metadata from a JSON string.
        ...(entry.metadata !== null ? { metadata: entry.metadata } : {}),
      });
    });
  }
  const complete = next >= candidates.length;
  const body = complete
    ? { keys: page, list_complete: true, cacheStatus: null }
    : { keys: page, list_complete: false, cursor: last, cacheStatus: null };
  return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

async function readEntry(space: Namespace, key: string, ttlSeconds: number): Promise<Entry | null> {
  return readEncoded(space, encodeKey(Buffer.from(key)), ttlSeconds);
}

/**
 * The entry at an encoded key; null when absent or expired (an expired one is deleted). A read
 * cached within `ttlSeconds` is answered from the cache.
 */
async function readEncoded(space: Namespace, encoded: string, ttlSeconds: number): Promise<Entry | null> {
  const key = keys.runtimeKvEntry(space.application, space.namespace, segments(encoded));
  let entry: Entry | null;
  const cached = space.cache?.fresh(key, ttlSeconds, space.nowMs);
  if (cached !== undefined) entry = cached.value;
  else {
    const object = await space.store.get(key);
    // An object not written by this module is no KV entry.
    entry = object ? parseEntry(object.body, object.etag) : null;
    space.cache?.remember(key, entry, entry?.value.byteLength ?? 0, space.nowMs);
  }
  if (!entry) return null;
  if (entry.expiration !== null && entry.expiration <= space.now) {
    space.cache?.remember(key, null, 0, space.nowMs);
    // Only the expired version: a put that landed meanwhile stays.
    await space.store.delete(key, { ifMatch: entry.etag }).catch((err: unknown) => {
      if (!isCasConflict(err)) throw err;
    });
    return null;
  }
  return entry;
}

function parseEntry(body: Uint8Array, etag: string): Entry | null {
  const end = body.indexOf(0x0a);
  if (end < 0) return null;
  try {
    const header = JSON.parse(Buffer.from(body.subarray(0, end)).toString('utf8')) as Record<string, unknown>;
    const expiration = typeof header.expiration === 'number' ? header.expiration : null;
    const metadata = typeof header.metadata === 'string' ? header.metadata : null;
    return { expiration, metadata, value: body.subarray(end + 1), etag };
  } catch {
    return null;
  }
}

function entryKey(space: Namespace, key: string): string {
  return keys.runtimeKvEntry(space.application, space.namespace, segments(encodeKey(Buffer.from(key))));
}

/** An encoded key cut into its path segments (R2's records use it too: r2.ts). */
export function segments(encoded: string): string {
  const parts: string[] = [];
  for (let i = 0; i < encoded.length; i += SEGMENT_CHARS) parts.push(encoded.slice(i, i + SEGMENT_CHARS));
  return parts.join('/');
}

/** The encoded key an entry's object key (below its namespace) holds; null for any other object. */
export function encodedOf(below: string): string | null {
  if (!below.endsWith('/-')) return null;
  const parts = below.slice(0, -2).split('/');
  if (parts.some((part, i) => part === '' || (i < parts.length - 1 && part.length !== SEGMENT_CHARS)))
    return null;
  const encoded = parts.join('');
  return ENCODED.test(encoded) && encoded.length <= SEGMENT_CHARS * 5 ? encoded : null;
}

/** RFC 4648 base32hex without padding: order-preserving, in [0-9A-V]. */
export function encodeKey(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32HEX[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32HEX[(buffer << (5 - bits)) & 31];
  return out;
}

export function decodeKey(encoded: string): Buffer {
  const out: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const ch of encoded) {
    buffer = (buffer << 5) | BASE32HEX.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      out.push((buffer >>> (bits - 8)) & 255);
      bits -= 8;
    }
    buffer &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}
