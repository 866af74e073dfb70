// The one conditional read-modify-write over the store. Every record several writers may race on
// (applications, claims, the freeze, trust policies, secrets, operator and node keys) changes
// through `updateJson`: read the object, let a change function decide, write on the ETag read
// (`If-Match`, or `If-None-Match: *` when there was none), and on a lost race read again and
// decide again. Each loss means another writer's change landed, so the loop always makes
// progress fleet-wide; after UPDATE_TRIES losses in a row the caller gets `store-unavailable`.

import { Problem } from '../problem.ts';
import { isCasConflict, parseJsonBody, type Store, type WriteCondition } from './store.ts';

/** Lost races before an update gives up. */
export const UPDATE_TRIES = 10;

/** A value as read, with the ETag a write that replaces it must match. */
export interface Versioned<T> {
  value: T;
  etag: string;
}

/**
 * What a change decides: write `put`, remove the object (`delete`), or leave it as it is (null).
 * Deleting an object that is absent is leaving it as it is.
 */
export type Change<T> = { put: T } | { delete: true } | null;

export interface Updated<T> {
  /** The value stored now: as written, as read when nothing was written, null when absent. */
  value: T | null;
  /** Its ETag; null when absent. */
  etag: string | null;
  /** This call wrote or deleted the object. */
  changed: boolean;
  /** This call wrote an object where there was none. */
  created: boolean;
}

export interface UpdateOptions<T> {
  /**
   * Turns the stored bytes into the value the change sees; JSON by default. It may throw to refuse
   * an unreadable object, or answer a value that stands for one (the object's ETag still guards
   * the write that replaces it).
   */
  parse?: (body: Uint8Array) => T;
}

/**
 * Reads `key`, applies `change` to what is there (null when absent) and writes the result as JSON
 * on the condition that nothing changed since the read; on a lost race, reads and applies again.
 * `change` is called once per attempt, on what that attempt read; it may read other objects but
 * must not write. A Problem it throws refuses the update (nothing is written, nothing retried).
 * A write that keeps losing ends in `store-unavailable` (Registry is busy).
 */
export async function updateJson<T>(
  store: Store,
  key: string,
  change: (current: Versioned<T> | null) => Change<T> | Promise<Change<T>>,
  options: UpdateOptions<T> = {},
): Promise<Updated<T>> {
  const parse = options.parse ?? parseJsonBody<T>;
  for (let attempt = 0; attempt < UPDATE_TRIES; attempt++) {
    const object = await store.get(key);
    const current = object ? { value: parse(object.body), etag: object.etag } : null;
    const decided = await change(current);
    if (decided === null || ('delete' in decided && !current)) {
      return { value: current?.value ?? null, etag: current?.etag ?? null, changed: false, created: false };
    }
    const condition: WriteCondition = current ? { ifMatch: current.etag } : { ifNoneMatch: '*' };
    try {
      if ('delete' in decided) {
        await store.delete(key, { ifMatch: current!.etag });
        return { value: null, etag: null, changed: true, created: false };
      }
      const etag = await store.put(key, JSON.stringify(decided.put), condition);
      return { value: decided.put, etag, changed: true, created: current === null };
    } catch (err) {
      if (!isCasConflict(err)) throw err;
    }
  }
  throw registryBusy(key);
}

/** The refusal of an update that lost every race it ran. */
export function registryBusy(key: string): Problem {
  return new Problem(
    'store-unavailable',
    'Registry is busy',
    `${UPDATE_TRIES} conditional writes to ${key} each lost to another writer; retry`,
  );
}
