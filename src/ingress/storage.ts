// The node's side of storage protocol v1 (docs/ingress.md "The storage protocol (version 1)", its
// locks): objects, listings, stats and locks for a colocated TLS terminator, kept in
// the ingress keyspace of the bucket and nowhere else.

import { randomUUID } from 'node:crypto';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isCasConflict, type Store } from '../store/store.ts';

/** A lock unrefreshed for this long may be taken over (docs/ingress.md: after 10 s). */
export const LOCK_TAKEOVER_MS = 10_000;

/** The stat object of docs/ingress.md. */
export interface StorageStat {
  key: string;
  modified: string | null;
  size: number;
  isTerminal: boolean;
}

interface LockRecord {
  v: 1;
  /** Identifies one acquisition; a POST carrying it restamps instead of conflicting. */
  token: string;
  stampedMs: number;
}

function parseLock(body: Uint8Array): LockRecord | null {
  try {
    const value = JSON.parse(new TextDecoder().decode(body)) as LockRecord;
    return typeof value.token === 'string' && typeof value.stampedMs === 'number' ? value : null;
  } catch {
    return null;
  }
}

const objectsRoot = keys.ingressObjectsPrefix;
const VALUE_SUFFIX = `/${keys.ingressValueSegment}`;

/** Storage protocol operations over the bucket's ingress keyspace. Keys are already validated. */
export class IngressStorage {
  readonly store: Store;
  readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  async put(key: string, body: Uint8Array): Promise<void> {
    await this.store.put(keys.ingressObject(key), body);
  }

  /** The value, or null when absent. */
  async get(key: string): Promise<Uint8Array | null> {
    const object = await this.store.get(keys.ingressObject(key));
    return object ? object.body : null;
  }

  /** Removes the key and its subtree (the value is one level below the key); false when nothing was there. */
  async delete(key: string): Promise<boolean> {
    const below = await this.store.list(keys.ingressObjectDir(key), { recursive: true });
    let removed = false;
    for (const object of below.objects) removed = (await this.store.delete(object.key)) || removed;
    return removed;
  }

  /**
   * Keys at or under a prefix, as full keys. Non-recursive answers immediate children
   * (terminal keys and "directories"). Empty when nothing exists at or under the prefix.
   */
  async list(prefix: string, recursive: boolean): Promise<string[]> {
    const base = prefix === '' ? objectsRoot : keys.ingressObjectDir(prefix);
    const listing = await this.store.list(base, { recursive });
    const own = prefix === '' ? null : keys.ingressObject(prefix);
    const found = new Set<string>();
    // Recursive: every value below (its key is its object's key less the value segment).
    // Non-recursive: the child "directories" are the children, values or not.
    for (const object of listing.objects) {
      if (object.key !== own && object.key.endsWith(VALUE_SUFFIX))
        found.add(object.key.slice(objectsRoot.length, -VALUE_SUFFIX.length));
    }
    for (const child of listing.prefixes) found.add(child.slice(objectsRoot.length).replace(/\/$/, ''));
    if (found.size === 0 && own !== null && listing.objects.some((object) => object.key === own))
      found.add(prefix);
    return [...found].sort();
  }

  /** The stat object, or null when nothing exists at or under the key. */
  async stat(key: string): Promise<StorageStat | null> {
    const info = await this.store.stat(keys.ingressObject(key));
    if (info) return { key, modified: info.modified.toISOString(), size: info.size, isTerminal: true };
    const below = await this.store.list(keys.ingressObjectDir(key), { recursive: false });
    if (below.prefixes.length > 0) return { key, modified: null, size: 0, isTerminal: false };
    return null;
  }

  /**
   * Try-acquire, never waiting. Succeeds when the lock is free, when it is held under the
   * same token (a restamp), or when it went unrefreshed for LOCK_TAKEOVER_MS (takeover
   * after a crashed holder). Otherwise `cas-conflict`. Two racing acquirers are decided
   * by the conditional write: exactly one wins.
   */
  async acquire(name: string, token: string = randomUUID()): Promise<void> {
    const key = keys.ingressLock(name);
    const record: LockRecord = { v: 1, token, stampedMs: this.now() };
    const current = await this.store.get(key);
    const body = JSON.stringify(record);
    try {
      if (!current) {
        await this.store.put(key, body, { ifNoneMatch: '*' });
        return;
      }
      const held = parseLock(current.body);
      // An unreadable lock record can only be a torn or foreign write: treat it as stale.
      const stale = !held || this.now() - held.stampedMs > LOCK_TAKEOVER_MS;
      if (held?.token === token || stale) {
        await this.store.put(key, body, { ifMatch: current.etag });
        return;
      }
    } catch (err) {
      if (!isCasConflict(err)) throw err;
    }
    throw new Problem(
      'cas-conflict',
      'Lock is held',
      `the lock ${JSON.stringify(name)} is held elsewhere; retry in 1 s`,
    );
  }

  /** Frees the lock whether or not it is held. */
  async release(name: string): Promise<void> {
    await this.store.delete(keys.ingressLock(name));
  }
}
