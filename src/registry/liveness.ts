// The one liveness rule by which every node judges another (docs/api.md "What the service
// does": nodes report liveness by heartbeat; docs/ingress.md rule 3: nodes that stopped beating
// are dropped). Documented in docs/fleet.md "Liveness".
//
// A node is live while its last beat (`beatMs`, written by that node) is at most
// NODE_DEAD_AFTER_MS old on the reader's clock. The reader holds other nodes' records from its
// registry cache, re-read every `registry-node-refresh-ms` (default 30 s), so a record can be up
// to that interval plus one heartbeat old before the reader sees the next one: the threshold sits
// well above both (and leaves room for clocks that disagree by a few seconds).

import type { NodeRecord } from './records.ts';

/** A node rewrites its record at least this often (and at once when what it says changes). */
export const HEARTBEAT_MS = 10_000;

/** A node is dead once its last beat is older than this: six missed beats. */
export const NODE_DEAD_AFTER_MS = 6 * HEARTBEAT_MS;

/** True while the node's last heartbeat is recent enough; draining nodes are still live. */
export function isNodeLive(record: Pick<NodeRecord, 'beatMs'>, nowMs: number): boolean {
  return nowMs - record.beatMs <= NODE_DEAD_AFTER_MS;
}

/** True when the node is live and not draining: it may serve and be placed on. */
export function isNodeServing(record: Pick<NodeRecord, 'beatMs' | 'state'>, nowMs: number): boolean {
  return record.state !== 'draining' && isNodeLive(record, nowMs);
}
