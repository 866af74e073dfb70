// Cron triggers (docs/runtime.md "Cron triggers"): the config's `triggers.crons` run the worker's
// `scheduled` handler once per scheduled time across the whole fleet, not once per node. Every
// `cell serve` replica of the application keeps a timer per schedule (in its front, from
// `nextCronTimes`); at a scheduled time each one tries a conditional create (`If-None-Match: *`)
// of the claim object for (schedule, time), and only the replica whose write lands runs the
// handler (`fireCron`, the runtime host's `cron-fire` op). It then records the outcome in the claim.
//
// Expressions and their times: src/runtime-tools/cron-schedule.ts (svc checks them at deploy).

import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { keys } from '../../src/registry/keys.ts';
import { cronProblem, earlierScheduledMs, nextScheduledMs } from '../../src/runtime-tools/cron-schedule.ts';
import { isCasConflict, type Store } from '../../src/store/store.ts';

/** How far back a claim is deleted by the replica that fires: claims of older times are not kept. */
export const CLAIMS_KEPT = 60;

/** The claim keys' name for a schedule: a short hash, since an expression holds spaces and `*`. */
export function cronId(expression: string): string {
  return createHash('sha256').update(expression.trim()).digest('hex').slice(0, 16);
}

/** What the claim object holds: who fired, and once known, how the handler ended. */
export interface CronClaim {
  cron: string;
  scheduled_ms: number;
  node: string;
  deployment: string;
  claimed_ms: number;
  outcome?: string;
  finished_ms?: number;
  error?: string;
}

/** Runs one scheduled event in the serving deployment; answers the handler's outcome. */
export type RunScheduled = (
  cron: string,
  scheduledMs: number,
) => Promise<{ outcome: string; error?: string }>;

export interface CronTarget {
  /** The deployment now serving. */
  deployment: string;
  run: RunScheduled;
}

/** Who fires: the application's bucket and this node. */
export interface CronFirer {
  store: Store;
  application: string;
  node: string;
  log: (line: string) => void;
}

/**
 * The next scheduled time of each valid expression after `afterMs` (null: it never fires again);
 * invalid ones are left out. The front keeps one timer per schedule from these (a timer fires at
 * its scheduled time, so no replica polls the bucket for crons).
 */
export function nextCronTimes(crons: readonly string[], afterMs: number): Record<string, number | null> {
  const next: Record<string, number | null> = {};
  for (const cron of crons) if (cronProblem(cron) === null) next[cron] = nextScheduledMs(cron, afterMs);
  return next;
}

/**
 * Claims (cron, time) for this replica and runs it in `target`; any other replica's claim wins
 * silently (null). Each scheduled time costs one conditional write per replica and one outcome write.
 */
export async function fireCron(
  firer: CronFirer,
  target: CronTarget,
  cron: string,
  scheduledMs: number,
): Promise<CronClaim | null> {
  const { store, log } = firer;
  const key = keys.runtimeCronClaim(firer.application, cronId(cron), scheduledMs);
  const claim: CronClaim = {
    cron,
    scheduled_ms: scheduledMs,
    node: firer.node,
    deployment: target.deployment,
    claimed_ms: Date.now(),
  };
  let etag: string;
  try {
    etag = await store.put(key, JSON.stringify(claim), { ifNoneMatch: '*' });
  } catch (err) {
    if (isCasConflict(err)) return null; // another replica fires this time
    log(`cell: cron ${JSON.stringify(cron)} at ${iso(scheduledMs)}: cannot claim ${key}: ${message(err)}`);
    return null;
  }
  let result: { outcome: string; error?: string };
  try {
    result = await target.run(cron, scheduledMs);
  } catch (err) {
    result = { outcome: 'exception', error: message(err) };
  }
  const done: CronClaim = { ...claim, ...result, finished_ms: Date.now() };
  // The outcome's one record for now: the claim object and this log line (the daemon keeps
  // the runtime's stderr), one place to emit an event from later.
  log(
    `cell: cron ${JSON.stringify(cron)} at ${iso(scheduledMs)} ran on ${firer.node} (${target.deployment}): ${done.outcome}${done.error ? `: ${done.error}` : ''}`,
  );
  await store
    .put(key, JSON.stringify(done), { ifMatch: etag })
    .catch((err) => log(`cell: cron outcome not recorded in ${key}: ${message(err)}`));
  const old = earlierScheduledMs(cron, scheduledMs, CLAIMS_KEPT);
  if (old !== null) {
    await store.delete(keys.runtimeCronClaim(firer.application, cronId(cron), old)).catch(() => {}); // gone already, or left for a later fire's clean-up: harmless
  }
  return done;
}

/** Runs the worker's `scheduled` handler once, through the trigger worker on `socketPath`. */
export function postScheduled(
  socketPath: string | null,
  cron: string,
  scheduledMs: number,
): Promise<{ outcome: string; error?: string }> {
  if (!socketPath)
    return Promise.resolve({ outcome: 'exception', error: 'the deployment has no cron triggers' });
  const query = new URLSearchParams({ cron, time: String(scheduledMs) });
  return new Promise((resolveRun, reject) => {
    const call = request(
      { socketPath, path: `/?${query}`, method: 'POST', headers: { host: 'localhost' } },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (c) => {
          body += c;
        });
        response.on('end', () => {
          try {
            const parsed = JSON.parse(body) as { outcome?: unknown; error?: unknown };
            resolveRun({
              outcome: typeof parsed.outcome === 'string' ? parsed.outcome : 'unknown',
              ...(typeof parsed.error === 'string' ? { error: parsed.error.slice(0, 2000) } : {}),
            });
          } catch {
            resolveRun({ outcome: 'exception', error: `the trigger answered ${response.statusCode}` });
          }
        });
      },
    );
    call.on('error', reject);
    call.end();
  });
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
