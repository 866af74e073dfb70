// Workers KV through a node (docs/api.md "Workers KV"), on a real `svc sail` over a local-directory
// bucket with an application deployed by `svc deploy` that binds two namespaces: an operator key
// scoped to `shop-*` lists the namespaces, puts, reads, lists, deletes and bulk-writes keys of
// `shop-web` (a CI job's workload token the trust policy admits does too), the entries land in the
// binding's storage format under `fleets/shop-web/kv/<id>/`, and every refusal answers a problem
// document (status, code, title), never a 500. Keys, values, expirations and metadata behave as
// Cloudflare's KV (developers.cloudflare.com/kv/platform/limits/: keys ≤ 512 bytes, values ≤ 25 MiB,
// metadata ≤ 1024 bytes, expirationTtl ≥ 60).

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { encodeKey } from '../runtime/src/bindings/kv.ts';
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
const BASE = `/v1/applications/${APP}/kv/namespaces`;
const MiB = 1024 * 1024;

let bucket: Bucket;
let node: SailProcess;
let shop: Signer;
let other: Signer;
let nodeToken: Signer;
let issuer: TestIssuer;
const SUBJECT = 'repo:acme/shop:ref:refs/heads/main';
const workloadToken = (sub = SUBJECT) => issuer.sign({ sub, aud: 'svc' });

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
      kv_namespaces: [
        { binding: 'CACHE', id: 'cache' },
        { binding: 'SESSIONS', id: 'sessions' },
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

const value = (key: string, ns = 'cache') => `${BASE}/${ns}/values/${encodeURIComponent(key)}`;

/** A request whose path goes out exactly as written (fetch would resolve `..`). */
function rawRequest(method: string, path: string, authorization: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const url = new URL(node.url);
    const req = httpRequest(
      { host: url.hostname, port: url.port, method, path, headers: { authorization } },
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
    req.end();
  });
}

