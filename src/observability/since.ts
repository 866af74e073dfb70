// `--since` and `--limit` of `svc metrics` and `svc traces`: a duration back from now (`90s`,
// `15m`, `1h`, `7d`) or an ISO-8601 instant (`2026-11-23`, `2026-11-23T14:00Z`,
// `2026-11-23T14:00:00.5+01:00`); a whole number >= 1. Anything else is `invalid-input`.

import { Problem } from '../problem.ts';

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const ISO_INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** The instant (ms) a `--since` value names, at `nowMs`. */
export function parseSince(text: string, nowMs: number): number {
  const refuse = (why: string) =>
    new Problem(
      'invalid-input',
      'Invalid --since',
      `${JSON.stringify(text)} ${why}; give a duration such as 90s, 15m, 1h or 7d, or an ISO-8601 instant such as 2026-11-23T14:00:00Z`,
    );
  const duration = /^(\d{1,15})([smhd])$/.exec(text);
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2]!]!;
    if (ms === 0) throw refuse('is an empty window');
    if (!Number.isSafeInteger(ms) || ms > nowMs) throw refuse('reaches back before 1970');
    return nowMs - ms;
  }
  const iso = ISO_INSTANT.exec(text);
  if (!iso) throw refuse('is neither a duration nor an instant');
  const [, y, mo, d, h = '00', mi = '00', sec = '00', , zone = 'Z'] = iso;
  const ms = Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text);
  // Date.parse rolls 2026-02-30 over to March and accepts hour 24: refuse what is not a real time.
  const real =
    Number.isFinite(ms) &&
    Number(mo) >= 1 &&
    Number(mo) <= 12 &&
    Number(d) >= 1 &&
    Number(d) <= daysIn(Number(y), Number(mo)) &&
    Number(h) <= 23 &&
    Number(mi) <= 59 &&
    Number(sec) <= 59 &&
    validZone(zone);
  if (!real) throw refuse('is not a real date and time');
  if (ms > nowMs) throw refuse('is in the future');
  return ms;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function validZone(zone: string): boolean {
  if (zone === 'Z') return true;
  return Number(zone.slice(1, 3)) <= 23 && Number(zone.slice(4, 6)) <= 59;
}

/** `--limit`: a whole number >= 1. */
export function parseLimit(text: string): number {
  const n = /^\d{1,15}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new Problem(
      'invalid-input',
      'Invalid --limit',
      `${JSON.stringify(text)} is not a whole number of events >= 1`,
    );
  }
  return n;
}
