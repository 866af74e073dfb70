// R2 in real workerd (docs/bindings.md "R2 buckets"): examples/r2 published with the real
// `cell publish` and served by `cell serve` (its private runtime host answers the R2 calls on the
// bindings socket), on the local-directory bucket and on MinIO. examples/r2's /conformance runs
// every method, option and limit inside workerd; what it must see comes from Cloudflare's R2
// Workers API reference (developers.cloudflare.com/r2/api/workers/workers-api-reference/) and
// Miniflare's R2 tests and error words (workers-sdk packages/miniflare/test/plugins/r2/index.spec.ts,
// packages/miniflare/src/workers/r2/errors.worker.ts), as workerd shows them:
// `<operation>: <message> (<v4 code>)`. And two applications with the same bucket_name never see
// each other's objects.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { openDirStore } from '../src/store/dir.ts';
import { type Bucket, call, keyArg, openBucket } from './helpers/applications.ts';
import {
  type BucketEnv,
  type CellProcess,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  s3BucketEnv,
  startServing,
} from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { runSvc, tempDir, waitFor } from './helpers/svc.ts';

const FOLLOW_DEADLINE_MS = 60_000;
const minioStarting = useMinio();

const md5 = (text: string) => createHash('md5').update(text).digest('hex');
type Outcome = { ok?: unknown; error?: string };

/** An R2Object as examples/r2 describes it, for a single put of `text` (etag: its MD5 hex). */
function described(key: string, text: string, more: Record<string, unknown> = {}) {
  const etag = md5(text);
  return {
    key,
    size: Buffer.byteLength(text),
    etag,
    httpEtag: `"${etag}"`,
    versionLength: 32,
    uploadedIsDate: true,
    checksums: { md5: etag },
    hasBody: false,
    ...more,
  };
}

