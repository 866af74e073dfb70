// The fleet freeze record and its reason rules (docs/applications.md "The fleet freeze"; docs/api.md "Fleet
// freeze").

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { refuses, tempStore } from '../../test/helpers/temp-store.ts';
import type { Store } from '../store/store.ts';
import {
  assertDeploysOpen,
  checkFreezeReason,
  freezeDeploys,
  parseFreezeBody,
  readFreeze,
  unfreezeDeploys,
} from './freeze.ts';

test('reason: trimmed, empty reads as none, at most 200 characters, one line', async () => {
  assert.equal(checkFreezeReason('  incident 42  '), 'incident 42');
  assert.equal(checkFreezeReason('   '), undefined);
  assert.equal(checkFreezeReason(undefined), undefined);
  assert.equal(checkFreezeReason('x'.repeat(200)), 'x'.repeat(200));
  assert.equal(checkFreezeReason(` ${'é'.repeat(200)} `), 'é'.repeat(200), 'characters, not bytes');
  for (const reason of [
    'x'.repeat(201),
    'two\nlines',
    'tab\there',
    'bell\u0007',
    'del\u007f',
    'c1\u0085',
    'ls\u2028x',
    42,
    {},
    [],
  ]) {
    await refuses(() => checkFreezeReason(reason), 'invalid-input', 'Invalid freeze reason');
  }
});

test('body: absent, or an object whose only member is reason', async () => {
  assert.equal(parseFreezeBody(undefined), undefined);
  assert.equal(parseFreezeBody({}), undefined);
  assert.equal(parseFreezeBody({ reason: 'x' }), 'x');
  for (const body of [null, 'x', [], 3, true, { reason: 'x', until: 'tomorrow' }]) {
    await refuses(() => parseFreezeBody(body), 'invalid-input', 'Invalid freeze request');
  }
});

describe('freeze record', () => {
  let store: Store;
  before(async () => {
    store = await tempStore();
  });
  after(async () => {
    await store?.close();
  });

  test('freeze, freeze again (first stands), unfreeze twice', async () => {
    await assertDeploysOpen(store);
    const first = await freezeDeploys(store, 'op-a', 'incident', () => new Date('2030-01-01T00:00:00Z'));
    assert.deepEqual(first, {
      freeze: { v: 1, frozenAt: '2030-01-01T00:00:00.000Z', by: 'op-a', reason: 'incident' },
      created: true,
    });
    const second = await freezeDeploys(store, 'op-b', undefined);
    assert.deepEqual(second, { freeze: first.freeze, created: false });
    assert.deepEqual(await readFreeze(store), first.freeze);
    const refusal = await refuses(() => assertDeploysOpen(store), 'deploys-frozen', 'Deploys are frozen');
    assert.match(refusal.detail!, /since 2030-01-01T00:00:00.000Z by op-a: incident/);
    assert.deepEqual(await unfreezeDeploys(store), { lifted: true });
    assert.deepEqual(await unfreezeDeploys(store), { lifted: false });
    assert.equal(await readFreeze(store), null);
    const noReason = await freezeDeploys(store, 'op-a', undefined);
    assert.ok(!('reason' in noReason.freeze));
  });

  test('concurrent freezes: one created', async () => {
    await unfreezeDeploys(store);
    const results = await Promise.all(['a', 'b', 'c', 'd'].map((by) => freezeDeploys(store, by, by)));
    assert.equal(results.filter((r) => r.created).length, 1);
    assert.equal(new Set(results.map((r) => r.freeze.by)).size, 1);
  });
});
