// Cron triggers (docs/runtime.md "Cron triggers"): expressions are Workers' five UTC fields, and
// of several replicas firing the same scheduled time against one bucket exactly one runs it and
// records the outcome. The bucket is the real local-directory store.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { keys } from '../../src/registry/keys.ts';
import { cronProblem, earlierScheduledMs, nextScheduledMs } from '../../src/runtime-tools/cron-schedule.ts';
import { openDirStore } from '../../src/store/dir.ts';
import { CLAIMS_KEPT, cronId, fireCron, nextCronTimes } from './cron.ts';

const MINUTE = 60_000;
const T = Date.UTC(2026, 10, 23, 14, 0, 0);

describe('cron expressions', () => {
  it('accepts five fields and refuses anything else, saying why', () => {
    for (const ok of ['* * * * *', '*/5 * * * *', '0 9 * * MON-FRI', '30 2 1 * *', '0 0 L * *']) {
      assert.equal(cronProblem(ok), null, ok);
    }
    assert.match(cronProblem('* * * *')!, /five fields/);
    assert.match(cronProblem('0 * * * * *')!, /five fields/);
    assert.notEqual(cronProblem('61 * * * *'), null);
    assert.notEqual(cronProblem('* * * * nope'), null);
  });

  it('answers any text with a reason or null, never a throw; an accepted one has a next time', () => {
    const field = fc.oneof(
      fc.constantFrom('*', '*/5', '0', '59', '1-5', 'MON', 'L', '?', '#', ',', '-', '/', '99'),
      fc.string({ maxLength: 6 }),
    );
    const expression = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.array(field, { minLength: 4, maxLength: 6 }).map((parts) => parts.join(' ')),
    );
    fc.assert(
      fc.property(expression, (text) => {
        const why = cronProblem(text);
        assert.ok(why === null || (typeof why === 'string' && why.length > 0));
        if (why === null) {
          const next = nextScheduledMs(text, T);
          assert.ok(next === null || next > T);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('computes scheduled times in UTC', () => {
    assert.equal(nextScheduledMs('* * * * *', T), T + MINUTE);
    assert.equal(nextScheduledMs('* * * * *', T + 1), T + MINUTE);
    assert.equal(nextScheduledMs('0 * * * *', T), T + 60 * MINUTE);
    assert.equal(nextScheduledMs('30 14 * * *', T), T + 30 * MINUTE);
    assert.equal(earlierScheduledMs('* * * * *', T, CLAIMS_KEPT), T - CLAIMS_KEPT * MINUTE);
  });

  it('answers the next time of each valid schedule and leaves invalid ones out', () => {
    assert.deepEqual(nextCronTimes(['* * * * *', '0 * * * *', 'nope', '61 * * * *'], T), {
      '* * * * *': T + MINUTE,
      '0 * * * *': T + 60 * MINUTE,
    });
    assert.deepEqual(nextCronTimes([], T), {});
  });

  it('names a schedule by a hash that keys can hold', () => {
    assert.match(cronId('*/5 * * * *'), /^[0-9a-f]{16}$/);
    assert.equal(cronId(' * * * * * '), cronId('* * * * *'));
    assert.notEqual(cronId('* * * * *'), cronId('*/5 * * * *'));
  });
});

describe('firing a scheduled time', () => {
  it('of three replicas firing the same time, exactly one runs it and records the outcome', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cell-cron-'));
    const store = await openDirStore(dir);
    try {
      const runs: string[] = [];
      const lines: string[] = [];
      const replicas = ['node-a', 'node-b', 'node-c'].map((node) => ({
        firer: { store, application: 'ticker', node, log: (line: string) => lines.push(line) },
        target: {
          deployment: 'd1',
          run: async (cron: string, at: number) => {
            runs.push(`${node} ${cron} ${at}`);
            return { outcome: 'ok' };
          },
        },
      }));
      const results = await Promise.all(replicas.map((r) => fireCron(r.firer, r.target, '* * * * *', T)));
      assert.equal(runs.length, 1, runs.join('\n'));
      const winners = results.filter((r) => r !== null);
      assert.equal(winners.length, 1);
      const claim = JSON.parse(
        new TextDecoder().decode(
          (await store.get(keys.runtimeCronClaim('ticker', cronId('* * * * *'), T)))!.body,
        ),
      );
      assert.equal(claim.outcome, 'ok');
      assert.equal(claim.node, winners[0]!.node);
      assert.equal(claim.scheduled_ms, T);
      assert.equal(claim.deployment, 'd1');
      assert.ok(claim.finished_ms >= claim.claimed_ms);
      assert.equal(lines.filter((l) => / ran on node-[abc] \(d1\): ok$/.test(l)).length, 1, lines.join('\n'));

      // The next minute is a new claim; a handler that throws is recorded as such.
      const next = await fireCron(
        { store, application: 'ticker', node: 'node-a', log: () => {} },
        {
          deployment: 'd1',
          run: async () => {
            throw new Error('socket closed');
          },
        },
        '* * * * *',
        T + MINUTE,
      );
      assert.equal(next?.outcome, 'exception');
      assert.equal(next?.error, 'socket closed');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('deletes the claim of the time CLAIMS_KEPT fires earlier', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cell-cron-'));
    const store = await openDirStore(dir);
    try {
      const old = T - CLAIMS_KEPT * MINUTE;
      const oldKey = keys.runtimeCronClaim('ticker', cronId('* * * * *'), old);
      await store.put(oldKey, '{}');
      await fireCron(
        { store, application: 'ticker', node: 'node-a', log: () => {} },
        { deployment: 'd1', run: async () => ({ outcome: 'ok' }) },
        '* * * * *',
        T,
      );
      assert.equal(await store.stat(oldKey), null);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