/** What /conformance must report: objects as Cloudflare's R2 API answers them, refusals in workerd's words. */
function checkConformance(r: Record<string, Outcome>): void {
  // R2 API reference: get and head answer null for an absent key.
  assert.deepEqual(r.missingGet, { ok: null });
  assert.deepEqual(r.missingHead, { ok: null });
  const textMetadata = {
    httpMetadata: { contentType: 'text/plain; charset=utf-8', cacheControl: 'max-age=60' },
    customMetadata: { by: 'ünïcode' },
  };
  assert.deepEqual(r.putText, { ok: described('text', 'héllo', textMetadata) });
  const whole = { range: { offset: 0, length: 6 } };
  assert.deepEqual(r.head, { ok: described('text', 'héllo', { ...textMetadata, ...whole }) });
  assert.deepEqual(r.get, {
    ok: { ...described('text', 'héllo', { ...textMetadata, ...whole, hasBody: true }), text: 'héllo' },
  });
  assert.deepEqual(r.writeHttpMetadata, {
    ok: { 'cache-control': 'max-age=60', 'content-type': 'text/plain; charset=utf-8' },
  });
  assert.deepEqual(r.bytes, { ok: [0, 1, 2, 255] });
  assert.deepEqual(r.stream, { ok: 'strea' });
  assert.deepEqual(r.unknownLengthStream, {
    error:
      'TypeError: Provided readable stream must have a known length (request/response body or readable half of FixedLengthStream)',
  });
  assert.deepEqual(r.empty, { ok: { size: 0, text: '' } });
  assert.deepEqual(r.rangeOffsetLength, { ok: { range: { offset: 2, length: 3 }, text: 'cde' } });
  assert.deepEqual(r.rangeSuffix, { ok: 'xyz' });
  assert.deepEqual(r.rangeHeaders, { ok: 'bcd' });
  assert.deepEqual(r.rangeUnsatisfiable, {
    error: 'Error: get: The requested range is not satisfiable (10039)',
  });
  // A failed onlyIf makes get answer the object without its body, put answer null.
  assert.deepEqual(r.getIfMatch, { ok: true });
  assert.deepEqual(r.getIfMatchFails, {
    ok: described('alphabet', 'abcdefghijklmnopqrstuvwxyz', {
      httpMetadata: {},
      customMetadata: {},
      range: { offset: 0, length: 26 },
    }),
  });
  assert.deepEqual(r.getIfNoneMatchHeaders, { ok: false });
  assert.deepEqual(r.putIfMatchFails, { ok: null });
  assert.deepEqual(r.putCreateOnly, { ok: [true, false, 'a'] });
  assert.deepEqual(r.md5, { ok: { md5: md5('value') } });
  assert.deepEqual(r.badMd5, {
    error: `Error: put: The MD5 checksum you specified did not match what we received.\nYou provided a MD5 checksum with value: ${'0'.repeat(32)}\nActual MD5 was: ${md5('value')} (10037)`,
  });
  assert.deepEqual(r.sha256, {
    ok: { md5: md5('value'), sha256: createHash('sha256').update('value').digest('hex') },
  });
  assert.match(
    r.badSha1!.error ?? '',
    /^Error: put: The SHA-1 checksum you specified did not match what we received\./,
  );
  assert.deepEqual(r.bigMetadata, {
    error: 'Error: put: Your metadata headers exceed the maximum allowed metadata size. (10012)',
  });
  assert.deepEqual(r.longKey, { error: 'Error: head: The specified object name is not valid. (10020)' });
  assert.deepEqual(r.longestKey, { ok: null });

  const listed = [
    'list/a',
    'list/a/b',
    'list/ab',
    'list/b',
    'list/d/1',
    'list/d/2',
    'list/é',
    'list/\u{1F600}',
  ];
  // Without `include`, a listed object carries neither kind of metadata (R2 API reference, R2ListOptions).
  assert.deepEqual(r.list, { ok: { names: listed, truncated: false, first: described('list/a', 'list/a') } });
  assert.deepEqual(r.listInclude, {
    ok: ['list/a', 'list/a/b', 'list/ab'].map((key) => [key, { contentType: 'text/plain' }, { k: key }]),
  });
  assert.deepEqual(r.listDelimiter, {
    ok: {
      names: ['list/a', 'list/ab', 'list/b', 'list/é', 'list/\u{1F600}'],
      delimitedPrefixes: ['list/a/', 'list/d/'],
    },
  });
  assert.deepEqual(r.listPages, {
    ok: [
      { names: listed.slice(0, 3), truncated: true },
      { names: listed.slice(3, 6), truncated: true },
      { names: listed.slice(6), truncated: false },
    ],
  });
  assert.deepEqual(r.listLimitTooHigh, {
    error: 'Error: list: MaxKeys params must be positive integer <= 1000. (10022)',
  });
  assert.deepEqual(r.deleteOne, { ok: null });
  assert.deepEqual(r.deleteMany, { ok: ['list/a/b'] });

  // Multipart: R2's etag for a multipart object is the MD5 of the parts' MD5s, then `-<parts>`.
  const partSize = 5 * 1024 * 1024;
  const partMd5s = [md5('a'.repeat(partSize)), md5('b')].map((h) => Buffer.from(h, 'hex'));
  assert.deepEqual(r.multipart, {
    ok: {
      key: 'multi',
      size: partSize + 1,
      etag: `${createHash('md5').update(Buffer.concat(partMd5s)).digest('hex')}-2`,
      httpMetadata: { contentType: 'text/plain' },
      across: 'ab',
    },
  });
  assert.deepEqual(r.multipartAborted, {
    error: 'Error: uploadPart: The specified multipart upload does not exist. (10024)',
  });
  assert.deepEqual(r.multipartTooSmall, {
    error:
      'Error: completeMultipartUpload: Your proposed upload is smaller than the minimum allowed object size. (10011)',
  });
}

