// The KV service's request→bucket logic (docs/bindings.md "KV namespaces") against the
// local-directory bucket: workerd's wire requests (src/workerd/api/kv.c++) in, Cloudflare's
// answers and refusals out (limits: developers.cloudflare.com/kv/platform/limits/; words as
// Miniflare's KV gateway gives them, packages/miniflare/src/workers/kv/validator.worker.ts).

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { openDirStore } from '../../../src/store/dir.ts';
import type { Store } from '../../../src/store/store.ts';
import { decodeKey, encodeKey, handleKv, type KvRequest } from './kv.ts';

const NOW_MS = 1_800_000_000_000;
const NOW = NOW_MS / 1000;

describe('the KV service', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kv-'));
  let store: Store;
  before(async () => {
    store = await openDirStore(join(dir, 'bucket'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (
    method: string,
    target: string,
    options: {
      app?: string;
      ns?: string;
      body?: string | Buffer;
      headers?: Record<string, string>;
      now?: number;
    } = {},
  ) => {
    const request: KvRequest = {
      method,
      target,
      headers: {
        'cell-kv-application': options.app ?? 'shop',
        'cell-kv-namespace': options.ns ?? 'ns1',
        ...options.headers,
      },
      body: Buffer.from(options.body ?? ''),
    };
    return handleKv(store, request, options.now ?? NOW_MS);
  };
  const put = (key: string, value: string, query = '', options: Parameters<typeof call>[2] = {}) =>
    call('PUT', `/${encodeURIComponent(key)}?urlencoded=true${query}`, { body: value, ...options });
  const get = (key: string, options: Parameters<typeof call>[2] = {}) =>
    call('GET', `/${encodeURIComponent(key)}?urlencoded=true`, options);
  const listing = async (query: string, options: Parameters<typeof call>[2] = {}) => {
    const answer = await call('GET', `/?${query}`, options);
    assert.equal(answer.status, 200, String(answer.statusText));
    return JSON.parse(String(answer.body));
  };

  it('encodes keys in base32hex, order-preserving and reversible', () => {
    const samples = ['', 'a', 'a\u0000', 'ab', 'b', '\u00e9', '\u{1f600}', 'z'.repeat(300)];
    const sorted = [...samples].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const encoded = sorted.map((s) => encodeKey(Buffer.from(s)));
    assert.deepEqual([...encoded].sort(), encoded);
    for (const s of samples) assert.equal(decodeKey(encodeKey(Buffer.from(s))).toString('utf8'), s);
  });

  it('puts and gets a value with its metadata and expiration; a missing key is 404', async () => {
    assert.equal(
      (
        await put('greeting', 'héllo', `&expiration_ttl=120`, {
          headers: { 'cf-kv-metadata': Buffer.from('{"by":"ü"}').toString('latin1') },
        })
      ).status,
      200,
    );
    const answer = await get('greeting');
    assert.equal(answer.status, 200);
    assert.equal(Buffer.from(answer.body as Uint8Array).toString('utf8'), 'héllo');
    assert.equal(Buffer.from(answer.headers!['cf-kv-metadata']!, 'latin1').toString('utf8'), '{"by":"ü"}');
    assert.equal(answer.headers!['cf-expiration'], String(NOW + 120));
    assert.equal((await get('absent')).status, 404);
    assert.equal((await call('DELETE', '/greeting?urlencoded=true')).status, 200);
    assert.equal((await get('greeting')).status, 404);
  });

  it('keeps one object per key under the application and namespace, and no other reaches it', async () => {
    await put('k', 'mine');
    const objects = (await store.list(keys.runtimeKvNamespacePrefix('shop', 'ns1'), { recursive: true }))
      .objects;
    assert.deepEqual(
      objects.map((o) => o.key),
      [keys.runtimeKvEntry('shop', 'ns1', encodeKey(Buffer.from('k')))],
    );
    assert.equal((await get('k', { app: 'other' })).status, 404);
    assert.equal((await get('k', { ns: 'ns2' })).status, 404);
    assert.deepEqual((await listing('', { app: 'other' })).keys, []);
    const unnamed = await handleKv(store, {
      method: 'GET',
      target: '/k',
      headers: {},
      body: Buffer.alloc(0),
    });
    assert.equal(unnamed.status, 400);
    await call('DELETE', '/k?urlencoded=true');
  });

  it('never returns an expired key, and deletes it when seen', async () => {
    await put('soon', 'v', '&expiration_ttl=60');
    await put('later', 'v', `&expiration=${NOW + 3600}`);
    const laterMs = NOW_MS + 61_000;
    assert.equal((await get('soon', { now: laterMs })).status, 404);
    assert.deepEqual((await listing('', { now: laterMs })).keys, [{ name: 'later', expiration: NOW + 3600 }]);
    assert.equal((await get('soon')).status, 404, 'the expired object was deleted');
    await call('DELETE', '/later?urlencoded=true');
  });

  it('lists in UTF-8 byte order with prefix, limit and cursor, across segment boundaries', async () => {
    const names = [
      'a',
      'a/b',
      'ab',
      'b',
      '\u00e9',
      '\u{1f600}',
      'x'.repeat(200),
      `${'x'.repeat(200)}y`,
      'x'.repeat(512),
    ];
    for (const name of names)
      await put(name, `v-${name.length}`, '', { headers: { 'cf-kv-metadata': '{"n":1}' } });
    const expected = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const all = await listing('');
    assert.deepEqual(
      all.keys.map((k: { name: string }) => k.name),
      expected,
    );
    assert.equal(all.list_complete, true);
    assert.equal(all.keys[0].metadata, '{"n":1}', 'metadata as a JSON string, which workerd parses');
    assert.deepEqual(
      (await listing('prefix=a')).keys.map((k: { name: string }) => k.name),
      ['a', 'a/b', 'ab'],
    );
    assert.deepEqual(
      (await listing(`prefix=${encodeURIComponent('x'.repeat(200))}`)).keys.map(
        (k: { name: string }) => k.name.length,
      ),
      [200, 512, 201],
    );
    const pages: string[] = [];
    let cursor = '';
    for (;;) {
      const page = await listing(`key_count_limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      pages.push(...page.keys.map((k: { name: string }) => k.name));
      if (page.list_complete) break;
      assert.equal(page.keys.length, 2);
      cursor = page.cursor;
    }
    assert.deepEqual(pages, expected);
    for (const name of names) await call('DELETE', `/${encodeURIComponent(name)}?urlencoded=true`);
  });

  it("refuses what Cloudflare refuses, with Cloudflare's status and words", async () => {
    const refusals: [Promise<{ status: number; statusText?: string }>, number, RegExp][] = [
      [put('', 'v'), 400, /^Key names must not be empty$/],
      [put('..', 'v'), 400, /^Illegal key name "\.\."/],
      [put('é'.repeat(257), 'v'), 414, /^UTF-8 encoded length of 514 exceeds key length limit of 512\.$/],
      [
        put('k', 'v', '&expiration_ttl=59'),
        400,
        /^Invalid expiration_ttl of 59\. Expiration TTL must be at least 60\.$/,
      ],
      [
        put('k', 'v', '&expiration_ttl=0'),
        400,
        /^Invalid expiration_ttl of 0\. Please specify integer greater than 0\.$/,
      ],
      [
        put('k', 'v', `&expiration=${NOW - 1}`),
        400,
        /^Invalid expiration of \d+\. Please specify integer greater than the current/,
      ],
      [
        put('k', 'v', `&expiration=${NOW + 59}`),
        400,
        /^Invalid expiration of \d+\. Expiration times must be at least 60 seconds in the future\.$/,
      ],
      [
        put('k', 'v', '', { headers: { 'cf-kv-metadata': JSON.stringify({ m: 'x'.repeat(1020) }) } }),
        413,
        /^Metadata length of 1028 exceeds limit of 1024\.$/,
      ],
      [
        put('k', 'x'.repeat(25 * 1024 * 1024 + 1)),
        413,
        /^Value length of 26214401 exceeds limit of 26214400\.$/,
      ],
      [
        call('GET', '/?key_count_limit=1001'),
        400,
        /^Invalid key_count_limit of 1001\. Please specify an integer less than 1000\.$/,
      ],
      [call('GET', `/?prefix=${'p'.repeat(513)}`), 414, /exceeds key length limit of 512/],
      [
        call('GET', '/k?urlencoded=true&cache_ttl=10'),
        400,
        /^Invalid cache_ttl of 10\. Cache TTL must be at least 30\.$/,
      ],
      [call('GET', '/%E0%A4%A?urlencoded=true'), 400, /^Could not URL-decode key name$/],
    ];
    for (const [answer, status, words] of refusals) {
      const { status: got, statusText } = await answer;
      assert.equal(got, status, statusText);
      assert.match(statusText ?? '', words);
    }
    assert.equal((await put('k', 'x'.repeat(25 * 1024 * 1024))).status, 200, 'exactly 25 MiB is allowed');
    assert.equal(
      (await put('k', 'v', '', { headers: { 'cf-kv-metadata': JSON.stringify({ m: 'x'.repeat(1016) }) } }))
        .status,
      200,
    );
    await call('DELETE', '/k?urlencoded=true');
  });

  it('reads up to 100 keys at once as text or JSON, with metadata when asked', async () => {
    await put('j', '{"a":1}', '', { headers: { 'cf-kv-metadata': '{"m":2}' } });
    const bulk = async (body: unknown) => call('POST', '/bulk/get', { body: JSON.stringify(body) });
    const text = await bulk({ keys: ['j', 'none'] });
    assert.deepEqual(JSON.parse(String(text.body)), { j: '{"a":1}', none: null });
    const json = await bulk({ keys: ['j'], type: 'json', withMetadata: true });
    assert.deepEqual(JSON.parse(String(json.body)), { j: { value: { a: 1 }, metadata: { m: 2 } } });
    assert.equal((await bulk({ keys: Array.from({ length: 101 }, (_, i) => `k${i}`) })).status, 400);
    assert.equal((await bulk({ keys: [] })).statusText, 'You must request a minimum of 1 key');
    await call('DELETE', '/j?urlencoded=true');
  });
});
