// The one store interface over the fleet's bucket (DESIGN.md "The store and the
// consistency model"). Two backends implement it: s3.ts (any S3-compatible bucket)
// and dir.ts (a local directory, the embedded default).

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

/** The bucket. Keys are `/`-separated, relative, never starting with `/`. */
export interface Store {
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
  return { value: JSON.parse(new TextDecoder().decode(object.body)) as T, etag: object.etag };
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