describe('R2 in workerd, through cell publish and cell serve', () => {
  const running: CellProcess[] = [];
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  const serve = async (application: string, bucket: BucketEnv) => {
    const published = await publish(join(EXAMPLES, 'r2'), application, bucket);
    assert.equal(published.code, 0, published.stderr);
    assert.match(published.stderr, /cell: warning: .*ignoring "r2_buckets\[0\]\.preview_bucket_name"/);
    const cell = await startServing(application, 'node-r2', bucket, {
      deployment: published.published!.deployment,
    });
    running.push(cell);
    return cell;
  };

  const conformance = async (cell: CellProcess) => {
    const answer = await fetchText(`${cell.url}/conformance`);
    assert.equal(answer?.status, 200, `${answer?.body}\n${cell.stderr()}`);
    checkConformance(JSON.parse(answer!.body));
  };

  /** The example's object API: PUT, GET (with a Range), DELETE of /objects/<key>, GET /objects. */
  const objects = (cell: CellProcess) => ({
    put: (key: string, body: string) =>
      fetchText(`${cell.url}/objects/${encodeURIComponent(key)}`, {
        method: 'PUT',
        body,
        headers: { 'content-type': 'text/plain' },
      }),
    get: (key: string, headers: Record<string, string> = {}) =>
      fetchText(`${cell.url}/objects/${encodeURIComponent(key)}`, { headers }),
    delete: (key: string) =>
      fetchText(`${cell.url}/objects/${encodeURIComponent(key)}`, { method: 'DELETE' }),
    list: async () => JSON.parse((await fetchText(`${cell.url}/objects`))!.body) as { key: string }[],
  });

  it('passes the conformance run on the local-directory bucket, keeps the objects under the application, and keeps applications apart', async () => {
    const dir = tempDir('r2-bucket-');
    const bucket = dirBucketEnv(dir);
    const a = await serve('r2-a', bucket);
    await conformance(a);
    const store = await openDirStore(dir);
    try {
      const records = await store.list(keys.runtimeR2RecordsPrefix('r2-a', 'files'), { recursive: true });
      assert.ok(records.objects.length >= 10, 'one record per object under fleets/r2-a/r2/files/objects/');
    } finally {
      await store.close();
    }

    // Another application with a bucket of the same name reaches none of r2-a's objects.
    const b = await serve('r2-b', bucket);
    const [oa, ob] = [objects(a), objects(b)];
    assert.equal((await oa.put('shared', 'from-a'))?.status, 200);
    assert.equal((await ob.get('shared'))?.status, 404);
    assert.equal((await ob.get('text'))?.status, 404);
    assert.deepEqual(await ob.list(), []);
    assert.equal((await ob.put('shared', 'from-b'))?.status, 200);
    assert.deepEqual(await oa.get('shared'), { status: 200, body: 'from-a' });
    assert.deepEqual(await ob.get('shared'), { status: 200, body: 'from-b' });
    assert.deepEqual(await oa.get('shared', { range: 'bytes=5-' }), { status: 206, body: 'a' });
    assert.equal((await ob.delete('shared'))?.status, 204);
    assert.deepEqual(await oa.get('shared'), { status: 200, body: 'from-a' });
    assert.deepEqual(await ob.list(), []);
  });

  describe('on MinIO', () => {
    let minio: Minio;
    before(async () => {
      minio = await minioStarting;
    });

    it('passes the same conformance run on a real S3 server', async () => {
      const name = await minio.createBucket();
      const options = minio.bucketOptions(name);
      const cell = await serve('r2-m', s3BucketEnv(options, { prefix: 'fleet-r2/' }));
      await conformance(cell);
      const o = objects(cell);
      // An object and one "below" it coexist, which MinIO cannot hold as plain keys.
      assert.equal((await o.put('dir', 'file'))?.status, 200);
      assert.equal((await o.put('dir/child', 'nested'))?.status, 200);
      assert.deepEqual(await o.get('dir'), { status: 200, body: 'file' });
      assert.deepEqual(await o.get('dir/child'), { status: 200, body: 'nested' });
    });
  });
});

describe('R2 through the node daemon', () => {
  let bucket: Bucket;
  before(async () => {
    bucket = await openBucket();
  });
  after(async () => {
    await bucket.close();
  });

  it("serves the runtimes' R2 calls on <state dir>/bindings.sock, the socket KV's calls use", async () => {
    const admin = await bucket.operator('op-r2', 'admin', ['*']);
    const node = await bucket.sail(['--cell-bin', CELL_REAL]);
    assert.equal(statSync(join(node.stateDir, 'bindings.sock')).mode & 0o777, 0o600);
    const run = await runSvc(['deploy', join(EXAMPLES, 'r2'), '--node', node.url, '--key', keyArg(admin)], {
      timeoutMs: 120_000,
    });
    assert.equal(run.code, 0, run.stderr);
    const port = await waitFor(
      async () => {
        const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
          processes: { application: string; port: number; ready: boolean }[];
        };
        const p = state.processes.find((process) => process.application === 'r2');
        return p?.ready ? p.port : undefined;
      },
      () => `r2 ready\n${node.log()}`,
      FOLLOW_DEADLINE_MS,
    );
    const url = `http://127.0.0.1:${port}/objects/k`;
    const put = await fetchText(url, { method: 'PUT', body: 'through-the-daemon' });
    assert.equal(put?.status, 200, put?.body);
    assert.deepEqual(await fetchText(url), { status: 200, body: 'through-the-daemon' });
    const records = await bucket.store.list(keys.runtimeR2RecordsPrefix('r2', 'files'), { recursive: true });
    assert.equal(records.objects.length, 1, 'the object sits in the bucket under fleets/r2/r2/files/');
  });
});
