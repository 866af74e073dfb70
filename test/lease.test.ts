// `svc app lease show|drop` (docs/cli.md "svc app"): each verdict from the three reads, the body
// naming another node, the drop rules (held refused without --force, consent, dry run,
// absent key, read-back). Reads that fail or disagree are produced by a store wrapper, named
// `unreliable` below, since a healthy bucket never answers that way on demand.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Problem } from '../src/problem.ts';
import { keys } from '../src/registry/keys.ts';
import type { Answerer } from '../src/runtime-tools/consent.ts';
import {
  checkLeaseNode,
  type DropRun,
  dropLease,
  judgeLease,
  readLeases,
} from '../src/runtime-tools/lease.ts';
import { type DirStore, openDirStore } from '../src/store/dir.ts';
import type { Store } from '../src/store/store.ts';
import { tempDir } from './helpers/svc.ts';

const APP = 'shop';
const NOW = Date.now();
let store: DirStore;

const lease = (node: string, expiresMs: number) => JSON.stringify({ node, expires_ms: expiresMs });
const now = () => NOW;

/** A store whose reads of one key misbehave as told: absent or failing GET or HEAD, a no-op delete. */
function unreliable(
  inner: Store,
  faults: {
    key: string;
    get?: 'absent' | 'fail';
    head?: 'absent' | 'fail';
    list?: 'fail';
    deleteIgnored?: boolean;
  },
): Store {
  return {
    description: inner.description,
    put: (key, body, condition) => inner.put(key, body, condition),
    close: () => inner.close(),
    async get(key) {
      if (key === faults.key && faults.get === 'absent') return null;
      if (key === faults.key && faults.get === 'fail') throw new Error('503 SlowDown');
      return inner.get(key);
    },
    async stat(key) {
      if (key === faults.key && faults.head === 'absent') return null;
      if (key === faults.key && faults.head === 'fail') throw new Error('connection reset');
      return inner.stat(key);
    },
    async list(prefix, options) {
      if (faults.list === 'fail') throw new Error('listing timed out');
      return inner.list(prefix, options);
    },
    async delete(key, condition) {
      if (key === faults.key && faults.deleteIgnored) return true;
      return inner.delete(key, condition);
    },
  };
}

