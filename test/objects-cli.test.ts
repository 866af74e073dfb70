// `svc objects` (docs/cli.md "svc objects") against a real `svc sail` serving a real worker with
// Durable Objects in workerd, with an operator key scoped to `shop-*` and no bucket credentials:
// `objects list` names the live class and the class a deleted_classes migration removed, with the
// objects the bucket keeps for each; `objects delete-class` removes a deleted class's stored objects;
// and the refusals, one line each. The node holds the application's objects; the stored objects
// listed are histories as a holder ships them (runtime/src/bindings/objects-storage.ts), written
// into the bucket by the test (the worker's own objects are created by requests, which it gets none of).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { writeSnapshot } from '../runtime/src/bindings/d1-log.ts';
import { fileLog } from '../runtime/src/bindings/objects-storage.ts';
import { keys } from '../src/registry/keys.ts';
import { durableObjectStorageKey } from '../src/runtime-tools/layout.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { assertRefused, deployThroughNode, readyPort } from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const APP = 'shop-web';

let bucket: Bucket;
let node: SailProcess;
let shop: Signer;
let other: Signer;
const env = () => ({
  SVC_HOME: tempDir('svc-home-'),
  SVC_OPERATOR_KEY: undefined,
  SVC_REMOTE: undefined,
  SVC_STATE_DIR: tempDir(),
  SVC_S3_ENDPOINT: undefined,
});
const svc = (args: string[]) => runSvc(args, { env: env(), timeoutMs: 60_000 });
const asShop = () => ['--name', 'shop', '--env', 'web', '--node', node.url, '--key', keyArg(shop)];

/** An object file's history as the holder ships it: one snapshot generation. */
async function stored(namespace: string, file: string): Promise<void> {
  const log = fileLog({ store: bucket.store, application: APP }, { namespace, file });
  await writeSnapshot(log, 1, { time_ms: Date.now(), index: 0 }, new Uint8Array([1, 2, 3]));
}

/** The project: a live class Counter and a class Old that a deleted_classes migration removed. */
function project(text: string): Record<string, string> {
  return {
    'cell.jsonc': JSON.stringify({
      name: APP,
      main: 'index.js',
      compatibility_date: '2025-06-01',
      durable_objects: { bindings: [{ name: 'COUNTER', class_name: 'Counter' }] },
      migrations: [
        { tag: 'v1', new_sqlite_classes: ['Counter', 'Old'] },
        { tag: 'v2', deleted_classes: ['Old'] },
      ],
    }),
    'index.js': `import { DurableObject } from 'cloudflare:workers';
export class Counter extends DurableObject {
  fetch() { return new Response('counter${text}'); }
}
export default { fetch: () => new Response('ok') };
`,
  };
}

before(async () => {
  bucket = await openBucket();
  const admin = await bucket.operator('op-admin', 'admin', ['*']);
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
  node = await bucket.sail(['--cell-bin', CELL_BIN, '--cell-env', 'CELL_DRAIN_MS=2000']);
  await deployThroughNode(node, shop, project(''));
  await readyPort(node, admin, APP);
  await bucket.application('shop-empty');
});

after(async () => {
  await bucket?.close();
});

interface Listed {
  holder: { node: string } | null;
  classes: { class_name: string; storage_key: string; state: string; bindings: string[]; objects: number }[];
}

async function listed(): Promise<Listed> {
  const json = await svc(['objects', 'list', ...asShop(), '--json']);
  assert.equal(json.code, 0, json.stderr);
  return JSON.parse(json.stdout);
}

