// The runtime version comparison of deploy intake (docs/deploys.md "Runtime version comparison":
// `version-skew` when another answering node serves, or crash-loops on, this application on a
// different runtime version outside a declared rolling pair).
//
// This node publishes with its own runtime (`cell --version` of `--cell-bin`). Another node is
// "answering" when it is live by the fleet liveness rule; it "serves or crash-loops" the
// application when its node record lists a process for it in state `ready` or `crashloop`.
//
// A rolling pair is declared fleet-wide in the bucket, at `_svc/fleet/runtime-pairs.json`
// (keys.runtimePairs): `{"v":1,"pairs":[["0.6.1","0.6.2"]]}`. A pair is unordered: while it stands,
// nodes on either version accept deploys of applications served on the other. Remove it once the
// roll is over. docs/deploys.md says how to write it.

import { Problem } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import { isNodeLive } from '../../registry/liveness.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { getJson, type Store } from '../../store/store.ts';

export interface RuntimePairs {
  v: 1;
  /** Unordered pairs of runtime versions allowed to serve one application side by side. */
  pairs: [string, string][];
}

/** One node that would be left on another runtime version. */
export interface SkewedNode {
  node: string;
  version: string;
  state: string;
}

/** The declared rolling pairs; none when the record is absent or unreadable. */
export async function readRuntimePairs(store: Store): Promise<[string, string][]> {
  const found = await getJson<RuntimePairs>(store, keys.runtimePairs).catch((err) => {
    if (err instanceof SyntaxError) return null;
    throw err;
  });
  const pairs = found?.value?.pairs;
  if (!Array.isArray(pairs)) return [];
  return pairs.filter(
    (pair): pair is [string, string] =>
      Array.isArray(pair) && pair.length === 2 && typeof pair[0] === 'string' && typeof pair[1] === 'string',
  );
}

/** Whether two versions may serve side by side: equal, or a declared pair in either order. */
export function pairAllowed(a: string, b: string, pairs: readonly [string, string][]): boolean {
  return a === b || pairs.some(([x, y]) => (x === a && y === b) || (x === b && y === a));
}

/** The other live nodes serving or crash-looping `application` on a runtime version not allowed beside ours. */
export function findSkew(
  application: string,
  ownVersion: string,
  selfId: string,
  nodes: readonly NodeRecord[],
  pairs: readonly [string, string][],
  nowMs: number,
): SkewedNode[] {
  const skewed: SkewedNode[] = [];
  for (const node of nodes) {
    if (node.id === selfId || !isNodeLive(node, nowMs)) continue;
    for (const process of node.processes ?? []) {
      if (process.application !== application) continue;
      if (process.state !== 'ready' && process.state !== 'crashloop') continue;
      const version = process.runtimeVersion;
      if (typeof version !== 'string' || version === '') continue;
      if (!pairAllowed(ownVersion, version, pairs))
        skewed.push({ node: node.id, version, state: process.state });
    }
  }
  return skewed.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

export function versionSkew(
  application: string,
  ownVersion: string,
  selfId: string,
  skewed: readonly SkewedNode[],
  pairs: readonly [string, string][],
): Problem {
  const others = skewed
    .map((s) => `${s.node} ${s.state === 'crashloop' ? 'crash-loops on' : 'serves it on'} cell ${s.version}`)
    .join(', ');
  const allowed = pairs.length ? pairs.map(([a, b]) => `${a} with ${b}`).join(', ') : 'none';
  return new Problem(
    'version-skew',
    'Runtime version skew',
    `this node (${selfId}) publishes "${application}" with cell ${ownVersion}, but ${others}; allowed rolling pairs: ${allowed}. Upgrade those nodes, deploy through one of them, or declare the pair in ${keys.runtimePairs}`,
  );
}

/** Every node record in the registry (one listing, one read each); unreadable ones are skipped. */
export async function readNodeRecords(store: Store): Promise<NodeRecord[]> {
  const listing = await store.list(keys.nodeRecordsPrefix, { recursive: false });
  const records = await Promise.all(
    listing.objects.map((object) =>
      getJson<NodeRecord>(store, object.key)
        .then((found) => found?.value ?? null)
        .catch(() => null),
    ),
  );
  return records.filter(
    (record): record is NodeRecord => !!record && typeof record === 'object' && typeof record.id === 'string',
  );
}
