// The registry cache's fleet reads (docs/fleet.md "Registry cache"): the listing every pass makes
// for the heartbeats fetches nothing; bodies are fetched only when asked, only when their ETag
// moved, and a lease version the keeper already knows is not read again. Against a real
// directory bucket behind a counting wrapper.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tempDir } from '../../../test/helpers/svc.ts';
import { keys } from '../../registry/keys.ts';
import type { CoordinatorLease, NodeRecord } from '../../registry/records.ts';
import { openDirStore } from '../../store/dir.ts';
import { putJson, type Store } from '../../store/store.ts';
import { RegistryCache } from './cache.ts';

function counted(store: Store): { store: Store; gets: string[] } {
  const gets: string[] = [];
  return {
    gets,
    store: {
      ...store,
      description: store.description,
      get: (key) => {
        gets.push(key);
        return store.get(key);
      },
      put: (key, body, condition) => store.put(key, body, condition),
      delete: (key, condition) => store.delete(key, condition),
      list: (prefix, options) => store.list(prefix, options),
      stat: (key) => store.stat(key),
      close: () => store.close(),
    },
  };
}

function node(id: string, beatMs: number): NodeRecord {
  return {
    v: 1,
    id,
    advertise: `${id}:7311`,
    listen: `${id}:7311`,
    labels: {},
    versions: { svc: 'test' },
    state: 'ready',
    beatMs,
    startedAt: new Date(0).toISOString(),
    processes: [],
  };
}

const lease: CoordinatorLease = {
  v: 1,
  node: 'a',
  fence: 3,
  acquiredAt: new Date(0).toISOString(),
  renewedAt: new Date(0).toISOString(),
  expiresMs: 45_000,
};

test('the heartbeat listing fetches nothing; bodies only when asked and only when moved', async () => {
  const base = await openDirStore(tempDir('svc-cache-'));
  const { store, gets } = counted(base);
  await putJson(base, keys.nodeRecord('a'), node('a', 1));
  await putJson(base, keys.nodeRecord('b'), node('b', 1));
  const cache = new RegistryCache({ store });

  const first = await cache.listFleet();
  assert.deepEqual(first.map((r) => r.id).sort(), ['a', 'b']);
  assert.ok(first.every((r) => r.etag && r.modified instanceof Date));
  assert.deepEqual(gets, [], 'a listing alone reads no record');
  assert.equal(cache.nodes.size, 0);

  await cache.syncFleet();
  assert.deepEqual(gets.sort(), [keys.nodeRecord('a'), keys.nodeRecord('b')]);
  gets.length = 0;

  // b beats: the listing shows its new ETag, nothing is read until the bodies are synced.
  await putJson(base, keys.nodeRecord('b'), node('b', 2));
  const second = await cache.listFleet();
  assert.notEqual(second.find((r) => r.id === 'b')!.etag, first.find((r) => r.id === 'b')!.etag);
  assert.deepEqual(gets, []);
  assert.equal(cache.nodes.get('b')!.value.beatMs, 1);
  await cache.syncFleet();
  assert.deepEqual(gets, [keys.nodeRecord('b')], 'only the record that moved');
  assert.equal(cache.nodes.get('b')!.value.beatMs, 2);

  // A record that left the listing leaves the cache with the listing, before any sync.
  await base.delete(keys.nodeRecord('a'));
  await cache.listFleet();
  assert.deepEqual([...cache.nodes.keys()], ['b']);
});

test('a lease version the keeper knows is taken from it, not read', async () => {
  const base = await openDirStore(tempDir('svc-cache-'));
  const { store, gets } = counted(base);
  const etag = await putJson(base, keys.coordinatorLease, lease);
  const known = new Map([[etag, lease]]);
  const cache = new RegistryCache({
    store,
    knownLease: (listed) => (known.has(listed) ? { value: known.get(listed)!, etag: listed } : null),
  });
  await cache.listFleet();
  await cache.syncFleet();
  assert.deepEqual(gets, []);
  assert.deepEqual(cache.lease, { value: lease, etag });

  // Another holder's version is read.
  const other = { ...lease, node: 'b', fence: 4 };
  const otherEtag = await putJson(base, keys.coordinatorLease, other);
  await cache.listFleet();
  await cache.syncFleet();
  assert.deepEqual(gets, [keys.coordinatorLease]);
  assert.deepEqual(cache.lease, { value: other, etag: otherEtag });
});