async function refusal(work: Promise<unknown>): Promise<Problem> {
  try {
    await work;
  } catch (err) {
    assert.ok(err instanceof Problem, `expected a Problem, got ${err}`);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('app lease', () => {
  beforeEach(async () => {
    store = await openDirStore(tempDir('svc-lease-'));
  });
  afterEach(async () => {
    await store.close();
  });

  describe('show: the four verdicts', () => {
    it('held, expired and a body that is no lease, over every listed lease', async () => {
      await store.put(keys.runtimeNodeLease(APP, 'n-held'), lease('n-held', NOW + 20_000));
      await store.put(keys.runtimeNodeLease(APP, 'n-old'), lease('n-old', NOW - 90_000));
      await store.put(keys.runtimeNodeLease(APP, 'n-junk'), '{"node":"n-junk"}');
      await store.put(keys.runtimeNodeLease(APP, 'n-text'), 'not json');
      const readings = await readLeases(store, APP, undefined, now);
      const byNode = Object.fromEntries(readings.map((r) => [r.node, r]));
      assert.deepEqual(Object.keys(byNode).sort(), ['n-held', 'n-junk', 'n-old', 'n-text']);
      assert.equal(byNode['n-held']!.verdict, 'held');
      assert.equal(byNode['n-held']!.expiresAt, new Date(NOW + 20_000).toISOString());
      assert.equal(byNode['n-held']!.recordNode, 'n-held');
      assert.deepEqual(
        [byNode['n-held']!.listed, byNode['n-held']!.head, byNode['n-held']!.get],
        [true, 'present', 'present'],
      );
      assert.equal(byNode['n-old']!.verdict, 'expired');
      assert.equal(byNode['n-junk']!.verdict, 'unreadable');
      assert.match(byNode['n-junk']!.why, /expires_ms/);
      assert.equal(byNode['n-text']!.verdict, 'unreadable');
    });

    it('absent only for a named node that no read finds', async () => {
      const [reading] = await readLeases(store, APP, 'n9', now);
      assert.equal(reading!.verdict, 'absent');
      assert.deepEqual([reading!.listed, reading!.head, reading!.get], [false, 'absent', 'absent']);
      assert.equal(reading!.key, 'fleets/shop/nodes/n9.json');
      assert.deepEqual(await readLeases(store, APP, undefined, now), []);
    });

    it('unreadable when the listing or HEAD names it but GET says absent or fails', async () => {
      const key = keys.runtimeNodeLease(APP, 'n1');
      await store.put(key, lease('n1', NOW + 20_000));
      const [lagging] = await readLeases(unreliable(store, { key, get: 'absent' }), APP, 'n1', now);
      assert.equal(lagging!.verdict, 'unreadable');
      assert.match(lagging!.why, /GET says absent/);
      const [failing] = await readLeases(unreliable(store, { key, get: 'fail' }), APP, undefined, now);
      assert.equal(failing!.verdict, 'unreadable');
      assert.equal(failing!.get, 'failed');
      assert.match(failing!.why, /503 SlowDown/);
    });

    it('a failing HEAD or listing is part of the reading, not the end of it', async () => {
      const key = keys.runtimeNodeLease(APP, 'n1');
      await store.put(key, lease('n1', NOW + 20_000));
      const [reading] = await readLeases(
        unreliable(store, { key, head: 'fail', list: 'fail' }),
        APP,
        'n1',
        now,
      );
      assert.equal(reading!.verdict, 'held');
      assert.equal(reading!.head, 'failed');
      assert.equal(reading!.listed, false);
      assert.match(reading!.why, /listing failed/);
      const [nothing] = await readLeases(unreliable(store, { key: 'x', list: 'fail' }), APP, 'n2', now);
      assert.equal(nothing!.verdict, 'unreadable', 'absent needs the listing to say so too');
    });

    it('reports a body that names another node than its key', async () => {
      await store.put(keys.runtimeNodeLease(APP, 'n1'), lease('n2', NOW + 5_000));
      const [reading] = await readLeases(store, APP, 'n1', now);
      assert.equal(reading!.verdict, 'held');
      assert.equal(reading!.recordNode, 'n2');
      assert.match(reading!.why, /names node n2, not n1/);
    });

    it('judges the table without I/O', () => {
      const key = 'k';
      const absentEverywhere = { listed: false, head: 'absent', get: 'absent' } as const;
      assert.equal(judgeLease('n', key, absentEverywhere, NOW).verdict, 'absent');
      assert.equal(judgeLease('n', key, { ...absentEverywhere, listed: true }, NOW).verdict, 'unreadable');
      assert.equal(judgeLease('n', key, { ...absentEverywhere, head: 'present' }, NOW).verdict, 'unreadable');
      const body = new TextEncoder().encode(lease('n', NOW));
      assert.equal(
        judgeLease('n', key, { listed: true, head: 'present', get: 'present', body }, NOW).verdict,
        'expired',
      );
    });
  });

  describe('--node', () => {
    it('takes 1-128 ASCII letters, digits, underscores, hyphens or dots', () => {
      assert.equal(checkLeaseNode('node-1.eu_west'), 'node-1.eu_west');
      assert.equal(checkLeaseNode('a'.repeat(128)), 'a'.repeat(128));
      for (const bad of ['', 'a'.repeat(129), 'a/b', 'nöde', 'a b', '..', '.']) {
        assert.throws(() => checkLeaseNode(bad), { code: 'invalid-slug' });
      }
    });
  });

  describe('drop', () => {
    const nobody: Answerer = { interactive: false, ask: () => Promise.reject(new Error('asked nobody')) };
    const answering = (answer: string): Answerer => ({ interactive: true, ask: async () => answer });
    const drop = (options: Partial<DropRun> = {}) => {
      const lines: string[] = [];
      return dropLease({
        store,
        application: APP,
        node: 'n1',
        force: false,
        yes: false,
        dryRun: false,
        answerer: nobody,
        now,
        out: (line) => lines.push(line),
        ...options,
      }).then((outcome) => ({ outcome, lines }));
    };
    const key = () => keys.runtimeNodeLease(APP, 'n1');

    it('refuses a held lease with reference-held unless --force', async () => {
      await store.put(key(), lease('n1', NOW + 20_000));
      const problem = await refusal(drop({ yes: true }));
      assert.equal(problem.code, 'reference-held');
      assert.ok(await store.stat(key()));
      const { outcome } = await drop({ yes: true, force: true });
      assert.equal(outcome.deleted, true);
      assert.equal(outcome.stillThere, false);
      assert.equal(await store.stat(key()), null);
    });

    it('deletes an expired lease with --yes, then reads it back', async () => {
      await store.put(key(), lease('n1', NOW - 1));
      const { outcome, lines } = await drop({ yes: true });
      assert.deepEqual(Object.keys(outcome), [
        'application',
        'node',
        'key',
        'dryRun',
        'force',
        'deleted',
        'before',
        'after',
        'stillThere',
      ]);
      assert.equal(outcome.before.verdict, 'expired');
      assert.equal(outcome.after!.verdict, 'absent');
      assert.equal(lines.at(-1), `Deleted ${key()}: it is gone.`);
    });

    it('says so when the store still answers for the key after the delete', async () => {
      await store.put(key(), lease('n1', NOW - 1));
      const { outcome, lines } = await drop({
        yes: true,
        store: unreliable(store, { key: key(), deleteIgnored: true }),
      });
      assert.equal(outcome.deleted, true);
      assert.equal(outcome.stillThere, true);
      assert.match(lines.at(-1)!, /still answers for it: expired/);
    });

    it('asks [y/N]: only y or yes in any casing consents', async () => {
      await store.put(key(), lease('n1', NOW - 1));
      for (const answer of ['', 'n', 'yep', 'NO']) {
        const { outcome, lines } = await drop({ answerer: answering(answer) });
        assert.equal(outcome.deleted, false);
        assert.equal(lines.at(-1), 'Nothing deleted.');
      }
      assert.ok(await store.stat(key()));
      const { outcome } = await drop({ answerer: answering('YES') });
      assert.equal(outcome.deleted, true);
    });

    it('without a terminal and without --yes is invalid-input, Nothing to answer with', async () => {
      await store.put(key(), lease('n1', NOW - 1));
      const problem = await refusal(drop());
      assert.equal(problem.code, 'invalid-input');
      assert.equal(problem.title, 'Nothing to answer with');
      assert.ok(await store.stat(key()));
    });

    it('a dry run or an absent key asks nothing and deletes nothing', async () => {
      const absent = await drop();
      assert.equal(absent.outcome.before.verdict, 'absent');
      assert.equal(absent.outcome.deleted, false);
      assert.equal('after' in absent.outcome, false);
      await store.put(key(), lease('n1', NOW - 1));
      const dry = await drop({ dryRun: true });
      assert.equal(dry.outcome.deleted, false);
      assert.equal(dry.outcome.dryRun, true);
      assert.ok(await store.stat(key()));
    });

    it('deletes an unreadable lease', async () => {
      await store.put(key(), '{"expires_ms": "soon"}');
      const { outcome } = await drop({ yes: true });
      assert.equal(outcome.before.verdict, 'unreadable');
      assert.equal(outcome.stillThere, false);
    });
  });
});
