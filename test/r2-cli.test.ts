// `svc r2` (docs/cli.md "svc r2") against a real `svc sail` serving a real worker in workerd, with
// an operator key scoped to `shop-*` and no bucket credentials: the buckets of the serving
// deployment, objects put (from a file or stdin), read (to stdout or a file), listed and deleted
// as `wrangler r2 object` does them, every refusal as one line, and end to end: an object
// `svc r2 object put` writes is read by the worker through `env.FILES.get`, and one the worker
// puts is printed by `svc r2 object get`. Last, `svc app delete` removes the R2 data with the
// application and says how many objects.

import assert from 'node:assert/strict';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
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
const files = () => [...asShop(), '--binding', 'FILES'];

const svcBytes = (args: string[], stdin?: Buffer) => svcBytesUnder(env(), args, stdin);

async function worker(path: string): Promise<Response> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(response.status, 200);
  return response;
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
      r2_buckets: [
        { binding: 'FILES', bucket_name: 'files' },
        { binding: 'PHOTOS', bucket_name: 'photos' },
      ],
    }),
    'index.js': `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key');
    if (url.pathname === '/get') {
      const object = await env.FILES.get(key);
      if (object === null) return new Response('(null)');
      return new Response(object.body, {
        headers: { 'x-type': object.httpMetadata.contentType ?? '-', 'x-meta': JSON.stringify(object.customMetadata) },
      });
    }
    if (url.pathname === '/put') {
      await env.FILES.put(key, url.searchParams.get('value'), { httpMetadata: { contentType: 'text/x-worker' } });
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

describe('svc r2 through a node', () => {
  test('bucket list: the serving deployment’s bindings, as a table and as JSON', async () => {
    const listed = await svc(['r2', 'bucket', 'list', ...asShop()]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout, 'BINDING  BUCKET\nFILES    files\nPHOTOS   photos\n');
    const doc = JSON.parse((await svc(['r2', 'bucket', 'list', ...asShop(), '--json'])).stdout);
    assert.equal(doc.application, APP);
    assert.deepEqual(doc.buckets, [
      { binding: 'FILES', bucket_name: 'files' },
      { binding: 'PHOTOS', bucket_name: 'photos' },
    ]);
    const empty = await svc([
      'r2',
      'bucket',
      'list',
      '--name',
      'shop-empty',
      '--node',
      node.url,
      '--key',
      keyArg(shop),
    ]);
    assert.equal(empty.stdout, 'shop-empty has no serving deployment, so no R2 bucket.\n');
  });

  test('an object svc r2 object put writes, the worker reads through env.FILES.get', async () => {
    const bytes = Buffer.from([0, 255, 10, 13, 0x80, 1]);
    const file = join(tempDir(), 'object.bin');
    writeFileSync(file, bytes);
    const put = await svc([
      'r2',
      'object',
      'put',
      'from-cli/é.bin',
      '--file',
      file,
      '--content-type',
      'image/x-test',
      '--metadata',
      '{"by":"ci"}',
      ...files(),
    ]);
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, 'wrote "from-cli/é.bin" (6 bytes) to R2 bucket files (FILES) of shop-web\n');
    const read = await worker(`/get?key=${encodeURIComponent('from-cli/é.bin')}`);
    assert.equal(read.headers.get('x-type'), 'image/x-test');
    assert.equal(read.headers.get('x-meta'), '{"by":"ci"}');
    assert.deepEqual(Buffer.from(await read.arrayBuffer()), bytes);
  });

  test('an object the worker puts, svc r2 object get prints as raw bytes, or writes to --file', async () => {
    assert.equal(
      await (await worker(`/put?key=from-worker&value=${encodeURIComponent('wörker')}`)).text(),
      'put',
    );
    const raw = await svcBytes(['r2', 'object', 'get', 'from-worker', ...files()]);
    assert.equal(raw.code, 0, raw.stderr);
    assert.deepEqual(raw.stdout, Buffer.from('wörker'));
    const out = join(tempDir(), 'out.txt');
    const toFile = await svc(['r2', 'object', 'get', 'from-worker', ...files(), '--file', out]);
    assert.equal(toFile.code, 0, toFile.stderr);
    assert.equal(
      toFile.stdout,
      `wrote "from-worker" (7 bytes) from R2 bucket files (FILES) of shop-web to ${out}\n`,
    );
    assert.equal(readFileSync(out, 'utf8'), 'wörker');
  });

  test('put --pipe reads stdin whole; --bucket names the bucket', async () => {
    const bytes = Buffer.concat([Buffer.from([0, 1, 2]), Buffer.alloc(70_000, 7)]);
    const put = await svcBytes(
      ['r2', 'object', 'put', 'piped', '--pipe', ...asShop(), '--bucket', 'photos'],
      bytes,
    );
    assert.equal(put.code, 0, put.stderr);
    assert.equal(
      put.stdout.toString(),
      'wrote "piped" (70003 bytes) to R2 bucket photos (PHOTOS) of shop-web\n',
    );
    const got = await svcBytes(['r2', 'object', 'get', 'piped', ...asShop(), '--binding', 'PHOTOS']);
    assert.deepEqual(got.stdout, bytes);
    const records = await bucket.store.list(keys.runtimeR2RecordsPrefix(APP, 'photos'), { recursive: true });
    assert.equal(records.objects.length, 1, 'one record under fleets/shop-web/r2/photos/objects/');
  });

  test('list: every object with size, upload time and content type, --prefix, --json; delete', async () => {
    for (const key of ['l/b', 'l/a', 'l/c'])
      assert.equal(
        (await svcBytes(['r2', 'object', 'put', key, '--pipe', ...files()], Buffer.from(key))).code,
        0,
      );
    const table = await svc(['r2', 'object', 'list', ...files(), '--prefix', 'l/']);
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^KEY\s+SIZE\s+UPLOADED\s+CONTENT-TYPE$/);
    assert.match(lines[1]!, /^l\/a\s+3\s+\d{4}-\d\d-\d\dT\S+Z\s+application\/octet-stream$/);
    assert.equal(lines.length, 4);
    const doc = JSON.parse(
      (await svc(['r2', 'object', 'list', ...files(), '--prefix', 'l/', '--json'])).stdout,
    );
    assert.equal(doc.application, APP);
    assert.equal(doc.bucket, 'files');
    assert.deepEqual(
      doc.objects.map((o: { key: string; size: number }) => [o.key, o.size]),
      [
        ['l/a', 3],
        ['l/b', 3],
        ['l/c', 3],
      ],
    );
    const deleted = await svc(['r2', 'object', 'delete', 'l/b', ...files()]);
    assert.equal(deleted.stdout, 'deleted "l/b" from R2 bucket files (FILES) of shop-web\n');
    const after = JSON.parse(
      (await svc(['r2', 'object', 'list', ...files(), '--prefix', 'l/', '--json'])).stdout,
    );
    assert.deepEqual(
      after.objects.map((o: { key: string }) => o.key),
      ['l/a', 'l/c'],
    );
    assert.equal(
      await (await worker('/get?key=l%2Fb')).text(),
      '(null)',
      'the worker sees the delete at once',
    );
    const none = await svc(['r2', 'object', 'list', ...files(), '--prefix', 'nothing/']);
    assert.equal(none.stdout, 'No objects beginning "nothing/" in R2 bucket files (FILES) of shop-web.\n');
  });

  test('list follows the cursor past one page of 1000 objects', async () => {
    const names = Array.from({ length: 1003 }, (_, i) => `many/${String(i).padStart(4, '0')}`);
    for (let i = 0; i < names.length; i += 50)
      await Promise.all(
        names.slice(i, i + 50).map((name) =>
          call(
            node.url,
            'PUT',
            `/v1/applications/${APP}/r2/buckets/photos/objects/${encodeURIComponent(name)}`,
            {
              signer: shop,
              body: 'x',
            },
          ),
        ),
      );
    const json = await svc([
      'r2',
      'object',
      'list',
      ...asShop(),
      '--bucket',
      'photos',
      '--prefix',
      'many/',
      '--json',
    ]);
    assert.deepEqual(
      JSON.parse(json.stdout).objects.map((o: { key: string }) => o.key),
      names,
    );
  });

  test('--help says how the bucket is chosen and what each flag does', async () => {
    const help = await svc(['r2', 'object', 'put', '--help']);
    assert.equal(help.code, 0);
    for (const words of [
      '--binding <NAME>',
      '--bucket <bucket_name>',
      '--file <path>',
      '--pipe',
      '--content-type <type>',
      '--metadata <json>',
      'binds more than one',
    ])
      assert.ok(help.stdout.includes(words), `${words} in:\n${help.stdout}`);
    const top = await svc(['r2', '--help']);
    assert.match(top.stdout, /bucket\s+The R2 buckets an application binds/);
    assert.match(top.stdout, /object\s+Objects of one R2 bucket/);
  });
});

describe('svc r2 refusals, one line each', () => {
  test('choosing the bucket', async () => {
    assertRefused(
      await svcBytes(['r2', 'object', 'get', 'k', ...asShop()]),
      /^svc: Several R2 buckets: shop-web binds FILES \(files\), PHOTOS \(photos\); choose one with --binding <NAME> or --bucket <bucket_name> \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svcBytes(['r2', 'object', 'get', 'k', ...files(), '--bucket', 'files']),
      /^svc: Ambiguous R2 bucket: give --binding or --bucket, not both \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['r2', 'object', 'list', ...asShop(), '--binding', 'NOPE']),
      /^svc: No such R2 bucket: shop-web has no binding NOPE; it binds FILES \(files\), PHOTOS \(photos\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['r2', 'object', 'list', ...asShop(), '--bucket', 'nope']),
      /^svc: No such R2 bucket: shop-web has no bucket nope; .* \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['r2', 'object', 'list', '--name', 'shop-empty', '--node', node.url, '--key', keyArg(shop)]),
      /^svc: No R2 bucket: shop-empty has no serving deployment; deploy one whose r2_buckets binds a bucket \[urn:svc:not-found\]\n$/,
    );
  });

  test('values and keys refused before anything is sent', async () => {
    assertRefused(
      await svc(['r2', 'object', 'put', 'k', ...files()]),
      /^svc: No value: give --file <path>, or --pipe to read the object from stdin \[urn:svc:invalid-input\]\n$/,
    );
    const file = join(tempDir(), 'v');
    writeFileSync(file, 'v');
    assertRefused(
      await svc(['r2', 'object', 'put', 'k', '--file', file, '--pipe', ...files()]),
      /^svc: No value: give --file <path> or --pipe, not both \[urn:svc:invalid-input\]\n$/,
    );
    const huge = join(tempDir(), 'huge');
    writeFileSync(huge, '');
    truncateSync(huge, 100 * 1024 * 1024 + 1);
    assertRefused(
      await svc(['r2', 'object', 'put', 'k', '--file', huge, ...files()]),
      /^svc: Value too large: .* is 104857601 bytes; an R2 object put through a node is at most 104857600 bytes \(100 MiB\) \[urn:svc:resource-limit\]\n$/,
    );
    assertRefused(
      await svc(['r2', 'object', 'put', 'k', '--file', join(tempDir(), 'absent'), ...files()]),
      /^svc: Unreadable value file: .*: ENOENT \[urn:svc:invalid-input\]\n$/,
    );
    for (const key of ['..', '.'])
      assertRefused(
        await svcBytes(['r2', 'object', 'get', key, ...files()]),
        /^svc: Invalid key: "\.\.?" cannot travel in a URL path; R2 allows it, svc r2 does not \[urn:svc:invalid-input\]\n$/,
      );
  });

  test('the node’s refusals, re-rendered with its code', async () => {
    assertRefused(
      await svcBytes(['r2', 'object', 'put', 'k'.repeat(513), '--pipe', ...files()], Buffer.from('v')),
      /^svc: Invalid key: The specified object name is not valid\. \(10020\) \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svcBytes(
        ['r2', 'object', 'put', 'k', '--pipe', ...files(), '--metadata', '{nope'],
        Buffer.from('v'),
      ),
      /^svc: Invalid metadata: custom_metadata must be a JSON object whose values are strings \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svcBytes(
        [
          'r2',
          'object',
          'put',
          'k',
          '--pipe',
          ...files(),
          '--metadata',
          JSON.stringify({ pad: 'x'.repeat(2046) }),
        ],
        Buffer.from('v'),
      ),
      /^svc: Metadata too large: Your metadata headers exceed the maximum allowed metadata size\. \(10012\) \[urn:svc:resource-limit\]\n$/,
    );
    assertRefused(
      await svcBytes(['r2', 'object', 'get', 'never-put', ...files()]),
      /^svc: No such object: The specified key does not exist\. \(10007\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['r2', 'bucket', 'list', '--name', 'shop-web', '--node', node.url, '--key', keyArg(other)]),
      /^svc: Out of scope: .* \[urn:svc:auth-scope\]\n$/,
    );
    assertRefused(
      await svcBytes([
        'r2',
        'object',
        'get',
        'k',
        '--name',
        'shop-web',
        '--binding',
        'FILES',
        '--key',
        keyArg(shop),
      ]),
      /^svc: No node to ask: pass --node <url>, or add a remote with svc remote add \[urn:svc:invalid-input\]\n$/,
    );
  });
});

describe('svc app delete', () => {
  test('removes the R2 data with the application, and says how many objects', async () => {
    const r2Prefix = `${keys.fleetPrefix(APP)}r2/`;
    const records = async () =>
      (await bucket.store.list(r2Prefix, { recursive: true })).objects.filter((o) =>
        /\/objects\//.test(o.key),
      ).length;
    const held = await records();
    assert.ok(held > 1000, `R2 objects before: ${held}`);
    const deleted = await svc(['app', 'delete', '--force', ...asShop()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(
      deleted.stdout.split('\n')[0]!,
      new RegExp(`^Deleted ${APP}: \\d+ store keys removed \\(${held} of them R2 objects\\)$`),
    );
    assert.ok(deleted.stdout.includes(`\n${r2Prefix}files/bodies/`), 'each body is listed');
    assert.deepEqual((await bucket.store.list(r2Prefix, { recursive: true })).objects, []);
  });
});
