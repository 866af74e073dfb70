// Which node runs an application's Durable Objects (docs/bindings.md "Durable Objects on the fleet"):
// the holder of `fleets/<app>/objects/lease.json` (owner-lease.ts). Each node that may run them
// runs one of these: a standby checks the lease every few seconds
// (one GET) and takes it once it is free or expired; the taker restores every object file into a
// fresh folder (objects-storage.ts), and only then is told to serve. The holder renews the lease,
// ships the folder every second, and is told to stop serving at once when it cannot renew before
// its lease's validity ends on its monotonic clock, or when the bucket shows another node wrote on.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { keys } from '../../../src/registry/keys.ts';
import type { Store } from '../../../src/store/store.ts';
import { ObjectsMoved, ObjectsShipper, restoreObjects, resumeStates } from './objects-storage.ts';
import { OWNER_LEASE_TTL_MS, OwnerLease, type OwnerLeaseRecord } from './owner-lease.ts';

/** How often a standby looks at the lease. */
export const OBJECTS_STANDBY_CHECK_MS = 3_000;
/** How often the holder ships the changed object files. */
export const OBJECTS_SHIP_EVERY_MS = 1_000;

export interface ObjectsHolderOptions {
  store: Store;
  application: string;
  node: string;
  /** A folder of this node's own: each take gets a fresh folder in it (unless `storageDir`). */
  dataDir: string;
  /**
   * The one folder the objects are kept in on this node (the runtime's storage folder): a take
   * empties it and restores into it, except when the lease still named this node (a restart),
   * whose folder is then newer than the bucket and is served on as it is.
   */
  storageDir?: string;
  /** Start serving the objects from this storage folder (the application's workerd). */
  serve: (storageDir: string) => Promise<void>;
  /** Stop serving them now: the lease is no longer this node's. */
  stopServing: (reason: string) => Promise<void>;
  log: (line: string) => void;
  ttlMs?: number;
  standbyCheckMs?: number;
  shipEveryMs?: number;
}

export type HolderState = 'standby' | 'taking' | 'holding' | 'stopped';

export class ObjectsHolder {
  readonly #options: ObjectsHolderOptions;
  readonly #lease: OwnerLease;
  #state: HolderState = 'standby';
  #holder: OwnerLeaseRecord | null = null;
  #shipper: ObjectsShipper | null = null;
  #takeDir: string | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** Fires when the lease's validity ends, so serving stops then even while a step hangs. */
  #fenceTimer: NodeJS.Timeout | null = null;
  /**
   * Renews the lease while taking and holding, apart from the restore and the ship passes: a
   * restore or a pass over many objects can outlast the lease, and the holder must not lose its
   * own objects to its own work on them.
   */
  #renewTimer: NodeJS.Timeout | null = null;
  /** The renewal under way, so stop() waits for it. */
  #renewing: Promise<void> = Promise.resolve();
  /** Whether the last renewal failed (the bucket did not answer): the next is tried sooner. */
  #renewFailed = false;
  /** Whether `serve` was called and `stopServing` not since. */
  #serving = false;
  #lastRenewMs = 0;
  #lastShip: { startedMs: number; endedMs: number } | null = null;
  /** The step under way (a take, a renewal, a pass), so stop() waits for it. */
  #step: Promise<void> = Promise.resolve();
  /** Counts the takes and renewals: each extends this node's right to serve. */
  #renewal = 0;
  /** Told when the right to serve moved (a take, a renewal, a loss, a stop). */
  readonly #moved = new Set<() => void>();

