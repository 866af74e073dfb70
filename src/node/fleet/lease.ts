// The coordinator lease with fencing (docs/fleet.md "Coordinator lease and fencing",
// docs/api.md "State"; docs/architecture.md "How a request flows"). One object,
// `_svc/fleet/coordinator.json`, taken with a conditional write when absent or expired, renewed at
// a third of its lifetime with a body that changes each time (an ETag is a checksum of the
// content), and released by expiring it in place so its fence is never reused. The fence grows on
// every change of holder. docs/fleet.md "Coordinator lease and fencing".
//
// Two clocks: the lease's `expiresMs` is wall time (what other nodes compare against), while this
// holder's own right to act is judged on the monotonic clock from the moment its last successful
// write was sent, minus a margin, so a holder that cannot renew (store down, process stopped)
// stops acting as coordinator before any other node can see the lease expired.

import { performance } from 'node:perf_hooks';
import { Problem } from '../../problem.ts';
import {
  expiredLease,
  leaseToTake,
  readCoordinatorLease,
  renewedLease,
  type SeenLease,
  writeCoordinatorLease,
} from '../../registry/coordinator-lease.ts';
import type { CoordinatorLease } from '../../registry/records.ts';
import type { Store } from '../../store/store.ts';

/** Wall and monotonic time; tests drive both. */
export interface LeaseClock {
  wall(): number;
  mono(): number;
}

export const systemClock: LeaseClock = { wall: () => Date.now(), mono: () => performance.now() };

export interface LeaseKeeperOptions {
  store: Store;
  nodeId: string;
  ttlMs: number;
  clock?: LeaseClock;
  /** Called once each time this node stops being the coordinator (renewal lost or failed too long). */
  onLost?: (why: string) => void;
  /** Called when this node becomes the coordinator. */
  onAcquired?: (fence: number) => void;
}

interface Held {
  lease: CoordinatorLease;
  etag: string;
  /** Monotonic time until which this node may act as coordinator. */
  validUntil: number;
}

/**
 * This node's side of the coordinator election. The fleet service puts it in the context as
 * `ctx.lease`, a LeaseGate (src/node/context.ts).
 */
