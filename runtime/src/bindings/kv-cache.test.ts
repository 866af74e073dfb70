// The node-local KV read cache (docs/bindings.md "KV namespaces", its consistency paragraph), through the KV
// service as workerd calls it, on the local-directory bucket with every bucket read counted. Two
// caches on one bucket stand for two nodes. The bound is Cloudflare's: a read is cached for its
// `cacheTtl` (default 60 s, at least 30; developers.cloudflare.com/kv/api/read-key-value-pairs/),
// and a write is visible everywhere within about 60 s (developers.cloudflare.com/kv/concepts/how-kv-works/).

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openDirStore } from '../../../src/store/dir.ts';
import type { Store } from '../../../src/store/store.ts';
import { type Entry, handleKv } from './kv.ts';
import { KvCache } from './kv-cache.ts';

const NOW_MS = 1_800_000_000_000;

describe('the node-local KV read cache', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kv-cache-'));
  let bucket: Store;
  let gets = 0;
  /** The bucket, counting its reads. */
  let counted: Store;
  before(async () => {
    bucket = await openDirStore(join(dir, 'bucket'));
    counted = {
      description: bucket.description,
      get: (key) => {
        gets++;
        return bucket.get(key);
      },
      put: (key, body, condition) => bucket.put(key, body, condition),
      delete: (key, condition) => bucket.delete(key, condition),
      list: (prefix, options) => bucket.list(prefix, options),
      stat: (key) => bucket.stat(key),
      close: () => bucket.close(),
    };
  });
  after(async () => {
    await bucket.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (cache: KvCache<Entry>, method: string, key: string, nowMs: number, body = '', query = '') =>
    handleKv(
      counted,
      {
        method,
        target: `/${encodeURIComponent(key)}?urlencoded=true${query}`,
        headers: { 'cell-kv-application': 'shop', 'cell-kv-namespace': 'cached' },
        body: Buffer.from(body),
      },
      nowMs,
      cache,
    );
  const read = async (cache: KvCache<Entry>, key: string, nowMs: number, query = '') => {
    const answer = await call(cache, 'GET', key, nowMs, '', query);
    return answer.status === 404 ? null : Buffer.from(answer.body as Uint8Array).toString('utf8');
  };

  it('a hot key is read from the bucket once per cache TTL', async () => {
    const node = new KvCache<Entry>();
    assert.equal((await call(node, 'PUT', 'hot', NOW_MS, 'v1')).status, 200);
    gets = 0;
    for (let i = 0; i < 100; i++) assert.equal(await read(node, 'hot', NOW_MS + i * 100), 'v1');
    assert.equal(gets, 0, 'the node that wrote it reads its own write from the cache');
    const other = new KvCache<Entry>();
    for (let i = 0; i < 100; i++) assert.equal(await read(other, 'hot', NOW_MS + i * 100), 'v1');
    assert.equal(gets, 1, 'another node reads it from the bucket once');
    assert.equal(await read(other, 'hot', NOW_MS + 60_000), 'v1');
    assert.equal(gets, 2, 'and again once its copy is 60 s old');
  });

  it('a write on one node is seen on another within the reader cacheTtl, and at once on the writer', async () => {
    const writer = new KvCache<Entry>();
    const reader = new KvCache<Entry>();
    assert.equal(await read(reader, 'k', NOW_MS, '&cache_ttl=30'), null);
    await call(writer, 'PUT', 'k', NOW_MS + 1_000, 'new');
    assert.equal(await read(writer, 'k', NOW_MS + 1_000), 'new');
    assert.equal(await read(reader, 'k', NOW_MS + 29_000, '&cache_ttl=30'), null, 'a cached absence');
    assert.equal(await read(reader, 'k', NOW_MS + 30_000, '&cache_ttl=30'), 'new');
    await call(writer, 'DELETE', 'k', NOW_MS + 31_000);
    assert.equal(await read(writer, 'k', NOW_MS + 31_000), null, 'a delete is seen at once where it ran');
    assert.equal(await read(reader, 'k', NOW_MS + 59_000, '&cache_ttl=30'), 'new');
    assert.equal(await read(reader, 'k', NOW_MS + 60_000, '&cache_ttl=30'), null);
  });

  it('a cached key is never returned past its expiration', async () => {
    const node = new KvCache<Entry>();
    await call(node, 'PUT', 'brief', NOW_MS, 'soon gone', '&expiration_ttl=60');
    assert.equal(await read(node, 'brief', NOW_MS + 59_000), 'soon gone');
    assert.equal(await read(node, 'brief', NOW_MS + 60_000), null);
  });

  it('a value over 1 MiB is not cached', async () => {
    const node = new KvCache<Entry>();
    await call(node, 'PUT', 'large', NOW_MS, 'x'.repeat(1024 * 1024 + 1));
    gets = 0;
    await read(node, 'large', NOW_MS);
    await read(node, 'large', NOW_MS);
    assert.equal(gets, 2);
    assert.equal(node.bytes, 0);
  });

  it('past its budget the cache forgets the least recently used first', () => {
    const cache = new KvCache<string>(3 * (1000 + 1 + 200));
    for (const key of ['a', 'b', 'c']) cache.remember(key, key, 1000, NOW_MS);
    assert.ok(cache.fresh('a', 60, NOW_MS), 'a is used: b is now the oldest');
    cache.remember('d', 'd', 1000, NOW_MS);
    assert.deepEqual(
      ['a', 'b', 'c', 'd'].map((key) => cache.fresh(key, 60, NOW_MS)?.value ?? null),
      ['a', null, 'c', 'd'],
    );
    assert.equal(cache.bytes, 3 * 1201);
  });
});