describe('the namespaces and keys of an application, through a node', () => {
  test('the namespaces are those the serving deployment binds', async () => {
    const answer = await call(node.url, 'GET', BASE, { signer: shop });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.application, APP);
    assert.match(answer.body.deployment, /^\S+$/);
    assert.deepEqual(answer.body.namespaces, [
      { binding: 'CACHE', id: 'cache' },
      { binding: 'SESSIONS', id: 'sessions' },
    ]);
    const empty = await call(node.url, 'GET', '/v1/applications/shop-empty/kv/namespaces', { signer: shop });
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body, { application: 'shop-empty', deployment: null, namespaces: [] });
  });

  test('put, get, list and delete one key; the entry is in the binding format in the bucket', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 10]);
    const before = Math.floor(Date.now() / 1000);
    const put = await send(
      'PUT',
      `${value('a/b é')}?expiration_ttl=120&metadata=${encodeURIComponent('{"by":"ünï"}')}`,
      {
        signer: shop,
        body: bytes,
      },
    );
    assert.equal(put.status, 200, put.bytes.toString());
    assert.deepEqual(put.body, { application: APP, namespace: 'cache', key: 'a/b é' });

    const got = await send('GET', value('a/b é'), { signer: shop });
    assert.equal(got.status, 200);
    assert.equal(got.contentType, 'application/octet-stream');
    assert.deepEqual(got.bytes, bytes);
    const expiration = Number(got.headers.get('svc-kv-expiration'));
    assert.ok(expiration >= before + 120 && expiration <= before + 122, `expiration ${expiration}`);

    const stored = await bucket.store.get(keys.runtimeKvEntry(APP, 'cache', encodeKey(Buffer.from('a/b é'))));
    assert.ok(stored, 'one object per key under fleets/<app>/kv/<id>/');
    assert.deepEqual(
      Buffer.from(stored.body),
      Buffer.concat([Buffer.from(`${JSON.stringify({ expiration, metadata: '{"by":"ünï"}' })}\n`), bytes]),
      'a one-line JSON header, then the value',
    );

    const listed = await call(node.url, 'GET', `${BASE}/cache/keys`, { signer: shop });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body, {
      application: APP,
      namespace: 'cache',
      keys: [{ name: 'a/b é', expiration, metadata: { by: 'ünï' } }],
      list_complete: true,
    });
    // The other namespace holds nothing of it.
    const sessions = await call(node.url, 'GET', `${BASE}/sessions/keys`, { signer: shop });
    assert.deepEqual(sessions.body.keys, []);

    const deleted = await call(node.url, 'DELETE', value('a/b é'), { signer: shop });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { application: APP, namespace: 'cache', key: 'a/b é', deleted: true });
    assertProblem(await send('GET', value('a/b é'), { signer: shop }), 404, 'not-found', 'No such key');
    // Deleting a missing key is no error, as in Cloudflare's API.
    assert.equal((await call(node.url, 'DELETE', value('a/b é'), { signer: shop })).status, 200);
  });

  test('a 512-byte key of multibyte characters, and an empty value, go through', async () => {
    const key = 'é'.repeat(256);
    assert.equal(Buffer.byteLength(key), 512);
    assert.equal((await send('PUT', value(key), { signer: shop, body: '' })).status, 200);
    const got = await send('GET', value(key), { signer: shop });
    assert.equal(got.status, 200);
    assert.equal(got.bytes.length, 0);
    assert.equal(got.headers.get('svc-kv-expiration'), null, 'no expiration: none answered');
    await call(node.url, 'DELETE', value(key), { signer: shop });
  });

  test('a listing pages by limit and cursor, in byte order, and filters by prefix', async () => {
    const names = ['p:b', 'p:a', 'p:ab', 'q:z', 'p:é'];
    for (const name of names) await send('PUT', value(name, 'sessions'), { signer: shop, body: name });
    const first = await call(node.url, 'GET', `${BASE}/sessions/keys?prefix=p%3A&limit=2`, { signer: shop });
    assert.equal(first.status, 200);
    assert.deepEqual(
      first.body.keys.map((k: { name: string }) => k.name),
      ['p:a', 'p:ab'],
    );
    assert.equal(first.body.list_complete, false);
    assert.equal(typeof first.body.cursor, 'string');
    const second = await call(
      node.url,
      'GET',
      `${BASE}/sessions/keys?prefix=p%3A&limit=2&cursor=${first.body.cursor}`,
      { signer: shop },
    );
    assert.deepEqual(
      second.body.keys.map((k: { name: string }) => k.name),
      ['p:b', 'p:é'],
    );
    const all = await call(node.url, 'GET', `${BASE}/sessions/keys`, { signer: shop });
    assert.deepEqual(
      all.body.keys.map((k: { name: string }) => k.name),
      ['p:a', 'p:ab', 'p:b', 'p:é', 'q:z'],
    );
    assert.equal(all.body.list_complete, true);
    assert.equal(all.body.cursor, undefined);
    for (const name of names) await call(node.url, 'DELETE', value(name, 'sessions'), { signer: shop });
  });

  test('a bulk put writes every pair: text, base64, expiration, expiration_ttl, metadata', async () => {
    const now = Math.floor(Date.now() / 1000);
    const pairs = [
      { key: 'bulk:text', value: 'héllo' },
      { key: 'bulk:bytes', value: Buffer.from([0, 255, 7]).toString('base64'), base64: true },
      { key: 'bulk:ttl', value: 'x', expiration_ttl: 300, metadata: { n: 1 } },
      { key: 'bulk:at', value: 'y', expiration: now + 3600 },
    ];
    const answer = await send('PUT', `${BASE}/cache/bulk`, {
      signer: shop,
      body: JSON.stringify(pairs),
      contentType: 'application/json',
    });
    assert.equal(answer.status, 200, answer.bytes.toString());
    assert.deepEqual(answer.body, { application: APP, namespace: 'cache', written: 4 });
    assert.equal((await send('GET', value('bulk:text'), { signer: shop })).bytes.toString(), 'héllo');
    assert.deepEqual([...(await send('GET', value('bulk:bytes'), { signer: shop })).bytes], [0, 255, 7]);
    const listed = await call(node.url, 'GET', `${BASE}/cache/keys?prefix=bulk%3A`, { signer: shop });
    const byName = Object.fromEntries(listed.body.keys.map((k: { name: string }) => [k.name, k])) as Record<
      string,
      { expiration?: number; metadata?: unknown }
    >;
    assert.deepEqual(Object.keys(byName).sort(), ['bulk:at', 'bulk:bytes', 'bulk:text', 'bulk:ttl']);
    assert.equal(byName['bulk:at']?.expiration, now + 3600);
    assert.ok(Math.abs((byName['bulk:ttl']?.expiration ?? 0) - (now + 300)) <= 2);
    assert.deepEqual(byName['bulk:ttl']?.metadata, { n: 1 });
    for (const pair of pairs) await call(node.url, 'DELETE', value(pair.key), { signer: shop });
  });
});

