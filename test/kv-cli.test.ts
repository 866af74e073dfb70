// `svc kv` (docs/cli.md "svc kv") against a real `svc sail` serving a real worker in workerd,
// with an operator key scoped to `shop-*` and no bucket credentials: the namespaces of the serving
// deployment, keys put, read, listed, deleted and bulk-written as `wrangler kv` does them, every
// refusal as one line, and end to end: a value `svc kv key put` writes is read by the worker
// through `env.CACHE.get`, and a value the worker puts is printed by `svc kv key get`. Last,
// `svc app delete` removes the KV data with the application and says so.

import assert from 'node:assert/strict';
import { truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { encodeKey } from '../runtime/src/bindings/kv.ts';
import { keys } from '../src/registry/keys.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import {
  assertRefused,
  deployThroughNode,
  readyPort,
  svcBytes as svcBytesUnder,
} from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir } from './helpers/svc.ts';

const APP = 'shop-web';

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let shop: Signer;
let other: Signer;
let port: number;
const home = tempDir('svc-home-');
const env = () => ({
  SVC_HOME: home,
  SVC_OPERATOR_KEY: undefined,
  SVC_REMOTE: undefined,
  SVC_STATE_DIR: tempDir(),
  SVC_S3_ENDPOINT: undefined,
});

const svc = (args: string[]) => runSvc(args, { env: env(), timeoutMs: 60_000 });
/** Through the node, signed with the `shop-*` key. */
const asShop = () => ['--name', 'shop', '--env', 'web', '--node', node.url, '--key', keyArg(shop)];
const cache = () => [...asShop(), '--binding', 'CACHE'];

const svcBytes = (args: string[]) => svcBytesUnder(env(), args);

async function worker(path: string): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(response.status, 200);
  return response.text();
}

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
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
    'index.js': `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key');
    if (url.pathname === '/get') {
      const value = await env.CACHE.get(key);
      return new Response(value === null ? '(null)' : value);
    }
    if (url.pathname === '/put') {
      await env.CACHE.put(key, url.searchParams.get('value'));
      return new Response('put');
    }
    return new Response('ok');
  },
};
`,
  });
  port = await readyPort(node, admin, APP);
  await bucket.application('shop-empty');
});

after(async () => {
  await bucket?.close();
});

