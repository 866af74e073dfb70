// The console's charts of one application (docs/console.md "One application"): requests, error
// rate and p50/p99 latency over time, from the same snapshots `svc metrics` reads
// (docs/observability.md "Metrics"). Each node writes monotonic totals at every flush, so what a
// node served between two of its snapshots is the later minus the earlier; those differences are
// summed across nodes into fixed steps. A node's first snapshot with none before it counts from
// zero, as `svc metrics` counts a node that started inside the window.

import {
  hoursFrom,
  listHours,
  listShardObjects,
  readJsonObjects,
  type ShardObject,
} from '../observability/read.ts';
import {
  type AppTotals,
  addTotals,
  emptyTotals,
  latencyQuantile,
  readTotals,
  subtractTotals,
} from '../observability/totals.ts';
import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';

const HOUR_MS = 3_600_000;

export interface Series {
  application: string;
  sinceMs: number;
  stepMs: number;
  /** Step start times, seconds since the epoch (uPlot's x axis). */
  times: number[];
  requests: number[];
  /** 5xx over requests, as a percentage; null in a step without requests. */
  errorRate: (number | null)[];
  /** Upper bounds of the latency buckets holding p50 and p99, ms; null without requests. */
  p50: (number | null)[];
  p99: (number | null)[];
  /** Nodes whose snapshots were read. */
  nodes: string[];
}

export async function readSeries(
  store: Store,
  query: { application: string; sinceMs: number; nowMs: number; steps: number },
): Promise<Series> {
  const stepMs = Math.max(1000, Math.ceil((query.nowMs - query.sinceMs) / query.steps / 1000) * 1000);
  const steps = Math.ceil((query.nowMs - query.sinceMs) / stepMs);
  // An hour more than the window, so each node's snapshot before the window is its baseline.
  const hours = hoursFrom(await listHours(store, keys.metricsPrefix), query.sinceMs - HOUR_MS);
  const listed = await listShardObjects(store, keys.metricsPrefix, hours);
  const byNode = new Map<string, ShardObject[]>();
  for (const object of listed) byNode.set(object.node, [...(byNode.get(object.node) ?? []), object]);
  const buckets: AppTotals[] = Array.from({ length: steps }, () => emptyTotals());
  for (const objects of byNode.values()) {
    const firstInside = objects.findIndex((o) => o.ms >= query.sinceMs);
    if (firstInside < 0) continue;
    const wanted = objects.slice(Math.max(0, firstInside - 1));
    const bodies = await readJsonObjects(
      store,
      wanted.map((o) => o.key),
    );
    let previous = firstInside > 0 ? totalsOf(bodies[0], query.application) : emptyTotals();
    wanted.forEach((object, i) => {
      if (object.ms < query.sinceMs) return;
      const current = totalsOf(bodies[i], query.application);
      const step = Math.min(steps - 1, Math.floor((object.ms - query.sinceMs) / stepMs));
      buckets[step] = addTotals(buckets[step]!, subtractTotals(current, previous));
      previous = current;
    });
  }
  const finite = (v: number | null) => (v === null || Number.isFinite(v) ? v : null);
  return {
    application: query.application,
    sinceMs: query.sinceMs,
    stepMs,
    times: buckets.map((_, i) => Math.round((query.sinceMs + i * stepMs) / 1000)),
    requests: buckets.map((b) => b.requests),
    errorRate: buckets.map((b) => (b.requests ? (100 * b.status['5xx']) / b.requests : null)),
    p50: buckets.map((b) => finite(latencyQuantile(b.latency, 0.5))),
    p99: buckets.map((b) => finite(latencyQuantile(b.latency, 0.99))),
    nodes: [...byNode.keys()].sort(),
  };
}

function totalsOf(body: unknown, application: string): AppTotals {
  const apps = (body as { apps?: Record<string, unknown> } | null)?.apps;
  const totals = apps && typeof apps === 'object' ? apps[application] : undefined;
  return totals === undefined ? emptyTotals() : readTotals(totals);
}
