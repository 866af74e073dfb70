// What a runtime process reports to its node (docs/observability.md "Events", `cron.ran`;
// docs/runtime.md "Cron triggers"): one JSON object a line on the process's stdout, which the
// runtime's front alone writes (its request spans go there too; the worker's own output goes to
// stderr, so a worker cannot forge a report). The supervisor hands each stdout chunk to a reader
// per process; the reader records each cron run as an event, for the process's application and
// this node, and logs it. A report is told by the start of its line, so spans are not parsed.
//
// Only known kinds are taken, field by field, so a report names nothing the runtime may not say.

import type { Logger } from 'pino';
import type { EventSink } from './events.ts';

/** How a cron run report's line starts (the front writes `kind` first). */
export const CRON_RUN_LINE = '{"kind":"cron.ran"';
/** The longest report line read; a longer one is dropped whole (a report is a few hundred bytes). */
export const MAX_REPORT_BYTES = 16 * 1024;
/** The most of an exception's message an event and a log line carry. */
export const MAX_ERROR_CHARS = 2_000;

/** A cron run's event, as docs/observability.md lists it. */
export interface CronRun {
  kind: 'cron.ran';
  application: string;
  cron: string;
  /** The scheduled time, ISO-8601. */
  scheduled: string;
  deployment: string;
  /** As workerd reports it: `ok`, `exception`, `exceededCpu`, ... */
  outcome: string;
  /** The exception's `Name: message`, when the handler threw. */
  error?: string;
  durationMs: number;
}

/** The cron run a report line states, or null when the line is not one (not JSON, wrong fields). */
export function cronRunOf(application: string, line: string): CronRun | null {
  let report: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
    report = parsed as Record<string, unknown>;
  } catch {
    return null;
  }
  const { kind, cron, scheduledMs, deployment, outcome, error, durationMs } = report;
  if (kind !== 'cron.ran' || typeof cron !== 'string' || typeof deployment !== 'string') return null;
  if (typeof outcome !== 'string' || outcome === '') return null;
  if (typeof scheduledMs !== 'number' || !Number.isSafeInteger(scheduledMs) || scheduledMs < 0) return null;
  if (error !== undefined && typeof error !== 'string') return null;
  return {
    kind,
    application,
    cron: cron.slice(0, 200),
    scheduled: new Date(scheduledMs).toISOString(),
    deployment: deployment.slice(0, 200),
    outcome: outcome.slice(0, 100),
    ...(error ? { error: error.slice(0, MAX_ERROR_CHARS) } : {}),
    durationMs: typeof durationMs === 'number' && durationMs >= 0 ? Math.round(durationMs) : 0,
  };
}

/** A reader of one process's reports: feed it the descriptor's chunks as they come. */
export function runtimeReportReader(
  application: string,
  events: EventSink | undefined,
  log: Pick<Logger, 'info' | 'warn'>,
): (chunk: Buffer) => void {
  let pending = '';
  let overlong = false;
  return (chunk) => {
    pending += chunk.toString('utf8');
    for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n')) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      if (overlong) {
        overlong = false; // the end of a line already dropped
        continue;
      }
      record(application, line, events, log);
    }
    if (pending.length > MAX_REPORT_BYTES) {
      pending = '';
      overlong = true;
    }
  };
}

function record(
  application: string,
  line: string,
  events: EventSink | undefined,
  log: Pick<Logger, 'info' | 'warn'>,
): void {
  if (!line.startsWith(CRON_RUN_LINE)) return; // a span, or a runtime's own line: not a report
  const run = cronRunOf(application, line);
  if (run === null) {
    log.warn(
      { application, report: line.slice(0, 200) },
      'unreadable cron run report from the runtime, ignored',
    );
    return;
  }
  events?.emit({ ...run });
  const { kind: _kind, ...fields } = run;
  if (run.outcome === 'ok') log.info(fields, 'cron ran');
  else log.warn(fields, 'cron ran and failed');
}
