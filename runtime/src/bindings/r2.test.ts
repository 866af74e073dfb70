// R2 against the local-directory bucket (docs/bindings.md "R2 buckets"), through the wire
// contract workerd speaks (src/workerd/api/r2-bucket.c++, r2-rpc.c++, r2-api.capnp): each request
// below is built as workerd builds it. What each answer must be comes from Cloudflare's R2 Workers
// API reference (developers.cloudflare.com/r2/api/workers/workers-api-reference/, "R2 docs" below)
// and limits page (developers.cloudflare.com/r2/platform/limits/), and from Miniflare's R2 tests
// (workers-sdk packages/miniflare/test/plugins/r2/index.spec.ts, "Miniflare" below, test names
// quoted), whose error words and codes workerd shows the worker as `<op>: <message> (<code>)`.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { openDirStore } from '../../../src/store/dir.ts';
import type { Store } from '../../../src/store/store.ts';
import { encodeKey, segments } from './kv.ts';
import { handleR2, R2_LIMITS } from './r2.ts';

const NOW = 1_700_000_000_000;
const md5 = (text: string | Uint8Array) => createHash('md5').update(text).digest('hex');
const hash = (algorithm: string, text: string) => createHash(algorithm).update(text).digest('hex');

interface Answer {
  status: number;
  /** The parsed `cf-r2-error`, when refused. */
  error?: { version: number; v4code: number; message: string };
  // biome-ignore lint/suspicious/noExplicitAny: the answer's JSON, each field of it asserted by the tests
  metadata?: Record<string, any>;
  body?: string;
}

/** A client speaking workerd's side of the contract to one application's bucket. */
function client(store: () => Store, application = 'shop', bucket = 'files') {
  const names = { 'cell-r2-application': application, 'cell-r2-bucket': bucket };
  const decode = (answer: Awaited<ReturnType<typeof handleR2>>): Answer => {
    const out: Answer = { status: answer.status };
    const error = answer.headers['cf-r2-error'];
    if (error) out.error = JSON.parse(error);
    const size = answer.headers['cf-r2-metadata-size'];
    if (size !== undefined) {
      const bytes = Buffer.from(answer.body);
      out.metadata = JSON.parse(bytes.subarray(0, Number(size)).toString('utf8'));
      if (bytes.length > Number(size)) out.body = bytes.subarray(Number(size)).toString('utf8');
    }
    return out;
  };
  const viaGet = async (request: Record<string, unknown>, now = NOW) =>
    decode(
      await handleR2(
        store(),
        {
          method: 'GET',
          // Node hands header bytes over as Latin-1.
          headers: {
            ...names,
            'cf-r2-request': Buffer.from(JSON.stringify({ version: 1, ...request })).toString('latin1'),
          },
          body: new Uint8Array(),
        },
        now,
      ),
    );
  const viaPut = async (request: Record<string, unknown>, value: Uint8Array | string = '', now = NOW) => {
    const json = Buffer.from(JSON.stringify({ version: 1, ...request }));
    return decode(
      await handleR2(
        store(),
        {
          method: 'PUT',
          headers: { ...names, 'cf-r2-metadata-size': String(json.length) },
          body: Buffer.concat([json, Buffer.from(value)]),
        },
        now,
      ),
    );
  };
  return {
    head: (object: string) => viaGet({ method: 'head', object }),
    get: (object: string, options: Record<string, unknown> = {}) =>
      viaGet({ method: 'get', object, ...options }),
    put: (object: string, value: Uint8Array | string, options: Record<string, unknown> = {}, now = NOW) =>
      viaPut({ method: 'put', object, ...options }, value, now),
    delete: (object: string | string[]) =>
      viaPut(Array.isArray(object) ? { method: 'delete', objects: object } : { method: 'delete', object }),
    list: (options: Record<string, unknown> = {}) => viaGet({ method: 'list', ...options }),
    viaGet,
    viaPut,
  };
}

const ERRORS = {
  noSuchKey: { version: 1, v4code: 10007, message: 'The specified key does not exist.' },
  invalidName: { version: 1, v4code: 10020, message: 'The specified object name is not valid.' },
  precondition: {
    version: 1,
    v4code: 10031,
    message: 'At least one of the pre-conditions you specified did not hold.',
  },
  range: { version: 1, v4code: 10039, message: 'The requested range is not satisfiable' },
  maxKeys: { version: 1, v4code: 10022, message: 'MaxKeys params must be positive integer <= 1000.' },
  metadata: {
    version: 1,
    v4code: 10012,
    message: 'Your metadata headers exceed the maximum allowed metadata size.',
  },
  invalid: { version: 1, v4code: 10029, message: 'Metadata missing or invalid' },
};

