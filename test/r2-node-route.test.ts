// R2 objects through a node (docs/api.md "R2 buckets"), on a real `svc sail` over a local-directory
// bucket with an application deployed by `svc deploy` that binds two buckets: an operator key
// scoped to `shop-*` lists the buckets, puts, reads, lists and deletes objects of `shop-web`, the
// objects land in the binding's layout (a record and a body under `fleets/shop-web/r2/<bucket>/`),
// and every refusal answers a problem document (status, code, title), never a 500. Keys, values
// and metadata behave as R2's binding (keys ≤ 512 bytes here, custom metadata ≤ 2048 as R2
// measures it, list limits 1-1000), in Miniflare's words.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { encodeKey, segments } from '../runtime/src/bindings/kv.ts';
import { keys } from '../src/registry/keys.ts';
import {
  type Answer,
  assertProblem,
  type Bucket,
  call,
  openBucket,
  type Signer,
} from './helpers/applications.ts';
import { deployThroughNode, sendBytes, trustIssuer } from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { startTestIssuer, type TestIssuer } from './helpers/oidc-issuer.ts';
import { runSvc, type SailProcess, tempDir } from './helpers/svc.ts';

const APP = 'shop-web';
const BASE = `/v1/applications/${APP}/r2/buckets`;
const MiB = 1024 * 1024;

let bucket: Bucket;
let node: SailProcess;
let shop: Signer;
let other: Signer;
let nodeToken: Signer;
let issuer: TestIssuer;
const workloadToken = (sub = 'repo:acme/shop:ref:refs/heads/main') => issuer.sign({ sub, aud: 'svc' });

before(async () => {
  bucket = await openBucket();
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
  nodeToken = await bucket.node('node-caller');
  node = await bucket.sail(['--cell-bin', CELL_BIN, '--cell-env', 'CELL_DRAIN_MS=2000']);
  await deployThroughNode(node, shop, {
    'cell.jsonc': JSON.stringify({
      name: APP,
      main: 'index.js',
      compatibility_date: '2025-06-01',
      r2_buckets: [
        { binding: 'FILES', bucket_name: 'files' },
        { binding: 'PHOTOS', bucket_name: 'photos' },
      ],
    }),
    'index.js': 'export default { fetch() { return new Response("ok"); } };\n',
  });
  await bucket.application('shop-empty');
  await bucket.application('other-app');
  issuer = await startTestIssuer();
  await trustIssuer(bucket, APP, issuer.issuer, 'repo:acme/shop:*');
});

after(async () => {
  await issuer?.close();
  await bucket?.close();
});

const send = (method: string, path: string, options: Parameters<typeof sendBytes>[3] = {}) =>
  sendBytes(node.url, method, path, options);

const object = (key: string, name = 'files') => `${BASE}/${name}/objects/${encodeURIComponent(key)}`;