describe('svc kv through a node', () => {
  test('namespace list: the serving deployment’s bindings, as a table and as JSON', async () => {
    const listed = await svc(['kv', 'namespace', 'list', ...asShop()]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout, 'BINDING   ID\nCACHE     cache\nSESSIONS  sessions\n');
    const json = await svc(['kv', 'namespace', 'list', ...asShop(), '--json']);
    const doc = JSON.parse(json.stdout);
    assert.equal(doc.application, APP);
    assert.deepEqual(doc.namespaces, [
      { binding: 'CACHE', id: 'cache' },
      { binding: 'SESSIONS', id: 'sessions' },
    ]);
    const empty = await svc([
      'kv',
      'namespace',
      'list',
      '--name',
      'shop-empty',
      '--node',
      node.url,
      '--key',
      keyArg(shop),
    ]);
    assert.equal(empty.stdout, 'shop-empty has no serving deployment, so no KV namespace.\n');
  });

  test('a value svc kv key put writes, the worker reads through env.CACHE.get', async () => {
    assert.equal(await worker('/get?key=greeting'), '(null)');
    // The worker's read cache holds that absence for its TTL: the check below uses a key it never read.
    const put = await svc(['kv', 'key', 'put', 'from-cli', 'héllo from svc', ...cache()]);
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, 'wrote "from-cli" (15 bytes) to KV namespace cache (CACHE) of shop-web\n');
    assert.equal(await worker('/get?key=from-cli'), 'héllo from svc');
  });

  test('a value the worker puts, svc kv key get prints: raw bytes by default, --text with a newline', async () => {
    assert.equal(await worker(`/put?key=from-worker&value=${encodeURIComponent('wörker')}`), 'put');
    const raw = await svcBytes(['kv', 'key', 'get', 'from-worker', ...cache()]);
    assert.equal(raw.code, 0, raw.stderr);
    assert.deepEqual(raw.stdout, Buffer.from('wörker'));
    const text = await svc(['kv', 'key', 'get', 'from-worker', ...cache(), '--text']);
    assert.equal(text.stdout, 'wörker\n');
  });

  test('put --path keeps binary bytes whole; --namespace-id names the namespace', async () => {
    const bytes = Buffer.from([0, 255, 10, 13, 0x80, 1]);
    const file = join(tempDir(), 'value.bin');
    writeFileSync(file, bytes);
    const put = await svc([
      'kv',
      'key',
      'put',
      'bin',
      '--path',
      file,
      ...asShop(),
      '--namespace-id',
      'sessions',
    ]);
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, 'wrote "bin" (6 bytes) to KV namespace sessions (SESSIONS) of shop-web\n');
    const got = await svcBytes(['kv', 'key', 'get', 'bin', ...asShop(), '--binding', 'SESSIONS']);
    assert.deepEqual(got.stdout, bytes);
    const stored = await bucket.store.get(
      keys.runtimeKvEntry(APP, 'sessions', encodeKey(Buffer.from('bin'))),
    );
    assert.ok(stored, 'written under fleets/shop-web/kv/sessions/');
  });

  test('list: every key with expiration and metadata, --prefix, --json; delete', async () => {
    const now = Math.floor(Date.now() / 1000);
    const ttl = await svc([
      'kv',
      'key',
      'put',
      'l:ttl',
      'v',
      ...cache(),
      '--ttl',
      '600',
      '--metadata',
      '{"by":"ci"}',
    ]);
    assert.equal(ttl.code, 0, ttl.stderr);
    const at = now + 7200;
    const exp = await svc(['kv', 'key', 'put', 'l:at', 'v', ...cache(), '--expiration', String(at)]);
    assert.equal(exp.code, 0, exp.stderr);
    assert.equal((await svc(['kv', 'key', 'put', 'l:plain', 'v', ...cache()])).code, 0);

    const table = await svc(['kv', 'key', 'list', ...cache(), '--prefix', 'l:']);
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^KEY\s+EXPIRES\s+METADATA$/);
    assert.equal(lines[1], `l:at     ${new Date(at * 1000).toISOString()}  -`);
    assert.equal(lines[2], 'l:plain  -                         -');
    assert.match(lines[3]!, /^l:ttl\s+\d{4}-\d\d-\d\dT\S+Z\s+\{"by":"ci"\}$/);
    assert.equal(lines.length, 4);

    const json = await svc(['kv', 'key', 'list', ...cache(), '--prefix', 'l:', '--json']);
    const doc = JSON.parse(json.stdout);
    assert.equal(doc.application, APP);
    assert.equal(doc.namespace, 'cache');
    assert.deepEqual(
      doc.keys.map((k: { name: string; metadata?: unknown }) => [k.name, k.metadata ?? null]),
      [
        ['l:at', null],
        ['l:plain', null],
        ['l:ttl', { by: 'ci' }],
      ],
    );
    assert.equal(doc.keys[0].expiration, at);
    assert.ok(Math.abs(doc.keys[2].expiration - (now + 600)) <= 2);

    const deleted = await svc(['kv', 'key', 'delete', 'l:plain', ...cache()]);
    assert.equal(deleted.stdout, 'deleted "l:plain" from KV namespace cache (CACHE) of shop-web\n');
    const after = JSON.parse(
      (await svc(['kv', 'key', 'list', ...cache(), '--prefix', 'l:', '--json'])).stdout,
    );
    assert.deepEqual(
      after.keys.map((k: { name: string }) => k.name),
      ['l:at', 'l:ttl'],
    );
    const none = await svc(['kv', 'key', 'list', ...cache(), '--prefix', 'nothing:']);
    assert.equal(none.stdout, 'No keys beginning "nothing:" in KV namespace cache (CACHE) of shop-web.\n');
  });

  test('list follows the cursor past one page of 1000 keys', async () => {
    const pairs = Array.from({ length: 1005 }, (_, i) => ({
      key: `many:${String(i).padStart(4, '0')}`,
      value: 'x',
    }));
    const file = join(tempDir(), 'many.json');
    writeFileSync(file, JSON.stringify(pairs));
    const bulk = await svc(['kv', 'bulk', 'put', file, ...asShop(), '--binding', 'SESSIONS']);
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.equal(bulk.stdout, 'wrote 1005 keys to KV namespace sessions (SESSIONS) of shop-web\n');
    const json = await svc([
      'kv',
      'key',
      'list',
      ...asShop(),
      '--binding',
      'SESSIONS',
      '--prefix',
      'many:',
      '--json',
    ]);
    assert.deepEqual(
      JSON.parse(json.stdout).keys.map((k: { name: string }) => k.name),
      pairs.map((p) => p.key),
    );
  });

  test('bulk put: wrangler’s format, base64 and metadata; the worker reads what it wrote', async () => {
    const file = join(tempDir(), 'bulk.json');
    writeFileSync(
      file,
      JSON.stringify([
        { key: 'bulk-text', value: 'from bulk' },
        {
          key: 'bulk-b64',
          value: Buffer.from('décodé').toString('base64'),
          base64: true,
          metadata: { n: 2 },
        },
        { key: 'bulk-ttl', value: 'soon gone', expiration_ttl: 3600 },
      ]),
    );
    const bulk = await svc(['kv', 'bulk', 'put', file, ...cache()]);
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.equal(bulk.stdout, 'wrote 3 keys to KV namespace cache (CACHE) of shop-web\n');
    assert.equal(await worker('/get?key=bulk-text'), 'from bulk');
    assert.equal(await worker('/get?key=bulk-b64'), 'décodé');
  });

  test('--help says how the namespace is chosen and what each flag does', async () => {
    const help = await svc(['kv', 'key', 'put', '--help']);
    assert.equal(help.code, 0);
    for (const words of [
      '--binding <NAME>',
      '--namespace-id <id>',
      '--ttl <seconds>',
      '--expiration <seconds>',
      '--metadata <json>',
      '--path <file>',
      'binds more than one',
    ])
      assert.ok(help.stdout.includes(words), `${words} in:\n${help.stdout}`);
    const top = await svc(['kv', '--help']);
    assert.match(top.stdout, /namespace\s+The KV namespaces an application binds/);
    assert.match(top.stdout, /bulk\s+Many keys of one KV namespace at once/);
  });
});