describe('R2 (docs/bindings.md "R2 buckets")', () => {
  const dir = mkdtempSync(join(tmpdir(), 'r2-'));
  let store: Store;
  let count = 0;
  /** A fresh bucket name per test, so tests never see each other's objects. */
  const fresh = (application = 'shop') => client(() => store, application, `b-${++count}`);
  before(async () => {
    store = await openDirStore(join(dir, 'bucket'));
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('head', () => {
    it('answers 404 with 10007 for an absent key, which workerd makes null (Miniflare "head: returns null for non-existent keys")', async () => {
      const r2 = fresh();
      assert.deepEqual(await r2.head('key'), { status: 404, error: ERRORS.noSuchKey });
    });

    it('answers the metadata of an object (Miniflare "head: returns metadata for existing keys")', async () => {
      const r2 = fresh();
      const put = await r2.put('key', 'value', {
        httpFields: { contentType: 'text/plain', contentLanguage: 'en-GB', cacheExpiry: '1700000100000' },
        customFields: [{ k: 'foo', v: 'bar' }],
      });
      const head = await r2.head('key');
      assert.equal(head.status, 200);
      assert.equal(head.body, undefined, 'a head carries no body');
      const m = head.metadata!;
      assert.equal(m.name, 'key');
      assert.equal(m.size, 5);
      // R2 docs: "etag: the etag associated with the object upload" — the body's MD5 for a single put.
      assert.equal(m.etag, md5('value'));
      assert.match(m.version, /^[0-9a-f]{32}$/);
      assert.equal(m.version, put.metadata!.version);
      assert.equal(m.uploaded, NOW);
      assert.deepEqual(m.httpFields, {
        contentType: 'text/plain',
        contentLanguage: 'en-GB',
        cacheExpiry: 1700000100000,
      });
      assert.deepEqual(m.customFields, [{ k: 'foo', v: 'bar' }]);
      assert.deepEqual(m.range, { offset: 0, length: 5 });
      assert.deepEqual(m.checksums, { 0: md5('value') });
      assert.equal(m.storageClass, 'Standard');
    });

    it('refuses a key past 512 bytes with 10020 (Miniflare "head: validates key"; svc keeps keys to 512 bytes, R2 to 1,024)', async () => {
      const r2 = fresh();
      assert.deepEqual(await r2.head('x'.repeat(R2_LIMITS.maxKeyBytes + 1)), {
        status: 400,
        error: ERRORS.invalidName,
      });
      assert.equal((await r2.head('x'.repeat(R2_LIMITS.maxKeyBytes))).status, 404);
    });
  });

  describe('get', () => {
    it('answers 404 for an absent key and the metadata then the bytes for an object (Miniflare "get: returns metadata and body for existing keys")', async () => {
      const r2 = fresh();
      assert.deepEqual(await r2.get('key'), { status: 404, error: ERRORS.noSuchKey });
      await r2.put('key', 'value', { customFields: [{ k: 'foo', v: 'bar' }] });
      const got = await r2.get('key');
      assert.equal(got.status, 200);
      assert.equal(got.body, 'value');
      assert.equal(got.metadata!.etag, md5('value'));
      assert.deepEqual(got.metadata!.range, { offset: 0, length: 5 });
      assert.deepEqual(got.metadata!.customFields, [{ k: 'foo', v: 'bar' }]);
      assert.deepEqual(await r2.get('x'.repeat(513)), { status: 400, error: ERRORS.invalidName });
    });

    it('cuts a range given as { offset, length, suffix } (Miniflare "get: range using object")', async () => {
      const r2 = fresh();
      await r2.put('key', 'value');
      const cases: [Record<string, unknown>, { offset: number; length: number }, string][] = [
        [{ offset: '3' }, { offset: 3, length: 2 }, 'ue'],
        [{ length: '3' }, { offset: 0, length: 3 }, 'val'],
        [{ length: '42' }, { offset: 0, length: 5 }, 'value'],
        [{ offset: '1', length: '3' }, { offset: 1, length: 3 }, 'alu'],
        [{ suffix: '3' }, { offset: 2, length: 3 }, 'lue'],
        [{ suffix: '42' }, { offset: 0, length: 5 }, 'value'],
      ];
      for (const [range, expected, text] of cases) {
        const got = await r2.get('key', { range });
        assert.deepEqual(
          [got.status, got.metadata!.range, got.body],
          [200, expected, text],
          JSON.stringify(range),
        );
      }
      for (const range of [{ offset: '42' }, { length: '0' }, { suffix: '0' }])
        assert.deepEqual(
          await r2.get('key', { range }),
          { status: 416, error: ERRORS.range },
          JSON.stringify(range),
        );
    });

    it('cuts one range of a Range header, and serves the whole object for any other header (Miniflare "get: range using \\"Range\\" header")', async () => {
      const r2 = fresh();
      await r2.put('key', 'abcdefghijklmnopqrstuvwxyz');
      const cases: [string, string][] = [
        ['bytes=0-2', 'abc'],
        ['bytes=2-', 'cdefghijklmnopqrstuvwxyz'],
        ['bytes=-3', 'xyz'],
        ['bytes=24-99', 'yz'],
        ['bytes=0-1, 3-4', 'abcdefghijklmnopqrstuvwxyz'],
        ['nonsense', 'abcdefghijklmnopqrstuvwxyz'],
      ];
      for (const [rangeHeader, text] of cases)
        assert.equal((await r2.get('key', { rangeHeader })).body, text, rangeHeader);
    });

    it('answers the metadata alone, with 412, when onlyIf fails (Miniflare "get: returns body only if passes onlyIf")', async () => {
      const r2 = fresh();
      await r2.put('key', 'value');
      const etag = md5('value');
      const bad = md5('👻');
      const pass = async (onlyIf: Record<string, unknown>) => {
        const got = await r2.get('key', { onlyIf });
        assert.deepEqual([got.status, got.body], [200, 'value'], JSON.stringify(onlyIf));
      };
      const fail = async (onlyIf: Record<string, unknown>) => {
        const got = await r2.get('key', { onlyIf });
        assert.deepEqual([got.status, got.error, got.body], [412, ERRORS.precondition, undefined]);
        assert.equal(got.metadata!.etag, etag, 'workerd answers an R2Object without body');
      };
      await pass({ etagMatches: [{ type: 'strong', value: etag }] });
      await fail({ etagMatches: [{ type: 'strong', value: bad }] });
      await pass({ etagMatches: [{ type: 'wildcard' }] });
      await fail({ etagDoesNotMatch: [{ type: 'strong', value: etag }] });
      await pass({ etagDoesNotMatch: [{ type: 'strong', value: bad }] });
      await pass({ uploadedBefore: String(NOW + 60_000) });
      await fail({ uploadedBefore: String(NOW - 60_000) });
      await fail({ uploadedAfter: String(NOW + 60_000) });
      await pass({ uploadedAfter: String(NOW - 60_000) });
      // secondsGranularity truncates both sides to seconds (Miniflare validator.spec.ts).
      await fail({ uploadedBefore: String(NOW + 1), secondsGranularity: true });
      await pass({ uploadedBefore: String(NOW + 1) });
    });
  });

  describe('put', () => {
    it('answers the new object, keeps empty values, and replaces an object whole, its old body gone (Miniflare "put: returns metadata for created object", "put: puts empty value", "put: overrides existing keys")', async () => {
      const r2 = fresh();
      const put = await r2.put('key', 'value', { httpFields: { contentType: 'text/plain' } });
      assert.equal(put.status, 200);
      assert.equal(put.metadata!.name, 'key');
      assert.equal(put.metadata!.size, 5);
      assert.equal(put.metadata!.etag, md5('value'));
      assert.equal(put.metadata!.uploaded, NOW);
      assert.equal(put.metadata!.range, undefined);
      assert.deepEqual(put.metadata!.httpFields, { contentType: 'text/plain' });
      await r2.put('empty', '');
      assert.deepEqual(
        [(await r2.get('empty')).body, (await r2.head('empty')).metadata!.size],
        [undefined, 0],
      );
      const second = await r2.put('key', 'value2', {}, NOW + 1000);
      assert.notEqual(second.metadata!.version, put.metadata!.version);
      const got = await r2.get('key');
      assert.equal(got.body, 'value2');
      assert.deepEqual(got.metadata!.httpFields, {}, 'a put replaces the metadata too');
      assert.equal(got.metadata!.uploaded, NOW + 1000);
    });

    it('keeps one record and one body per object in the bucket, at the documented keys', async () => {
      const r2 = client(() => store, 'layout', 'files');
      const first = await r2.put('a', '1');
      await r2.put('a/b', '2');
      const second = await r2.put('a', '3');
      const record = keys.runtimeR2Record('layout', 'files', segments(encodeKey(Buffer.from('a'))));
      assert.ok(await store.stat(record));
      assert.equal(await store.stat(keys.runtimeR2Body('layout', 'files', first.metadata!.version)), null);
      const body = await store.get(keys.runtimeR2Body('layout', 'files', second.metadata!.version));
      assert.equal(Buffer.from(body!.body).toString(), '3');
      const { objects } = await store.list(keys.runtimeR2BucketPrefix('layout', 'files'), {
        recursive: true,
      });
      assert.equal(objects.length, 4, 'two records and two bodies');
    });

    it("keeps exactly one body when puts of one key race: the last record to land wins, the others' bodies are deleted", async () => {
      const r2 = fresh();
      const values = ['a', 'b', 'c', 'd', 'e'];
      const answers = await Promise.all(values.map((v) => r2.put('key', v)));
      assert.deepEqual(
        answers.map((a) => a.status),
        values.map(() => 200),
      );
      const got = await r2.get('key');
      assert.ok(values.includes(got.body!), got.body);
      assert.equal(got.metadata!.etag, md5(got.body!));
      const { objects } = await store.list(`${keys.runtimeR2BucketPrefix('shop', `b-${count}`)}bodies/`, {
        recursive: true,
      });
      assert.deepEqual(
        objects.map((o) => o.key),
        [keys.runtimeR2Body('shop', `b-${count}`, got.metadata!.version)],
      );
    });

    it('refuses a key past 512 bytes (Miniflare "put: validates key") and a value past 100 MiB (R2 limits: 5 GiB less 5 MiB; svc 100 MiB)', async () => {
      const r2 = fresh();
      assert.deepEqual(await r2.put('x'.repeat(513), 'v'), { status: 400, error: ERRORS.invalidName });
      assert.deepEqual(await r2.put('big', Buffer.alloc(R2_LIMITS.maxValueBytes + 1)), {
        status: 400,
        error: {
          version: 1,
          v4code: 100100,
          message: 'Your proposed upload exceeds the maximum allowed object size.',
        },
      });
      assert.equal((await r2.head('big')).status, 404);
    });

    it('verifies each checksum given and keeps it (Miniflare "put: validates checksums")', async () => {
      const r2 = fresh();
      const md5Base64 = createHash('md5').update('value').digest('base64');
      assert.equal((await r2.put('key', 'value', { md5: md5Base64 })).status, 200);
      const bad = (await r2.put('key', 'value', { md5: Buffer.alloc(16).toString('base64') })).error!;
      assert.deepEqual(bad, {
        version: 1,
        v4code: 10037,
        message: [
          'The MD5 checksum you specified did not match what we received.',
          `You provided a MD5 checksum with value: ${'0'.repeat(32)}`,
          `Actual MD5 was: ${md5('value')}`,
        ].join('\n'),
      });
      for (const [field, algorithm, name, wire] of [
        ['sha1', 'sha1', 'SHA-1', '1'],
        ['sha256', 'sha256', 'SHA-256', '2'],
        ['sha384', 'sha384', 'SHA-384', '3'],
        ['sha512', 'sha512', 'SHA-512', '4'],
      ] as const) {
        const digest = hash(algorithm, 'value');
        // A checksum is kept in lower case whatever case it came in.
        assert.equal((await r2.put('key', 'value', { [field]: digest.toUpperCase() })).status, 200);
        assert.deepEqual((await r2.head('key')).metadata!.checksums, { 0: md5('value'), [wire]: digest });
        const wrong = digest.replace(/./, (c) => (c === '0' ? '1' : '0'));
        const refused = await r2.put('key', 'other', { [field]: wrong });
        assert.equal(refused.error!.v4code, 10037);
        assert.match(refused.error!.message, new RegExp(`^The ${name} checksum you specified did not match`));
        assert.equal((await r2.get('key')).body, 'value', 'a refused put changes nothing');
      }
    });

    it('stores only if onlyIf holds, answering 412 (null in the worker) otherwise (Miniflare "put: stores only if passes onlyIf")', async () => {
      const r2 = fresh();
      const etag = md5('1');
      const bad = md5('👻');
      const reset = () => r2.put('key', '1');
      await reset();
      const pass = async (onlyIf: Record<string, unknown>) => {
        assert.equal((await r2.put('key', '2', { onlyIf })).status, 200, JSON.stringify(onlyIf));
        assert.equal((await r2.get('key')).body, '2');
        await reset();
      };
      const fail = async (onlyIf: Record<string, unknown>) => {
        assert.deepEqual(await r2.put('key', '2', { onlyIf }), { status: 412, error: ERRORS.precondition });
        assert.equal((await r2.get('key')).body, '1');
      };
      await pass({ etagMatches: [{ type: 'strong', value: etag }] });
      await fail({ etagMatches: [{ type: 'strong', value: bad }] });
      await fail({ etagDoesNotMatch: [{ type: 'strong', value: etag }] });
      await pass({ etagDoesNotMatch: [{ type: 'strong', value: bad }] });
      await pass({ uploadedBefore: String(NOW + 300_000) });
      await fail({ uploadedBefore: String(NOW - 60_000) });
      await fail({ uploadedAfter: String(NOW + 300_000) });
      await pass({ uploadedAfter: String(NOW - 60_000) });
      assert.deepEqual(
        await r2.put('no-key', '2', { onlyIf: { etagMatches: [{ type: 'strong', value: etag }] } }),
        {
          status: 412,
          error: ERRORS.precondition,
        },
      );
      // If-None-Match: * creates only: R2 docs "onlyIf ... etagDoesNotMatch".
      const create = { etagDoesNotMatch: [{ type: 'wildcard' }] };
      assert.equal((await r2.put('new', 'a', { onlyIf: create })).status, 200);
      assert.equal((await r2.put('new', 'b', { onlyIf: create })).status, 412);
    });

    it('limits custom metadata to 2,048 (Miniflare "put: validates metadata size")', async () => {
      const r2 = fresh();
      const meta = (k: string, v: string) => ({ customFields: [{ k, v }] });
      assert.equal((await r2.put('key', 'value', meta('key', 'x'.repeat(2045)))).status, 200);
      assert.deepEqual(await r2.put('key', 'value', meta('key', 'x'.repeat(2046))), {
        status: 400,
        error: ERRORS.metadata,
      });
      assert.equal((await r2.put('key', 'value', meta('hi', 'x'.repeat(2046)))).status, 200);
      assert.equal((await r2.put('key', 'value', meta('key', '🙂'.repeat(511)))).status, 200);
      assert.equal((await r2.put('key', 'value', meta('key1', '🙂'.repeat(511)))).status, 200);
      assert.equal((await r2.put('key', 'value', meta('key12', '🙂'.repeat(511)))).status, 400);
      assert.equal((await r2.put('key', 'value', meta('key', '🙂'.repeat(512)))).status, 400);
    });
  });

  describe('delete', () => {
    it('deletes one key or many, an absent one silently, bodies with them (Miniflare "delete: deletes existing keys", "delete: validates keys")', async () => {
      const r2 = fresh();
      const put = await r2.put('key', 'value');
      await r2.put('a', '1');
      await r2.put('b', '2');
      assert.deepEqual(await r2.delete('key'), { status: 200 });
      assert.equal((await r2.head('key')).status, 404);
      assert.equal(await store.stat(keys.runtimeR2Body('shop', `b-${count}`, put.metadata!.version)), null);
      assert.deepEqual(await r2.delete(['a', 'b', 'absent']), { status: 200 });
      assert.deepEqual((await r2.list()).metadata!.objects, []);
      assert.deepEqual(await r2.delete('x'.repeat(513)), { status: 400, error: ERRORS.invalidName });
      await r2.put('c', '3');
      assert.deepEqual(await r2.delete(['c', 'x'.repeat(513)]), { status: 400, error: ERRORS.invalidName });
      assert.equal((await r2.head('c')).status, 200, 'a refused delete deletes nothing');
    });
  });

  describe('list', () => {
    const names = (answer: Answer) => answer.metadata!.objects.map((o: { name: string }) => o.name);

    it('lists keys in UTF-8 byte order, under a prefix, with each object\'s size, etag and upload time (Miniflare "list: lists keys in sorted order", "list: lists keys matching prefix")', async () => {
      const r2 = fresh();
      for (const key of ['key3', 'key1', 'key2', 'a', 'a/b', 'ü', '\u{1F600}', '\uFFFD'])
        await r2.put(key, key);
      assert.deepEqual(names(await r2.list()), [
        'a',
        'a/b',
        'key1',
        'key2',
        'key3',
        'ü',
        '\uFFFD',
        '\u{1F600}',
      ]);
      assert.deepEqual(names(await r2.list({ prefix: 'key' })), ['key1', 'key2', 'key3']);
      assert.deepEqual(names(await r2.list({ prefix: 'nothing' })), []);
      const [object] = (await r2.list({ prefix: 'key1' })).metadata!.objects;
      assert.deepEqual(
        [object.size, object.etag, object.uploaded, object.httpFields, object.customFields],
        [4, md5('key1'), NOW, undefined, undefined],
      );
      const empty = await fresh().list();
      assert.deepEqual(empty.metadata, { objects: [], truncated: false, delimitedPrefixes: [] });
    });

    it('pages by limit and cursor, from startAfter, and sees keys written between pages (Miniflare "list: paginates keys", "list: lists keys starting from startAfter exclusive", "list: returns keys inserted whilst paginating", "list: returns an empty list with an invalid cursor")', async () => {
      const r2 = fresh();
      for (const key of ['key1', 'key2', 'key3']) await r2.put(key, key);
      const first = await r2.list({ limit: 2 });
      assert.deepEqual([names(first), first.metadata!.truncated], [['key1', 'key2'], true]);
      await r2.put('key2a', 'x');
      const second = await r2.list({ limit: 2, cursor: first.metadata!.cursor });
      assert.deepEqual(
        [names(second), second.metadata!.truncated, second.metadata!.cursor],
        [['key2a', 'key3'], false, undefined],
      );
      assert.deepEqual(names(await r2.list({ startAfter: 'key1' })), ['key2', 'key2a', 'key3']);
      assert.deepEqual(names(await r2.list({ startAfter: 'key1', limit: 1 })), ['key2']);
      assert.deepEqual(names(await r2.list({ cursor: 'bad' })), []);
    });

    it('answers an empty page for a prefix longer than any key can be', async () => {
      const r2 = fresh();
      await r2.put('k', 'v');
      assert.deepEqual(names(await r2.list({ prefix: 'k'.repeat(513) })), []);
      assert.deepEqual(names(await r2.list({ prefix: 'é'.repeat(600) })), []);
    });

    it('refuses a limit outside 1-1000 (Miniflare "list: validates limit")', async () => {
      const r2 = fresh();
      assert.deepEqual(await r2.list({ limit: 0 }), { status: 400, error: ERRORS.maxKeys });
      assert.deepEqual(await r2.list({ limit: 1001 }), { status: 400, error: ERRORS.maxKeys });
      assert.equal((await r2.list({ limit: 1000 })).status, 200);
    });

    it('includes httpMetadata and customMetadata only when asked (Miniflare "list: includes httpMetadata and customMetadata if specified")', async () => {
      const r2 = fresh();
      await r2.put('key', 'value', {
        httpFields: { contentType: 'text/plain' },
        customFields: [{ k: 'foo', v: 'bar' }],
      });
      const object = async (include: number[]) => (await r2.list({ include })).metadata!.objects[0];
      const both = await object([0, 1]);
      assert.deepEqual(
        [both.httpFields, both.customFields],
        [{ contentType: 'text/plain' }, [{ k: 'foo', v: 'bar' }]],
      );
      const http = await object([0]);
      assert.deepEqual([http.httpFields, http.customFields], [{ contentType: 'text/plain' }, undefined]);
      const custom = await object([1]);
      assert.deepEqual([custom.httpFields, custom.customFields], [undefined, [{ k: 'foo', v: 'bar' }]]);
    });

    it('groups keys by delimiter into delimitedPrefixes, which count towards the limit (Miniflare "list: returns correct delimitedPrefixes for delimiter and prefix")', async () => {
      const r2 = fresh();
      const all = [
        'dir0/file0',
        'dir0/file1',
        'dir0/sub0/file2',
        'dir0/sub0/file3',
        'dir0/sub1/file4',
        'dir0/sub1/file5',
        'dir1/file6',
        'dir1/file7',
        'file8',
        'file9',
      ];
      for (const key of all) await r2.put(key, key);
      const both = async (options: Record<string, unknown>) => {
        const answer = await r2.list(options);
        return [names(answer), answer.metadata!.delimitedPrefixes, answer.metadata!.truncated];
      };
      assert.deepEqual(await both({}), [all, [], false]);
      assert.deepEqual(await both({ delimiter: '' }), [all, [], false]);
      assert.deepEqual(await both({ delimiter: 'file8' }), [
        all.filter((k) => k !== 'file8'),
        ['file8'],
        false,
      ]);
      assert.deepEqual(await both({ prefix: 'dir1/', delimiter: 'file6' }), [
        ['dir1/file7'],
        ['dir1/file6'],
        false,
      ]);
      assert.deepEqual(await both({ delimiter: '/' }), [['file8', 'file9'], ['dir0/', 'dir1/'], false]);
      assert.deepEqual(await both({ prefix: 'dir0/', delimiter: '/' }), [
        ['dir0/file0', 'dir0/file1'],
        ['dir0/sub0/', 'dir0/sub1/'],
        false,
      ]);
      assert.deepEqual(await both({ prefix: 'dir0', delimiter: '/' }), [[], ['dir0/'], false]);
      const first = await r2.list({ prefix: 'dir0/', delimiter: '/', limit: 2 });
      assert.deepEqual(
        [names(first), first.metadata!.delimitedPrefixes, first.metadata!.truncated],
        [['dir0/file0', 'dir0/file1'], [], true],
      );
      assert.deepEqual(
        await both({ prefix: 'dir0/', delimiter: '/', limit: 2, cursor: first.metadata!.cursor }),
        [[], ['dir0/sub0/', 'dir0/sub1/'], false],
      );
    });
  });

  it('permits the empty key in every operation (Miniflare "operations permit empty key")', async () => {
    const r2 = fresh();
    await r2.put('a', 'other');
    assert.equal((await r2.put('', 'empty')).status, 200);
    assert.equal((await r2.head('')).metadata!.name, '');
    assert.equal((await r2.get('')).body, 'empty');
    assert.deepEqual(names(await r2.list()), ['', 'a']);
    assert.deepEqual(await r2.delete(''), { status: 200 });
    assert.equal((await r2.head('')).status, 404);
    function names(answer: Answer) {
      return answer.metadata!.objects.map((o: { name: string }) => o.name);
    }
  });

  it('keeps applications and buckets apart: the injected headers name whose objects a request reaches', async () => {
    const shop = client(() => store, 'shop', 'shared');
    const blog = client(() => store, 'blog', 'shared');
    const other = client(() => store, 'shop', 'other');
    await shop.put('key', 'shop');
    assert.equal((await blog.get('key')).status, 404);
    assert.equal((await other.get('key')).status, 404);
    await blog.put('key', 'blog');
    assert.deepEqual([(await shop.get('key')).body, (await blog.get('key')).body], ['shop', 'blog']);
    const list = await blog.list();
    assert.deepEqual(list.metadata!.objects.length, 1);
  });

  it('refuses a request naming no application or bucket, or that is no R2 request, with 10029', async () => {
    const none = await handleR2(store, {
      method: 'GET',
      headers: { 'cf-r2-request': JSON.stringify({ version: 1, method: 'head', object: 'k' }) },
      body: new Uint8Array(),
    });
    assert.deepEqual([none.status, JSON.parse(none.headers['cf-r2-error']!)], [400, ERRORS.invalid]);
    const r2 = fresh();
    assert.deepEqual(await r2.viaGet({ method: 'createBucket', bucket: 'x' }), {
      status: 400,
      error: ERRORS.invalid,
    });
  });

  describe('multipart uploads', () => {
    const PART = R2_LIMITS.minPartBytes;
    const upload = (r2: ReturnType<typeof fresh>) => ({
      create: (object: string, options: Record<string, unknown> = {}) =>
        r2.viaPut({ method: 'createMultipartUpload', object, ...options }),
      part: (object: string, uploadId: string, partNumber: number, value: string) =>
        r2.viaPut({ method: 'uploadPart', object, uploadId, partNumber }, value),
      complete: (object: string, uploadId: string, parts: { part: number; etag: string }[]) =>
        r2.viaPut({ method: 'completeMultipartUpload', object, uploadId, parts }),
      abort: (object: string, uploadId: string) =>
        r2.viaPut({ method: 'abortMultipartUpload', object, uploadId }),
    });
    const bodies = async (bucket: string) =>
      (await store.list(`${keys.runtimeR2BucketPrefix('shop', bucket)}bodies/`, { recursive: true })).objects
        .length;
    const NO_SUCH_UPLOAD = {
      version: 1,
      v4code: 10024,
      message: 'The specified multipart upload does not exist.',
    };
    const INTERNAL = {
      version: 1,
      v4code: 10001,
      message: 'We encountered an internal error. Please try again.',
    };

    it('creates distinct uploads for one key and validates the key (Miniflare "createMultipartUpload")', async () => {
      const mp = upload(fresh());
      const one = await mp.create('key', { customFields: [{ k: 'key', v: 'value' }] });
      const two = await mp.create('key');
      assert.equal(one.status, 200);
      assert.match(one.metadata!.uploadId, /^[0-9a-f]{32}$/);
      assert.notEqual(one.metadata!.uploadId, two.metadata!.uploadId);
      assert.deepEqual(await mp.create('x'.repeat(513)), { status: 400, error: ERRORS.invalidName });
    });

    it('stores parts, a part uploaded again replacing the earlier, and refuses an unknown upload (Miniflare "uploadPart")', async () => {
      const r2 = fresh();
      const mp = upload(r2);
      const id = (await mp.create('key')).metadata!.uploadId;
      const one = await mp.part('key', id, 1, 'value1');
      const two = await mp.part('key', id, 2, 'value two');
      assert.equal(one.status, 200);
      assert.notEqual(one.metadata!.etag, two.metadata!.etag);
      const again = await mp.part('key', id, 1, 'value1');
      assert.notEqual(again.metadata!.etag, one.metadata!.etag);
      assert.equal(await bodies(`b-${count}`), 2, 'the replaced part body is gone');
      assert.deepEqual(await mp.part('key', 'bad', 1, 'v'), { status: 400, error: NO_SUCH_UPLOAD });
      assert.deepEqual(await mp.part('badkey', id, 1, 'v'), { status: 400, error: NO_SUCH_UPLOAD });
      assert.deepEqual(await mp.part('x'.repeat(513), 'bad', 1, 'v'), {
        status: 400,
        error: ERRORS.invalidName,
      });
      assert.equal((await r2.head('key')).status, 404, 'nothing is visible before completion');
    });

    it('completes into one object: parts in order, R2 multipart etag, the upload metadata; sizes checked (Miniflare "completeMultipartUpload")', async () => {
      const r2 = fresh();
      const mp = upload(r2);
      const id = (
        await mp.create('key', {
          customFields: [{ k: 'key', v: 'value' }],
          httpFields: { contentType: 'text/plain' },
        })
      ).metadata!.uploadId;
      const p1 = (await mp.part('key', id, 1, '1'.repeat(PART))).metadata!.etag;
      const p2 = (await mp.part('key', id, 2, '2'.repeat(PART))).metadata!.etag;
      const p3 = (await mp.part('key', id, 3, '3')).metadata!.etag;
      const done = await mp.complete('key', id, [
        { part: 1, etag: p1 },
        { part: 2, etag: p2 },
        { part: 3, etag: p3 },
      ]);
      assert.equal(done.status, 200);
      const partMd5s = [md5('1'.repeat(PART)), md5('2'.repeat(PART)), md5('3')].map((h) =>
        Buffer.from(h, 'hex'),
      );
      const etag = `${createHash('md5').update(Buffer.concat(partMd5s)).digest('hex')}-3`;
      assert.deepEqual(
        [done.metadata!.size, done.metadata!.etag, done.metadata!.range, done.metadata!.checksums],
        [2 * PART + 1, etag, undefined, {}],
      );
      assert.deepEqual(done.metadata!.customFields, [{ k: 'key', v: 'value' }]);
      assert.deepEqual(done.metadata!.httpFields, { contentType: 'text/plain' });
      const got = await r2.get('key');
      assert.equal(got.body, `${'1'.repeat(PART)}${'2'.repeat(PART)}3`);
      // A range across the parts' boundary reads only the parts it touches.
      const across = await r2.get('key', { range: { offset: String(PART - 2), length: '4' } });
      assert.equal(across.body, '1122');
      assert.equal((await r2.get('key', { range: { suffix: '2' } })).body, '23');
      assert.deepEqual(
        await mp.part('key', id, 4, 'v'),
        { status: 400, error: NO_SUCH_UPLOAD },
        'a completed upload takes no parts',
      );
      assert.deepEqual(await mp.complete('key', id, [{ part: 1, etag: p1 }]), {
        status: 400,
        error: NO_SUCH_UPLOAD,
      });

      // Parts smaller than 5 MiB but the last are refused; one small part alone is an object.
      const second = (await mp.create('key')).metadata!.uploadId;
      const s1 = (await mp.part('key', second, 1, '1')).metadata!.etag;
      const s2 = (await mp.part('key', second, 2, '2')).metadata!.etag;
      const tooSmall = {
        version: 1,
        v4code: 10011,
        message: 'Your proposed upload is smaller than the minimum allowed object size.',
      };
      assert.deepEqual(
        await mp.complete('key', second, [
          { part: 1, etag: s1 },
          { part: 2, etag: s2 },
        ]),
        {
          status: 400,
          error: tooSmall,
        },
      );
      assert.deepEqual(await mp.complete('key', second, [{ part: 1, etag: 'wrong' }]), {
        status: 400,
        error: {
          version: 1,
          v4code: 10025,
          message: 'One or more of the specified parts could not be found.',
        },
      });
      const single = await mp.complete('key', second, [{ part: 1, etag: s1 }]);
      // Miniflare's "completeMultipartUpload": one part "1" has etag 46d1741e8075da4ac72c71d8130fcb71-1.
      assert.deepEqual(
        [single.metadata!.size, single.metadata!.etag],
        [1, '46d1741e8075da4ac72c71d8130fcb71-1'],
      );
      assert.equal((await r2.get('key')).body, '1');
      assert.equal(await bodies(`b-${count}`), 1, "the replaced object's parts and the unused part are gone");
    });

    it('aborts: parts deleted, no more parts taken, a finished upload left as it is (Miniflare "abortMultipartUpload")', async () => {
      const r2 = fresh();
      const mp = upload(r2);
      const one = (await mp.create('key')).metadata!.uploadId;
      const two = (await mp.create('key')).metadata!.uploadId;
      for (const n of [1, 2, 3]) await mp.part('key', one, n, `value${n}`);
      assert.deepEqual(await mp.abort('key', one), { status: 200 });
      assert.equal(await bodies(`b-${count}`), 0);
      assert.deepEqual(await mp.part('key', one, 4, 'value4'), { status: 400, error: NO_SUCH_UPLOAD });
      assert.deepEqual(await mp.abort('key', one), { status: 200 });
      const p1 = (await mp.part('key', two, 1, 'value1')).metadata!.etag;
      await mp.complete('key', two, [{ part: 1, etag: p1 }]);
      assert.deepEqual(await mp.abort('key', two), { status: 200 });
      assert.equal((await r2.get('key')).body, 'value1');
      const three = (await mp.create('key')).metadata!.uploadId;
      assert.deepEqual(await mp.abort('key', 'bad'), { status: 400, error: INTERNAL });
      assert.deepEqual(await mp.abort('bad', three), { status: 400, error: INTERNAL });
      assert.deepEqual(await mp.abort('x'.repeat(513), 'bad'), { status: 400, error: ERRORS.invalidName });
    });

    it('a put over or a delete of a multipart object removes its parts (Miniflare "put: is multipart aware", "delete: is multipart aware")', async () => {
      const r2 = fresh();
      const mp = upload(r2);
      const make = async (key: string) => {
        const id = (await mp.create(key)).metadata!.uploadId;
        const etag = (await mp.part(key, id, 1, 'part')).metadata!.etag;
        assert.equal((await mp.complete(key, id, [{ part: 1, etag }])).status, 200);
      };
      await make('a');
      await make('b');
      assert.equal(await bodies(`b-${count}`), 2);
      await r2.put('a', 'plain');
      await r2.delete('b');
      assert.equal(await bodies(`b-${count}`), 1, 'only the plain body of a is left');
      assert.equal((await r2.get('a')).body, 'plain');
    });
  });
});
