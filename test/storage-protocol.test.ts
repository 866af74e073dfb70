// Storage protocol v1 (spec 2) against a real node. Point it at any node with
// SVC_STORAGE_TEST_URL and SVC_STORAGE_TEST_TOKEN; otherwise it starts one on a fresh
// local-directory bucket.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { IngressClient } from '../src/ingress/client.ts';
import { type SailProcess, startSail, tempDir } from './helpers/svc.ts';

let node: SailProcess | undefined;
let client: IngressClient;
let baseUrl: string;
let token: string;
const root = `suite-${randomUUID().slice(0, 8)}`;

before(async () => {
  if (process.env.SVC_STORAGE_TEST_URL) {
    baseUrl = process.env.SVC_STORAGE_TEST_URL;
    token = process.env.SVC_STORAGE_TEST_TOKEN ?? '';
  } else {
    token = `tok-${randomUUID()}`;
    node = await startSail(['--endpoint', `file://${tempDir('svc-bucket-')}`, '--ingress-token', token]);
    baseUrl = node.url;
  }
  client = new IngressClient(baseUrl, token);
});
after(async () => {
  await node?.stop();
});

const bytes = (text: string) => new TextEncoder().encode(text);

async function problemFor(method: string, path: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...headers },
  });
  const body = response.status === 204 ? undefined : await response.json();
  return { status: response.status, contentType: response.headers.get('content-type'), body };
}

describe('objects', () => {
  test('put, get and binary values round-trip', async () => {
    const all = new Uint8Array(256).map((_, i) => i);
    await client.put(`${root}/bin/all.bytes`, all);
    assert.deepEqual(await client.get(`${root}/bin/all.bytes`), all);
    const response = await fetch(`${baseUrl}/v1/storage/objects/${root}/bin/all.bytes`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(response.headers.get('content-type'), 'application/octet-stream');
    await response.arrayBuffer();
  });

  test('a JSON value is stored as bytes, not parsed', async () => {
    const text = '{ "kept":   "as written" }';
    await client.put(`${root}/json/x.json`, bytes(text));
    assert.equal(new TextDecoder().decode((await client.get(`${root}/json/x.json`))!), text);
  });

  test('missing keys answer 404 problem documents, never 500', async () => {
    assert.equal(await client.get(`${root}/nothing`), null);
    const missing = await problemFor('GET', `/v1/storage/objects/${root}/nothing`);
    assert.equal(missing.status, 404);
    assert.equal(missing.contentType, 'application/problem+json');
    assert.equal(missing.body.type, 'urn:svc:not-found');
    assert.equal((await problemFor('DELETE', `/v1/storage/objects/${root}/nothing`)).status, 404);
  });

  test('DELETE removes the key and its subtree', async () => {
    await client.put(`${root}/tree`, bytes('top'));
    await client.put(`${root}/tree/a`, bytes('a'));
    await client.put(`${root}/tree/b/c`, bytes('c'));
    await client.put(`${root}/treeish`, bytes('sibling'));
    assert.equal(await client.delete(`${root}/tree`), true);
    assert.equal(await client.get(`${root}/tree`), null);
    assert.equal(await client.get(`${root}/tree/b/c`), null);
    assert.notEqual(await client.get(`${root}/treeish`), null, 'a sibling sharing a name prefix survives');
  });
});

describe('list and stat', () => {
  before(async () => {
    for (const key of ['l/a', 'l/b/c', 'l/b/d', 'l/e/f/g']) await client.put(`${root}/${key}`, bytes(key));
  });

  test('non-recursive lists immediate children as full keys', async () => {
    assert.deepEqual(await client.list(`${root}/l`, false), [`${root}/l/a`, `${root}/l/b`, `${root}/l/e`]);
  });

  test('recursive lists every terminal key under the prefix', async () => {
    assert.deepEqual(await client.list(`${root}/l`, true), [
      `${root}/l/a`,
      `${root}/l/b/c`,
      `${root}/l/b/d`,
      `${root}/l/e/f/g`,
    ]);
  });

  test('recursive is truthy only for true and 1', async () => {
    const asked = async (value: string) =>
      (
        await fetch(`${baseUrl}/v1/storage/list?prefix=${root}/l&recursive=${value}`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).json();
    assert.deepEqual(await asked('1'), await client.list(`${root}/l`, true));
    assert.deepEqual(await asked('yes'), await client.list(`${root}/l`, false));
  });

  test('an empty listing is 404', async () => {
    const { status, body } = await problemFor('GET', `/v1/storage/list?prefix=${root}/none&recursive=true`);
    assert.equal(status, 404);
    assert.equal(body.type, 'urn:svc:not-found');
  });

  test('stat of a value and of a prefix-only key', async () => {
    const value = await client.stat(`${root}/l/a`);
    assert.equal(value?.isTerminal, true);
    assert.equal(value?.size, 3);
    assert.ok(value?.modified && !Number.isNaN(Date.parse(value.modified)));
    assert.deepEqual(await client.stat(`${root}/l/b`), {
      key: `${root}/l/b`,
      modified: null,
      size: 0,
      isTerminal: false,
    });
    assert.equal(await client.stat(`${root}/l/zzz`), null);
  });
});

describe('locks', () => {
  test('try-acquire, conflict while held, restamp by the holder, release always 204', async () => {
    const name = `${root}-issue_cert_example.com`;
    assert.equal(await client.tryLock(name, 'holder-1'), true);
    assert.equal(await client.tryLock(name, 'holder-2'), false);
    const conflict = await problemFor('POST', `/v1/storage/locks/${name}`);
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.type, 'urn:svc:cas-conflict');
    assert.equal(await client.tryLock(name, 'holder-1'), true, 'the holder restamps');
    await client.unlock(name);
    assert.equal(await client.tryLock(name, 'holder-2'), true);
    await client.unlock(name);
    await client.unlock(name);
  });

  test('racing acquirers: exactly one wins', async () => {
    const name = `${root}-race`;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => client.tryLock(name, `racer-${i}`)),
    );
    assert.equal(results.filter(Boolean).length, 1);
    await client.unlock(name);
  });
});

