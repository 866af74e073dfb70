// The S3 store's own promises beyond the shared contract (docs/architecture.md "How a request flows"), against a real MinIO behind a fault-injecting proxy:
// an ambiguous conditional write is settled by its nonce, transient errors are retried with
// backoff, and a bucket that keeps failing is `store-unavailable` naming the endpoint.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Problem } from '../src/problem.ts';
import { openS3Store, type S3StoreOptions } from '../src/store/s3.ts';
import { CasConflict, type Store } from '../src/store/store.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { type Fault, type ProxiedRequest, type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import { freePort } from './helpers/svc.ts';

const ATTEMPTS = 3;
// Started at the top level so that MinIO lives until the whole file has run.
const minioStarting = useMinio();
minioStarting.catch(() => {}); // reported by the `before` below

describe('S3 store behind a faulty network', () => {
  let minio: Minio;
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    minio = await minioStarting;
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /** A fresh bucket reached through a proxy that applies `fault` to each request. */
  async function faulty(
    fault: (request: ProxiedRequest) => Fault,
    extra: Partial<S3StoreOptions> = {},
  ): Promise<{ store: Store; direct: Store; proxy: S3Proxy; bucket: string }> {
    const bucket = await minio.createBucket();
    const proxy = await startS3Proxy(minio.endpoint, { fault });
    const options = { ...minio.bucketOptions(bucket), attempts: ATTEMPTS, backoffMs: 1, ...extra };
    const store = openS3Store({ ...options, endpoint: proxy.endpoint });
    const direct = openS3Store(options);
    cleanups.push(async () => {
      await store.close();
      await direct.close();
      await proxy.close();
    });
    return { store, direct, proxy, bucket };
  }

  /** Faults the first `count` requests of one method, then lets everything through. */
  function firstOf(method: string, count: number, fault: Fault) {
    let seen = 0;
    return (request: ProxiedRequest) => (request.method === method && seen++ < count ? fault : undefined);
  }

  const puts = (proxy: S3Proxy) => proxy.seen.filter((r) => r.method === 'PUT').length;

  it('a conditional create whose answer is lost is settled as ours by its nonce', async () => {
    const { store, direct, proxy } = await faulty(firstOf('PUT', 1, 'lose-answer'));
    const etag = await store.put('lease.json', 'ours', { ifNoneMatch: '*' });
    const stored = await direct.get('lease.json');
    assert.equal(new TextDecoder().decode(stored!.body), 'ours');
    assert.equal(stored!.etag, etag);
    assert.equal(puts(proxy), 1, 'settled by reading back, not by writing again');
  });

  it('a conditional replace whose answer is lost is settled as ours, not reported as a conflict', async () => {
    const { store, direct, proxy } = await faulty(firstOf('PUT', 1, 'lose-answer'));
    const first = await direct.put('lease.json', 'old'); // `direct` bypasses the proxy
    const etag = await store.put('lease.json', 'new', { ifMatch: first });
    assert.equal((await direct.stat('lease.json'))!.etag, etag);
    assert.equal(puts(proxy), 1);
  });

  it('a lost answer to a write that lost its condition ends in one CasConflict, the object untouched', async () => {
    const { store, direct, proxy } = await faulty(firstOf('PUT', 1, 'lose-answer'));
    const stale = await direct.put('lease.json', 'one');
    const current = await direct.put('lease.json', 'two', { ifMatch: stale });
    await assert.rejects(store.put('lease.json', 'mine', { ifMatch: stale }), CasConflict);
    assert.equal((await direct.stat('lease.json'))!.etag, current);
    // Ambiguous, read back (not ours), retried, refused with 412 after our own retry, read back again.
    assert.equal(puts(proxy), 2);
  });

  it('a write refused with 503 SlowDown is retried with backoff and lands', async () => {
    const { store, direct, proxy } = await faulty(firstOf('PUT', ATTEMPTS - 1, 'refuse'));
    const etag = await store.put('a/b', 'body', { ifNoneMatch: '*' });
    assert.equal((await direct.stat('a/b'))!.etag, etag);
    assert.equal(puts(proxy), ATTEMPTS);
  });

  it('a 409 ConditionalRequestConflict is retried, not reported as a lost condition', async () => {
    const { store, direct, proxy } = await faulty(firstOf('PUT', 1, 'conflict'));
    const first = await direct.put('k', 'one');
    const etag = await store.put('k', 'two', { ifMatch: first });
    assert.equal((await direct.stat('k'))!.etag, etag);
    assert.equal(puts(proxy), 2);
  });

  it('reads and listings are retried too', async () => {
    const { store, direct, proxy } = await faulty(firstOf('GET', 2, 'refuse'));
    await direct.put('r/one', '1');
    assert.deepEqual(
      (await store.list('r/', { recursive: true })).objects.map((o) => o.key),
      ['r/one'],
    );
    assert.equal(new TextDecoder().decode((await store.get('r/one'))!.body), '1');
    assert.equal(proxy.seen.filter((r) => r.method === 'GET').length, 4);
  });

  it('a bucket that keeps failing is store-unavailable naming the endpoint, after bounded attempts', async () => {
    const { store, proxy } = await faulty(() => 'refuse');
    for (const run of [
      () => store.put('k', 'x', { ifNoneMatch: '*' }),
      () => store.put('k', 'x'),
      () => store.get('k'),
      () => store.list('', { recursive: true }),
      () => store.delete('k'),
    ]) {
      const before = proxy.seen.length;
      await assert.rejects(run(), isUnavailableAt(proxy.endpoint));
      assert.ok(proxy.seen.length - before <= 2 * ATTEMPTS, `${proxy.seen.length - before} requests`);
    }
  });

  it('an endpoint nobody listens on is store-unavailable naming it', async () => {
    const endpoint = `http://127.0.0.1:${await freePort()}`;
    const store = openS3Store({ ...minio.bucketOptions('nowhere'), endpoint, attempts: 2, backoffMs: 1 });
    cleanups.push(() => store.close());
    await assert.rejects(store.get('k'), isUnavailableAt(endpoint));
    await assert.rejects(store.put('k', 'x', { ifNoneMatch: '*' }), isUnavailableAt(endpoint));
  });

  it('refused credentials are store-unavailable at once, not retried', async () => {
    const { proxy, bucket } = await faulty(() => undefined);
    const store = openS3Store({
      ...minio.bucketOptions(bucket),
      endpoint: proxy.endpoint,
      secretKey: 'wrong',
      attempts: ATTEMPTS,
      backoffMs: 1,
    });
    cleanups.push(() => store.close());
    await assert.rejects(store.put('k', 'x'), (err: unknown) => {
      assert.ok(err instanceof Problem, String(err));
      assert.equal(err.code, 'store-unavailable');
      assert.equal(err.title, 'Bucket refused the credentials');
      assert.match(
        err.detail!,
        new RegExp(`^${proxy.endpoint} \\(bucket ${bucket}\\) answered SignatureDoesNotMatch`),
      );
      assert.match(err.detail!, /check the access key and secret/);
      return true;
    });
    assert.equal(puts(proxy), 1);
  });

  it('half a key pair is invalid-input naming the missing half', () => {
    const { accessKey, secretKey, ...rest } = minio.bucketOptions('b');
    assert.throws(
      () => openS3Store({ ...rest, accessKey }),
      (err: unknown) =>
        err instanceof Problem &&
        err.code === 'invalid-input' &&
        err.title === 'Invalid setting bucket.secretKey',
    );
    assert.throws(
      () => openS3Store({ ...rest, secretKey }),
      (err: unknown) =>
        err instanceof Problem &&
        err.code === 'invalid-input' &&
        err.title === 'Invalid setting bucket.accessKey',
    );
  });

  it('a missing bucket setting is invalid-input', () => {
    assert.throws(
      () => openS3Store({ endpoint: minio.endpoint }),
      (err: unknown) =>
        err instanceof Problem &&
        err.code === 'invalid-input' &&
        err.title === 'Invalid setting bucket.bucket',
    );
  });
});

function isUnavailableAt(endpoint: string) {
  return (err: unknown) => {
    assert.ok(err instanceof Problem, String(err));
    assert.equal(err.code, 'store-unavailable');
    assert.equal(err.status, 503);
    assert.equal(err.title, 'Bucket is unavailable');
    assert.ok(err.detail!.includes(endpoint), err.detail);
    return true;
  };
}