export class LeaseKeeper {
  readonly #store: Store;
  readonly #nodeId: string;
  readonly #ttl: number;
  readonly #clock: LeaseClock;
  readonly #onLost: (why: string) => void;
  readonly #onAcquired: (fence: number) => void;
  #held: Held | null = null;
  /** The lease as last read or written, and its ETag; null when the object is absent. */
  #seen: SeenLease | null = null;
  /** The highest fence this node has seen anywhere (lease, placements); a new fence is above it. */
  #fenceFloor = 0;
  /** Monotonic time of the last successful fence check against the bucket. */
  #checkedAt = Number.NEGATIVE_INFINITY;
  /** Wall time at which a follower should read the lease again (see `lookDue`). */
  #lookAt = Number.NEGATIVE_INFINITY;
  /** Serializes writes of the lease object (acquire, renew, release) within this process. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: LeaseKeeperOptions) {
    this.#store = options.store;
    this.#nodeId = options.nodeId;
    this.#ttl = options.ttlMs;
    this.#clock = options.clock ?? systemClock;
    this.#onLost = options.onLost ?? (() => {});
    this.#onAcquired = options.onAcquired ?? (() => {});
  }

  /** How often the holder renews: a third of the lifetime. */
  get renewEveryMs(): number {
    return Math.max(1, Math.floor(this.#ttl / 3));
  }

  /**
   * How much earlier than the lease's lifetime the holder stops acting: room for the write's own
   * latency and for clocks that disagree between nodes.
   */
  get marginMs(): number {
    return Math.max(50, Math.floor(this.#ttl / 5));
  }

  /** The lease object as last known, whether or not it has expired; null when absent. */
  lease(): CoordinatorLease | null {
    return this.#seen?.lease ?? null;
  }

  /** The lease as this node last read or wrote it, when that is the object at `etag`; else null. */
  known(etag: string): { value: CoordinatorLease; etag: string } | null {
    return this.#seen?.etag === etag ? { value: this.#seen.lease, etag } : null;
  }

  /** The holder of an unexpired lease as this node last saw it; null when nobody holds one. */
  view(): { node: string; fence: number } | null {
    const lease = this.#seen?.lease;
    if (!lease || lease.expiresMs <= this.#clock.wall()) return null;
    return { node: lease.node, fence: lease.fence };
  }

  /** True while this node holds the lease and may still act on it. */
  isCoordinator(): boolean {
    const held = this.#held;
    if (!held) return false;
    if (this.#clock.mono() < held.validUntil) return true;
    this.#lose('the lease could not be renewed within its lifetime');
    return false;
  }

  /** The fence this node acts under; null when it is not the coordinator. */
  fence(): number | null {
    return this.isCoordinator() ? this.#held!.lease.fence : null;
  }

  /**
   * True when a follower should read the lease again: shortly before the copy it holds expires
   * (by then the holder has renewed it, so one read a lifetime keeps the view current), and again
   * at expiry (the moment it may be taken).
   */
  lookDue(): boolean {
    return !this.#held && this.#clock.wall() >= this.#lookAt;
  }

  /** Raises the floor new fences are taken above (a placement written under a higher fence). */
  noteFence(fence: number): void {
    if (Number.isSafeInteger(fence) && fence > this.#fenceFloor) this.#fenceFloor = fence;
  }

  /** Takes in a lease body another reader (the registry cache) fetched. */
  observe(lease: CoordinatorLease | null, etag: string | null): void {
    const held = this.#held;
    if (held && lease && lease.node === this.#nodeId && lease.fence === held.lease.fence) return;
    this.#see(lease && etag ? { lease, etag } : null);
    if (this.#held && (!lease || lease.node !== this.#nodeId || lease.fence !== this.#held.lease.fence)) {
      this.#lose(
        lease ? `node ${lease.node} holds the lease under fence ${lease.fence}` : 'the lease is gone',
      );
    }
  }

  /**
   * Offers this node as coordinator once: reads the lease and takes it when absent, expired, or
   * left by an earlier run of this same node. Afterwards `isCoordinator()` and `view()` tell who
   * won. Answers true when this node holds the lease.
   */
  tryAcquire(): Promise<boolean> {
    return this.#serialized(() => this.#acquire());
  }

  /** Renews a held lease; a lost race or a failure past the margin gives it up. */
  renew(): Promise<boolean> {
    return this.#serialized(() => this.#renew());
  }

  /** Lets the lease go by expiring it in place (the fence stays, so the next one is higher). */
  release(): Promise<void> {
    return this.#serialized(() => this.#release());
  }

  /**
   * Refuses with `lease-lost` unless this node is still the coordinator and the bucket's lease
   * still names it under the same fence. Coordinator-only writes call it right before writing;
   * the bucket is re-read at most every `recheckMs` (the monotonic check runs every time).
   */
  async assertFence(recheckMs = 250): Promise<number> {
    const fence = this.fence();
    if (fence === null) throw leaseLost(this.#nodeId, this.#seen?.lease ?? null);
    if (this.#clock.mono() - this.#checkedAt < recheckMs) return fence;
    const current = await readCoordinatorLease(this.#store);
    const lease = current?.lease ?? null;
    if (!lease || lease.node !== this.#nodeId || lease.fence !== fence) {
      this.observe(lease, current?.etag ?? null);
      this.#lose('a newer fence exists');
      throw leaseLost(this.#nodeId, lease);
    }
    // The read may have taken long (or the process may have been stopped): check the clock again.
    if (this.fence() !== fence) throw leaseLost(this.#nodeId, lease);
    this.#checkedAt = this.#clock.mono();
    return fence;
  }

  async #acquire(): Promise<boolean> {
    if (this.isCoordinator()) return true;
    const current = await readCoordinatorLease(this.#store);
    this.#see(current);
    const now = this.#clock.wall();
    const next = leaseToTake(current?.lease ?? null, this.#nodeId, this.#fenceFloor, now, this.#ttl);
    if (!next) return false;
    const sentAt = this.#clock.mono();
    const etag = await writeCoordinatorLease(this.#store, next, current?.etag ?? null);
    if (etag === null) {
      // Someone else wrote first: learn who.
      const after = await readCoordinatorLease(this.#store);
      this.observe(after?.lease ?? null, after?.etag ?? null);
      return false;
    }
    this.#take(next, etag, sentAt);
    this.#onAcquired(next.fence);
    return true;
  }

  async #renew(): Promise<boolean> {
    if (!this.isCoordinator()) return false;
    const held = this.#held!;
    const sentAt = this.#clock.mono();
    const next = renewedLease(held.lease, this.#clock.wall(), this.#ttl);
    let etag: string | null;
    try {
      etag = await writeCoordinatorLease(this.#store, next, held.etag);
    } catch {
      // A transient failure: keep acting until the margin runs out (isCoordinator checks it).
      return this.isCoordinator();
    }
    if (etag === null) {
      this.#lose('the lease changed under this node');
      const after = await readCoordinatorLease(this.#store).catch(() => null);
      this.observe(after?.lease ?? null, after?.etag ?? null);
      return false;
    }
    // A renewal that returns after this node already gave up does not bring it back.
    if (this.#held !== held) return false;
    this.#take(next, etag, sentAt);
    return true;
  }

  async #release(): Promise<void> {
    const held = this.#held;
    if (!held) return;
    this.#held = null;
    const expired = expiredLease(held.lease, this.#clock.wall());
    // Lost meanwhile: the lease is someone else's. A store failure throws; it expires on its own.
    const etag = await writeCoordinatorLease(this.#store, expired, held.etag);
    if (etag !== null) this.#see({ lease: expired, etag });
  }

  #take(lease: CoordinatorLease, etag: string, sentAt: number): void {
    this.#held = { lease, etag, validUntil: sentAt + this.#ttl - this.marginMs };
    this.#see({ lease, etag });
  }

  #see(seen: SeenLease | null): void {
    this.#seen = seen;
    if (!seen) {
      this.#lookAt = Number.NEGATIVE_INFINITY;
      return;
    }
    this.noteFence(seen.lease.fence);
    const early = seen.lease.expiresMs - Math.floor(this.#ttl / 6);
    this.#lookAt = this.#clock.wall() >= early ? seen.lease.expiresMs : early;
  }

  #lose(why: string): void {
    if (!this.#held) return;
    this.#held = null;
    this.#checkedAt = Number.NEGATIVE_INFINITY;
    this.#onLost(why);
  }

  #serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => {});
    return run;
  }
}

/** The refusal of a coordinator-only write without the lease (docs/api.md "Error codes": `lease-lost`). */
export function leaseLost(nodeId: string, lease: CoordinatorLease | null): Problem {
  const holder = lease ? `node ${lease.node} under fence ${lease.fence}` : 'nobody';
  return new Problem(
    'lease-lost',
    'Coordinator lease lost',
    `node ${nodeId} no longer holds the coordinator lease (held by ${holder}); the write was not made`,
  );
}
