// Durable Objects' storage and lease (docs/bindings.md "Durable Objects on the fleet"): real workerd writes the objects' SQLite files; the shipper copies them to the bucket
// while workerd runs, a take restores them (objects and pending alarms) into a fresh folder that
// another workerd serves on from, and the lease moves the objects between two holders. The bucket
// is the in-memory store double at the Store seam.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { keys, logKeys } from '../../../src/registry/keys.ts';
import type { Store } from '../../../src/store/store.ts';
import { MemoryStore } from '../../../test/helpers/memory-store.ts';
import {
  call,
  runningWorkerds,
  startCounterWorkerd,
  type Workerd,
} from '../../../test/helpers/objects-workerd.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { ObjectsHolder } from './objects-holder.ts';
import {
  listStoredFiles,
  METADATA_FILE,
  ObjectsMoved,
  ObjectsShipper,
  restoreObjects,
} from './objects-storage.ts';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

after(async () => {
  for (const w of runningWorkerds) await w.stop();
});

const ref = (store: Store) => ({ store, application: 'app' });

test('a pass ships every changed object file while workerd writes; a take restores objects and alarms that another workerd serves on from', async () => {
  const store = new MemoryStore();
  const dir = await tempDir('objects-a-');
  const first = await startCounterWorkerd(dir);
  for (let i = 0; i < 5; i++) await call(first, '/inc?o=a');
  await call(first, '/inc?o=b');
  await call(first, '/alarm?o=b');
  const alarmAt = await call(first, '/when?o=b');
  const shipper = new ObjectsShipper({
    ref: ref(store),
    dir,
    scratchDir: await tempDir('objects-copies-'),
    mayShip: () => true,
    states: new Map(),
  });
  const pass = await shipper.pass();
  assert.equal(pass.shipped, 3, 'two objects and the namespace metadata');
  assert.equal((await shipper.pass()).shipped, 0, 'nothing changed: nothing shipped');
  await call(first, '/inc?o=a');
  assert.equal((await shipper.pass()).shipped, 1, 'only the object written since');
  const files = await listStoredFiles(ref(store));
  assert.deepEqual(
    files.map((f) => f.namespace),
    ['app-Counter', 'app-Counter', 'app-Counter'],
  );
  assert.ok(files.some((f) => f.file === METADATA_FILE));
  await first.stop();

  const taken = await tempDir('objects-b-');
  const states = await restoreObjects(ref(store), taken, 'b');
  assert.equal(states.size, 3);
  const second = await startCounterWorkerd(taken);
  assert.equal(await call(second, '/get?o=a'), '6');
  assert.equal(await call(second, '/get?o=b'), '1');
  assert.equal(await call(second, '/when?o=b'), alarmAt, 'the pending alarm moved with the object');
  assert.equal(await call(second, '/inc?o=a'), '7');
  await second.stop();
});

test('a former holder whose files another node took over finds its next write refused, and never ships again', async () => {
  const store = new MemoryStore();
  const dir = await tempDir('objects-a-');
  const w = await startCounterWorkerd(dir);
  await call(w, '/inc?o=a');
  const old = new ObjectsShipper({
    ref: ref(store),
    dir,
    scratchDir: await tempDir('objects-copies-'),
    mayShip: () => true,
    states: new Map(),
  });
  await old.pass();
  await restoreObjects(ref(store), await tempDir('objects-b-'), 'b');
  await call(w, '/inc?o=a');
  await assert.rejects(old.pass(), ObjectsMoved);
  await assert.rejects(old.pass(), ObjectsMoved);
  const files = await listStoredFiles(ref(store));
  const a = files.find((f) => f.file !== METADATA_FILE);
  assert.ok(a);
  const base = keys.runtimeObjectLog('app', a.namespace, a.file);
  const take = await store.get(logKeys.snapshot(base, 2));
  assert.match(Buffer.from(take?.body ?? []).toString(), /"taken_by":"b"/);
  await w.stop();
});

test("a deleted class's namespace: its stored objects go from the bucket at the next pass, and are shipped no more", async () => {
  const store = new MemoryStore();
  const dir = await tempDir('objects-a-');
  const w = await startCounterWorkerd(dir);
  await call(w, '/inc?o=a');
  const shipper = new ObjectsShipper({
    ref: ref(store),
    dir,
    scratchDir: await tempDir('objects-copies-'),
    mayShip: () => true,
    states: new Map(),
  });
  assert.equal((await shipper.pass()).shipped, 2);
  const prefix = keys.runtimeObjectsNamespacePrefix('app', 'app-Counter');
  assert.ok((await store.list(prefix, { recursive: true })).objects.length > 0);
  shipper.drop(['app-Counter']);
  await call(w, '/inc?o=a');
  assert.equal((await shipper.pass()).shipped, 0);
  assert.deepEqual((await store.list(prefix, { recursive: true })).objects, []);
  await w.stop();
});

/** One node's holder, serving through a workerd of its own while it holds the objects. */
function holderOn(store: Store, node: string, dataDir: string, ttlMs: number) {
  const events: string[] = [];
  let workerd: Workerd | null = null;
  const holder = new ObjectsHolder({
    store,
    application: 'app',
    node,
    dataDir,
    ttlMs,
    standbyCheckMs: 200,
    shipEveryMs: 200,
    log: () => {},
    serve: async (storageDir) => {
      workerd = await startCounterWorkerd(storageDir);
      events.push('serve');
    },
    stopServing: async (reason) => {
      await workerd?.stop();
      workerd = null;
      events.push(`stop: ${reason}`);
    },
  });
  return { holder, events, workerd: () => workerd };
}

