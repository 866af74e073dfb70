// The node's per-application meter: each access-log line is mapped from its host to the
// application through the routing this node serves, and counted. Every flush writes the node's
// monotonic totals as one snapshot (`_svc/metrics/<hour>/<node>/<ms>.json`); at start the node
// carries on from its newest snapshot, so its totals stay monotonic across restarts.

import type { Logger } from 'pino';
import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import type { AccessEntry } from './access-log.ts';
import { hourOf, hoursListed } from './hours.ts';
import { type AppTotals, addTotals, countRequest, emptyTotals, encodeTotals, readTotals } from './totals.ts';

/** The stored body of one snapshot. */
export interface MetricsSnapshot {
  v: 1;
  node: string;
  at: string;
  /** Per application, totals in their stored form (totals.ts `encodeTotals`). */
  apps: Record<string, number[]>;
}

export interface MeterOptions {
  store: Store;
  nodeId: string;
  /** The application a request to `host` (path `uri`) reached, as this node routes it now. */
  applicationOf: (host: string, uri: string) => string | undefined;
  now?: () => number;
  log?: Pick<Logger, 'warn'>;
  /** Told of each request counted for an application (the Prometheus metrics, when served). */
  counted?: (application: string, entry: AccessEntry) => void;
}

export class Meter {
  readonly #o: MeterOptions;
  readonly #now: () => number;
  readonly #apps = new Map<string, AppTotals>();
  /** Requests no route of this node named (unknown hosts, the API host). */
  unrouted = 0;

  constructor(options: MeterOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  count(entry: AccessEntry): void {
    const application = this.#o.applicationOf(entry.host, entry.uri);
    if (!application) {
      this.unrouted += 1;
      return;
    }
    const totals = this.#apps.get(application) ?? emptyTotals();
    this.#apps.set(application, totals);
    countRequest(totals, entry);
    this.#o.counted?.(application, entry);
  }

  /** Carries on from this node's newest snapshot in the bucket (none: from zero). */
  async resume(): Promise<void> {
    const { store, nodeId } = this.#o;
    const top = await store.list(keys.metricsPrefix, { recursive: false });
    const hours = hoursListed(top.prefixes, keys.metricsPrefix).reverse();
    for (const hour of hours) {
      const listing = await store.list(`${keys.metricsHourPrefix(hour)}${nodeId}/`, { recursive: true });
      const newest = listing.objects.at(-1);
      if (!newest) continue;
      const object = await store.get(newest.key);
      if (!object) continue;
      const snapshot = JSON.parse(new TextDecoder().decode(object.body)) as Partial<MetricsSnapshot>;
      // Anything counted since start comes on top of what was carried.
      for (const [name, totals] of Object.entries(snapshot.apps ?? {}))
        this.#apps.set(name, addTotals(this.#apps.get(name) ?? emptyTotals(), readTotals(totals)));
      return;
    }
  }

  snapshot(): MetricsSnapshot {
    const apps: Record<string, number[]> = {};
    for (const name of [...this.#apps.keys()].sort()) apps[name] = encodeTotals(this.#apps.get(name)!);
    return { v: 1, node: this.#o.nodeId, at: new Date(this.#now()).toISOString(), apps };
  }

  /**
   * Writes the totals as one snapshot, also when nothing was counted: a snapshot inside a window
   * is how `svc metrics` tells a node that counted nothing from one that stopped. A failed write
   * is logged; the next flush writes newer totals.
   */
  async flush(): Promise<void> {
    const ms = this.#now();
    try {
      await this.#o.store.put(
        keys.metricsSnapshot(hourOf(ms), this.#o.nodeId, ms),
        JSON.stringify(this.snapshot()),
      );
    } catch (err) {
      this.#o.log?.warn({ err }, 'could not write a metrics snapshot');
    }
  }
}
