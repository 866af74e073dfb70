// Application record operations against a real local-directory bucket (docs/applications.md
// "The application record", "Lifecycle"; docs/api.md "Deleting an application").

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { refuses, tempStore } from '../../test/helpers/temp-store.ts';
import type { Store } from '../store/store.ts';
import { parseLabelsBody, parseReplicasBody, parseSelectorBody } from './application-bodies.ts';
import { checkDeletable, deleteApplicationData } from './application-deletion.ts';
import { redactApplication } from './application-view.ts';
import {
  ensureApplicationForDeploy,
  getApplication,
  listApplications,
  retireApplication,
  setBlocked,
  setLabels,
  setReplicas,
  setSelector,
  unretireApplication,
} from './applications.ts';
import { keys } from './keys.ts';

describe('application records', () => {
  let store: Store;
  before(async () => {
    store = await tempStore();
  });
  after(async () => {
    await store?.close();
  });

  test('the first deploy creates with replicas all and no selector; later intents update; null preserves', async () => {
    const created = await ensureApplicationForDeploy(store, 'shop', {}, 'op-1');
    assert.equal(created.replicas, 'all');
    assert.equal(created.selector, null);
    assert.equal(created.createdBy, 'op-1');
    assert.deepEqual(created.domains, []);
    assert.equal(created.blocked, false);

    const placed = await ensureApplicationForDeploy(
      store,
      'shop',
      { replicas: 2, nodeSelector: { zone: 'a' } },
      'op-1',
    );
    assert.equal(placed.replicas, 2);
    assert.deepEqual(placed.selector, { zone: 'a' });
    const kept = await ensureApplicationForDeploy(
      store,
      'shop',
      { replicas: null, nodeSelector: null },
      'op-2',
    );
    assert.equal(kept.replicas, 2);
    assert.deepEqual(kept.selector, { zone: 'a' });
    assert.equal(kept.createdBy, 'op-1');

    const withCount = await ensureApplicationForDeploy(store, 'counted', { replicas: 3 }, 'op-1');
    assert.equal(withCount.replicas, 3);
  });

  test('a blocked application refuses deploys; a retired one stays retired', async () => {
    await ensureApplicationForDeploy(store, 'banned', {}, 'op-1');
    const { changed } = await setBlocked(store, 'banned', true);
    assert.equal(changed, true);
    assert.equal((await setBlocked(store, 'banned', true)).changed, false);
    await refuses(
      () => ensureApplicationForDeploy(store, 'banned', {}, 'op-1'),
      'application-blocked',
      'Application is blocked',
    );
    const unblocked = await setBlocked(store, 'banned', false);
    assert.equal(unblocked.application.blocked, false);

    await ensureApplicationForDeploy(store, 'old', {}, 'op-1');
    await retireApplication(store, 'old', 'op-1', 1000);
    const again = await ensureApplicationForDeploy(store, 'old', { replicas: 1 }, 'op-1');
    assert.ok(again.retired);
    assert.equal(again.replicas, 1);
  });

  test('concurrent first deploys create one record', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => ensureApplicationForDeploy(store, 'racy', {}, `op-${i}`)),
    );
    const creators = new Set(results.map((r) => r.createdBy));
    assert.equal(creators.size, 1);
  });

  test('concurrent changes all land (conditional writes retried)', async () => {
    await ensureApplicationForDeploy(store, 'busy', {}, 'op-1');
    await Promise.all([
      setLabels(store, 'busy', { team: 'a' }),
      setSelector(store, 'busy', { disk: 'ssd' }),
      setReplicas(store, 'busy', 4),
      setBlocked(store, 'busy', true),
      retireApplication(store, 'busy', 'op-1', 60_000),
    ]);
    const record = await getApplication(store, 'busy');
    assert.deepEqual(record.labels, { team: 'a' });
    assert.deepEqual(record.selector, { disk: 'ssd' });
    assert.equal(record.replicas, 4);
    assert.equal(record.blocked, true);
    assert.ok(record.retired);
  });

  test('labels replaced wholesale, {} clears; selector null clears', async () => {
    await ensureApplicationForDeploy(store, 'lab', {}, 'op-1');
    await setLabels(store, 'lab', { a: '1', b: '2' });
    assert.deepEqual((await setLabels(store, 'lab', { c: '3' })).labels, { c: '3' });
    assert.deepEqual((await setLabels(store, 'lab', {})).labels, {});
    await setSelector(store, 'lab', { zone: 'nowhere' });
    assert.equal((await setSelector(store, 'lab', null)).selector, null);
  });

  test('retire stamps a grace; retiring again keeps it; unretire during grace; refused after', async () => {
    await ensureApplicationForDeploy(store, 'tired', {}, 'op-1');
    const t0 = new Date('2030-01-01T00:00:00Z');
    const retired = await retireApplication(store, 'tired', 'node-a', 3600_000, () => t0);
    assert.deepEqual(retired.retired, {
      at: '2030-01-01T00:00:00.000Z',
      by: 'node-a',
      graceUntil: '2030-01-01T01:00:00.000Z',
    });
    const later = new Date('2030-01-01T00:30:00Z');
    const again = await retireApplication(store, 'tired', 'op-2', 3600_000, () => later);
    assert.deepEqual(again.retired, retired.retired);
    const back = await unretireApplication(store, 'tired', () => later);
    assert.equal(back.retired, undefined);
    assert.equal((await unretireApplication(store, 'tired', () => later)).retired, undefined);

    await retireApplication(store, 'tired', 'op-1', 1000, () => t0);
    await refuses(
      () => unretireApplication(store, 'tired', () => new Date('2030-01-01T00:00:02Z')),
      'invalid-input',
      'Retirement grace period is over',
    );
  });

  test('every operation on a missing application is not-found', async () => {
    for (const run of [
      () => getApplication(store, 'ghost'),
      () => setBlocked(store, 'ghost', true),
      () => setLabels(store, 'ghost', {}),
      () => retireApplication(store, 'ghost', 'op', 1),
      () => unretireApplication(store, 'ghost'),
      () => setSelector(store, 'ghost', null),
      () => setReplicas(store, 'ghost', 'all'),
      () => deleteApplicationData(store, 'ghost'),
    ]) {
      await refuses(run, 'not-found', 'No such application');
    }
  });

  test('listing is in name order; a non-admin view has no labels but keeps blocked', async () => {
    const names = (await listApplications(store)).map((r) => r.name);
    assert.deepEqual(names, [...names].sort());
    assert.ok(names.includes('shop'));
    const record = await getApplication(store, 'busy');
    const redacted = redactApplication(record, false);
    assert.ok(!('labels' in redacted));
    assert.equal(redacted.blocked, true);
    assert.deepEqual(redactApplication(record, true), record);
  });

  test('deletion: retired past grace unless forced', () => {
    const base = { v: 1 as const, name: 'x', createdAt: '', updatedAt: '', labels: {}, blocked: false };
    const record = { ...base, selector: null, replicas: 'all' as const, domains: [], wildcardDomains: [] };
    const now = Date.parse('2030-01-02T00:00:00Z');
    assert.throws(() => checkDeletable(record, false, now), /Application is not retired/);
    checkDeletable(record, true, now);
    const retired = {
      ...record,
      retired: { at: '2030-01-01T00:00:00Z', by: 'op', graceUntil: '2030-01-03T00:00:00Z' },
    };
    assert.throws(() => checkDeletable(retired, false, now), /Retirement grace period is not over/);
    checkDeletable(retired, false, Date.parse('2030-01-03T00:00:01Z'));
  });

  test('deleteApplicationData removes every key of the application and nothing else, record last', async () => {
    await ensureApplicationForDeploy(store, 'doomed', {}, 'op-1');
    await ensureApplicationForDeploy(store, 'doomed-dev', {}, 'op-1');
    const mine = [
      keys.trustPolicy('doomed'),
      keys.placement('doomed'),
      keys.deploy('doomed', 'doomed.0123456789abcdef'),
      keys.deployment('doomed', 'v1'),
      'fleets/doomed/deploy/main/abc/manifest.json',
      'fleets/doomed/nodes/n1.json',
      keys.domainClaim('doomed.example'),
    ];
    const theirs = [
      'fleets/doomed-dev/nodes/n1.json',
      keys.placement('doomed-dev'),
      keys.domainClaim('dev.example'),
    ];
    for (const key of [...mine, ...theirs]) await store.put(key, '{}');
    await store.put(
      keys.domainClaim('doomed.example'),
      JSON.stringify({ host: 'doomed.example', application: 'doomed' }),
    );
    await store.put(
      keys.domainClaim('dev.example'),
      JSON.stringify({ host: 'dev.example', application: 'doomed-dev' }),
    );
    const deleted = await deleteApplicationData(store, 'doomed');
    assert.deepEqual(deleted, [...mine, keys.application('doomed')].sort());
    for (const key of deleted) assert.equal(await store.stat(key), null, key);
    for (const key of theirs) assert.ok(await store.stat(key), key);
    await refuses(() => getApplication(store, 'doomed'), 'not-found', 'No such application');
  });
});

