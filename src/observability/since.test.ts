import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isProblem } from '../problem.ts';
import { parseLimit, parseSince } from './since.ts';

const NOW = Date.parse('2026-11-23T15:00:00.000Z');

function refused(run: () => unknown, title: string): void {
  assert.throws(run, (err: unknown) => isProblem(err) && err.code === 'invalid-input' && err.title === title);
}

test('--since durations count back from now', () => {
  assert.equal(parseSince('90s', NOW), NOW - 90_000);
  assert.equal(parseSince('15m', NOW), NOW - 900_000);
  assert.equal(parseSince('1h', NOW), NOW - 3_600_000);
  assert.equal(parseSince('7d', NOW), NOW - 7 * 86_400_000);
});

test('--since ISO-8601 instants: date, minutes, seconds, fractions, offsets', () => {
  assert.equal(parseSince('2026-11-23', NOW), Date.parse('2026-11-23T00:00:00Z'));
  assert.equal(parseSince('2026-11-23T14:00Z', NOW), Date.parse('2026-11-23T14:00:00Z'));
  assert.equal(parseSince('2026-11-23T14:30:15.250Z', NOW), Date.parse('2026-11-23T14:30:15.250Z'));
  assert.equal(parseSince('2026-11-23T15:30:00+01:00', NOW), Date.parse('2026-11-23T14:30:00Z'));
});

test('--since refusals: empty window, future, unreal dates, other forms', () => {
  for (const bad of [
    '0s',
    '',
    '1',
    'h',
    '1w',
    '-1h',
    '1.5h',
    ' 1h',
    '1h ',
    '2026-02-30',
    '2026-13-01',
    '2026-11-23T24:00Z',
    '2026-11-23T14:00',
    '2027-01-01',
    '2026-11-23T14:00:00+24:00',
    'yesterday',
    '99999999999999999d',
  ]) {
    refused(() => parseSince(bad, NOW), 'Invalid --since');
  }
});

test('--since, any string: an instant at or before now, or invalid-input; never another failure', () => {
  const answersOrRefuses = (text: string) => {
    try {
      const ms = parseSince(text, NOW);
      assert.ok(Number.isFinite(ms) && ms <= NOW, `${text} -> ${ms}`);
    } catch (err) {
      assert.ok(isProblem(err) && err.code === 'invalid-input', `${text}: ${err}`);
    }
  };
  fc.assert(fc.property(fc.string({ maxLength: 40 }), answersOrRefuses), { numRuns: 3000 });
  fc.assert(fc.property(fc.stringMatching(/^[0-9T:.+Z-]{0,30}$/), answersOrRefuses), { numRuns: 3000 });
});

test('--since, generated durations and instants parse to what they say', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('s', 'm', 'h', 'd'), (n, unit) => {
      const ms = { s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[unit];
      assert.equal(parseSince(`${n}${unit}`, NOW), NOW - n * ms);
    }),
  );
  fc.assert(
    fc.property(fc.integer({ min: 0, max: NOW }), (ms) => {
      assert.equal(parseSince(new Date(ms).toISOString(), NOW), ms);
    }),
  );
});

test('--limit: whole numbers >= 1 only', () => {
  assert.equal(parseLimit('1'), 1);
  assert.equal(parseLimit('200'), 200);
  for (const bad of ['0', '-1', '1.5', 'ten', '', ' 2', '1e3', '99999999999999999']) {
    refused(() => parseLimit(bad), 'Invalid --limit');
  }
  fc.assert(
    fc.property(fc.string({ maxLength: 20 }), (text) => {
      try {
        const n = parseLimit(text);
        assert.ok(Number.isSafeInteger(n) && n >= 1);
      } catch (err) {
        assert.ok(isProblem(err) && err.code === 'invalid-input');
      }
    }),
  );
});
