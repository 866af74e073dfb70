// The bucket self-test at start (docs/cli.md "Output and exit status"): `svc sail` on a
// bucket behind a proxy that drops conditional headers exits 1 with the store-nonconforming
// failure line, while the same proxy passing those headers through serves. MinIO is real;
// the proxy (test/helpers/s3-proxy.ts) plays the nonconforming middlebox.

import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { Problem } from '../src/problem.ts';
import { openS3Store } from '../src/store/s3.ts';
import { selfTestStore } from '../src/store/selftest.ts';
import type { Store } from '../src/store/store.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { allowAnonymous, type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import { freePort, runSvc, startSail, tempDir } from './helpers/svc.ts';

// Started at the top level so that MinIO lives until the whole file has run.
const minioStarting = useMinio();
minioStarting.catch(() => {}); // reported by the `before` below

const CONDITIONAL = ['if-match', 'if-none-match'];

describe('bucket self-test', () => {
  let minio: Minio;
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    minio = await minioStarting;
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  /** A fresh bucket open to anonymous requests, a proxy in front of it, and a direct store. */
  async function behindProxy(stripHeaders: string[]) {
    const bucket = await minio.createBucket();
    await allowAnonymous(minio, bucket);
    const proxy: S3Proxy = await startS3Proxy(minio.endpoint, { stripHeaders, anonymous: true });
    const direct: Store = openS3Store(minio.bucketOptions(bucket));
    cleanups.push(async () => {
      await direct.close();
      await proxy.close();
    });
    const flags = [
      '--endpoint',
      proxy.endpoint,
      '--bucket',
      bucket,
      '--region',
      minio.region,
      '--access-key',
      minio.accessKey,
      '--secret-key',
      minio.secretKey,
    ];
    return { bucket, proxy, direct, flags };
  }

  it('svc sail refuses a bucket whose proxy drops If-Match and If-None-Match', async () => {
    const { bucket, proxy, direct, flags } = await behindProxy(CONDITIONAL);
    const stateDir = tempDir('svc-node-');
    cleanups.push(() => rm(stateDir, { recursive: true, force: true }));
    const listen = `127.0.0.1:${await freePort()}`;
    const run = await runSvc(['sail', '--listen', listen, '--state-dir', stateDir, ...flags], {
      env: { SVC_LOG_LEVEL: 'error' },
    });
    assert.equal(run.code, 1, run.stderr);
    assert.doesNotMatch(run.stdout, /listening on/);
    const lines = run.stderr.trim().split('\n');
    assert.equal(
      lines.at(-1),
      `svc: Bucket ignores conditional writes: s3://${bucket}/ at ${proxy.endpoint} accepted a write ` +
        'with a stale If-Match ETag; it, or a proxy in front of it, drops conditional headers, ' +
        'and svc cannot run on it [urn:svc:store-nonconforming]',
    );
    // The proxy really did strip: MinIO saw writes, none of them conditional.
    const puts = proxy.seen.filter((r) => r.method === 'PUT');
    assert.ok(puts.length >= 3, `${puts.length} writes`);
    assert.ok(puts.some((r) => r.headers['if-match'] !== undefined));
    // Its scratch objects are cleaned up even when it refuses.
    assert.deepEqual(await direct.list('', { recursive: true }), { objects: [], prefixes: [] });
  });

  it('svc sail serves through the same proxy when it passes conditional headers on', async () => {
    const { direct, flags } = await behindProxy([]);
    const sail = await startSail(flags);
    try {
      const health = await fetch(`${sail.url}/.well-known/svc/health`);
      assert.equal(health.status, 200);
      await health.body?.cancel();
    } finally {
      assert.equal(await sail.stop(), 0);
    }
    assert.deepEqual((await direct.list('_svc/selftest/', { recursive: true })).objects, []);
  });

  it('names a bucket that ignores If-None-Match on an existing key', async () => {
    const { proxy, bucket } = await behindProxy(['if-none-match']);
    const store = openS3Store({ ...minio.bucketOptions(bucket), endpoint: proxy.endpoint });
    cleanups.push(() => store.close());
    await assert.rejects(selfTestStore(store), (err: unknown) => {
      assert.ok(err instanceof Problem, String(err));
      assert.equal(err.code, 'store-nonconforming');
      assert.equal(err.title, 'Bucket ignores conditional writes');
      assert.match(err.detail!, /accepted If-None-Match: \* on a key that exists/);
      assert.ok(err.detail!.includes(proxy.endpoint), err.detail);
      return true;
    });
  });

  it('a conforming MinIO passes and keeps no scratch object', async () => {
    const bucket = await minio.createBucket();
    const store = openS3Store({ ...minio.bucketOptions(bucket), prefix: 'fleet' });
    cleanups.push(() => store.close());
    await selfTestStore(store);
    assert.deepEqual(await store.list('', { recursive: true }), { objects: [], prefixes: [] });
  });
});
