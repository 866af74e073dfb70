// `svc metrics` and `svc traces`: read straight from the bucket, no node needed
// (docs/observability.md).

import type { Command } from 'commander';
import type { FleetEvent } from '../observability/events.ts';
import { type MetricsResult, readMetrics } from '../observability/metrics.ts';
import { parseLimit, parseSince } from '../observability/since.ts';
import { readTraces, type TraceResult } from '../observability/traces.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { addBucketFlags, addNameFlags, withBucket } from './flags.ts';
import { formatBytes, say, table, warn } from './output.ts';

interface ObserveFlags extends Record<string, unknown> {
  name?: string;
  env?: string;
  since: string;
  limit?: string;
  all?: boolean;
  json?: boolean;
}

export function registerMetrics(program: Command): void {
  addNameFlags(addBucketFlags(program.command('metrics').description('Per-application served totals')), false)
    .option('--since <when>', 'Duration such as 90s, 15m, 1h, 7d, or an ISO-8601 instant', '1h')
    .option('--json', 'Print JSON')
    .action((flags: ObserveFlags) => metricsCommand(flags));
}

export function registerTraces(program: Command): void {
  addNameFlags(addBucketFlags(program.command('traces').description('Fleet events in order')), false)
    .option('--since <when>', 'Duration or ISO-8601 instant', '1h')
    .option('--limit <n>', 'Newest events kept', '200')
    .option('--all', "Include the reconcile loop's own passes")
    .option('--json', 'Print JSON')
    .action((flags: ObserveFlags) => tracesCommand(flags));
}

/** `--name`/`--env` when given; omitted means every application. */
function applicationOf(flags: ObserveFlags): string | undefined {
  if (flags.name === undefined && flags.env === undefined) return undefined;
  return resolveApplicationName(flags.name, flags.env);
}

async function tracesCommand(flags: ObserveFlags): Promise<void> {
  const sinceMs = parseSince(flags.since, Date.now());
  const limit = parseLimit(flags.limit ?? '200');
  const application = applicationOf(flags);
  const all = flags.all === true;
  const result = await withBucket(flags, (store) =>
    readTraces(store, { sinceMs, limit, all, ...(application ? { application } : {}) }),
  );
  if (result.unreadable) warn(`${result.unreadable} event batches could not be read and are left out`);
  const since = new Date(sinceMs).toISOString();
  if (flags.json) {
    const { events, heldBack, beyondLimit } = result;
    say(JSON.stringify({ since, limit, events, heldBack, beyondLimit }, null, 2));
    return;
  }
  for (const line of renderTraces(result, { since, limit, all, application })) say(line);
}

const EVENT_COLUMNS = new Set(['at', 'node', 'kind', 'application', 'actor', 'tail']);

/** The readable table: one row per event, a process's output tail indented below its row. */
export function renderTraces(
  result: Omit<TraceResult, 'unreadable'>,
  context: { since: string; limit: number; all: boolean; application?: string | undefined },
): string[] {
  const lines: string[] = [];
  const of = context.application ? ` of ${context.application}` : '';
  if (result.events.length === 0) lines.push(`No events${of} since ${context.since}.`);
  else {
    const rows = result.events.map((e) => [
      e.at,
      e.node,
      e.kind,
      e.application ?? '-',
      e.actor ?? '-',
      detailOf(e),
    ]);
    const rendered = table(['TIME', 'NODE', 'KIND', 'APPLICATION', 'ACTOR', 'DETAIL'], rows);
    lines.push(rendered[0]!);
    result.events.forEach((event, i) => {
      lines.push(rendered[i + 1]!);
      if (typeof event.tail === 'string' && event.tail !== '') {
        for (const line of event.tail.replace(/\n$/, '').split('\n')) lines.push(`    | ${line}`);
      }
    });
    const older = result.beyondLimit
      ? `; ${result.beyondLimit} older left out by --limit ${context.limit}`
      : '';
    lines.push(`${result.events.length} events${of} since ${context.since}${older}.`);
  }
  lines.push(
    context.all
      ? 'Reconcile passes included (--all): none held back.'
      : `${result.heldBack} reconcile passes held back (--all includes them).`,
  );
  return lines;
}

function detailOf(event: FleetEvent): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(event)) {
    if (EVENT_COLUMNS.has(key) || value === undefined) continue;
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    parts.push(`${key}=${/[\s"]/.test(text) && typeof value === 'string' ? JSON.stringify(text) : text}`);
  }
  return parts.join(' ');
}

async function metricsCommand(flags: ObserveFlags): Promise<void> {
  const sinceMs = parseSince(flags.since, Date.now());
  const application = applicationOf(flags);
  const result = await withBucket(flags, (store) =>
    readMetrics(store, { sinceMs, ...(application ? { application } : {}) }),
  );
  const since = new Date(sinceMs).toISOString();
  if (flags.json) {
    say(JSON.stringify({ since, ...result }, null, 2));
    return;
  }
  for (const line of renderMetrics(result, since, application)) say(line);
}

export function renderMetrics(result: MetricsResult, since: string, application?: string): string[] {
  const silence = result.silence;
  const of = application ? ` for ${application}` : '';
  if (silence?.kind === 'never-written') {
    return [
      'No metrics were ever written: no node follows an ingress access log (svc sail --observability --ingress-access-log <file>).',
    ];
  }
  if (silence?.kind === 'outside-window') {
    return [
      `No metrics written since ${since}: the newest snapshot is from ${silence.newestAt} (node ${silence.node}). Is any node with --ingress-access-log running? A longer --since shows older totals.`,
    ];
  }
  if (silence?.kind === 'no-requests') {
    return [
      `Nodes ${silence.nodes.join(', ')} observed themselves since ${since} but counted no requests${of}.`,
    ];
  }
  const ms = (v: number | null) => (v === null ? '-' : `<=${v}ms`);
  const rows = result.applications.map((a) => [
    a.application,
    String(a.requests),
    String(a.status['2xx']),
    String(a.status['3xx']),
    String(a.status['4xx']),
    String(a.status['5xx']),
    `${(a.errorRate * 100).toFixed(1)}%`,
    formatBytes(a.bytesIn),
    formatBytes(a.bytesOut),
    ms(a.latencyMs.p50),
    ms(a.latencyMs.p90),
    ms(a.latencyMs.p99),
  ]);
  return [
    `Served since ${since}, counted by ${result.nodes.join(', ')}:`,
    ...table(
      ['APPLICATION', 'REQUESTS', '2XX', '3XX', '4XX', '5XX', 'ERRORS', 'IN', 'OUT', 'P50', 'P90', 'P99'],
      rows,
    ),
  ];
}
