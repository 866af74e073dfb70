// The owner lease of one D1 database (docs/bindings.md "D1 databases", "One writer"): the object
// `fleets/<app>/d1/<db>/lease.json` names the node that serves the database and until when, by
// the rules of owner-lease.ts. The log's single-writer segments (d1-log.ts) are the fence behind it.

import { keys } from '../../../src/registry/keys.ts';
import type { DatabaseRef } from './d1-log.ts';
import { OWNER_LEASE_TTL_MS, OwnerLease, type OwnerLeaseRecord } from './owner-lease.ts';

export type { Acquired } from './owner-lease.ts';
/** The lease object's fields. */
export type D1LeaseRecord = OwnerLeaseRecord;

/** How long a lease lasts unrenewed: a dead owner's databases move within this plus a restore. */
export const D1_LEASE_TTL_MS = OWNER_LEASE_TTL_MS;

export class D1Lease extends OwnerLease {
  constructor(ref: DatabaseRef, node: string, ttlMs = D1_LEASE_TTL_MS) {
    super(ref.store, keys.runtimeD1Lease(ref.application, ref.database), node, ttlMs);
  }
}
