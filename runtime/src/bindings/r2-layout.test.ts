// R2's one-object layout on an S3 bucket (docs/bindings.md "R2 buckets", "Bucket layout"), against
// real MinIO: a put is one object at the key, its record in the object's own metadata, so an
// ordinary S3 client reads the bytes; a record too large for S3's 2 KB of user metadata, a
// multipart object, and an object written in the record layout before (a record, its bytes a
// body of their own) are kept and read as records, and a put over one of them deletes its bodies.
// Requests are built as workerd builds them (r2.test.ts says how); a put's value is streamed as
// the bindings socket streams it.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { openS3Store } from '../../../src/store/s3.ts';
import type { Store } from '../../../src/store/store.ts';
import { useMinio } from '../../../test/helpers/minio.ts';
import { encodeKey, segments } from './kv.ts';
import { handleR2, handleR2Streamed, type R2Request } from './r2.ts';

const NOW = 1_700_000_000_000;
const md5 = (bytes: Uint8Array | string) => createHash('md5').update(bytes).digest('hex');
const minioStarting = useMinio();

// biome-ignore lint/suspicious/noExplicitAny: the answer's JSON, each field of it asserted by the tests
type Metadata = Record<string, any>;

function client(store: Store, application: string, bucket = 'files') {
  const names = { 'cell-r2-application': application, 'cell-r2-bucket': bucket };
  const decode = (answer: { status: number; headers: Record<string, string>; body: Uint8Array }) => {
    const size = Number(answer.headers['cf-r2-metadata-size'] ?? 0);
    const bytes = Buffer.from(answer.body);
    return {
      status: answer.status,
      error: answer.headers['cf-r2-error'] && JSON.parse(answer.headers['cf-r2-error']),
      metadata: (size > 0 ? JSON.parse(bytes.subarray(0, size).toString('utf8')) : undefined) as Metadata,
      body: bytes.subarray(size),
    };
  };
  const getRequest = (request: Record<string, unknown>): R2Request => ({
    method: 'GET',
    headers: {
      ...names,
      'cf-r2-request': Buffer.from(JSON.stringify({ version: 1, ...request })).toString('latin1'),
    },
    body: new Uint8Array(),
  });
  const putRequest = (request: Record<string, unknown>, value: Uint8Array, streamed: boolean): R2Request => {
    const json = Buffer.from(JSON.stringify({ version: 1, ...request }));
    const headers = { ...names, 'cf-r2-metadata-size': String(json.length) };
    return streamed
      ? {
          method: 'PUT',
          headers,
          body: json,
          value: { stream: Readable.from([Buffer.from(value)]), length: value.byteLength },
        }
      : { method: 'PUT', headers, body: Buffer.concat([json, value]) };
  };
  return {
    /** A put whose value arrives as a stream, as the bindings socket passes it on. */
    put: async (object: string, value: Uint8Array | string, options: Record<string, unknown> = {}) =>
      decode(
        await handleR2(
          store,
          putRequest({ method: 'put', object, ...options }, Buffer.from(value), true),
          NOW,
        ),
      ),
    /** A put with the value whole, as the node API's route sends it. */
    putWhole: async (object: string, value: Uint8Array | string, options: Record<string, unknown> = {}) =>
      decode(
        await handleR2(
          store,
          putRequest({ method: 'put', object, ...options }, Buffer.from(value), false),
          NOW,
        ),
      ),
    head: async (object: string) => decode(await handleR2(store, getRequest({ method: 'head', object }))),
    get: async (object: string, options: Record<string, unknown> = {}) =>
      decode(await handleR2(store, getRequest({ method: 'get', object, ...options }))),
    getStreamed: (object: string) => handleR2Streamed(store, getRequest({ method: 'get', object })),
    list: async (options: Record<string, unknown> = {}) =>
      decode(await handleR2(store, getRequest({ method: 'list', ...options }))),
    delete: async (object: string) =>
      decode(await handleR2(store, putRequest({ method: 'delete', object }, new Uint8Array(), false))),
    multipart: async (object: string, value: Uint8Array) => {
      const call = async (request: Record<string, unknown>, bytes: Uint8Array = new Uint8Array()) =>
        decode(await handleR2(store, putRequest(request, bytes, false), NOW)).metadata;
      const { uploadId } = await call({ method: 'createMultipartUpload', object });
      const { etag } = await call({ method: 'uploadPart', object, uploadId, partNumber: 1 }, value);
      return call({ method: 'completeMultipartUpload', object, uploadId, parts: [{ part: 1, etag }] });
    },
  };
}

