// Cron schedules (docs/runtime.md "Cron triggers"): Workers' five fields (minute, hour, day of
// month, month, day of week), in UTC, parsed by croner. svc checks a config's `triggers.crons`
// with these before it uploads; the runtime computes its firing times with the same parser.

import { Cron } from 'croner';

/** Why `expression` is not a five-field cron expression; null when it is one. */
export function cronProblem(expression: string): string | null {
  if (expression.trim().split(/\s+/).length !== 5) {
    return 'give five fields: minute, hour, day of month, month, day of week (UTC)';
  }
  try {
    parseCron(expression);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

function parseCron(expression: string): Cron {
  return new Cron(expression.trim(), { mode: '5-part', timezone: 'UTC', paused: true });
}

/** The first scheduled time strictly after `afterMs`; null when the schedule never fires again. */
export function nextScheduledMs(expression: string, afterMs: number): number | null {
  const next = parseCron(expression).nextRun(new Date(afterMs));
  return next ? next.getTime() : null;
}

/** The scheduled time `count` fires before `scheduledMs`; null when there is none. */
export function earlierScheduledMs(expression: string, scheduledMs: number, count: number): number | null {
  const runs = parseCron(expression).previousRuns(count, new Date(scheduledMs));
  return runs.length === count ? runs[count - 1]!.getTime() : null;
}
