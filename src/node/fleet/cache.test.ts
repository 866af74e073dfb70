// The registry cache's fleet reads (docs/fleet.md "Registry cache"): the listing every pass makes
// for the heartbeats fetches nothing; bodies are fetched only when asked, only when their ETag
// moved, and a lease version the keeper already knows is not read again. The application listing
// is answered from the cache, re-listed first after a change this process made. Against a real
// directory bucket behind a counting wrapper.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tempDir, waitFor } from '../../../test/helpers/svc.ts';
import { ensureApplicationForDeploy, setBlocked } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import type { CoordinatorLease, NodeRecord } from '../../registry/records.ts';
import { openDirStore } from '../../store/dir.ts';
import { putJson, type Store } from '../../store/store.ts';
import { RegistryCache } from './cache.ts';

function counted(store: Store): { store: Store; gets: string[]; lists: string[] } {
  const gets: string[] = [];
  const lists: string[] = [];
  return {
    gets,
    lists,
    store: {
      ...store,
      description: store.description,
      get: (key) => {
        gets.push(key);
        return store.get(key);
      },
      put: (key, body, condition) => store.put(key, body, condition),
      delete: (key, condition) => store.delete(key, condition),
      list: (prefix, options) => {
        lists.push(prefix);
        return store.list(prefix, options);
      },
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

const names = (records: { name: string }[]) => records.map((r) => r.name);

test('the application listing comes from the cache; a change made here re-lists before it answers', async () => {
  const base = await openDirStore(tempDir('svc-cache-'));
  const { store, gets, lists } = counted(base);
  for (const name of ['shop', 'blog', 'alpha']) await ensureApplicationForDeploy(base, name, {}, 'test');
  const cache = new RegistryCache({ store });

  // The first answer fills the cache: the listings and every record.
  assert.deepEqual(names(await cache.currentApplications()), ['alpha', 'blog', 'shop']);
  assert.deepEqual(lists.sort(), [keys.appsPrefix, keys.domainClaimsPrefix].sort());
  assert.equal(gets.length, 3);
  gets.length = 0;
  lists.length = 0;

  // Written elsewhere and not told: the cache answers as it was, with no request.
  await setBlocked(base, 'blog', true);
  const unchanged = await cache.currentApplications();
  assert.equal(unchanged.find((a) => a.name === 'blog')!.blocked, false);
  assert.deepEqual([gets, lists], [[], []]);

  // Told of a change: one listing of each keyspace, then only the record that moved.
  cache.applicationsChanged();
  const changed = await cache.currentApplications();
  assert.equal(changed.find((a) => a.name === 'blog')!.blocked, true);
  assert.deepEqual(gets, [keys.application('blog')]);
  assert.equal(lists.length, 2);
  gets.length = 0;
  lists.length = 0;
  await cache.currentApplications();
  assert.deepEqual([gets, lists], [[], []], 'the change was seen once; no further request');
});

test('refreshes run one at a time; a caller after a change gets a refresh that started after it', async () => {
  const base = await openDirStore(tempDir('svc-cache-'));
  const { store, lists } = counted(base);
  for (const name of ['shop', 'blog']) await ensureApplicationForDeploy(base, name, {}, 'test');
  // Holds the answer of a listing of `_svc/apps/` (made before the hold) until released, counting
  // how many listings are in flight.
  let inFlight = 0;
  let most = 0;
  let waiting = 0;
  let release: (() => void) | null = null;
  let held: Promise<void> | null = null;
  const gated: Store = {
    ...store,
    list: async (prefix, options) => {
      inFlight++;
      most = Math.max(most, inFlight);
      try {
        const gate = prefix === keys.appsPrefix ? held : null;
        const listing = await store.list(prefix, options);
        if (gate) {
          waiting++;
          await gate;
        }
        return listing;
      } finally {
        inFlight--;
      }
    },
  };
  const cache = new RegistryCache({ store: gated });
  await cache.currentApplications();
  lists.length = 0;
  most = 0;

  held = new Promise((resolve) => {
    release = resolve;
  });
  // A refresh is under way (the pass's, its listing already made) when this process changes the
  // registry: it cannot show the change, so the callers after the change must not take its answer.
  const passRefresh = cache.refreshApplications();
  await waitFor(() => waiting > 0, "the pass's listing of _svc/apps/");
  await setBlocked(base, 'shop', true);
  cache.applicationsChanged();
  const answers = Promise.all([cache.currentApplications(), cache.currentApplications()]);
  held = null;
  release!();
  await passRefresh;
  const [first, second] = await answers;
  assert.equal(first.find((a) => a.name === 'shop')!.blocked, true);
  assert.equal(second.find((a) => a.name === 'shop')!.blocked, true);
  // Two refreshes (the pass's and one shared by both callers), never two listings of a keyspace at once.
  assert.equal(lists.filter((prefix) => prefix === keys.appsPrefix).length, 2);
  assert.ok(most <= 2, `at most the two keyspaces listed at once, saw ${most}`);
});
