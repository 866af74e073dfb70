// The node lease (docs/runtime.md: `cell serve` holds
// `fleets/<name>/nodes/<node>.json` with `node` and `expires_ms`). It says "this node runs this
// application" to anyone reading the bucket; `svc app lease show|drop` reads and removes it.
// Every write is conditional on what this process last wrote, so a lease dropped or rewritten
// by someone else is noticed and re-taken instead of silently overwritten.

import { keys } from '../../src/registry/keys.ts';
import { isCasConflict, type Store } from '../../src/store/store.ts';

export interface LeaseOptions {
  store: Store;
  application: string;
  node: string;
  ttlMs: number;
  log: (line: string) => void;
  /** What the lease also tells a reader: the deployment being served. */
  describe: () => Record<string, unknown>;
}

export class NodeLease {
  private readonly options: LeaseOptions;
  private readonly key: string;
  private etag: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly startedMs = Date.now();

  constructor(options: LeaseOptions) {
    this.options = options;
    this.key = keys.runtimeNodeLease(options.application, options.node);
  }

  /** Takes the lease now and renews it every third of its lifetime until `release`. */
  start(): void {
    void this.renew();
  }

  /** Writes the lease once more, now, e.g. after the served deployment changed. */
  renew(): Promise<void> {
    // One write at a time: two writes racing on one ETag would lose to each other.
    this.chain = this.chain.then(() => this.renewOnce());
    return this.chain;
  }

  private chain: Promise<void> = Promise.resolve();

  private async renewOnce(): Promise<void> {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    let delay = Math.max(1000, Math.floor(this.options.ttlMs / 3));
    try {
      await this.write();
    } catch (err) {
      // Keep serving: the bucket may be back before the lease runs out.
      this.options.log(`cell: cannot renew the node lease ${this.key}: ${(err as Error).message}`);
      delay = Math.min(delay, 2000);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.renew(), delay);
  }

  private async write(): Promise<void> {
    const body = JSON.stringify({
      node: this.options.node,
      expires_ms: Date.now() + this.options.ttlMs,
      application: this.options.application,
      pid: process.pid,
      started_ms: this.startedMs,
      renewed_ms: Date.now(),
      ...this.options.describe(),
    });
    if (this.etag) {
      try {
        this.etag = await this.options.store.put(this.key, body, { ifMatch: this.etag });
        return;
      } catch (err) {
        if (!isCasConflict(err)) throw err;
        this.options.log(
          `cell: the node lease ${this.key} was changed or dropped by someone else; taking it again`,
        );
      }
    }
    const current = await this.options.store.stat(this.key);
    this.etag = await this.options.store.put(
      this.key,
      body,
      current ? { ifMatch: current.etag } : { ifNoneMatch: '*' },
    );
  }

  /** Stops renewing and deletes the lease if it is still the one this process wrote. */
  async release(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.chain;
    if (!this.etag) return;
    try {
      await this.options.store.delete(this.key, { ifMatch: this.etag });
    } catch (err) {
      if (!isCasConflict(err))
        this.options.log(`cell: cannot delete the node lease ${this.key}: ${(err as Error).message}`);
    }
  }
}
