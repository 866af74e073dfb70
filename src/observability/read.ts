// Reading the observability shards back for `svc traces` and `svc metrics`: straight from the
// bucket, no node needed. Only the hours a window touches are listed.

import type { Store } from '../store/store.ts';
import { hourStart, hoursListed } from './hours.ts';

const HOUR_MS = 3_600_000;
const READ_CONCURRENCY = 16;

/** One stored object of a shard: its key, the node it names and the time in its name. */
export interface ShardObject {
  key: string;
  hour: string;
  node: string;
  ms: number;
}

/** The hours present under `prefix`, oldest first. */
export async function listHours(store: Store, prefix: string): Promise<string[]> {
  const top = await store.list(prefix, { recursive: false });
  return hoursListed(top.prefixes, prefix);
}

/** The objects of the given hours (`<prefix><hour>/<node>/<ms>[-<seq>].json`), oldest first. */
export async function listShardObjects(
  store: Store,
  prefix: string,
  hours: readonly string[],
): Promise<ShardObject[]> {
  const out: ShardObject[] = [];
  for (const hour of hours) {
    const listing = await store.list(`${prefix}${hour}/`, { recursive: true });
    for (const object of listing.objects) {
      const parsed = parseShardKey(object.key.slice(prefix.length + hour.length + 1));
      if (parsed) out.push({ key: object.key, hour, ...parsed });
    }
  }
  return out.sort((a, b) => a.ms - b.ms || (a.key < b.key ? -1 : 1));
}

/** Hours that may hold objects written at or after `sinceMs`. */
export function hoursFrom(hours: readonly string[], sinceMs: number): string[] {
  return hours.filter((hour) => hourStart(hour) + HOUR_MS > sinceMs);
}

function parseShardKey(rest: string): { node: string; ms: number } | null {
  const match = /^([^/]+)\/(\d{13})(?:-\d+)?\.json$/.exec(rest);
  return match ? { node: match[1]!, ms: Number(match[2]) } : null;
}

/** Reads objects as JSON, a few at a time; an unreadable or vanished object (or an empty key) is null. */
export async function readJsonObjects(
  store: Store,
  objectKeys: readonly string[],
): Promise<(unknown | null)[]> {
  const out: (unknown | null)[] = new Array(objectKeys.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < objectKeys.length) {
      const i = next++;
      if (!objectKeys[i]) continue;
      const object = await store.get(objectKeys[i]!);
      if (!object) continue;
      try {
        out[i] = JSON.parse(new TextDecoder().decode(object.body));
      } catch {
        out[i] = null;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, objectKeys.length) }, worker));
  return out;
}
