// The UTC hour shards of the observability keys (`yyyy-mm-dd-hh`): a reader lists only the hours
// its window touches, and the reaper deletes whole hours once they are past the retention.

const HOUR_MS = 3_600_000;

/** Events and metric snapshots older than this are reaped (docs/observability.md "Batching, retention"). */
export const RETENTION_MS = 8 * 24 * HOUR_MS;

/** The shard of an instant: `2026-11-23-14`. */
export function hourOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13).replace('T', '-');
}

/** The instant an hour shard starts at; NaN for a name that is no shard. */
export function hourStart(hour: string): number {
  const match = /^(\d{4}-\d{2}-\d{2})-(\d{2})$/.exec(hour);
  return match ? Date.parse(`${match[1]}T${match[2]}:00:00.000Z`) : Number.NaN;
}

/** Every shard from the one holding `fromMs` to the one holding `toMs`, oldest first. */
export function hoursBetween(fromMs: number, toMs: number): string[] {
  const out: string[] = [];
  for (let t = Math.floor(fromMs / HOUR_MS) * HOUR_MS; t <= toMs; t += HOUR_MS) out.push(hourOf(t));
  return out;
}

/** The shard names under a prefix's non-recursive listing (`<prefix><hour>/`), oldest first. */
export function hoursListed(prefixes: readonly string[], prefix: string): string[] {
  return prefixes
    .map((p) => p.slice(prefix.length, -1))
    .filter((hour) => Number.isFinite(hourStart(hour)))
    .sort();
}

/** Shards wholly older than the retention at `nowMs`. */
export function expiredHours(hours: readonly string[], nowMs: number, retentionMs = RETENTION_MS): string[] {
  return hours.filter((hour) => hourStart(hour) + HOUR_MS <= nowMs - retentionMs);
}
