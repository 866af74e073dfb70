// Long polls (docs/api.md "Waiting for a change"): `GET /v1/deploys/:id?wait=<s>&state=<state>`
// holds its answer until the deploy is in another state than the one named, and
// `GET /v1/applications/:name?wait=<s>&serving=<deployment>` until a process is ready on that
// deployment or the application's processes change; both answer when the wait ends. A node that
// knows nothing of `wait` answers at once, so a caller keeps its own interval between polls then.
//
// A deploy this node runs is watched in memory: its record writer tells each record as it is
// written. Any other deploy is re-read from the bucket once a second, no more often than a caller
// polling it would. Processes are looked at in memory (the supervisor's and the node records this
// node keeps) every PROCESS_CHECK_MS: a waiting request costs no bucket read.

import type { ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { invalidInput } from '../../problem.ts';
import { VERSION_PATTERN } from '../../runtime-tools/layout.ts';
import type { NodeContext, NodeProcess } from '../context.ts';
import { type DeployRecord, type DeployState, type DeployStatus, isTerminal, statusOf } from './records.ts';

/**
 * Set on an answer to a request with `wait`: `changed` when the answer differs from what the
 * caller waited on (a change ended the wait, or had come before it), else `unchanged` (the wait
 * ran out, or nothing can change). A caller tells by it a node that held its answer from one that
 * ignores `wait` and answers at once (without the header), whose polls it spaces itself.
 */
export const WAIT_HEADER = 'x-svc-wait';

/** The longest wait a caller may ask for, in seconds: well inside any client's or proxy's idle timeout. */
export const MAX_WAIT_S = 30;
/** How often a deploy this node does not run is re-read while a caller waits on it. */
const REREAD_MS = 1_000;
/** How often the application's processes are looked at while a caller waits on them. */
const PROCESS_CHECK_MS = 20;

const DEPLOY_STATES: readonly DeployState[] = ['accepted', 'uploading', 'deployed', 'failed'];

/** `?wait=`: how long to hold the answer, in ms; undefined when not asked. */
export function waitFromQuery(query: unknown): number | undefined {
  const value = queryValue(query, 'wait');
  if (value === undefined) return undefined;
  if (!/^\d{1,2}$/.test(value) || Number(value) > MAX_WAIT_S) {
    throw invalidInput(
      'Malformed request',
      `wait is a whole number of seconds from 0 to ${MAX_WAIT_S}, not ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return Number(value) * 1_000;
}

/** `?state=`: the deploy state the caller last saw; undefined when not given. */
export function stateFromQuery(query: unknown): DeployState | undefined {
  const value = queryValue(query, 'state');
  if (value === undefined) return undefined;
  if (!(DEPLOY_STATES as readonly string[]).includes(value)) {
    throw invalidInput(
      'Malformed request',
      `state is one of ${DEPLOY_STATES.join(', ')}, not ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return value as DeployState;
}

/** `?serving=`: the deployment the caller waits to see served; undefined when not given. */
export function servingFromQuery(query: unknown): string | undefined {
  const value = queryValue(query, 'serving');
  if (value === undefined) return undefined;
  if (!VERSION_PATTERN.test(value)) {
    throw invalidInput(
      'Malformed request',
      `serving names a deployment (1 to 64 lowercase hex digits), not ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return value;
}

/** A query parameter given at most once; given twice is malformed. */
function queryValue(query: unknown, name: string): string | undefined {
  const value = (query as Record<string, unknown> | undefined)?.[name];
  if (value === undefined || typeof value === 'string') return value;
  throw invalidInput('Malformed request', `give ${name} at most once`);
}

/** Aborted when the caller goes away before its answer is sent: a wait for it ends. */
export function abandoned(response: ServerResponse): AbortSignal {
  const controller = new AbortController();
  response.once('close', () => controller.abort());
  return controller.signal;
}

export interface DeployWait {
  id: string;
  /** The status the request found when it arrived. */
  status: DeployStatus;
  /** The state the caller last saw (the state found, when it named none). */
  from: DeployState;
  waitMs: number;
  /** Aborted when the caller left. */
  gone: AbortSignal;
  /** Reads and judges the record as a poll does. */
  reread: () => Promise<DeployStatus>;
}

/**
 * The deploy's status once it is in another state than `from`, or when the wait ends. A terminal
 * state never changes, so it is answered at once.
 */
export async function awaitDeployChange(ctx: NodeContext, wait: DeployWait): Promise<DeployStatus> {
  const { status, from } = wait;
  if (wait.waitMs === 0 || status.state !== from || isTerminal(status.state)) return status;
  const signal = AbortSignal.any([wait.gone, AbortSignal.timeout(wait.waitMs)]);
  // The record of a deploy this node runs says by itself that the node works on it: as a poll
  // judges it, it stands as written.
  const own = ownRecordChange(ctx, wait.id, from, signal);
  if (own) return statusOf(await own);
  let current = status;
  while (current.state === from) {
    const due = await delay(REREAD_MS, true, { signal }).catch(() => false);
    if (!due) break;
    current = await wait.reread();
  }
  return current;
}

/**
 * The record of a deploy this node runs, once one in another state than `from` is written or the
 * signal aborts (then the record as it stands); null when this node does not run the deploy.
 */
function ownRecordChange(
  ctx: NodeContext,
  id: string,
  from: DeployState,
  signal: AbortSignal,
): Promise<DeployRecord> | null {
  const { promise, resolve } = Promise.withResolvers<DeployRecord>();
  let latest: DeployRecord | undefined;
  const watching = ctx.deploys?.watchRecord(id, (record) => {
    latest = record;
    if (record.state !== from) resolve(record);
  });
  if (!watching) return null;
  latest ??= watching.record;
  if (latest.state !== from) resolve(latest);
  const ended = () => resolve(latest!);
  if (signal.aborted) ended();
  signal.addEventListener('abort', ended, { once: true });
  return promise.finally(() => {
    watching.stop();
    signal.removeEventListener('abort', ended);
  });
}

/** Where an application runs, as GET /v1/applications/:name answers it beside the record. */
export interface ProcessView {
  processes: NodeProcess[];
  placement?: { state: string; nodes: string[] };
}

/**
 * The view once a process is ready on `serving` (or on a deployment it does not name), or once
 * the view differs from the one found when the request arrived, or when the wait ends.
 */
export async function awaitProcessChange(
  view: () => ProcessView,
  serving: string | undefined,
  waitMs: number,
  gone: AbortSignal,
): Promise<{ view: ProcessView; changed: boolean }> {
  const first = view();
  if (isServing(first, serving)) return { view: first, changed: true };
  if (waitMs === 0) return { view: first, changed: false };
  const before = JSON.stringify(first);
  const signal = AbortSignal.any([gone, AbortSignal.timeout(waitMs)]);
  for (;;) {
    const due = await delay(PROCESS_CHECK_MS, true, { signal }).catch(() => false);
    const current = view();
    const changed = isServing(current, serving) || JSON.stringify(current) !== before;
    if (changed || !due) return { view: current, changed };
  }
}

function isServing(view: ProcessView, serving: string | undefined): boolean {
  if (serving === undefined) return false;
  return view.processes.some((p) => p.ready && (p.deployment === undefined || p.deployment === serving));
}
