// An owner lease in the bucket (docs/bindings.md "D1 databases", "One writer"; the same lease
// holds an application's Durable Objects, docs/bindings.md "Durable Objects"): one JSON object
// naming the node that serves something and until when. It is taken when absent or expired,
// renewed at a third of its lifetime, and dropped by expiring it in place; every write is
// conditional on the ETag last seen. The holder judges its own right to serve on the monotonic
// clock from when its last write was sent, minus a margin, so a holder that cannot renew (bucket
// down, process stopped) stops serving before another node may take over.
//
// How another node's lease is judged is the user's choice (`Takeover`): by its written expiry
// against this node's wall clock (D1, Durable Objects), or, for a queue's consumer
// (docs/bindings.md "Queues"), by no clock but this node's own: taken once released, or once this
// node has seen it unchanged (same ETag) for a whole lifetime on its monotonic clock. A live
// holder rewrites it every third of that, and its own validity ended before, whatever the clocks.

import { performance } from 'node:perf_hooks';
import { getJson, isCasConflict, type Store } from '../../../src/store/store.ts';

/** The lease object's fields. */
export interface OwnerLeaseRecord {
  node: string;
  expires_ms: number;
  /** Grows by one each time the holder changes. */
  fence: number;
}

/** How long a lease lasts unrenewed: a dead owner's work moves within this plus a restore. */
export const OWNER_LEASE_TTL_MS = 10_000;
/** The part of the lifetime a holder gives up early, for clock rate differences and slow writes. */
const safetyMarginMs = (ttlMs: number) => Math.min(2_000, ttlMs / 5);

/** `resumed`: the lease named this node already (a restart of the holder): nobody held it since. */
export type Acquired =
  | { held: true; fence: number; resumed: boolean }
  | { held: false; holder: OwnerLeaseRecord };

/** `expiry`: another node's lease is free once its expiry is past on this node's wall clock;
 * `observed`: once released, or seen unchanged for `ttlMs` on this node's monotonic clock. */
export type Takeover = 'expiry' | 'observed';

export class OwnerLease {
  readonly #store: Store;
  readonly key: string;
  readonly #node: string;
  readonly ttlMs: number;
  #etag: string | null = null;
  #record: OwnerLeaseRecord | null = null;
  /** Monotonic time until which this node may serve. */
  #validUntil = Number.NEGATIVE_INFINITY;
  readonly #takeover: Takeover;
  /** With `observed`: another node's lease as first seen (its ETag, monotonic time). */
  #seen: { etag: string; atMs: number } | null = null;

  constructor(
    store: Store,
    key: string,
    node: string,
    ttlMs = OWNER_LEASE_TTL_MS,
    takeover: Takeover = 'expiry',
  ) {
    this.#store = store;
    this.key = key;
    this.#node = node;
    this.ttlMs = ttlMs;
    this.#takeover = takeover;
  }

  /** With `observed`: how long until the lease last seen held elsewhere may be taken if unchanged. */
  takeoverInMs(): number | null {
    return this.#seen ? Math.max(0, this.#seen.atMs + this.ttlMs - performance.now()) : null;
  }

  /** Whether this node may serve now. */
  valid(): boolean {
    return performance.now() < this.#validUntil;
  }

  /** Milliseconds of validity left on the monotonic clock (negative once past). */
  remainingMs(): number {
    return this.#validUntil - performance.now();
  }

  /** Takes the lease if nobody else holds it unexpired; else answers who does. */
  async acquire(): Promise<Acquired> {
    const current = await getJson<OwnerLeaseRecord>(this.#store, this.key);
    const record = current?.value ?? null;
    if (record && current && record.node !== this.#node && this.#heldElsewhere(record, current.etag))
      return { held: false, holder: record };
    this.#seen = null;
    const fence = record?.node === this.#node ? record.fence : (record?.fence ?? 0) + 1;
    try {
      await this.#write({ node: this.#node, expires_ms: 0, fence }, current?.etag ?? null);
    } catch (err) {
      if (!isCasConflict(err)) throw err;
      const now = await getJson<OwnerLeaseRecord>(this.#store, this.key);
      if (now) return { held: false, holder: now.value };
      throw err;
    }
    return { held: true, fence, resumed: record?.node === this.#node };
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
      await this.#store.put(this.key, JSON.stringify({ ...this.#record, expires_ms: 0 }), {
        ifMatch: this.#etag,
      });
    } catch (err) {
      if (!isCasConflict(err)) throw err;
    }
    this.#record = null;
    this.#etag = null;
  }

  /** Whether a record another node wrote still holds the lease, by the `Takeover` rule. */
  #heldElsewhere(record: OwnerLeaseRecord, etag: string): boolean {
    if (this.#takeover === 'expiry') return record.expires_ms > Date.now();
    if (record.expires_ms === 0) return false; // released
    if (this.#seen?.etag !== etag) {
      this.#seen = { etag, atMs: performance.now() };
      return true;
    }
    return performance.now() - this.#seen.atMs < this.ttlMs;
  }

  async #write(record: OwnerLeaseRecord, etag: string | null): Promise<void> {
    const sentAt = performance.now();
    const next = { ...record, expires_ms: Date.now() + this.ttlMs };
    this.#etag = await this.#store.put(
      this.key,
      JSON.stringify(next),
      etag ? { ifMatch: etag } : { ifNoneMatch: '*' },
    );
    this.#record = next;
    this.#validUntil = sentAt + this.ttlMs - safetyMarginMs(this.ttlMs);
  }
}
