// Cron triggers (docs/runtime.md "Cron triggers"): the config's `triggers.crons` run the worker's
// `scheduled` handler once per scheduled time across the whole fleet, not once per node. Every
// `cell serve` replica of the application keeps a timer per schedule; at a scheduled time each one
// tries a conditional create (`If-None-Match: *`) of the claim object for (schedule, time), and
// only the replica whose write lands runs the handler. It then records the outcome in the claim.
//
// Expressions and their times: src/runtime-tools/cron-schedule.ts (svc checks them at deploy).

import { createHash } from 'node:crypto';
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
  /** The deployment now serving, or null while none is ready. */
  deployment: string;
  run: RunScheduled;
}

/**
 * One replica's timers. `setSchedules` is called whenever the serving deployment changes; a
 * timer fires at its scheduled time (Node timers never fire early), so no replica polls the
 * bucket: each scheduled time costs one conditional write per replica and one outcome write.
 */
export class CronScheduler {
  private readonly store: Store;
  private readonly application: string;
  private readonly node: string;
  private readonly log: (line: string) => void;
  private readonly target: () => CronTarget | null;
  private timers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(options: {
    store: Store;
    application: string;
    node: string;
    log: (line: string) => void;
    target: () => CronTarget | null;
  }) {
    this.store = options.store;
    this.application = options.application;
    this.node = options.node;
    this.log = options.log;
    this.target = options.target;
  }

  /** Replaces the schedules; schedules kept across a switch keep their timers. */
  setSchedules(crons: readonly string[]): void {
    const wanted = new Set(crons.filter((c) => cronProblem(c) === null));
    for (const [cron, timer] of this.timers) {
      if (!wanted.has(cron)) {
        clearTimeout(timer);
        this.timers.delete(cron);
      }
    }
    for (const cron of wanted) if (!this.timers.has(cron)) this.arm(cron, Date.now());
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  private arm(cron: string, afterMs: number): void {
    if (this.stopped) return;
    const next = nextScheduledMs(cron, afterMs);
    if (next === null) return;
    // setTimeout holds at most ~24.8 days; a longer wait re-arms on the way.
    const wait = Math.min(Math.max(0, next - Date.now()), 2 ** 31 - 1);
    const timer = setTimeout(() => {
      if (Date.now() < next) return this.arm(cron, afterMs);
      // The next time counts from this one, or from now when the process was held up past
      // several times: times missed while nothing ran are not made up.
      this.arm(cron, Math.max(next, Date.now() - 1000));
      void this.fire(cron, next);
    }, wait);
    timer.unref();
    this.timers.set(cron, timer);
  }

  /** Claims (cron, time) for this replica and runs it; any other replica's claim wins silently. */
  async fire(cron: string, scheduledMs: number): Promise<CronClaim | null> {
    const target = this.target();
    if (!target) return null; // no deployment ready here: a replica that has one claims it
    const key = keys.runtimeCronClaim(this.application, cronId(cron), scheduledMs);
    const claim: CronClaim = {
      cron,
      scheduled_ms: scheduledMs,
      node: this.node,
      deployment: target.deployment,
      claimed_ms: Date.now(),
    };
    let etag: string;
    try {
      etag = await this.store.put(key, JSON.stringify(claim), { ifNoneMatch: '*' });
    } catch (err) {
      if (isCasConflict(err)) return null; // another replica fires this time
      this.log(
        `cell: cron ${JSON.stringify(cron)} at ${iso(scheduledMs)}: cannot claim ${key}: ${message(err)}`,
      );
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
    this.log(
      `cell: cron ${JSON.stringify(cron)} at ${iso(scheduledMs)} ran on ${this.node} (${target.deployment}): ${done.outcome}${done.error ? `: ${done.error}` : ''}`,
    );
    await this.store
      .put(key, JSON.stringify(done), { ifMatch: etag })
      .catch((err) => this.log(`cell: cron outcome not recorded in ${key}: ${message(err)}`));
    const old = earlierScheduledMs(cron, scheduledMs, CLAIMS_KEPT);
    if (old !== null) {
      await this.store.delete(keys.runtimeCronClaim(this.application, cronId(cron), old)).catch(() => {}); // gone already, or left for a later fire's clean-up: harmless
    }
    return done;
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