describe('request bodies', () => {
  test('labels: an object of strings', async () => {
    assert.deepEqual(parseLabelsBody({ labels: { a: 'b' } }), { a: 'b' });
    assert.deepEqual(parseLabelsBody({ labels: {} }), {});
    for (const body of [
      undefined,
      null,
      [],
      'x',
      {},
      { labels: null },
      { labels: [] },
      { labels: { a: 1 } },
      { labels: 'a=b' },
    ]) {
      await refuses(() => parseLabelsBody(body), 'invalid-input', 'Invalid labels');
    }
  });

  test('selector: object, or null; omission refused', async () => {
    assert.equal(parseSelectorBody({ selector: null }), null);
    assert.deepEqual(parseSelectorBody({ selector: { zone: 'a' } }), { zone: 'a' });
    for (const body of [undefined, {}, { selector: [] }, { selector: { a: 2 } }, { selector: 'zone=a' }]) {
      await refuses(() => parseSelectorBody(body), 'invalid-input', 'Invalid selector');
    }
  });

  test('replicas: all or a whole number >= 1; null and omission refused', async () => {
    assert.equal(parseReplicasBody({ replicas: 'all' }), 'all');
    assert.equal(parseReplicasBody({ replicas: 1 }), 1);
    for (const body of [
      undefined,
      {},
      { replicas: null },
      { replicas: 0 },
      { replicas: -1 },
      { replicas: 1.5 },
      { replicas: '2' },
      { replicas: 'ALL' },
      { replicas: 1e300 },
    ]) {
      await refuses(() => parseReplicasBody(body), 'invalid-input', 'Invalid replicas');
    }
  });
});
