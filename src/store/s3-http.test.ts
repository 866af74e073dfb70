// The streaming store against a real MinIO, directly and behind the fault-injecting proxy: its HEAD
// and PUT go through s3-http.ts (its own requests, signed by the SDK's signer), its GET through the SDK, and together
// they give the SDK's answers and failures (the bytes, metadata, ranges, conditions, retries,
// settled ambiguity, refusals).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { type Minio, useMinio } from '../../test/helpers/minio.ts';
import { type Fault, type ProxiedRequest, startS3Proxy } from '../../test/helpers/s3-proxy.ts';
import { Problem } from '../problem.ts';
import { openS3Store, type S3StoreOptions } from './s3.ts';
import { CasConflict, type Store, type StreamingStore } from './store.ts';

const minioStarting = useMinio();
minioStarting.catch(() => {}); // reported by the `before` below

describe('S3 store, streaming calls (HEAD and PUT through its own requests)', () => {
  let minio: Minio;
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    minio = await minioStarting;
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function open(extra: Partial<S3StoreOptions> = {}, fault?: (r: ProxiedRequest) => Fault) {
    const bucket = await minio.createBucket();
    const proxy = fault ? await startS3Proxy(minio.endpoint, { fault }) : null;
    const store = openS3Store({
      ...minio.bucketOptions(bucket),
      attempts: 3,
      backoffMs: 1,
      ...(proxy ? { endpoint: proxy.endpoint } : {}),
      ...extra,
    });
    cleanups.push(async () => {
      await store.close();
      await proxy?.close();
    });
    return { store, streaming: store.streaming as StreamingStore, proxy, bucket };
  }

  it('writes, heads and reads objects with metadata, whole and in ranges, under keys of any characters', async () => {
    const { store, streaming } = await open({ prefix: 'some prefix/ü' });
    const body = randomBytes(300_000);
    const key = "a b/ü+=&?#%!'()*~,;:@$/é";
    const etag = await streaming.write(
      key,
      Readable.from([body.subarray(0, 100_000), body.subarray(100_000)]),
      body.length,
      { 'svc-r2': '%7B%22a%22%3A1%7D' },
    );
    const head = await streaming.head(key);
    assert.equal(head?.etag, etag);
    assert.equal(head?.size, body.length);
    assert.deepEqual(head?.metadata, { 'svc-r2': '%7B%22a%22%3A1%7D' });
    const read = await streaming.read(key);
    assert.equal(read?.etag, etag);
    assert.deepEqual(await buffer(read!.body), body);
    const range = await streaming.read(key, { offset: 1000, length: 5000 });
    assert.equal(range?.size, 5000);
    assert.deepEqual(await buffer(range!.body), body.subarray(1000, 6000));
    // The SDK's path sees the same object.
    const seen = await store.get(key);
    assert.equal(seen?.etag, etag);
    assert.deepEqual(Buffer.from(seen!.body), body);
    assert.equal(await streaming.head('absent'), null);
    assert.equal(await streaming.read('absent'), null);
  });

  it('a whole body is written with its conditions: a failed one is a CasConflict, the object untouched', async () => {
    const { store, streaming } = await open();
    const first = await streaming.write('k', Buffer.from('one'), 3, {}, { ifNoneMatch: '*' });
    await assert.rejects(streaming.write('k', Buffer.from('two'), 3, {}, { ifNoneMatch: '*' }), CasConflict);
    await assert.rejects(streaming.write('k', Buffer.from('two'), 3, {}, { ifMatch: '"0000"' }), CasConflict);
    await assert.rejects(streaming.write('gone', Buffer.from('two'), 3, {}, { ifMatch: first }), CasConflict);
    const second = await streaming.write('k', Buffer.from('two'), 3, {}, { ifMatch: first });
    assert.notEqual(second, first);
    assert.equal(Buffer.from((await store.get('k'))!.body).toString(), 'two');
  });

  it('a stream that fails midway writes nothing', async () => {
    const { streaming } = await open();
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024));
        this.destroy(new Error('the sender went away'));
      },
    });
    await assert.rejects(streaming.write('cut', failing, 1024 * 1024, {}));
    assert.equal(await streaming.head('cut'), null);
  });

  it('reads refused with 503 are retried; a write whose answer is lost is settled as ours by its nonce', async () => {
    let gets = 0;
    let puts = 0;
    const { streaming, proxy } = await open({}, (r) => {
      if (r.method === 'GET' && gets++ < 2) return 'refuse';
      if (r.method === 'PUT' && puts++ < 1) return 'lose-answer';
      return undefined;
    });
    const etag = await streaming.write('k', Buffer.from('mine'), 4, {}, { ifNoneMatch: '*' });
    assert.equal(proxy!.seen.filter((r) => r.method === 'PUT').length, 1, 'settled by reading back');
    const read = await streaming.read('k');
    assert.equal(read?.etag, etag);
    assert.equal((await buffer(read!.body)).toString(), 'mine');
  });

  it('refused credentials are store-unavailable saying so, at once', async () => {
    const { bucket, proxy } = await open({}, () => undefined);
    const store: Store = openS3Store({
      ...minio.bucketOptions(bucket),
      endpoint: proxy!.endpoint,
      secretKey: 'wrong',
      attempts: 3,
      backoffMs: 1,
    });
    cleanups.push(() => store.close());
    await assert.rejects(store.streaming!.write('k', Buffer.from('x'), 1, {}), (err: unknown) => {
      assert.ok(err instanceof Problem, String(err));
      assert.equal(err.title, 'Bucket refused the credentials');
      assert.match(err.detail!, /answered SignatureDoesNotMatch/);
      return true;
    });
    assert.equal(proxy!.seen.filter((r) => r.method === 'PUT').length, 1);
    await assert.rejects(store.streaming!.read('k'), /SignatureDoesNotMatch/);
  });
});