describe('R2 on an S3 bucket: one object per key, its record in its metadata (docs/bindings.md "R2 buckets")', () => {
  let store: Store;
  let count = 0;
  const fresh = () => `app-${++count}`;
  const recordAt = (application: string, key: string) =>
    keys.runtimeR2Record(application, 'files', segments(encodeKey(Buffer.from(key))));
  const stored = async (application: string) =>
    (await store.list(keys.runtimeR2BucketPrefix(application, 'files'), { recursive: true })).objects.map(
      (o) => o.key.slice(keys.runtimeR2BucketPrefix(application, 'files').length),
    );

  before(async () => {
    const minio = await minioStarting;
    store = openS3Store(minio.bucketOptions(await minio.createBucket()));
  });
  after(async () => {
    await store?.close();
  });

  it('stores a put as one object holding the bytes, read back whole, by range and by S3 clients', async () => {
    const app = fresh();
    const r2 = client(store, app);
    const value = randomBytes(300_000);
    const put = await r2.put('photos/a.jpg', value, {
      httpFields: { contentType: 'image/jpeg', cacheExpiry: 1_800_000_000_123 },
      customFields: [
        { k: 'by', v: 'ünïcode 100% "quoted"  two spaces' },
        { k: 'emoji', v: '🙂' },
      ],
    });
    assert.equal(put.status, 200);
    assert.equal(put.metadata.etag, md5(value), 'the etag is the MD5 of the bytes, as R2 gives it');
    assert.equal(put.metadata.size, value.length);
    assert.deepEqual(await stored(app), [`objects/${segments(encodeKey(Buffer.from('photos/a.jpg')))}/-`]);
    const plain = await store.get(recordAt(app, 'photos/a.jpg'));
    assert.ok(plain && Buffer.from(plain.body).equals(value), 'an S3 client reads the bytes at the key');

    const head = await r2.head('photos/a.jpg');
    assert.equal(head.status, 200);
    assert.equal(head.metadata.etag, md5(value));
    assert.equal(head.metadata.size, value.length);
    assert.equal(head.metadata.version, put.metadata.version);
    assert.equal(head.metadata.uploaded, NOW);
    assert.deepEqual(head.metadata.httpFields, { contentType: 'image/jpeg', cacheExpiry: 1_800_000_000_123 });
    assert.deepEqual(head.metadata.customFields, [
      { k: 'by', v: 'ünïcode 100% "quoted"  two spaces' },
      { k: 'emoji', v: '🙂' },
    ]);
    assert.deepEqual(head.metadata.checksums, { 0: md5(value) });

    const streamed = await r2.getStreamed('photos/a.jpg');
    assert.equal(streamed.tail?.length, value.length, "a get passes the bucket's bytes on as they arrive");
    streamed.tail?.stream.destroy();
    const whole = await r2.get('photos/a.jpg');
    assert.ok(whole.body.equals(value));
    assert.deepEqual(whole.metadata.range, { offset: 0, length: value.length });
    const range = await r2.get('photos/a.jpg', { range: { offset: 1000, length: 10 } });
    assert.deepEqual(range.metadata.range, { offset: 1000, length: 10 });
    assert.ok(range.body.equals(value.subarray(1000, 1010)));
    const suffix = await r2.get('photos/a.jpg', { range: { suffix: 5 } });
    assert.ok(suffix.body.equals(value.subarray(value.length - 5)));
    const failed = await r2.get('photos/a.jpg', {
      onlyIf: { etagMatches: [{ type: 'strong', value: 'other' }] },
    });
    assert.equal(failed.status, 412);
    assert.equal(failed.error.v4code, 10031);
    assert.equal(failed.metadata.etag, md5(value), 'a failed condition answers the object without its bytes');
    assert.equal(failed.body.length, 0);

    const listed = await r2.list({ include: [0, 1] });
    assert.deepEqual(
      listed.metadata.objects.map((o: Metadata) => [o.name, o.etag, o.size, o.customFields.length]),
      [['photos/a.jpg', md5(value), value.length, 2]],
    );
    assert.equal((await r2.delete('photos/a.jpg')).status, 200);
    assert.deepEqual(await stored(app), []);
    assert.equal((await r2.head('photos/a.jpg')).error.v4code, 10007);
  });

  it('puts on a condition and with checksums in one object, the value checked first', async () => {
    const r2 = client(store, fresh());
    const sha256 = createHash('sha256').update('abc').digest('hex');
    const first = await r2.put('k', 'abc', { sha256, onlyIf: { etagDoesNotMatch: [{ type: 'wildcard' }] } });
    assert.equal(first.status, 200);
    assert.deepEqual((await r2.head('k')).metadata.checksums, { 0: md5('abc'), 2: sha256 });
    const refused = await r2.put('k', 'xyz', { onlyIf: { etagDoesNotMatch: [{ type: 'wildcard' }] } });
    assert.equal(refused.status, 412);
    const wrong = await r2.put('k', 'xyz', { sha256 });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.error.v4code, 10037);
    const replaced = await r2.putWhole('k', 'xyz', {
      onlyIf: { etagMatches: [{ type: 'strong', value: md5('abc') }] },
    });
    assert.equal(replaced.status, 200);
    assert.equal((await r2.get('k')).body.toString(), 'xyz');
  });

  it('keeps a record too large for S3 metadata as a record and a body, and a put over it deletes that body', async () => {
    const app = fresh();
    const r2 = client(store, app);
    // R2 allows 2,048 bytes of custom metadata; with the rest of the record that passes S3's 2 KB.
    const customFields = [{ k: 'notes', v: 'n'.repeat(2000) }];
    const big = await r2.put('doc', 'large metadata', { customFields });
    assert.equal(big.status, 200);
    const layout = await stored(app);
    assert.equal(layout.length, 2);
    assert.ok(layout.includes(`bodies/${big.metadata.version}`), layout.join());
    assert.deepEqual((await r2.head('doc')).metadata.customFields, customFields);
    assert.equal((await r2.get('doc')).body.toString(), 'large metadata');
    assert.equal((await r2.get('doc', { range: { offset: 6, length: 8 } })).body.toString(), 'metadata');
    assert.equal((await r2.list()).metadata.objects[0].etag, md5('large metadata'));

    const small = await r2.put('doc', 'small', { customFields: [{ k: 'notes', v: 'short' }] });
    assert.equal(small.status, 200);
    assert.deepEqual(await stored(app), [`objects/${segments(encodeKey(Buffer.from('doc')))}/-`]);
    assert.equal((await r2.get('doc')).body.toString(), 'small');
    // Just inside the bound, one object still.
    await r2.put('doc', 'edge', { customFields: [{ k: 'notes', v: 'e'.repeat(1800) }] });
    assert.equal((await stored(app)).length, 1);
    assert.equal((await r2.head('doc')).metadata.customFields[0].v.length, 1800);
  });

  it('reads an object written in the record layout, and a put over a multipart object deletes its parts', async () => {
    const app = fresh();
    const r2 = client(store, app);
    // The record layout as a store without metadata writes it: a record, the bytes a body.
    const version = 'ab'.repeat(16);
    await store.put(keys.runtimeR2Body(app, 'files', version), 'old bytes');
    await store.put(
      recordAt(app, 'old'),
      JSON.stringify({
        version,
        size: 9,
        etag: md5('old bytes'),
        uploaded: NOW - 1000,
        checksums: {},
        httpMetadata: { contentType: 'text/plain' },
        customMetadata: { from: 'before' },
      }),
    );
    const head = await r2.head('old');
    assert.equal(head.metadata.etag, md5('old bytes'));
    assert.deepEqual(head.metadata.customFields, [{ k: 'from', v: 'before' }]);
    assert.equal((await r2.get('old')).body.toString(), 'old bytes');
    assert.equal((await r2.get('old', { range: { offset: 4, length: 5 } })).body.toString(), 'bytes');
    assert.equal((await r2.put('old', 'new bytes')).status, 200);
    assert.deepEqual(await stored(app), [`objects/${segments(encodeKey(Buffer.from('old')))}/-`]);
    assert.equal((await r2.get('old')).body.toString(), 'new bytes');

    const completed = await r2.multipart('parts', Buffer.from('one part'));
    assert.match(completed.etag, /-1$/);
    assert.equal((await r2.get('parts')).body.toString(), 'one part');
    assert.ok((await stored(app)).some((key) => key.startsWith('bodies/')));
    await r2.put('parts', 'replaced');
    assert.equal((await stored(app)).filter((key) => key.startsWith('bodies/')).length, 0);
    assert.equal((await r2.get('parts')).body.toString(), 'replaced');
  });
});
