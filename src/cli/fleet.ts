// `svc fleet` (docs/cli.md "svc fleet"). `fleet nodes` reads the bucket directly: the node records
// under `_svc/fleet/nodes/` and the freeze record, no node needed. STATE is the record's state, or
// `dead` once the node stopped beating (the liveness rule, docs/fleet.md "Liveness").

import type { Command } from 'commander';
import { keys } from '../registry/keys.ts';
import { isNodeLive } from '../registry/liveness.ts';
import type { FreezeRecord, NodeRecord } from '../registry/records.ts';
import { getJson, type Store } from '../store/store.ts';
import { addBucketFlags, addRemoteFlags, withBucket } from './flags.ts';
import { fleetFreeze, fleetUnfreeze } from './freeze.ts';
import { say, table } from './output.ts';

export function registerFleet(program: Command): void {
  const fleet = program.command('fleet').description('The fleet: nodes and the deploy freeze');
  addBucketFlags(fleet.command('nodes').description('List the nodes of the fleet (reads the bucket)'))
    .option('--json', 'Print records as JSON')
    .action((flags: Record<string, unknown>) => fleetNodes(flags));
  addRemoteFlags(fleet.command('freeze').description('Refuse deploys fleet-wide (admin)'))
    .option('--reason <line>', 'Why, at most 200 characters on one line')
    .action((flags: Parameters<typeof fleetFreeze>[0]) => fleetFreeze(flags));
  addRemoteFlags(fleet.command('unfreeze').description('Accept deploys again (admin)')).action(
    (flags: Parameters<typeof fleetUnfreeze>[0]) => fleetUnfreeze(flags),
  );
}

/** One row of `svc fleet nodes` (the JSON carries the same rows). */
export interface NodeRow {
  node: string;
  state: NodeRecord['state'] | 'dead';
  /** Last heartbeat, ISO time, and its age in whole seconds when read. */
  seen: string;
  seenSecondsAgo: number;
  api: string;
  labels: Record<string, string>;
  versions: { svc?: string; cell?: string };
}

async function fleetNodes(flags: Record<string, unknown>): Promise<void> {
  await withBucket(flags, async (store) => {
    const [records, freeze] = await Promise.all([
      readNodeRecords(store),
      getJson<FreezeRecord>(store, keys.freeze),
    ]);
    const rows = nodeRows(records, Date.now());
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ nodes: rows }, null, 2)}\n`);
      return;
    }
    for (const line of renderNodes(rows, freeze?.value ?? null)) say(line);
  });
}

/** Every node record in the bucket (unreadable ones left out). */
export async function readNodeRecords(store: Store): Promise<NodeRecord[]> {
  const listing = await store.list(keys.nodeRecordsPrefix, { recursive: false });
  const found = await Promise.all(
    listing.objects
      .filter((o) => o.key.endsWith('.json'))
      .map((o) => getJson<NodeRecord>(store, o.key).catch(() => null)),
  );
  return found.filter((f) => f !== null).map((f) => f.value);
}

/** Rows in node id order. */
export function nodeRows(records: readonly NodeRecord[], nowMs: number): NodeRow[] {
  return [...records]
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((r) => ({
      node: r.id,
      state: isNodeLive(r, nowMs) ? r.state : 'dead',
      seen: new Date(r.beatMs).toISOString(),
      seenSecondsAgo: Math.max(0, Math.round((nowMs - r.beatMs) / 1000)),
      api: r.advertise,
      labels: r.labels ?? {},
      versions: {
        ...(r.versions?.svc ? { svc: r.versions.svc } : {}),
        ...(r.versions?.cell ? { cell: r.versions.cell } : {}),
      },
    }));
}

/** The version lines (one per binary, versions newest first), the freeze line, then the table. */
export function renderNodes(rows: readonly NodeRow[], freeze: FreezeRecord | null): string[] {
  const lines: string[] = [];
  for (const binary of ['svc', 'cell'] as const) {
    const counts = new Map<string, number>();
    for (const row of rows) {
      const version = row.versions[binary];
      if (version) counts.set(version, (counts.get(version) ?? 0) + 1);
    }
    if (counts.size === 0) continue;
    const parts = [...counts]
      .sort(([a], [b]) => compareVersions(b, a))
      .map(([version, n]) => `${version} (${n} node${n === 1 ? '' : 's'})`);
    lines.push(`${binary}: ${parts.join(', ')}`);
  }
  if (freeze) {
    lines.push(
      `deploys frozen since ${freeze.frozenAt} by ${freeze.by}${freeze.reason ? `: ${freeze.reason}` : ''}`,
    );
  }
  const cells = rows.map((r) => [
    r.node,
    r.state,
    `${r.seenSecondsAgo}s ago`,
    r.api,
    r.versions.cell ?? '-',
    r.versions.svc ?? '-',
    Object.entries(r.labels)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${k}=${v}`)
      .join(',') || '-',
  ]);
  lines.push(...table(['NODE', 'STATE', 'SEEN', 'API', 'CELL', 'SVC', 'LABELS'], cells));
  return lines;
}

/** Dotted versions compared part by part, numerically where both parts are numbers. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/);
  const pb = b.split(/[.+-]/);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? '';
    const y = pb[i] ?? '';
    if (x === y) continue;
    const nx = Number(x);
    const ny = Number(y);
    if (x !== '' && y !== '' && Number.isFinite(nx) && Number.isFinite(ny)) return nx - ny;
    return x < y ? -1 : 1;
  }
  return 0;
}