describe('svc objects through a node', () => {
  test('objects list: the live class with its bindings and stored objects, a deleted class while it keeps any, the holder', async () => {
    const before = await listed();
    assert.deepEqual(
      before.classes.map((c) => [c.class_name, c.state, c.bindings, c.objects]),
      [['Counter', 'live', ['COUNTER'], 0]],
      'a deleted class with no stored objects is not listed',
    );
    const counterKey = before.classes[0]?.storage_key as string;
    assert.equal(counterKey, durableObjectStorageKey(APP, 'Counter'));
    const oldKey = durableObjectStorageKey(APP, 'Old');
    // The holder's first pass (it removes a deleted class's stored objects first) is done once the
    // namespace's alarms file is shipped: objects stored before it would be removed with the class.
    const alarms = keys.runtimeObjectLog(APP, counterKey, keys.runtimeObjectsAlarmsFile);
    await waitFor(
      async () => (await bucket.store.list(alarms, { recursive: true })).objects.length > 0,
      'the first pass',
    );
    await stored(counterKey, 'a'.repeat(64));
    await stored(counterKey, 'b'.repeat(64));
    await stored(oldKey, 'c'.repeat(64));
    const after = await listed();
    assert.deepEqual(
      after.classes.map((c) => [c.class_name, c.state, c.objects]),
      [
        ['Counter', 'live', 2],
        ['Old', 'deleted', 1],
      ],
    );
    assert.equal(after.holder?.node, node.nodeId, 'the node serving the application holds its objects');
    const text = await svc(['objects', 'list', ...asShop()]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^CLASS +STATE +STORAGE +BINDINGS +OBJECTS\n/);
    assert.match(text.stdout, /\nCounter +live \(sql\) +\S+ +COUNTER +2\n/);
    assert.match(text.stdout, /\nOld +deleted +\S+ +- +1\n/);
    assert.ok(text.stdout.endsWith(`\nHeld by node ${node.nodeId}.\n`), text.stdout);

    const deleted = await svc(['objects', 'delete-class', 'Old', ...asShop()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.equal(deleted.stdout, 'Deleted the stored objects of Old of shop-web: 1 object.\n');
    const listing = await bucket.store.list(keys.runtimeObjectsNamespacePrefix(APP, oldKey), {
      recursive: true,
    });
    assert.equal(listing.objects.length, 0);
    assert.deepEqual(
      (await listed()).classes.map((c) => c.class_name),
      ['Counter'],
    );
  });

  test('an application without a serving deployment lists no class', async () => {
    const text = await svc([
      'objects',
      'list',
      '--name',
      'shop-empty',
      '--node',
      node.url,
      '--key',
      keyArg(shop),
    ]);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, 'shop-empty has no serving deployment, so no Durable Object class.\n');
  });

  test('refusals: a live class, an unknown class, another scope, an unknown application, no node', async () => {
    assertRefused(
      await svc(['objects', 'delete-class', 'Counter', ...asShop()]),
      /^svc: Durable Object class in use: the serving deployment of shop-web declares Counter, whose objects its holder serves: deploy a deleted_classes migration for it, which deletes them too \[urn:svc:reference-held\]\n$/,
    );
    assertRefused(
      await svc(['objects', 'delete-class', 'Nope', ...asShop()]),
      /^svc: No such Durable Object class: the serving deployment of shop-web names no class "Nope" \(deleted classes: Old\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['objects', 'list', '--name', 'shop-web', '--node', node.url, '--key', keyArg(other)]),
      /^svc: Out of scope: .* \[urn:svc:auth-scope\]\n$/,
    );
    assertRefused(
      await svc([
        'objects',
        'delete-class',
        'Old',
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
      await svc(['objects', 'list', '--name', 'shop-nope', '--node', node.url, '--key', keyArg(shop)]),
      /^svc: No such application: no application is named "shop-nope"; applications are created by their first deploy \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['objects', 'list', '--name', 'shop-web', '--key', keyArg(shop)]),
      /^svc: No node to ask: pass --node <url>, or add a remote with svc remote add \[urn:svc:invalid-input\]\n$/,
    );
  });
});

describe('a deleted_classes migration', () => {
  test("a deployment started with it removes the deleted class's stored objects from the bucket", async () => {
    const oldKey = durableObjectStorageKey(APP, 'Old');
    await stored(oldKey, 'e'.repeat(64));
    assert.equal((await listed()).classes.find((c) => c.class_name === 'Old')?.objects, 1);
    await deployThroughNode(node, shop, project(' v2'));
    const prefix = keys.runtimeObjectsNamespacePrefix(APP, oldKey);
    await waitFor(
      async () => (await bucket.store.list(prefix, { recursive: true })).objects.length === 0,
      "the deleted class's objects removed",
    );
    assert.deepEqual(
      (await listed()).classes.map((c) => c.class_name),
      ['Counter'],
    );
  });
});

describe('svc app delete', () => {
  test("removes the application's stored objects with it, and says how many", async () => {
    const counterKey = durableObjectStorageKey(APP, 'Counter');
    await stored(counterKey, 'd'.repeat(64)); // beside a and b from the first test, and the alarms' file
    const prefix = keys.runtimeObjectsPrefix(APP);
    const objects = (await bucket.store.list(prefix, { recursive: true })).objects.length;
    assert.ok(objects >= 4, `the stored objects and the lease: ${objects}`);
    const deleted = await svc(['app', 'delete', '--force', ...asShop()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(
      deleted.stdout.split('\n')[0] ?? '',
      new RegExp(`^Deleted ${APP}: \\d+ store keys removed \\(the storage of 3 Durable Objects\\)$`),
    );
    assert.deepEqual((await bucket.store.list(prefix, { recursive: true })).objects, []);
  });
});
