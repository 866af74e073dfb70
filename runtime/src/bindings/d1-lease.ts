// The owner lease of one D1 database (docs/bindings.md "D1 databases", "One writer"): the object
// `fleets/<app>/d1/<db>/lease.json` names the node that serves the database and until when.
// It is taken when absent or expired, renewed at a third of its lifetime, and dropped by
// expiring it in place; every write is conditional on the ETag last seen. The holder judges its
// own right to serve on the monotonic clock from when its last write was sent, minus a margin,
// so a holder that cannot renew (bucket down, process stopped) stops serving before another
// node may take over. The log's single-writer segments (d1-log.ts) are the fence behind it.

import { performance } from 'node:perf_hooks';
import { keys } from '../../../src/registry/keys.ts';
import { getJson, isCasConflict } from '../../../src/store/store.ts';
import type { DatabaseRef } from './d1-log.ts';

/** The lease object's fields. */
export interface D1LeaseRecord {
  node: string;
  expires_ms: number;
  /** Grows by one each time the holder changes. */
  fence: number;
}

/** How long a lease lasts unrenewed: a dead owner's databases move within this plus a restore. */
export const D1_LEASE_TTL_MS = 10_000;
/** The part of the lifetime a holder gives up early, for clock rate differences and slow writes. */
const safetyMarginMs = (ttlMs: number) => Math.min(2_000, ttlMs / 5);

export type Acquired = { held: true; fence: number } | { held: false; holder: D1LeaseRecord };

export class D1Lease {
  readonly #ref: DatabaseRef;
  readonly #node: string;
  readonly #ttlMs: number;
  #etag: string | null = null;
  #record: D1LeaseRecord | null = null;
  /** Monotonic time until which this node may serve the database. */
  #validUntil = Number.NEGATIVE_INFINITY;

  constructor(ref: DatabaseRef, node: string, ttlMs = D1_LEASE_TTL_MS) {
    this.#ref = ref;
    this.#node = node;
    this.#ttlMs = ttlMs;
  }

  get key(): string {
    return keys.runtimeD1Lease(this.#ref.application, this.#ref.database);
  }

  /** Whether this node may serve the database now. */
  valid(): boolean {
    return performance.now() < this.#validUntil;
  }

  /** Takes the lease if nobody else holds it unexpired; else answers who does. */
  async acquire(): Promise<Acquired> {
    const current = await getJson<D1LeaseRecord>(this.#ref.store, this.key);
    const record = current?.value ?? null;
    if (record && record.node !== this.#node && record.expires_ms > Date.now())
      return { held: false, holder: record };
    const fence = record?.node === this.#node ? record.fence : (record?.fence ?? 0) + 1;
    try {
      await this.#write({ node: this.#node, expires_ms: 0, fence }, current?.etag ?? null);
    } catch (err) {
      if (!isCasConflict(err)) throw err;
      const now = await getJson<D1LeaseRecord>(this.#ref.store, this.key);
      if (now) return { held: false, holder: now.value };
      throw err;
    }
    return { held: true, fence };
  }

  /** Extends the lease; false when someone else changed it (this node must stop serving). */
  async renew(): Promise<boolean> {
    if (!this.#record) return false;
    try {
      await this.#write(this.#record, this.#etag);
      return true;
    } catch (err) {
      if (isCasConflict(err)) {
        this.#validUntil = Number.NEGATIVE_INFINITY;
        return false;
      }
      throw err;
    }
  }

  /** Gives the lease up by expiring it in place, keeping its fence. */
  async release(): Promise<void> {
    this.#validUntil = Number.NEGATIVE_INFINITY;
    if (!this.#record || !this.#etag) return;
    try {
      await this.#ref.store.put(this.key, JSON.stringify({ ...this.#record, expires_ms: 0 }), {
        ifMatch: this.#etag,
      });
    } catch (err) {
      if (!isCasConflict(err)) throw err;
    }
    this.#record = null;
    this.#etag = null;
  }

  async #write(record: D1LeaseRecord, etag: string | null): Promise<void> {
    const sentAt = performance.now();
    const next = { ...record, expires_ms: Date.now() + this.#ttlMs };
    this.#etag = await this.#ref.store.put(
      this.key,
      JSON.stringify(next),
      etag ? { ifMatch: etag } : { ifNoneMatch: '*' },
    );
    this.#record = next;
    this.#validUntil = sentAt + this.#ttlMs - safetyMarginMs(this.#ttlMs);
  }
}
