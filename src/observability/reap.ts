// Deletes observability shards past the retention, about once an hour. Each node deletes its own
// objects (one listing of the shard names, then per expired hour one listing of its own folder and
// one delete per object), so deletes match that node's writes one for one and no node's cost grows
// with the size of the fleet. The coordinator also sweeps whole hours a day past the retention,
// for what nodes that left the fleet did not delete themselves.

import type { Store } from '../store/store.ts';
import { expiredHours, hoursListed, RETENTION_MS } from './hours.ts';

/** How long past the retention the coordinator's sweep waits for each node's own reaping. */
export const LEFTOVER_GRACE_MS = 24 * 3_600_000;

export interface ReapOptions {
  retentionMs?: number;
  /** Only this node's objects; absent: every object of the expired hours. */
  node?: string;
}

/** Answers how many objects were deleted. */
export async function reapShards(
  store: Store,
  prefix: string,
  nowMs: number,
  options: ReapOptions = {},
): Promise<number> {
  const top = await store.list(prefix, { recursive: false });
  const hours = expiredHours(hoursListed(top.prefixes, prefix), nowMs, options.retentionMs ?? RETENTION_MS);
  let deleted = 0;
  for (const hour of hours) {
    const folder = options.node ? `${prefix}${hour}/${options.node}/` : `${prefix}${hour}/`;
    const listing = await store.list(folder, { recursive: true });
    for (const object of listing.objects) if (await store.delete(object.key)) deleted++;
  }
  return deleted;
}