describe('the buckets and objects of an application, through a node', () => {
  test('the buckets are those the serving deployment binds', async () => {
    const answer = await call(node.url, 'GET', BASE, { signer: shop });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.application, APP);
    assert.match(answer.body.deployment, /^\S+$/);
    assert.deepEqual(answer.body.buckets, [
      { binding: 'FILES', bucket_name: 'files' },
      { binding: 'PHOTOS', bucket_name: 'photos' },
    ]);
    const empty = await call(node.url, 'GET', '/v1/applications/shop-empty/r2/buckets', { signer: shop });
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body, { application: 'shop-empty', deployment: null, buckets: [] });
  });

  test('put, get, list and delete one object; record and body are in the binding layout', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 10]);
    const put = await send(
      'PUT',
      `${object('a/b é')}?custom_metadata=${encodeURIComponent('{"by":"ünï"}')}`,
      { signer: shop, body: bytes, contentType: 'image/png' },
    );
    assert.equal(put.status, 200, put.bytes.toString());
    assert.equal(put.body.application, APP);
    assert.equal(put.body.bucket, 'files');
    assert.equal(put.body.object.key, 'a/b é');
    assert.equal(put.body.object.size, 6);
    assert.equal(put.body.object.content_type, 'image/png');
    assert.deepEqual(put.body.object.custom_metadata, { by: 'ünï' });
    assert.equal(put.body.object.etag, createHash('md5').update(bytes).digest('hex'), 'the MD5, as R2');

    const got = await send('GET', object('a/b é'), { signer: shop });
    assert.equal(got.status, 200);
    assert.equal(got.contentType, 'image/png');
    assert.equal(got.headers.get('etag'), `"${put.body.object.etag}"`);
    assert.deepEqual(got.bytes, bytes);

    const recordKey = keys.runtimeR2Record(APP, 'files', segments(encodeKey(Buffer.from('a/b é'))));
    const stored = await bucket.store.get(recordKey);
    assert.ok(stored, 'a record under fleets/<app>/r2/<bucket>/objects/');
    const record = JSON.parse(Buffer.from(stored.body).toString('utf8'));
    assert.equal(record.etag, put.body.object.etag);
    assert.deepEqual(record.httpMetadata, { contentType: 'image/png' });
    const body = await bucket.store.get(keys.runtimeR2Body(APP, 'files', record.version));
    assert.deepEqual(Buffer.from(body!.body), bytes, 'the body under bodies/<version>');

    const listed = await call(node.url, 'GET', `${BASE}/files/objects`, { signer: shop });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body, {
      application: APP,
      bucket: 'files',
      objects: [put.body.object],
      delimited_prefixes: [],
      truncated: false,
    });
    const photos = await call(node.url, 'GET', `${BASE}/photos/objects`, { signer: shop });
    assert.deepEqual(photos.body.objects, [], 'the other bucket holds nothing of it');

    const deleted = await call(node.url, 'DELETE', object('a/b é'), { signer: shop });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { application: APP, bucket: 'files', key: 'a/b é', deleted: true });
    assertProblem(await send('GET', object('a/b é'), { signer: shop }), 404, 'not-found', 'No such object');
    assert.equal(await bucket.store.get(recordKey), null);
    // Deleting a missing object is no error, as R2's delete.
    assert.equal((await call(node.url, 'DELETE', object('a/b é'), { signer: shop })).status, 200);
  });

  test('a 512-byte key of multibyte characters, and an empty object, go through', async () => {
    const key = 'é'.repeat(256);
    assert.equal(Buffer.byteLength(key), 512);
    assert.equal((await send('PUT', object(key), { signer: shop, body: '' })).status, 200);
    const got = await send('GET', object(key), { signer: shop });
    assert.equal(got.status, 200);
    assert.equal(got.bytes.length, 0);
    assert.equal(got.contentType, 'application/octet-stream');
    await call(node.url, 'DELETE', object(key), { signer: shop });
  });

  test('a listing pages by limit and cursor in byte order, filters by prefix, groups by delimiter', async () => {
    const names = ['p/b', 'p/a', 'p/ab', 'q/z', 'p/é', 'p/d/1', 'p/d/2'];
    for (const name of names)
      assert.equal((await send('PUT', object(name, 'photos'), { signer: shop, body: name })).status, 200);
    const first = await call(node.url, 'GET', `${BASE}/photos/objects?prefix=p%2F&limit=2`, { signer: shop });
    assert.equal(first.status, 200);
    assert.deepEqual(
      first.body.objects.map((o: { key: string }) => o.key),
      ['p/a', 'p/ab'],
    );
    assert.equal(first.body.truncated, true);
    assert.equal(typeof first.body.cursor, 'string');
    const second = await call(
      node.url,
      'GET',
      `${BASE}/photos/objects?prefix=p%2F&limit=10&cursor=${encodeURIComponent(first.body.cursor)}`,
      { signer: shop },
    );
    assert.deepEqual(
      second.body.objects.map((o: { key: string }) => o.key),
      ['p/b', 'p/d/1', 'p/d/2', 'p/é'],
    );
    assert.equal(second.body.truncated, false);
    const grouped = await call(node.url, 'GET', `${BASE}/photos/objects?prefix=p%2F&delimiter=%2F`, {
      signer: shop,
    });
    assert.deepEqual(
      grouped.body.objects.map((o: { key: string }) => o.key),
      ['p/a', 'p/ab', 'p/b', 'p/é'],
    );
    assert.deepEqual(grouped.body.delimited_prefixes, ['p/d/']);
  });
});