describe('svc kv refusals, one line each', () => {
  test('choosing the namespace', async () => {
    assertRefused(
      await svc(['kv', 'key', 'get', 'k', ...asShop()]),
      /^svc: Several KV namespaces: shop-web binds CACHE \(cache\), SESSIONS \(sessions\); choose one with --binding <NAME> or --namespace-id <id> \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'get', 'k', ...cache(), '--namespace-id', 'cache']),
      /^svc: Ambiguous KV namespace: give --binding or --namespace-id, not both \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'list', ...asShop(), '--binding', 'NOPE']),
      /^svc: No such KV namespace: shop-web has no binding NOPE; it binds CACHE \(cache\), SESSIONS \(sessions\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'list', ...asShop(), '--namespace-id', 'nope']),
      /^svc: No such KV namespace: shop-web has no namespace id nope; .* \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'list', '--name', 'shop-empty', '--node', node.url, '--key', keyArg(shop)]),
      /^svc: No KV namespace: shop-empty has no serving deployment; .* \[urn:svc:not-found\]\n$/,
    );
  });

  test('values and keys refused before anything is sent', async () => {
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', ...cache()]),
      /^svc: No value: give the value as an argument after the key, or --path <file> \[urn:svc:invalid-input\]\n$/,
    );
    const file = join(tempDir(), 'v');
    writeFileSync(file, 'v');
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', 'v', '--path', file, ...cache()]),
      /^svc: No value: give the value as an argument or --path <file>, not both \[urn:svc:invalid-input\]\n$/,
    );
    const huge = join(tempDir(), 'huge');
    writeFileSync(huge, '');
    truncateSync(huge, 25 * 1024 * 1024 + 1);
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', '--path', huge, ...cache()]),
      /^svc: Value too large: .* is 26214401 bytes; a KV value is at most 26214400 bytes \(25 MiB\) \[urn:svc:resource-limit\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', '--path', join(tempDir(), 'absent'), ...cache()]),
      /^svc: Unreadable value file: .*: ENOENT \[urn:svc:invalid-input\]\n$/,
    );
    for (const key of ['..', '.'])
      assertRefused(
        await svc(['kv', 'key', 'get', key, ...cache()]),
        /^svc: Invalid key: Illegal key name "\.\.?"\. Please use a different name\. \[urn:svc:invalid-input\]\n$/,
      );
    const notJson = join(tempDir(), 'bulk.json');
    writeFileSync(notJson, '{nope');
    assertRefused(
      await svc(['kv', 'bulk', 'put', notJson, ...cache()]),
      /^svc: Invalid bulk file: .* is not JSON .* \[urn:svc:invalid-input\]\n$/,
    );
    writeFileSync(notJson, '{"key":"a","value":"b"}');
    assertRefused(
      await svc(['kv', 'bulk', 'put', notJson, ...cache()]),
      /^svc: Invalid bulk file: .* must hold one JSON array .* \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'bulk', 'put', join(tempDir(), 'absent.json'), ...cache()]),
      /^svc: Unreadable bulk file: .*: ENOENT \[urn:svc:invalid-input\]\n$/,
    );
  });

  test('the node’s refusals, re-rendered with its code', async () => {
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', 'v', ...cache(), '--ttl', '30']),
      /^svc: Invalid expiration: Invalid expiration_ttl of 30\. Expiration TTL must be at least 60\. \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'put', 'k', 'v', ...cache(), '--metadata', '{nope']),
      /^svc: Invalid metadata: the metadata is not JSON \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'put', 'k'.repeat(513), 'v', ...cache()]),
      /^svc: Key too long: UTF-8 encoded length of 513 exceeds key length limit of 512\. \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svcBytes(['kv', 'key', 'get', 'never-put', ...cache()]),
      /^svc: No such key: "never-put" is not in KV namespace cache \[urn:svc:not-found\]\n$/,
    );
    const badPair = join(tempDir(), 'bad.json');
    writeFileSync(
      badPair,
      JSON.stringify([
        { key: 'ok', value: 'v' },
        { key: 'bad', value: 'v', expiration_ttl: 5 },
      ]),
    );
    assertRefused(
      await svc(['kv', 'bulk', 'put', badPair, ...cache()]),
      /^svc: Invalid expiration: item 1 \(bad\): Invalid expiration_ttl of 5\. .* \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc([
        'kv',
        'namespace',
        'list',
        '--name',
        'shop-web',
        '--node',
        node.url,
        '--key',
        keyArg(other),
      ]),
      /^svc: Out of scope: .* \[urn:svc:auth-scope\]\n$/,
    );
    assertRefused(
      await svc(['kv', 'key', 'get', 'k', '--name', 'shop-web', '--binding', 'CACHE', '--key', keyArg(shop)]),
      /^svc: No node to ask: pass --node <url>, or add a remote with svc remote add \[urn:svc:invalid-input\]\n$/,
    );
  });
});

describe('svc app delete', () => {
  test('removes the KV data with the application, and says how much', async () => {
    const kvPrefix = `${keys.fleetPrefix(APP)}kv/`;
    const held = (await bucket.store.list(kvPrefix, { recursive: true })).objects.length;
    assert.ok(held > 1000, `KV entries before: ${held}`);
    const deleted = await svc(['app', 'delete', '--force', ...asShop()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    const first = deleted.stdout.split('\n')[0]!;
    assert.match(
      first,
      new RegExp(`^Deleted ${APP}: \\d+ store keys removed \\(${held} of them Workers KV entries\\)$`),
    );
    assert.ok(deleted.stdout.includes(`\n${kvPrefix}cache/`), 'each KV key is listed');
    assert.deepEqual((await bucket.store.list(kvPrefix, { recursive: true })).objects, []);
  });
});