test('one holder serves the objects; when it stops, the standby takes them over with every acknowledged increment', async () => {
  const store = new MemoryStore();
  const a = holderOn(store, 'a', await tempDir('objects-node-a-'), 3_000);
  const b = holderOn(store, 'b', await tempDir('objects-node-b-'), 3_000);
  a.holder.start();
  await waitFor(() => a.holder.state === 'holding' && a.workerd(), 'a to hold the objects');
  b.holder.start();
  await waitFor(() => b.holder.holder?.node === 'a', 'b to see a holding');
  assert.equal(b.holder.state, 'standby');
  assert.equal(b.workerd(), null);
  let acknowledged = 0;
  for (let i = 0; i < 20; i++) {
    await call(a.workerd() as Workerd, '/inc?o=shared');
    acknowledged++;
  }
  await a.holder.stop();
  assert.deepEqual(a.events, ['serve', 'stop: the runtime is stopping']);
  const served = await waitFor(() => b.workerd(), 'b to take the objects over');
  assert.ok(served);
  assert.equal(await call(served, '/get?o=shared'), String(acknowledged));
  await b.holder.stop();
});

test('a holder that cannot renew stops serving before its lease may be taken by another node', async () => {
  const memory = new MemoryStore();
  let bucketDown = false;
  const store: Store = new Proxy(memory, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name !== 'put' || typeof value !== 'function') return value;
      return (key: string, ...rest: unknown[]) => {
        if (bucketDown && key === keys.runtimeObjectsLease('app'))
          return Promise.reject(new Error('bucket down'));
        return value.call(target, key, ...rest);
      };
    },
  });
  const a = holderOn(store, 'a', await tempDir('objects-node-a-'), 3_000);
  a.holder.start();
  await waitFor(() => a.holder.state === 'holding' && a.workerd(), 'a to hold the objects');
  bucketDown = true;
  const lease = JSON.parse(
    Buffer.from((await memory.get(keys.runtimeObjectsLease('app')))?.body ?? []).toString(),
  );
  await waitFor(() => a.events.length === 2, 'a to stop serving', 10_000);
  const stoppedAt = Date.now();
  assert.match(a.events[1] ?? '', /^stop: the lease ran out/);
  // Its last renewal may still have landed after the read above: the lease it holds ends no earlier.
  assert.ok(
    stoppedAt < lease.expires_ms,
    `stopped at ${stoppedAt}, the lease could be taken from ${lease.expires_ms}`,
  );
  assert.equal(a.workerd(), null);
  bucketDown = false;
  await a.holder.stop();
});

test('a ship pass or a take that outlasts the lease does not cost the holder its objects: the lease is renewed meanwhile', async () => {
  const memory = new MemoryStore();
  const lease = keys.runtimeObjectsLease('app');
  const namespaces = keys.runtimeObjectsNamespacesPrefix('app');
  let leaseWrites = 0;
  // While `held` is set, the reads (and, with `holdWrites`, the writes) of the objects' files wait
  // for it to be released, as a pass or a take over many objects keeps the bucket busy longer than
  // the lease lasts.
  let held: PromiseWithResolvers<void> | null = null;
  let holdWrites = true;
  const store: Store = new Proxy(memory, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if ((name !== 'put' && name !== 'get') || typeof value !== 'function') return value;
      return async (key: string, ...rest: unknown[]) => {
        if (name === 'put' && key === lease) leaseWrites++;
        if (held && key.startsWith(namespaces) && (name === 'get' || holdWrites)) await held.promise;
        return value.call(target, key, ...rest);
      };
    },
  });
  const heldForRenewals = async (what: string) => {
    const from = leaseWrites;
    // Four renewals, a third of the lease apart: longer than the lease.
    await waitFor(() => leaseWrites >= from + 4, `the lease renewed while ${what}`, 20_000);
    held?.resolve();
    held = null;
  };

  const a = holderOn(store, 'a', await tempDir('objects-node-a-'), 3_000);
  a.holder.start();
  await waitFor(() => a.holder.state === 'holding' && a.workerd(), 'a to hold the objects');
  for (let i = 0; i < 5; i++) await call(a.workerd() as Workerd, '/inc?o=slow');
  held = Promise.withResolvers();
  await heldForRenewals('a pass waits on the bucket');
  assert.deepEqual(a.events, ['serve'], 'a never stopped serving');
  assert.equal(await call(a.workerd() as Workerd, '/inc?o=slow'), '6');

  const b = holderOn(store, 'b', await tempDir('objects-node-b-'), 3_000);
  b.holder.start();
  await waitFor(() => b.holder.holder?.node === 'a', 'b to see a holding');
  // a's last pass writes; b's take, which reads every file, is what waits now.
  holdWrites = false;
  held = Promise.withResolvers();
  await a.holder.stop();
  await waitFor(() => b.holder.state === 'taking', 'b to start taking the objects over');
  await heldForRenewals("b's take restores the objects");
  const served = (await waitFor(() => b.workerd(), 'b to serve the objects')) as Workerd;
  assert.equal(await call(served, '/get?o=slow'), '6');
  assert.deepEqual(b.events, ['serve'], 'b served from its first take on');
  await b.holder.stop();
});