test('the empty key, which R2 allows, and a put with no Content-Type (kept without one)', async () => {
  const put = await new Promise<Answer>((resolve, reject) => {
    const url = new URL(node.url);
    void shop.bearer().then((authorization) => {
      // No content-type header at all: fetch would add one.
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          method: 'PUT',
          path: `${BASE}/files/objects/`,
          headers: { authorization },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
              contentType: res.headers['content-type'] ?? null,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end('empty-keyed');
    }, reject);
  });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.equal(put.body.object.key, '');
  assert.equal(put.body.object.content_type, undefined);
  const got = await send('GET', `${BASE}/files/objects/`, { signer: shop });
  assert.equal(got.status, 200);
  assert.equal(got.bytes.toString(), 'empty-keyed');
  assert.equal(got.contentType, 'application/octet-stream');
  assert.ok(await bucket.store.get(keys.runtimeR2Record(APP, 'files', '')), 'its record is objects/-');
  assert.equal((await call(node.url, 'DELETE', `${BASE}/files/objects/`, { signer: shop })).status, 200);
});

test('a CI job’s workload token the trust policy admits writes and reads, as an operator key does', async () => {
  const bearer = async () => `Bearer ${await workloadToken()}`;
  const put = await fetch(`${node.url}${object('ci')}`, {
    method: 'PUT',
    headers: { authorization: await bearer(), 'content-type': 'text/plain' },
    body: 'from ci',
  });
  assert.equal(put.status, 200, await put.text());
  const got = await fetch(`${node.url}${object('ci')}`, { headers: { authorization: await bearer() } });
  assert.equal(got.headers.get('content-type'), 'text/plain');
  assert.equal(await got.text(), 'from ci');
  assertProblem(
    await call(node.url, 'GET', BASE, {
      headers: { authorization: `Bearer ${await workloadToken('repo:evil/fork:ref:refs/heads/main')}` },
    }),
    403,
    'trust-mismatch',
    'Workload not trusted',
  );
  // `svc r2 --token` presents it instead of signing, as `svc kv --token`.
  const cli = await runSvc(
    [
      'r2',
      'object',
      'get',
      'ci',
      '--name',
      APP,
      '--binding',
      'FILES',
      '--node',
      node.url,
      '--token',
      await workloadToken(),
    ],
    {
      env: {
        SVC_HOME: tempDir(),
        SVC_OPERATOR_KEY: undefined,
        SVC_REMOTE: undefined,
        SVC_STATE_DIR: tempDir(),
      },
    },
  );
  assert.equal(cli.code, 0, cli.stderr);
  assert.equal(cli.stdout, 'from ci');
  await call(node.url, 'DELETE', object('ci'), { signer: shop });
});

