// The reaper's view of the bucket (listed-store.ts): a listing under `_svc/apps/` is answered from
// the cache's last recursive listing, grouped by application, and must say exactly what a scan
// of that whole listing says.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { keys } from '../../registry/keys.ts';
import type { ListResult, ObjectInfo, Store } from '../../store/store.ts';
import { listedAppsStore, listFrom } from './listed-store.ts';

const object = (key: string): ObjectInfo => ({ key, etag: `"${key}"`, size: 1, modified: new Date(0) });

/** A bucket that must not be listed under `_svc/apps/`, and answers anything else with one object. */
function bucket(): Store & { listed: string[] } {
  const listed: string[] = [];
  const refuse = () => Promise.reject(new Error('not used here'));
  return {
    listed,
    description: 'test bucket',
    get: refuse,
    put: refuse,
    delete: refuse,
    stat: refuse,
    close: () => Promise.resolve(),
    list(prefix: string): Promise<ListResult> {
      if (prefix.startsWith(keys.appsPrefix)) throw new Error(`listed ${prefix} from the bucket`);
      listed.push(prefix);
      return Promise.resolve({ objects: [object(`${prefix}x`)], prefixes: [] });
    },
  };
}

const segment = fc.constantFrom('a', 'ab', 'b', 'deploys', 'x.json', 'placement.json');
const keyUnderApps = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((parts) => keys.appsPrefix + parts.join('/'));

test('a listing under one application answers what a scan of the whole listing answers', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(keyUnderApps, { maxLength: 40 }).map((list) => list.sort().map(object)),
      fc.array(segment, { maxLength: 3 }),
      fc.constantFrom('', '/'),
      fc.boolean(),
      async (listing, parts, end, recursive) => {
        const prefix = keys.appsPrefix + parts.join('/') + (parts.length > 0 ? end : '');
        const store = listedAppsStore(bucket(), () => listing);
        assert.deepEqual(await store.list(prefix, { recursive }), listFrom(listing, prefix, recursive));
      },
    ),
  );
});

test('a new listing is answered from, not the grouping of the one before', async () => {
  let listing = [object(`${keys.appsPrefix}a/deploys/1.json`)];
  const store = listedAppsStore(bucket(), () => listing);
  const prefix = keys.deploysPrefix('a');
  assert.deepEqual(
    (await store.list(prefix, { recursive: false })).objects.map((o) => o.key),
    [`${prefix}1.json`],
  );
  listing = [object(`${prefix}2.json`), object(`${keys.appsPrefix}b/deploys/3.json`)];
  assert.deepEqual(
    (await store.list(prefix, { recursive: false })).objects.map((o) => o.key),
    [`${prefix}2.json`],
  );
  assert.deepEqual(await store.list(keys.deploysPrefix('c'), { recursive: false }), {
    objects: [],
    prefixes: [],
  });
});

test('listings outside the applications go to the bucket', async () => {
  const inner = bucket();
  const store = listedAppsStore(inner, () => []);
  assert.deepEqual(
    (await store.list('_svc/fleet/', { recursive: true })).objects.map((o) => o.key),
    ['_svc/fleet/x'],
  );
  assert.deepEqual(inner.listed, ['_svc/fleet/']);
});
