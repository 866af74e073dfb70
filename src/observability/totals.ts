// Per-application served totals and their arithmetic: a node counts monotonically, snapshots are
// written to the bucket, and a window is the newest snapshot minus the one before the window.

/** Upper bounds (ms) of the latency buckets; a last, open bucket counts everything slower. */
export const LATENCY_BOUNDS_MS: readonly number[] = [
  1, 2, 3, 5, 8, 13, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 10_000,
  30_000,
];

export type StatusClass = '1xx' | '2xx' | '3xx' | '4xx' | '5xx' | 'other';
const CLASSES: readonly StatusClass[] = ['1xx', '2xx', '3xx', '4xx', '5xx', 'other'];

export interface AppTotals {
  requests: number;
  bytesIn: number;
  bytesOut: number;
  status: Record<StatusClass, number>;
  /** Counts per latency bucket: LATENCY_BOUNDS_MS.length + 1 entries. */
  latency: number[];
}

export function emptyTotals(): AppTotals {
  return {
    requests: 0,
    bytesIn: 0,
    bytesOut: 0,
    status: { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, other: 0 },
    latency: new Array(LATENCY_BOUNDS_MS.length + 1).fill(0),
  };
}

export function statusClass(status: number): StatusClass {
  const hundreds = Math.floor(status / 100);
  return hundreds >= 1 && hundreds <= 5 ? (`${hundreds}xx` as StatusClass) : 'other';
}

export function latencyBucket(ms: number): number {
  const i = LATENCY_BOUNDS_MS.findIndex((bound) => ms <= bound);
  return i < 0 ? LATENCY_BOUNDS_MS.length : i;
}

export function countRequest(
  totals: AppTotals,
  entry: { status: number; bytesIn: number; bytesOut: number; durationMs: number },
) {
  totals.requests += 1;
  totals.bytesIn += entry.bytesIn;
  totals.bytesOut += entry.bytesOut;
  totals.status[statusClass(entry.status)] += 1;
  totals.latency[latencyBucket(entry.durationMs)]! += 1;
}

/**
 * The stored form of one application's totals, compact because a snapshot holds every application
 * a node ever served: `[requests, bytesIn, bytesOut, 1xx, 2xx, 3xx, 4xx, 5xx, other, ...latency]`,
 * trailing empty latency buckets left out.
 */
export function encodeTotals(t: AppTotals): number[] {
  let end = t.latency.length;
  while (end > 0 && t.latency[end - 1] === 0) end--;
  return [t.requests, t.bytesIn, t.bytesOut, ...CLASSES.map((c) => t.status[c]), ...t.latency.slice(0, end)];
}

/** Reads stored totals defensively: anything missing or malformed counts as 0. */
export function readTotals(value: unknown): AppTotals {
  const out = emptyTotals();
  if (!Array.isArray(value)) return out;
  out.requests = count(value[0]);
  out.bytesIn = count(value[1]);
  out.bytesOut = count(value[2]);
  CLASSES.forEach((c, i) => {
    out.status[c] = count(value[3 + i]);
  });
  const first = 3 + CLASSES.length;
  for (let i = 0; i < out.latency.length; i++) out.latency[i] = count(value[first + i]);
  return out;
}

function count(value: unknown): number {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : 0;
}

/**
 * `later - earlier`, counter by counter. A counter that went down was reset (a node that could not
 * carry its totals over a restart), so all of its later value is new.
 */
export function subtractTotals(later: AppTotals, earlier: AppTotals): AppTotals {
  const d = (a: number, b: number) => (a >= b ? a - b : a);
  const out = emptyTotals();
  out.requests = d(later.requests, earlier.requests);
  out.bytesIn = d(later.bytesIn, earlier.bytesIn);
  out.bytesOut = d(later.bytesOut, earlier.bytesOut);
  for (const c of CLASSES) out.status[c] = d(later.status[c], earlier.status[c]);
  out.latency = later.latency.map((n, i) => d(n, earlier.latency[i] ?? 0));
  return out;
}

export function addTotals(into: AppTotals, more: AppTotals): AppTotals {
  into.requests += more.requests;
  into.bytesIn += more.bytesIn;
  into.bytesOut += more.bytesOut;
  for (const c of CLASSES) into.status[c] += more.status[c];
  for (let i = 0; i < into.latency.length; i++) into.latency[i]! += more.latency[i] ?? 0;
  return into;
}

/**
 * The latency under which a fraction `q` of requests finished, as the upper bound of the bucket
 * holding that rank (null with no requests; Infinity when it falls in the open bucket).
 */
export function latencyQuantile(latency: readonly number[], q: number): number | null {
  const total = latency.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < latency.length; i++) {
    seen += latency[i]!;
    if (seen >= rank) return LATENCY_BOUNDS_MS[i] ?? Number.POSITIVE_INFINITY;
  }
  return Number.POSITIVE_INFINITY;
}
