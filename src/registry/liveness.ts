// The one liveness rule by which every node judges another (spec 1 "What the service
// does": nodes report liveness by heartbeat; spec 2 rule 3: nodes that stopped beating
// are dropped). Documented in docs/fleet.md.

import type { NodeRecord } from './records.ts';

/** A node rewrites its record every HEARTBEAT_MS. */
export const HEARTBEAT_MS = 5_000;

/** A node is dead once its last beat is older than this: three missed beats. */
export const NODE_DEAD_AFTER_MS = 3 * HEARTBEAT_MS;

/** True while the node's last heartbeat is recent enough; draining nodes are still live. */
export function isNodeLive(record: Pick<NodeRecord, 'beatMs'>, nowMs: number): boolean {
  return nowMs - record.beatMs <= NODE_DEAD_AFTER_MS;
}

/** True when the node is live and not draining: it may serve and be placed on. */
export function isNodeServing(record: Pick<NodeRecord, 'beatMs' | 'state'>, nowMs: number): boolean {
  return record.state !== 'draining' && isNodeLive(record, nowMs);
}
