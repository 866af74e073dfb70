// Deletes observability shards past the retention. Run by the coordinator only (one reaper per
// fleet), about once an hour: one listing of the shard names, then per expired hour one listing
// and one delete per object, so deletes match writes one for one over time.

import type { Store } from '../store/store.ts';
import { expiredHours, hoursListed, RETENTION_MS } from './hours.ts';

/** Answers how many objects were deleted. */
export async function reapShards(
  store: Store,
  prefix: string,
  nowMs: number,
  retentionMs = RETENTION_MS,
): Promise<number> {
  const top = await store.list(prefix, { recursive: false });
  let deleted = 0;
  for (const hour of expiredHours(hoursListed(top.prefixes, prefix), nowMs, retentionMs)) {
    const listing = await store.list(`${prefix}${hour}/`, { recursive: true });
    for (const object of listing.objects) if (await store.delete(object.key)) deleted++;
  }
  return deleted;
}
