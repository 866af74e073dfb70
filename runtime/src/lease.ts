// The node lease (docs/runtime.md: `cell serve` holds
// `fleets/<name>/nodes/<node>.json` with `node` and `expires_ms`). It says "this node runs this
// application" to anyone reading the bucket; `svc app lease show|drop` reads and removes it.
// Every write is conditional on what this replica last wrote, so a lease dropped or rewritten
// by someone else is noticed and re-taken instead of silently overwritten. The front keeps the
// ETag and the renewal timer; these functions are the runtime host's `lease` op, one write each.

import { keys } from '../../src/registry/keys.ts';
import { isCasConflict, type Store } from '../../src/store/store.ts';

export interface LeaseHolder {
  store: Store;
  application: string;
  node: string;
  log: (line: string) => void;
}

/** What one write of the lease says besides its owner: the process holding it and what it serves. */
export interface LeaseWrite {
  ttlMs: number;
  /** The process serving the application (the front) and when it started. */
  pid: number;
  startedMs: number;
  /** The deployment being served, when one is. */
  describe: Record<string, unknown>;
}

export function leaseKey(holder: LeaseHolder): string {
  return keys.runtimeNodeLease(holder.application, holder.node);
}

/**
 * Writes the lease, conditional on `etag` (the one this replica last wrote; null: none yet).
 * Answers the new ETag; throws when the bucket refuses or fails.
 */
export async function writeLease(
  holder: LeaseHolder,
  etag: string | null,
  write: LeaseWrite,
): Promise<string> {
  const key = leaseKey(holder);
  const body = JSON.stringify({
    node: holder.node,
    expires_ms: Date.now() + write.ttlMs,
    application: holder.application,
    pid: write.pid,
    started_ms: write.startedMs,
    renewed_ms: Date.now(),
    ...write.describe,
  });
  if (etag) {
    try {
      return await holder.store.put(key, body, { ifMatch: etag });
    } catch (err) {
      if (!isCasConflict(err)) throw err;
      holder.log(`cell: the node lease ${key} was changed or dropped by someone else; taking it again`);
    }
  }
  const current = await holder.store.stat(key);
  return holder.store.put(key, body, current ? { ifMatch: current.etag } : { ifNoneMatch: '*' });
}

/** Deletes the lease if it is still the one this replica wrote (`etag`); never throws. */
export async function releaseLease(holder: LeaseHolder, etag: string | null): Promise<void> {
  if (!etag) return;
  const key = leaseKey(holder);
  try {
    await holder.store.delete(key, { ifMatch: etag });
  } catch (err) {
    if (!isCasConflict(err))
      holder.log(`cell: cannot delete the node lease ${key}: ${(err as Error).message}`);
  }
}
