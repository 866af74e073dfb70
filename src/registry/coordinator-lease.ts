// The coordinator lease object, `_svc/fleet/coordinator.json` (docs/fleet.md "Coordinator lease
// and fencing"): how it is read, taken, renewed and released. Two holders use these rules: the
// daemon's LeaseKeeper (src/node/fleet/lease.ts), which elects a coordinator among nodes, and the
// CLI's bucket path (src/cli/cli-lease.ts), which holds the lease while it deletes an
// application so no node coordinates meanwhile. Both take a fence above every fence they have
// seen, the lease's and the placements', so a fence is never reused even when the lease object
// was deleted.

import { getJson, isCasConflict, putJson, type Store } from '../store/store.ts';
import { keys } from './keys.ts';
import type { CoordinatorLease, PlacementRecord } from './records.ts';

/** The lease object as read or written, with its ETag. */
export interface SeenLease {
  lease: CoordinatorLease;
  etag: string;
}

/** Reads the lease object; null when there is none. */
export async function readCoordinatorLease(store: Store): Promise<SeenLease | null> {
  const found = await getJson<CoordinatorLease>(store, keys.coordinatorLease);
  return found ? { lease: found.value, etag: found.etag } : null;
}

/**
 * The fence a new holder takes: one above the current lease's and above `floor`, the highest
 * fence the holder has seen anywhere else (placement records).
 */
export function nextFence(current: CoordinatorLease | null, floor: number): number {
  return Math.max(current?.fence ?? 0, Number.isSafeInteger(floor) ? floor : 0) + 1;
}

/**
 * The lease `holder` writes to take the object, or null while another holder's lease is live.
 * A live lease naming `holder` itself was left by an earlier run of it and is taken back.
 */
export function leaseToTake(
  current: CoordinatorLease | null,
  holder: string,
  floor: number,
  nowMs: number,
  ttlMs: number,
): CoordinatorLease | null {
  if (current && current.expiresMs > nowMs && current.node !== holder) return null;
  const stamp = new Date(nowMs).toISOString();
  return {
    v: 1,
    node: holder,
    fence: nextFence(current, floor),
    acquiredAt: stamp,
    renewedAt: stamp,
    expiresMs: nowMs + ttlMs,
  };
}

/** The lease renewed at `nowMs`: same holder and fence, a new body (so a new ETag). */
export function renewedLease(lease: CoordinatorLease, nowMs: number, ttlMs: number): CoordinatorLease {
  return { ...lease, renewedAt: new Date(nowMs).toISOString(), expiresMs: nowMs + ttlMs };
}

/** The lease let go at `nowMs`: expired in place, its fence kept so the next one is higher. */
export function expiredLease(lease: CoordinatorLease, nowMs: number): CoordinatorLease {
  return { ...lease, renewedAt: new Date(nowMs).toISOString(), expiresMs: nowMs };
}

/**
 * Writes `next` on the condition that the object is still the one seen (`etag`; null: that there
 * is none). Answers the new ETag, or null when another writer got there first.
 */
export async function writeCoordinatorLease(
  store: Store,
  next: CoordinatorLease,
  etag: string | null,
): Promise<string | null> {
  try {
    return await putJson(store, keys.coordinatorLease, next, etag ? { ifMatch: etag } : { ifNoneMatch: '*' });
  } catch (err) {
    if (isCasConflict(err)) return null;
    throw err;
  }
}

/**
 * The highest fence any placement record carries; 0 when none does. The floor for a holder that
 * has not been watching the fleet (the CLI), read from the bucket; the daemon learns the same
 * fences from its registry cache.
 */
export async function highestPlacementFence(store: Store): Promise<number> {
  const listing = await store.list(keys.appsPrefix, { recursive: false });
  const names = listing.prefixes.map((prefix) => prefix.slice(keys.appsPrefix.length, -1));
  const fences = await Promise.all(
    names.map(async (name) => {
      // An unreadable placement holds no fence worth keeping above.
      const found = await getJson<PlacementRecord>(store, keys.placement(name)).catch(() => null);
      const fence = found?.value.fence;
      return typeof fence === 'number' && Number.isSafeInteger(fence) ? fence : 0;
    }),
  );
  return fences.reduce((highest, fence) => Math.max(highest, fence), 0);
}
