// `svc traces`: the fleet's events of a window, in order, newest `limit` kept. The reconcile
// loop's own passes are held back unless `all`, and how many were is always told.

import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import { type FleetEvent, RECONCILE_PASS } from './events.ts';
import { hoursFrom, listHours, listShardObjects, readJsonObjects } from './read.ts';

export interface TraceQuery {
  sinceMs: number;
  application?: string;
  limit: number;
  all: boolean;
}

export interface TraceResult {
  /** Oldest first. */
  events: FleetEvent[];
  /** Reconcile passes of the window left out because `all` was not asked for. */
  heldBack: number;
  /** Older events of the window left out by the limit. */
  beyondLimit: number;
  /** Batch objects that could not be read (vanished or not JSON). */
  unreadable: number;
}

export async function readTraces(store: Store, query: TraceQuery): Promise<TraceResult> {
  const hours = hoursFrom(await listHours(store, keys.eventsPrefix), query.sinceMs);
  // A batch is written after its events: one written before the window holds none of them.
  const batches = (await listShardObjects(store, keys.eventsPrefix, hours)).filter(
    (b) => b.ms >= query.sinceMs,
  );
  const bodies = await readJsonObjects(
    store,
    batches.map((b) => b.key),
  );
  const events: FleetEvent[] = [];
  let unreadable = 0;
  for (const body of bodies) {
    const batch = body as { events?: unknown } | null;
    if (!batch || !Array.isArray(batch.events)) {
      unreadable++;
      continue;
    }
    for (const event of batch.events) if (isEvent(event)) events.push(event);
  }
  return { ...selectEvents(events, query), unreadable };
}

/** The pure half: window, application, held-back passes, order and limit. */
export function selectEvents(
  events: readonly FleetEvent[],
  query: TraceQuery,
): Omit<TraceResult, 'unreadable'> {
  let heldBack = 0;
  const chosen: FleetEvent[] = [];
  for (const event of events) {
    if (Date.parse(event.at) < query.sinceMs) continue;
    if (query.application !== undefined && event.application !== query.application) continue;
    if (event.kind === RECONCILE_PASS && !query.all) {
      heldBack++;
      continue;
    }
    chosen.push(event);
  }
  chosen.sort(
    (a, b) => Date.parse(a.at) - Date.parse(b.at) || (a.node < b.node ? -1 : a.node > b.node ? 1 : 0),
  );
  const beyondLimit = Math.max(0, chosen.length - query.limit);
  return { events: chosen.slice(beyondLimit), heldBack, beyondLimit };
}

function isEvent(value: unknown): value is FleetEvent {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.kind === 'string' &&
    typeof v.node === 'string' &&
    typeof v.at === 'string' &&
    Number.isFinite(Date.parse(v.at))
  );
}