test('a CI job’s workload token the trust policy admits writes and reads, as an operator key does', async () => {
  const bearer = async () => `Bearer ${await workloadToken()}`;
  const put = await fetch(`${node.url}${value('ci')}`, {
    method: 'PUT',
    headers: { authorization: await bearer(), 'content-type': 'text/plain' },
    body: 'from ci',
  });
  assert.equal(put.status, 200, await put.text());
  const got = await fetch(`${node.url}${value('ci')}`, { headers: { authorization: await bearer() } });
  assert.equal(await got.text(), 'from ci');
  assertProblem(
    await call(node.url, 'GET', BASE, {
      headers: { authorization: `Bearer ${await workloadToken('repo:evil/fork:ref:refs/heads/main')}` },
    }),
    403,
    'trust-mismatch',
    'Workload not trusted',
  );
  // `svc kv --token` presents it instead of signing, as `svc app secret --token`.
  const cli = await runSvc(
    [
      'kv',
      'key',
      'get',
      'ci',
      '--name',
      APP,
      '--binding',
      'CACHE',
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
  await call(node.url, 'DELETE', value('ci'), { signer: shop });
});

test('an entry whose metadata is no JSON (written to the bucket by hand) lists with its text, not a 500', async () => {
  const key = keys.runtimeKvEntry(APP, 'sessions', encodeKey(Buffer.from('odd')));
  await bucket.store.put(key, `${JSON.stringify({ expiration: null, metadata: '{not json' })}\nv`);
  const listed = await call(node.url, 'GET', `${BASE}/sessions/keys?prefix=odd`, { signer: shop });
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  assert.deepEqual(listed.body.keys, [{ name: 'odd', metadata: '{not json' }]);
  await bucket.store.delete(key);
});

describe('refusals', () => {
  const putValue = (path: string, body: string | Uint8Array = 'v') =>
    send('PUT', path, { signer: shop, body });
  const bulk = (body: string) =>
    send('PUT', `${BASE}/cache/bulk`, { signer: shop, body, contentType: 'application/json' });

  test('keys: too long, `..`; a path of bad percent-encoding is refused by the router', async () => {
    assertProblem(
      await putValue(value('k'.repeat(513))),
      400,
      'invalid-input',
      'Key too long',
      /513 exceeds key length limit of 512/,
    );
    assertProblem(
      await send('GET', value('k'.repeat(513)), { signer: shop }),
      400,
      'invalid-input',
      'Key too long',
    );
    assertProblem(
      await rawRequest('GET', `${BASE}/cache/values/..`, await shop.bearer()),
      400,
      'invalid-input',
      'Invalid key',
      /Illegal key name "\.\."/,
    );
    assertProblem(
      await send('PUT', `${BASE}/cache/values/`, { signer: shop, body: 'v' }),
      400,
      'invalid-input',
      'Invalid key',
      /Key names must not be empty/,
    );
    assertProblem(
      await rawRequest('DELETE', `${BASE}/cache/values/%E0%A4%A`, await shop.bearer()),
      400,
      'invalid-input',
      'Malformed request',
      /not valid percent-encoding/,
    );
  });

  test('expirations and metadata, in the binding words', async () => {
    assertProblem(
      await putValue(`${value('k')}?expiration_ttl=30`),
      400,
      'invalid-input',
      'Invalid expiration',
      /Expiration TTL must be at least 60/,
    );
    assertProblem(
      await putValue(`${value('k')}?expiration_ttl=soon`),
      400,
      'invalid-input',
      'Invalid expiration',
    );
    assertProblem(
      await putValue(`${value('k')}?expiration=${Math.floor(Date.now() / 1000) - 10}`),
      400,
      'invalid-input',
      'Invalid expiration',
      /greater than the current number of seconds/,
    );
    assertProblem(
      await putValue(`${value('k')}?metadata=${encodeURIComponent('{nope')}`),
      400,
      'invalid-input',
      'Invalid metadata',
    );
    const big = JSON.stringify({ pad: 'x'.repeat(1100) });
    assertProblem(
      await putValue(`${value('k')}?metadata=${encodeURIComponent(big)}`),
      413,
      'resource-limit',
      'Metadata too large',
      /exceeds limit of 1024/,
    );
    assertProblem(await send('GET', value('k'), { signer: shop }), 404, 'not-found', 'No such key');
  });

  test('a value over 25 MiB is refused from its declared length, before its body is read', async () => {
    const answer = await new Promise<Answer & { sent: number }>((resolve, reject) => {
      const url = new URL(node.url);
      void shop.bearer().then((authorization) => {
        const req = httpRequest({
          host: url.hostname,
          port: url.port,
          method: 'PUT',
          path: value('huge'),
          headers: { authorization, 'content-length': String(25 * MiB + 1) },
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolve({
              status: res.statusCode ?? 0,
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
              contentType: res.headers['content-type'] ?? null,
              sent: 1024,
            });
            req.destroy();
          });
        });
        req.on('error', reject);
        // Only a first KiB is ever sent: the answer comes without the rest.
        req.write(Buffer.alloc(1024));
      }, reject);
    });
    assertProblem(answer, 413, 'resource-limit', 'Value too large', /at most 26214400 bytes/);
  });

  test('listing: limit and cursor', async () => {
    for (const limit of ['0', '1001', 'x'])
      assertProblem(
        await call(node.url, 'GET', `${BASE}/cache/keys?limit=${limit}`, { signer: shop }),
        400,
        'invalid-input',
        'Invalid limit',
      );
    assertProblem(
      await call(node.url, 'GET', `${BASE}/cache/keys?cursor=%21%21`, { signer: shop }),
      400,
      'invalid-input',
      'Invalid cursor',
    );
    assertProblem(
      await call(node.url, 'GET', `${BASE}/cache/keys?prefix=${'p'.repeat(513)}`, { signer: shop }),
      400,
      'invalid-input',
      'Key too long',
    );
  });

  test('bulk bodies: not JSON, not an array, a malformed pair, too many pairs; a refused pair writes none', async () => {
    assertProblem(await bulk('{nope'), 400, 'invalid-input', 'Malformed JSON body');
    assertProblem(await bulk('{"key":"a"}'), 400, 'invalid-input', 'Malformed bulk body', /must be an array/);
    assertProblem(
      await bulk('[{"key":"a","value":1}]'),
      400,
      'invalid-input',
      'Malformed bulk body',
      /"value" must be a string/,
    );
    assertProblem(
      await bulk('[{"key":"a","value":"v","ttl":60}]'),
      400,
      'invalid-input',
      'Malformed bulk body',
      /unknown field "ttl"/,
    );
    assertProblem(
      await bulk('[{"key":"a","value":"*not base64*","base64":true}]'),
      400,
      'invalid-input',
      'Malformed bulk body',
      /not base64/,
    );
    const many = JSON.stringify(Array.from({ length: 10_001 }, (_, i) => ({ key: `k${i}`, value: '' })));
    assertProblem(await bulk(many), 413, 'resource-limit', 'Too many pairs');
    const oneBad = JSON.stringify([
      { key: 'atomic:1', value: 'one' },
      { key: 'atomic:2', value: 'two', expiration_ttl: 10 },
    ]);
    assertProblem(await bulk(oneBad), 400, 'invalid-input', 'Invalid expiration', /^item 1 \(atomic:2\): /);
    const listed = await call(node.url, 'GET', `${BASE}/cache/keys?prefix=atomic`, { signer: shop });
    assert.deepEqual(listed.body.keys, [], 'nothing of a refused bulk put is written');
  });

  test('namespaces and applications the node does not know', async () => {
    assertProblem(
      await send('GET', `${BASE}/nope/values/k`, { signer: shop }),
      404,
      'not-found',
      'No such KV namespace',
      /its namespaces: cache \(CACHE\), sessions \(SESSIONS\)/,
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-empty/kv/namespaces/cache/keys', { signer: shop }),
      404,
      'not-found',
      'No such KV namespace',
      /no serving deployment/,
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-gone/kv/namespaces', { signer: shop }),
      404,
      'not-found',
      'No such application',
    );
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/Shop_Web/kv/namespaces', { signer: shop }),
      400,
      'invalid-slug',
      'Invalid application name',
    );
  });

  test('scope: shop-* cannot touch other-*, other-* cannot touch shop-web; node tokens and no token are refused', async () => {
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/other-app/kv/namespaces', { signer: shop }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await send('PUT', value('k'), { signer: other, body: 'v' }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(await send('GET', value('k'), { signer: other }), 403, 'auth-scope', 'Out of scope');
    assertProblem(
      await call(node.url, 'GET', `${BASE}/cache/keys`, { signer: other }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await send('PUT', `${BASE}/cache/bulk`, { signer: other, body: '[]', contentType: 'application/json' }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await call(node.url, 'DELETE', value('k'), { signer: other }),
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
