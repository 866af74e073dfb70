// The one store interface over the fleet's bucket (docs/architecture.md "How a request flows"). Two backends implement it: s3.ts (any S3-compatible bucket)
// and dir.ts (a local directory, the embedded default).

import type { Readable } from 'node:stream';
import { Problem } from '../problem.ts';

/** What a listing or a stat knows of one object. */
export interface ObjectInfo {
  key: string;
  etag: string;
  size: number;
  modified: Date;
}

/** An object read whole. */
export interface StoredObject extends ObjectInfo {
  body: Uint8Array;
}

/** Conditions on a write or delete; at most one of the two. */
export interface WriteCondition {
  /** Succeed only if the object's current ETag equals this. */
  ifMatch?: string;
  /** `*`: succeed only if no object exists at the key. */
  ifNoneMatch?: '*';
}

export interface ListOptions {
  /** true: every key under the prefix; false: immediate children only (common prefixes end in `/`). */
  recursive: boolean;
}

export interface ListResult {
  objects: ObjectInfo[];
  /** Only for non-recursive listings: child "directories", each ending in `/`. */
  prefixes: string[];
}

/** An object's facts with the metadata it was written with (S3's user metadata). */
export interface MetadataObject extends ObjectInfo {
  metadata: Record<string, string>;
}

/** An object being read: its facts, then its bytes as they arrive (`size` counts those bytes). */
export interface ObjectStream extends MetadataObject {
  body: Readable;
}

/**
 * What a backend that keeps metadata with each object and can stream bodies offers besides the
 * Store (the S3 backend): R2's one-object layout uses it (docs/bindings.md "R2 buckets"). Metadata
 * keys are lower case; values are printable ASCII, the whole at most 2 KB, as S3 bounds them.
 */
export interface StreamingStore {
  /** The object's facts and metadata without its bytes; null when absent. */
  head(key: string): Promise<MetadataObject | null>;
  /** The object (or `length` bytes of it from `offset`); null when absent. */
  read(key: string, range?: { offset: number; length: number }): Promise<ObjectStream | null>;
  /**
   * Writes `length` bytes with `metadata` and answers the new ETag; a failed condition throws
   * CasConflict. A stream is sent once: a write that fails midway is not retried.
   */
  write(
    key: string,
    body: Readable | Uint8Array,
    length: number,
    metadata: Record<string, string>,
    condition?: WriteCondition,
  ): Promise<string>;
}

/** The bucket. Keys are `/`-separated, relative, never starting with `/`. */
export interface Store {
  /** Present when the backend keeps per-object metadata and streams bodies (S3). */
  readonly streaming?: StreamingStore;
  /** Reads one object; null when absent. */
  get(key: string): Promise<StoredObject | null>;
  /**
   * Writes one object and answers its new ETag. A failed condition throws CasConflict
   * (once, after any ambiguity has been settled by reading back).
   */
  put(key: string, body: Uint8Array | string, condition?: WriteCondition): Promise<string>;
  /** Deletes one object; answers false when it was absent. A failed `ifMatch` throws CasConflict. */
  delete(key: string, condition?: Pick<WriteCondition, 'ifMatch'>): Promise<boolean>;
  /** Lists keys under a prefix, every page, in key order. */
  list(prefix: string, options: ListOptions): Promise<ListResult>;
  /** Metadata of one object; null when absent. */
  stat(key: string): Promise<ObjectInfo | null>;
  /** Releases connections and handles. */
  close(): Promise<void>;
  /** A human description for logs, e.g. `s3://bucket/prefix` or `file:///dir`. */
  readonly description: string;
}

/** S3's limit on a key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 1024;

/**
 * Answers the key when both backends can hold it, else throws `invalid-input`. The rule is
 * the interface's, not a backend's, so a key refused by one is refused by the other:
 * non-empty, at most 1,024 UTF-8 bytes, no control characters, and `/`-separated segments
 * that are neither empty nor `.` nor `..` (so no leading, trailing or doubled slash).
 */
export function checkKey(key: string): string {
  const refuse = (why: string) =>
    new Problem('invalid-input', 'Invalid bucket key', `${why}: ${JSON.stringify(key)}`);
  if (key === '') throw refuse('the key is empty');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw refuse(`the key is longer than ${MAX_KEY_BYTES} bytes`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\x00-\x1f\x7f]/.test(key)) throw refuse('the key has a control character');
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw refuse('the key has an empty, "." or ".." segment');
    }
  }
  return key;
}

/** True when `checkKey` accepts the key: listings skip what no backend could have written. */
export function isValidKey(key: string): boolean {
  try {
    checkKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * Refuses a condition neither backend can honour, with `invalid-input` naming the key: both
 * `ifMatch` and `ifNoneMatch`, or an `ifNoneMatch` other than `*`.
 */
export function checkCondition(key: string, condition: WriteCondition | undefined): void {
  if (!condition) return;
  const { ifMatch, ifNoneMatch } = condition;
  if (ifMatch !== undefined && ifNoneMatch !== undefined) {
    throw new Problem('invalid-input', 'Invalid write condition', `both ifMatch and ifNoneMatch for ${key}`);
  }
  if (ifNoneMatch !== undefined && ifNoneMatch !== '*') {
    throw new Problem('invalid-input', 'Invalid write condition', `ifNoneMatch must be "*" for ${key}`);
  }
}

/** Orders keys as S3 lists them: by their UTF-8 bytes (not JavaScript's UTF-16 order). */
export function compareKeys(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return utf8Rank(x) - utf8Rank(y);
  }
  return a.length - b.length;
}

// UTF-8 byte order is code point order; UTF-16 puts surrogates (code points past U+FFFF)
// below U+E000..U+FFFF, so they are lifted above the whole basic plane.
function utf8Rank(unit: number): number {
  return unit >= 0xd800 && unit <= 0xdfff ? unit + 0x10000 : unit;
}

/** A conditional write or delete lost its condition: someone else wrote first. */
export class CasConflict extends Error {
  readonly key: string;
  constructor(key: string, message = `conditional write to ${key} lost its condition`) {
    super(message);
    this.name = 'CasConflict';
    this.key = key;
  }
}

export function isCasConflict(err: unknown): err is CasConflict {
  return err instanceof CasConflict;
}

/** Reads an object as JSON; null when absent. A body that is not JSON throws. */
export async function getJson<T>(store: Store, key: string): Promise<{ value: T; etag: string } | null> {
  const object = await store.get(key);
  if (!object) return null;
  return { value: parseJsonBody<T>(object.body), etag: object.etag };
}

/** A stored body as JSON; a body that is not JSON throws. */
export function parseJsonBody<T>(body: Uint8Array): T {
  return JSON.parse(new TextDecoder().decode(body)) as T;
}

/** Writes a value as JSON under a condition; answers the new ETag. */
export function putJson(
  store: Store,
  key: string,
  value: unknown,
  condition?: WriteCondition,
): Promise<string> {
  return store.put(key, JSON.stringify(value), condition);
}
