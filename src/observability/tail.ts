// The live tail's records and filters (docs/observability.md "svc tail"). A runtime process writes
// short records on its tail socket (runtime/front/tail.go); the node turns each into the record
// `wrangler tail --format json` prints (outcome, scriptName, exceptions, logs, eventTimestamp,
// event), adding which node it came from and what kind of line it is, and keeps those the
// filters ask for. The same filters are applied on every node, so a peer sends only what the
// operator asked for.

import { Problem } from '../problem.ts';
import { isNodeId } from '../registry/names.ts';

/** A line of a runtime process's tail socket. */
export interface FrontRecord {
  /** `hello` opens every connection (not a record of the tail). */
  kind: 'hello' | 'request' | 'log' | 'exception' | 'runtime' | 'dropped';
  ts: number;
  method?: string;
  url?: string;
  status?: number;
  durationMs?: number;
  outcome?: string;
  deployment?: string;
  level?: string;
  name?: string;
  message?: string;
  count?: number;
}

/** One record of the tail, in wrangler's shape plus `kind`, `node` and svc's own fields. */
export interface TailMessage {
  kind: Exclude<FrontRecord['kind'], 'hello'>;
  node: string;
  scriptName: string;
  outcome: string;
  eventTimestamp: number;
  event: { request: { url: string; method: string }; response: { status: number } } | null;
  logs: { message: unknown[]; level: string; timestamp: number }[];
  exceptions: { name: string; message: string; timestamp: number }[];
  diagnosticsChannelEvents: unknown[];
  /** request: how long the answer took, in ms; and the deployment that served it. */
  durationMs?: number;
  deployment?: string;
  /** runtime: the line; dropped: what was lost. */
  message?: string;
  /** dropped: how many records were lost. */
  dropped?: number;
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

/** The tail record of one line of the tail socket; null for a line that is none. */
export function fromFront(line: string, where: { node: string; application: string }): TailMessage | null {
  let r: FrontRecord;
  try {
    r = JSON.parse(line) as FrontRecord;
  } catch {
    return null;
  }
  if (typeof r !== 'object' || r === null || typeof r.ts !== 'number') return null;
  if (r.kind === 'hello') return null;
  const m = message(r.kind, where, r.ts);
  switch (r.kind) {
    case 'request':
      m.outcome = r.outcome ?? 'ok';
      m.event = {
        request: { url: r.url ?? '', method: r.method ?? '' },
        response: { status: r.status ?? 0 },
      };
      m.durationMs = r.durationMs ?? 0;
      if (r.deployment) m.deployment = r.deployment;
      return m;
    case 'log':
      m.logs = [{ message: [r.message ?? ''], level: r.level ?? 'log', timestamp: r.ts }];
      return m;
    case 'exception':
      m.outcome = 'exception';
      m.exceptions = [{ name: r.name ?? 'Error', message: r.message ?? '', timestamp: r.ts }];
      return m;
    case 'runtime':
      m.message = r.message ?? '';
      return m;
    case 'dropped':
      return droppedMessage(where, r.count ?? 0, 'the runtime process', r.ts);
    default:
      return null;
  }
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
