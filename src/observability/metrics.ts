// `svc metrics`: per-application served totals over a window. Each node writes monotonic totals,
// so a node's share of the window is its newest snapshot minus its newest one from before the
// window (none: it started counting inside the window). Three silences are told apart: nothing was
// ever written; snapshots exist but none inside the window; nodes wrote snapshots inside the window
// but counted no requests (for the application asked about).

import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import { hoursFrom, listHours, listShardObjects, readJsonObjects, type ShardObject } from './read.ts';
import {
  type AppTotals,
  addTotals,
  emptyTotals,
  latencyQuantile,
  readTotals,
  type StatusClass,
  subtractTotals,
} from './totals.ts';

export interface MetricsQuery {
  sinceMs: number;
  application?: string;
}

export type Silence =
  | { kind: 'never-written' }
  | { kind: 'outside-window'; newestAt: string; node: string }
  | { kind: 'no-requests'; nodes: string[] };

export interface ApplicationWindow {
  application: string;
  requests: number;
  bytesIn: number;
  bytesOut: number;
  status: Record<StatusClass, number>;
  /** 5xx answers over requests. */
  errorRate: number;
  /** Upper bounds of the latency buckets holding these ranks, in ms; null for the open bucket. */
  latencyMs: { p50: number | null; p90: number | null; p99: number | null };
}

export interface MetricsResult {
  /** Nodes with a snapshot inside the window. */
  nodes: string[];
  applications: ApplicationWindow[];
  silence?: Silence;
}

export async function readMetrics(store: Store, query: MetricsQuery): Promise<MetricsResult> {
  const hours = await listHours(store, keys.metricsPrefix);
  if (hours.length === 0) return { nodes: [], applications: [], silence: { kind: 'never-written' } };
  const windowHours = hoursFrom(hours, query.sinceMs);
  const listed = await listShardObjects(store, keys.metricsPrefix, windowHours);
  const inside = listed.filter((o) => o.ms >= query.sinceMs);
  if (inside.length === 0) {
    const newest =
      listed.at(-1) ?? (await newestBefore(store, hours.slice(0, hours.length - windowHours.length)));
    return {
      nodes: [],
      applications: [],
      silence: newest
        ? { kind: 'outside-window', newestAt: new Date(newest.ms).toISOString(), node: newest.node }
        : { kind: 'never-written' },
    };
  }
  const ends = newestPerNode(inside);
  const baselines = newestPerNode(listed.filter((o) => o.ms < query.sinceMs));
  // A node may have written its last snapshot before the window in an earlier hour.
  const earlier = hours.slice(0, hours.length - windowHours.length).reverse();
  for (const hour of earlier) {
    if ([...ends.keys()].every((node) => baselines.has(node))) break;
    for (const [node, object] of newestPerNode(await listShardObjects(store, keys.metricsPrefix, [hour]))) {
      if (!baselines.has(node)) baselines.set(node, object);
    }
  }
  const nodes = [...ends.keys()].sort();
  const endBodies = await readJsonObjects(
    store,
    nodes.map((n) => ends.get(n)!.key),
  );
  const baseBodies = await readJsonObjects(
    store,
    nodes.map((n) => baselines.get(n)?.key ?? ''),
  );
  const sums = new Map<string, AppTotals>();
  nodes.forEach((_, i) => {
    const end = appsOf(endBodies[i]);
    const base = appsOf(baseBodies[i]);
    for (const [application, totals] of end) {
      if (query.application !== undefined && application !== query.application) continue;
      const delta = subtractTotals(totals, base.get(application) ?? emptyTotals());
      sums.set(application, addTotals(sums.get(application) ?? emptyTotals(), delta));
    }
  });
  const applications = [...sums.entries()]
    .filter(([, t]) => t.requests > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([application, t]) => windowOf(application, t));
  if (applications.length === 0) return { nodes, applications, silence: { kind: 'no-requests', nodes } };
  return { nodes, applications };
}

function windowOf(application: string, t: AppTotals): ApplicationWindow {
  const q = (p: number) => {
    const v = latencyQuantile(t.latency, p);
    return v === null || Number.isFinite(v) ? v : null;
  };
  return {
    application,
    requests: t.requests,
    bytesIn: t.bytesIn,
    bytesOut: t.bytesOut,
    status: t.status,
    errorRate: t.requests ? t.status['5xx'] / t.requests : 0,
    latencyMs: { p50: q(0.5), p90: q(0.9), p99: q(0.99) },
  };
}

function newestPerNode(objects: readonly ShardObject[]): Map<string, ShardObject> {
  const out = new Map<string, ShardObject>();
  for (const o of objects) {
    const seen = out.get(o.node);
    if (!seen || o.ms > seen.ms) out.set(o.node, o);
  }
  return out;
}

async function newestBefore(store: Store, hours: readonly string[]): Promise<ShardObject | undefined> {
  for (const hour of [...hours].reverse()) {
    const newest = (await listShardObjects(store, keys.metricsPrefix, [hour])).at(-1);
    if (newest) return newest;
  }
  return undefined;
}

function appsOf(body: unknown): Map<string, AppTotals> {
  const apps = (body as { apps?: unknown } | null)?.apps;
  const out = new Map<string, AppTotals>();
  if (typeof apps !== 'object' || apps === null) return out;
  for (const [name, totals] of Object.entries(apps)) out.set(name, readTotals(totals));
  return out;
}