describe('refusals', () => {
  test('a bad key is invalid-input titled Invalid storage key', async () => {
    for (const path of [
      '/v1/storage/objects/a//b',
      '/v1/storage/objects/a/%2e%2e/b',
      '/v1/storage/objects/a%2Fb',
      '/v1/storage/stat?key=',
      '/v1/storage/stat?key=/abs',
    ]) {
      const { status, body } = await problemFor('GET', path);
      assert.equal(status, 400, path);
      assert.equal(body.type, 'urn:svc:invalid-input', path);
      assert.equal(body.title, 'Invalid storage key', path);
    }
  });

  test('an unknown version header is invalid-input; absent or empty means 1', async () => {
    const bad = await problemFor('GET', `/v1/storage/stat?key=${root}/l/a`, { 'x-svc-storage-version': '2' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.type, 'urn:svc:invalid-input');
    assert.equal(
      (await problemFor('GET', `/v1/storage/stat?key=${root}/l/a`, { 'x-svc-storage-version': '' })).status,
      200,
    );
  });

  test('the routing document answers only once a pass completed, and formats are named', async () => {
    const routes = await fetch(`${baseUrl}/v1/ingress/routes`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const doc = await routes.json();
    if (routes.status === 503) {
      assert.equal(doc.type, 'urn:svc:draining');
      assert.equal(doc.title, 'Routing is not known yet');
      if (node) assert.match(doc.detail, new RegExp(node.nodeId));
    } else {
      assert.equal(routes.status, 200);
      assert.equal(doc.v, 1);
    }
    const unknown = await problemFor('GET', '/v1/ingress/routes/nginx');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.type, 'urn:svc:not-found');
    assert.match(unknown.body.detail, /proxyb/);
  });

  test('property: no path under /v1/storage/objects answers 500', async () => {
    const segment = fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.constantFrom('.', '..', '%2e', '%2F', '%', '%00', '~'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(segment, { minLength: 1, maxLength: 4 }),
        fc.constantFrom('GET', 'DELETE'),
        async (segments, method) => {
          const path = `/v1/storage/objects/${segments.map((s) => s.replace(/[?#]/g, '')).join('/')}`;
          let response: Response;
          try {
            response = await fetch(`${baseUrl}${path}`, {
              method,
              headers: { authorization: `Bearer ${token}` },
            });
          } catch {
            return; // the URL itself was unsendable; nothing reached the node
          }
          await response.arrayBuffer();
          assert.ok(response.status < 500, `${method} ${path} answered ${response.status}`);
        },
      ),
      { numRuns: 200 },
    );
  });
});