  constructor(options: ObjectsHolderOptions) {
    this.#options = options;
    this.#lease = new OwnerLease(
      options.store,
      keys.runtimeObjectsLease(options.application),
      options.node,
      options.ttlMs ?? OWNER_LEASE_TTL_MS,
    );
  }

  get state(): HolderState {
    return this.#state;
  }

  /** The holder as last read (this node's own record while it holds the lease). */
  get holder(): OwnerLeaseRecord | null {
    return this.#holder;
  }

  /** The storage folder being served, while holding. */
  get storageDir(): string | null {
    return this.#state === 'holding' ? this.#takeDir : null;
  }

  /** When the last ship pass started and ended (wall time), while holding. */
  get lastShip(): { startedMs: number; endedMs: number } | null {
    return this.#lastShip;
  }

  /** The number of the last take or renewal (0: none yet). */
  get renewal(): number {
    return this.#renewal;
  }

  /**
   * How long this node's right to serve the objects holds from the monotonic time `fromMs`
   * (`performance.now()`): the lease's validity, on this process's monotonic clock; 0 unless holding.
   */
  validFrom(fromMs: number): number {
    if (this.#state !== 'holding' || !this.#lease.valid()) return 0;
    return Math.max(0, Math.floor(performance.now() + this.#lease.remainingMs() - fromMs));
  }

  /**
   * Resolves once the right to serve moved past `renewal` (a renewal, a take, a loss or a stop),
   * at once when it already has or this node is known to stand by, or after `waitMs`, or when
   * `signal` aborts. A holder still deciding (its first look at the lease, or a take under way,
   * as after the host restarted) is waited for.
   */
  async changed(renewal: number, waitMs: number, signal?: AbortSignal): Promise<void> {
    const waiting =
      this.#state === 'holding'
        ? this.#renewal === renewal
        : this.#state === 'taking' || (this.#state === 'standby' && this.#holder === null);
    if (!waiting || signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#moved.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      this.#moved.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  #tellMoved(): void {
    for (const done of [...this.#moved]) done();
  }

  start(): void {
    this.#schedule(0);
  }

  /**
   * Stops: a holder stops serving, ships a last time and gives the lease up, so a standby takes
   * the objects over at once.
   */
  async stop(): Promise<void> {
    const wasHolding = this.#state === 'holding';
    this.#state = 'stopped';
    this.#tellMoved();
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#fenceTimer) clearTimeout(this.#fenceTimer);
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    await Promise.all([this.#step.catch(() => {}), this.#renewing.catch(() => {})]);
    if (!wasHolding) return;
    this.#serving = false;
    await this.#options.stopServing('the runtime is stopping');
    try {
      if (this.#lease.valid()) await this.#shipper?.pass();
      await this.#lease.release();
    } catch (err) {
      this.#options.log(`objects: the last pass before giving the lease up failed: ${String(err)}`);
    }
    await this.#dropTakeDir();
  }

  /** Deletes the stored objects of these namespaces (deleted classes) at the next pass, and ships them no more. */
  dropNamespaces(namespaces: string[]): void {
    this.#shipper?.drop(namespaces);
  }

  /**
   * Stops looking after the objects without stopping them or giving the lease up: a runtime host
   * restarting while its workerd serves on; the next host takes the lease back as this node's
   * (same fence) and serves on from the same folder.
   */
  async detach(): Promise<void> {
    this.#state = 'stopped';
    this.#tellMoved();
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#fenceTimer) clearTimeout(this.#fenceTimer);
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    await Promise.all([this.#step.catch(() => {}), this.#renewing.catch(() => {})]);
  }

  #schedule(delayMs: number): void {
    if (this.#state === 'stopped') return;
    this.#timer = setTimeout(() => {
      this.#step = this.#tick().finally(() => {
        if (this.#state === 'holding') this.#schedule(this.#holdingDelay());
        else this.#schedule(this.#options.standbyCheckMs ?? OBJECTS_STANDBY_CHECK_MS);
      });
    }, delayMs);
    this.#timer.unref?.();
  }

  #holdingDelay(): number {
    return Math.max(
      0,
      Math.min(this.#options.shipEveryMs ?? OBJECTS_SHIP_EVERY_MS, this.#lease.remainingMs()),
    );
  }

  async #tick(): Promise<void> {
    try {
      if (this.#state === 'holding') await this.#hold();
      else if (this.#state === 'standby') await this.#tryTake();
    } catch (err) {
      this.#options.log(`objects: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async #tryTake(): Promise<void> {
    const acquired = await this.#lease.acquire();
    if (!acquired.held) {
      this.#holder = acquired.holder;
      this.#tellMoved();
      return;
    }
    this.#state = 'taking';
    // Renewed while the objects are restored too: a restore of many objects outlasts the lease.
    this.#lastRenewMs = performance.now();
    this.#renewFailed = false;
    this.#scheduleRenewal();
    const fixed = this.#options.storageDir;
    const dir =
      fixed ?? join(this.#options.dataDir, `take-${acquired.fence}-${randomBytes(4).toString('hex')}`);
    try {
      this.#takeDir = dir;
      const resume = fixed !== undefined && acquired.resumed && existsSync(dir);
      if (fixed && !resume) {
        // Whatever ran on this folder before is older than the bucket: stopped, then replaced.
        await this.#options.stopServing('the objects are restored from the bucket');
        await rm(dir, { recursive: true, force: true });
      }
      await mkdir(dir, { recursive: true });
      const states = resume
        ? await resumeStates(this.#options)
        : await restoreObjects(this.#options, dir, this.#options.node);
      if (!this.#lease.valid()) throw new ObjectsMoved('the lease ran out while the objects were restored');
      this.#shipper = new ObjectsShipper({
        ref: this.#options,
        dir,
        scratchDir: join(this.#options.dataDir, 'copies'),
        mayShip: () => this.#lease.valid(),
        states,
      });
      this.#holder = {
        node: this.#options.node,
        expires_ms: Date.now() + this.#lease.ttlMs,
        fence: acquired.fence,
      };
      this.#armFence();
      this.#state = 'holding';
      this.#renewal++;
      this.#tellMoved();
      this.#options.log(
        `objects: this node holds the objects (fence ${acquired.fence}), restored into ${dir}`,
      );
      this.#serving = true;
      await this.#options.serve(dir);
    } catch (err) {
      if (this.#state === 'taking') this.#state = 'standby';
      await this.#lose(`the take failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** The next renewal: a third of the lease after the last one, or a pass's interval after a failed one. */
  #scheduleRenewal(): void {
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    const delay = this.#renewFailed
      ? (this.#options.shipEveryMs ?? OBJECTS_SHIP_EVERY_MS)
      : this.#lastRenewMs + this.#lease.ttlMs / 3 - performance.now();
    this.#renewTimer = setTimeout(
      () => {
        this.#renewing = this.#renew().finally(() => {
          if (this.#state === 'holding' || this.#state === 'taking') this.#scheduleRenewal();
        });
      },
      Math.max(0, delay),
    );
    this.#renewTimer.unref?.();
  }

  async #renew(): Promise<void> {
    const renewing = () => this.#state === 'holding' || this.#state === 'taking';
    if (!renewing()) return;
    if (!this.#lease.valid()) return this.#lose('the lease ran out before it could be renewed');
    const renewed = await this.#lease.renew().catch(() => null);
    if (!renewing()) return;
    this.#renewFailed = renewed === null;
    if (renewed === false) return this.#lose('another node took the objects lease');
    if (renewed) {
      this.#lastRenewMs = performance.now();
      this.#armFence();
      this.#renewal++;
      this.#tellMoved();
    }
  }

  async #hold(): Promise<void> {
    if (!this.#lease.valid()) return this.#lose('the lease ran out before it could be renewed');
    try {
      const pass = await this.#shipper?.pass();
      if (pass) this.#lastShip = { startedMs: pass.startedMs, endedMs: Date.now() };
    } catch (err) {
      if (err instanceof ObjectsMoved) return this.#lose(err.message);
      this.#options.log(`objects: a ship pass failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  #armFence(): void {
    if (this.#fenceTimer) clearTimeout(this.#fenceTimer);
    this.#fenceTimer = setTimeout(() => {
      if (this.#state === 'holding' && !this.#lease.valid())
        void this.#lose('the lease ran out before it could be renewed');
    }, Math.max(0, this.#lease.remainingMs()) + 1);
    this.#fenceTimer.unref?.();
  }

  /** Stops serving at once and goes back to standby. */
  async #lose(reason: string): Promise<void> {
    const wasServing = this.#serving;
    this.#serving = false;
    if (this.#state !== 'stopped') this.#state = 'standby';
    this.#holder = null; // known again at the next look at the lease
    this.#shipper = null;
    this.#lastShip = null;
    if (this.#fenceTimer) clearTimeout(this.#fenceTimer);
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    this.#tellMoved();
    if (wasServing) {
      this.#options.log(`objects: this node stops serving the objects: ${reason}`);
      await this.#options.stopServing(reason);
    }
    await this.#dropTakeDir();
  }

  /** Removes a take's own folder; the one storage folder stays (its next take empties it). */
  async #dropTakeDir(): Promise<void> {
    if (this.#takeDir && this.#takeDir !== this.#options.storageDir)
      await rm(this.#takeDir, { recursive: true, force: true });
    this.#takeDir = null;
  }
}