describe('refusals', () => {
  test('keys: too long; a path of bad percent-encoding is refused by the router', async () => {
    assertProblem(
      await send('PUT', object('k'.repeat(513)), { signer: shop, body: 'v' }),
      400,
      'invalid-input',
      'Invalid key',
      /The specified object name is not valid\. \(10020\)/,
    );
    assertProblem(
      await send('GET', object('k'.repeat(513)), { signer: shop }),
      400,
      'invalid-input',
      'Invalid key',
    );
    assertProblem(
      await send('DELETE', `${BASE}/files/objects/%E0%A4%A`, { signer: shop }),
      400,
      'invalid-input',
      'Malformed request',
      /not valid percent-encoding/,
    );
  });

  test('custom metadata: not an object of strings, over 2048 as R2 measures it', async () => {
    for (const bad of ['{nope', '["a"]', '{"n":1}'])
      assertProblem(
        await send('PUT', `${object('k')}?custom_metadata=${encodeURIComponent(bad)}`, {
          signer: shop,
          body: 'v',
        }),
        400,
        'invalid-input',
        'Invalid metadata',
      );
    const big = JSON.stringify({ pad: 'x'.repeat(2046) });
    assertProblem(
      await send('PUT', `${object('k')}?custom_metadata=${encodeURIComponent(big)}`, {
        signer: shop,
        body: 'v',
      }),
      413,
      'resource-limit',
      'Metadata too large',
      /exceed the maximum allowed metadata size\. \(10012\)/,
    );
    assertProblem(await send('GET', object('k'), { signer: shop }), 404, 'not-found', 'No such object');
  });

  test('a value over 100 MiB is refused from its declared length, before its body is read', async () => {
    const answer = await new Promise<Answer>((resolve, reject) => {
      const url = new URL(node.url);
      void shop.bearer().then((authorization) => {
        const req = httpRequest({
          host: url.hostname,
          port: url.port,
          method: 'PUT',
          path: object('huge'),
          headers: { authorization, 'content-length': String(100 * MiB + 1) },
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
              contentType: res.headers['content-type'] ?? null,
            });
            req.destroy();
          });
        });
        req.on('error', reject);
        // Only a first KiB is ever sent: the answer comes without the rest.
        req.write(Buffer.alloc(1024));
      }, reject);
    });
    assertProblem(answer, 413, 'resource-limit', 'Value too large', /at most 104857600 bytes/);
  });

  test('listing: a prefix longer than any key lists nothing, not a 500', async () => {
    const listed = await call(node.url, 'GET', `${BASE}/files/objects?prefix=${'p'.repeat(1500)}`, {
      signer: shop,
    });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.deepEqual(listed.body.objects, []);
  });

  test('listing: limit', async () => {
    for (const limit of ['0', '1001', 'x', '1.5'])
      assertProblem(
        await call(node.url, 'GET', `${BASE}/files/objects?limit=${limit}`, { signer: shop }),
        400,
        'invalid-input',
        'Invalid limit',
        /MaxKeys params must be positive integer <= 1000\. \(10022\)/,
      );
  });

  test('buckets and applications the node does not know', async () => {
    assertProblem(
      await send('GET', `${BASE}/nope/objects/k`, { signer: shop }),
      404,
      'not-found',
      'No such R2 bucket',
      /its buckets: files \(FILES\), photos \(PHOTOS\)/,
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-empty/r2/buckets/files/objects', { signer: shop }),
      404,
      'not-found',
      'No such R2 bucket',
      /no serving deployment/,
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-gone/r2/buckets', { signer: shop }),
      404,
      'not-found',
      'No such application',
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/Shop_Web/r2/buckets', { signer: shop }),
      400,
      'invalid-slug',
      'Invalid application name',
    );
  });

  test('scope: shop-* cannot touch other-*, other-* cannot touch shop-web; node tokens and no token are refused', async () => {
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/other-app/r2/buckets', { signer: shop }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await send('GET', '/v1/applications/other-app/r2/buckets/files/objects/k', { signer: shop }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await send('PUT', object('k'), { signer: other, body: 'v' }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(await send('GET', object('k'), { signer: other }), 403, 'auth-scope', 'Out of scope');
    assertProblem(
      await call(node.url, 'GET', `${BASE}/files/objects`, { signer: other }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await call(node.url, 'DELETE', object('k'), { signer: other }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await call(node.url, 'GET', BASE, { signer: nodeToken }),
      403,
      'auth-scope',
      'Operator key required',
    );
    assertProblem(await call(node.url, 'GET', BASE), 401, 'auth-invalid', 'Token rejected');
  });
});
