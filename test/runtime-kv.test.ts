// Workers KV in real workerd (docs/bindings.md "KV namespaces"): examples/kv published with the
// real `cell publish` and served by `cell serve` (its private runtime host answers the KV calls),
// on the local-directory bucket and on MinIO. examples/kv's /conformance runs every method and
// limit inside workerd; what it must see comes from Cloudflare's KV docs
// (developers.cloudflare.com/kv/api/, .../kv/platform/limits/: keys ≤ 512 bytes, values ≤ 25 MiB,
// metadata ≤ 1024 bytes, expirationTtl ≥ 60, list ≤ 1000 keys in UTF-8 byte order) and Miniflare's
// KV tests and gateway words (workers-sdk packages/miniflare/test/plugins/kv/index.spec.ts,
// packages/miniflare/src/workers/kv/validator.worker.ts). And one application never reads another's
// namespace of the same id.

import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodeKey } from '../runtime/src/bindings/kv.ts';
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

const byteOrder = (names: string[]) =>
  [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
const LISTED = byteOrder(['b', 'a', 'ab', 'a/b', 'é', '\u{1F600}', 'z'.repeat(507)].map((k) => `list:${k}`));

type Outcome = { ok?: unknown; error?: string };

/** What /conformance must report: values as Cloudflare's KV API answers them, refusals in workerd's words. */
function checkConformance(r: Record<string, Outcome> & { now: number }): void {
  assert.deepEqual(r.missing, { ok: null }, 'get of a missing key is null');
  assert.deepEqual(r.text, { ok: 'héllo' });
  assert.deepEqual(r.textAsArrayBuffer, { ok: [...Buffer.from('héllo')] });
  assert.deepEqual(r.textAsStream, { ok: 'héllo' });
  assert.deepEqual(r.bytes, { ok: [0, 1, 2, 255] });
  assert.deepEqual(r.json, { ok: { a: [1, 2] } });
  assert.deepEqual(r.withMetadata, {
    ok: { value: { a: [1, 2] }, metadata: { by: 'ünïcode', n: 7 }, cacheStatus: null },
  });
  assert.deepEqual(r.noMetadata, { ok: { value: 'héllo', metadata: null, cacheStatus: null } });
  assert.deepEqual(r.emptyValue, { ok: '' });
  assert.deepEqual(r.overwrite, { ok: 'two' });
  assert.deepEqual(r.deleted, { ok: null }, 'delete of a missing key succeeds');
  assert.deepEqual(r.bulk, { ok: { text: 'héllo', missing: null, json: '{"a":[1,2]}' } });
  assert.deepEqual(r.bulkJsonWithMetadata, {
    ok: { json: { value: { a: [1, 2] }, metadata: { by: 'ünïcode', n: 7 } } },
  });

  const all = r.listAll!.ok as { keys: { name: string }[]; list_complete: boolean };
  assert.deepEqual(
    all.keys.map((k) => k.name),
    LISTED,
    'list answers keys in UTF-8 byte order',
  );
  assert.equal(all.list_complete, true);
  assert.deepEqual(
    (r.listPrefixA!.ok as { keys: { name: string }[] }).keys.map((k) => k.name),
    ['list:a', 'list:a/b', 'list:ab'],
  );
  const pages = r.listPages!.ok as { names: string[]; complete: boolean }[];
  assert.deepEqual(
    pages.flatMap((p) => p.names),
    LISTED,
  );
  assert.deepEqual(
    pages.map((p) => [p.names.length, p.complete]),
    [
      [3, false],
      [3, false],
      [1, true],
    ],
  );
  const described = Object.fromEntries(
    (r.listExpirationAndMetadata!.ok as { name: string }[]).map(({ name, ...rest }) => [name, rest]),
  );
  assert.deepEqual(described.json, { metadata: { by: 'ünïcode', n: 7 } });
  assert.ok(
    Math.abs((described.ttl as { expiration: number }).expiration - (r.now + 3600)) <= 5,
    JSON.stringify(described),
  );
  assert.deepEqual(described.abs, { expiration: r.now + 7200 });

  assert.deepEqual(r.emptyKey, { error: 'TypeError: Key name cannot be empty.' });
  assert.deepEqual(r.dotKey, { error: 'TypeError: "." is not allowed as a key name.' });
  assert.deepEqual(r.dotDotKey, { error: 'TypeError: ".." is not allowed as a key name.' });
  assert.deepEqual(r.longKey, {
    error: 'Error: KV GET failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512.',
  });
  assert.deepEqual(r.longestKey, { ok: null });
  assert.deepEqual(r.shortTtl, {
    error: 'Error: KV PUT failed: 400 Invalid expiration_ttl of 30. Expiration TTL must be at least 60.',
  });
  assert.match(
    r.pastExpiration!.error ?? '',
    /^Error: KV PUT failed: 400 Invalid expiration of \d+\. Please specify integer greater than the current number of seconds since the UNIX epoch\.$/,
  );
  assert.match(
    r.nearExpiration!.error ?? '',
    /^Error: KV PUT failed: 400 Invalid expiration of \d+\. Expiration times must be at least 60 seconds in the future\.$/,
  );
  assert.deepEqual(r.bigMetadata, {
    error: 'Error: KV PUT failed: 413 Metadata length of 1028 exceeds limit of 1024.',
  });
  assert.deepEqual(r.bigValue, {
    error: 'Error: KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400.',
  });
  assert.deepEqual(r.largestValue, { ok: 25 * 1024 * 1024 });
  assert.deepEqual(r.listLimitTooHigh, {
    error:
      'Error: KV GET failed: 400 Invalid key_count_limit of 1001. Please specify an integer less than 1000.',
  });
}

describe('Workers KV in workerd, through cell publish and cell serve', () => {
  const running: CellProcess[] = [];
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  const serve = async (application: string, bucket: BucketEnv) => {
    const published = await publish(join(EXAMPLES, 'kv'), application, bucket);
    assert.equal(published.code, 0, published.stderr);
    assert.match(published.stderr, /cell: warning: .*ignoring "kv_namespaces\[0\]\.preview_id"/);
    const cell = await startServing(application, 'node-kv', bucket, {
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

  it('passes the conformance run on the local-directory bucket, and keeps the keys under the application', async () => {
    const dir = tempDir('kv-bucket-');
    const bucket = dirBucketEnv(dir);
    const a = await serve('kv-a', bucket);
    await conformance(a);
    const store = await openDirStore(dir);
    try {
      const listed = await store.list(keys.runtimeKvNamespacePrefix('kv-a', 'data'), { recursive: true });
      assert.ok(listed.objects.length >= LISTED.length, 'one object per key under fleets/kv-a/kv/data/');
    } finally {
      await store.close();
    }

    // Another application with a namespace of the same id reaches none of kv-a's keys.
    const b = await serve('kv-b', bucket);
    assert.equal((await fetchText(`${a.url}/put?key=shared&value=from-a`))?.status, 200);
    assert.deepEqual(JSON.parse((await fetchText(`${b.url}/get?key=shared`))!.body), { value: null });
    assert.deepEqual(JSON.parse((await fetchText(`${b.url}/get?key=text`))!.body), { value: null });
    assert.deepEqual(JSON.parse((await fetchText(`${a.url}/get?key=shared`))!.body), { value: 'from-a' });
  });

  describe('on MinIO', () => {
    let minio: Minio;
    before(async () => {
      minio = await minioStarting;
    });

    it('passes the same conformance run on a real S3 server', async () => {
      const name = await minio.createBucket();
      const options = minio.bucketOptions(name);
      const cell = await serve('kv-m', s3BucketEnv(options, { prefix: 'fleet-kv/' }));
      await conformance(cell);
    });
  });
});

describe('Workers KV through the node daemon', () => {
  let bucket: Bucket;
  before(async () => {
    bucket = await openBucket();
  });
  after(async () => {
    await bucket.close();
  });

  it("serves the runtimes' KV calls on <state dir>/bindings.sock, owner-only", async () => {
    const admin = await bucket.operator('op-kv', 'admin', ['*']);
    const node = await bucket.sail(['--cell-bin', CELL_REAL]);
    const socket = join(node.stateDir, 'bindings.sock');
    assert.equal(statSync(socket).mode & 0o777, 0o600);
    const run = await runSvc(['deploy', join(EXAMPLES, 'kv'), '--node', node.url, '--key', keyArg(admin)], {
      timeoutMs: 120_000,
    });
    assert.equal(run.code, 0, run.stderr);
    const port = await waitFor(
      async () => {
        const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
          processes: { application: string; port: number; ready: boolean }[];
        };
        const p = state.processes.find((process) => process.application === 'kv');
        return p?.ready ? p.port : undefined;
      },
      () => `kv ready\n${node.log()}`,
      FOLLOW_DEADLINE_MS,
    );
    const url = `http://127.0.0.1:${port}`;
    assert.equal((await fetchText(`${url}/put?key=k&value=through-the-daemon`))?.status, 200);
    assert.deepEqual(JSON.parse((await fetchText(`${url}/get?key=k`))!.body), {
      value: 'through-the-daemon',
    });
    assert.ok(
      await bucket.store.stat(keys.runtimeKvEntry('kv', 'data', encodeKey(Buffer.from('k')))),
      'the key sits in the bucket',
    );
  });
});
