// The live tail's records and filters (docs/observability.md "svc tail"). A runtime process writes
// each record on its tail socket as `svc tail --format json` prints it (runtime/front/tail.go makes
// them: the keys of `wrangler tail`'s JSON records plus `kind` and `node`); the node passes the lines
// on as they are, parsing them only to apply the filters the operator asked for. The same filters
// are applied on every node, so a peer sends only what the operator asked for. The node's own lines
// (attached, lost, dropped) are made here in the same shape.

import { Problem } from '../problem.ts';
import { isNodeId } from '../registry/names.ts';

/** One record of the tail, in wrangler's shape plus `kind`, `node` and svc's own fields. */
export interface TailMessage {
  kind: 'request' | 'log' | 'exception' | 'runtime' | 'dropped';
  node: string;
  scriptName: string;
  outcome: string;
  eventTimestamp: number;
  event: { request: { url: string; method: string }; response: { status: number } } | null;
  logs: { message: unknown[]; level: string; timestamp: number }[];
  exceptions: { name: string; message: string; timestamp: number; stack?: string }[];
  diagnosticsChannelEvents: unknown[];
  /** request: how long the answer took, in ms; and the deployment that served it. */
  durationMs?: number;
  deployment?: string;
  /** runtime: the line; dropped: what was lost. */
  message?: string;
  /** dropped: how many records were lost. */
  dropped?: number;
}

const KINDS = new Set(['request', 'log', 'exception', 'runtime', 'dropped']);

/** The record a line of the tail holds; null for a line that is none (the socket's hello). */
export function parseMessage(line: string): TailMessage | null {
  try {
    const m = JSON.parse(line) as TailMessage;
    return typeof m === 'object' && m !== null && KINDS.has(m.kind) ? m : null;
  } catch {
    return null;
  }
}

function message(
  kind: TailMessage['kind'],
  where: { node: string; application: string },
  ts: number,
): TailMessage {
  return {
    kind,
    node: where.node,
    scriptName: where.application,
    outcome: 'ok',
    eventTimestamp: ts,
    event: null,
    logs: [],
    exceptions: [],
    diagnosticsChannelEvents: [],
  };
}

/** A line of the tail's own (connected, lost, reconnecting), as a runtime record. */
export function runtimeMessage(where: { node: string; application: string }, text: string): TailMessage {
  const m = message('runtime', where, Date.now());
  m.message = text;
  return m;
}

/** `count` records that `who` could not pass on because this tail read too slowly. */
export function droppedMessage(
  where: { node: string; application: string },
  count: number,
  who: string,
  ts = Date.now(),
): TailMessage {
  const m = message('dropped', where, ts);
  m.dropped = count;
  m.message = `${count} record${count === 1 ? '' : 's'} dropped by ${who} on node ${where.node}: this tail read too slowly`;
  return m;
}

/** Whether the filters keep everything but other nodes (then lines need no parsing). */
export function keepsAll(filters: TailFilters): boolean {
  return (
    filters.status === undefined &&
    filters.method === undefined &&
    filters.search === undefined &&
    filters.samplingRate === undefined
  );
}

/** What the operator asked to see; absent fields keep everything. */
export interface TailFilters {
  status?: ('ok' | 'error' | 'canceled')[];
  method?: string[];
  search?: string;
  samplingRate?: number;
  node?: string[];
}

const STATUSES = ['ok', 'error', 'canceled'] as const;

function list(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return (Array.isArray(value) ? value : [value]).flatMap((v) => v.split(',')).filter((v) => v !== '');
}

function one(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.at(-1) : value;
}

/** The filters of a tail request's query; a bad one is refused naming the flag that sets it. */
export function parseFilters(query: Record<string, string | string[] | undefined>): TailFilters {
  const filters: TailFilters = {};
  const status = list(query.status);
  if (status?.length) {
    const bad = status.find((s) => !(STATUSES as readonly string[]).includes(s));
    if (bad !== undefined)
      throw new Problem(
        'invalid-input',
        'Invalid --status',
        `${JSON.stringify(bad)} is none of ok, error, canceled`,
      );
    filters.status = [...new Set(status)] as TailFilters['status'];
  }
  const method = list(query.method);
  if (method?.length) {
    const bad = method.find((m) => !/^[A-Za-z]{1,20}$/.test(m));
    if (bad !== undefined)
      throw new Problem('invalid-input', 'Invalid --method', `${JSON.stringify(bad)} is no HTTP method`);
    filters.method = method.map((m) => m.toUpperCase());
  }
  const search = one(query.search);
  if (search !== undefined && search !== '') {
    if (search.length > 1024)
      throw new Problem('invalid-input', 'Invalid --search', 'the text is over 1024 characters');
    filters.search = search;
  }
  const rate = one(query.sampling_rate);
  if (rate !== undefined) {
    const value = Number(rate);
    if (rate.trim() === '' || !Number.isFinite(value) || value <= 0 || value > 1)
      throw new Problem(
        'invalid-input',
        'Invalid --sampling-rate',
        `${JSON.stringify(rate)} is no number above 0 and at most 1`,
      );
    filters.samplingRate = value;
  }
  const node = list(query.node);
  if (node?.length) {
    const bad = node.find((n) => !isNodeId(n));
    if (bad !== undefined)
      throw new Problem('invalid-input', 'Invalid --node-id', `${JSON.stringify(bad)} is no node id`);
    filters.node = node;
  }
  return filters;
}

/** The query that asks a node for the same filters. */
export function filterQuery(filters: TailFilters): URLSearchParams {
  const query = new URLSearchParams();
  for (const s of filters.status ?? []) query.append('status', s);
  for (const m of filters.method ?? []) query.append('method', m);
  if (filters.search !== undefined) query.set('search', filters.search);
  if (filters.samplingRate !== undefined) query.set('sampling_rate', String(filters.samplingRate));
  for (const n of filters.node ?? []) query.append('node', n);
  return query;
}

/** wrangler's status words: `error` is every outcome but ok and canceled. */
function statusOf(outcome: string): 'ok' | 'error' | 'canceled' {
  return outcome === 'ok' ? 'ok' : outcome === 'canceled' ? 'canceled' : 'error';
}

/**
 * Whether the tail shows this record. The tail's own lines and the runtime's always pass. A
 * console line belongs to no request the runtime can name, so a status or method filter holds
 * console lines back; an uncaught exception passes `--status error`. The search looks in the
 * URL, the console line and the exception; the sampling keeps each request or line alike.
 */
export function keeps(m: TailMessage, filters: TailFilters, random: () => number = Math.random): boolean {
  if (m.kind === 'runtime' || m.kind === 'dropped') return true;
  if (filters.status) {
    if (m.kind === 'log') return false;
    if (!filters.status.includes(statusOf(m.outcome))) return false;
  }
  if (filters.method) {
    if (m.kind !== 'request' || !filters.method.includes(m.event?.request.method ?? '')) return false;
  }
  if (filters.search !== undefined && !searchedText(m).includes(filters.search)) return false;
  if (filters.samplingRate !== undefined && random() >= filters.samplingRate) return false;
  return true;
}

function searchedText(m: TailMessage): string {
  if (m.kind === 'request') return m.event?.request.url ?? '';
  if (m.kind === 'log') return m.logs.map((l) => l.message.join(' ')).join('\n');
  return m.exceptions.map((e) => `${e.name}: ${e.message}`).join('\n');
}
