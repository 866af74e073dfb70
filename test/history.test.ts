// History and rollback in process against a local-directory bucket seeded with the runtime's
// layout: ordering, serving mark, provenance, sizes; the rollback target rules (default, by
// version, by deploy id, already serving) and every refusal (frozen, pruned, incomplete,
// unknown, nothing older, no application, no selector), and the single conditional write.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { parseRollbackBody } from '../src/node/routes/rollback.ts';
import { isProblem } from '../src/problem.ts';
import { writeDeploymentNote } from '../src/registry/deployments.ts';
import { freezeDeploys } from '../src/registry/freeze.ts';
import { keys } from '../src/registry/keys.ts';
import { readHistory, rollback } from '../src/runtime-tools/history.ts';
import { parsePointer } from '../src/runtime-tools/layout.ts';
import type { Store } from '../src/store/store.ts';
import { seedDeployment, seedSelector } from './helpers/runtime-seed.ts';
import { refuses, tempStore } from './helpers/temp-store.ts';

const APP = 'shop';
const V1 = '019a00000001aaaaaaaa';
const V2 = '019a00000002bbbbbbbb';
const V3 = '019a00000003cccccccc';

async function seeded(): Promise<Store> {
  const store = await tempStore();
  await store.put(
    keys.application(APP),
    JSON.stringify({
      v: 1,
      name: APP,
      createdAt: '',
      updatedAt: '',
      labels: {},
      blocked: false,
      selector: null,
      replicas: 'all',
      domains: [],
      wildcardDomains: [],
    }),
  );
  for (const [i, version] of [V1, V2, V3].entries()) {
    await seedDeployment(store, APP, { script: APP, version, createdMs: 1000 * (i + 1) });
    await writeDeploymentNote(store, {
      v: 1,
      application: APP,
      script: APP,
      deployment: version,
      deploy: `${APP}.${String(i + 1).repeat(16)}`,
      by: i === 1 ? 'https://issuer.example#repo:acme/shop' : 'op-admin',
      deployedAt: new Date(1000 * (i + 1)).toISOString(),
      ...(i === 2
        ? { source: { provider: 'github', repo: 'acme/shop', ref: 'main', commit: 'c'.repeat(40) } }
        : {}),
    });
  }
  await seedSelector(store, APP, APP, V3);
  return store;
}

async function serving(store: Store): Promise<string> {
  const object = await store.get(keys.runtimeSelector(APP));
  const pointer = parsePointer(object!.body);
  assert.ok(pointer.ok);
  return pointer.value.deployment;
}

test('history: newest first, the serving one marked, with provenance and size', async () => {
  const store = await seeded();
  const history = await readHistory(store, APP);
  assert.deepEqual(history.serving, { script: APP, deployment: V3 });
  assert.deepEqual(
    history.deployments.map((d) => [d.deployment, d.serving, d.by, d.deploy]),
    [
      [V3, true, 'op-admin', `${APP}.${'3'.repeat(16)}`],
      [V2, false, 'https://issuer.example#repo:acme/shop', `${APP}.${'2'.repeat(16)}`],
      [V1, false, 'op-admin', `${APP}.${'1'.repeat(16)}`],
    ],
  );
  assert.equal(history.deployments[0]!.source?.repo, 'acme/shop');
  assert.equal(history.deployments[1]!.source, undefined);
  assert.ok(history.deployments.every((d) => d.bytes > 0 && d.complete));
  await store.close();
});

test('rollback: the one before by default, then by version, by deploy id, and to itself', async () => {
  const store = await seeded();
  const first = await rollback(store, { application: APP, nowMs: 5 });
  assert.deepEqual(first, {
    application: APP,
    from: { script: APP, deployment: V3 },
    to: { script: APP, deployment: V2 },
    changed: true,
  });
  assert.equal(await serving(store), V2);
  await rollback(store, { application: APP, nowMs: 6 });
  assert.equal(await serving(store), V1, 'the default walks further back');
  await refuses(
    () => rollback(store, { application: APP, nowMs: 7 }),
    'not-found',
    'Nothing to roll back to',
  );
  await rollback(store, { application: APP, to: `${APP}.${'3'.repeat(16)}`, nowMs: 8 });
  assert.equal(await serving(store), V3, 'by deploy id');
  await rollback(store, { application: APP, to: V2, nowMs: 9 });
  assert.equal(await serving(store), V2, 'by version');
  const same = await rollback(store, { application: APP, to: V2, nowMs: 10 });
  assert.equal(same.changed, false);
  await store.close();
});

test('rollback refusals: frozen, pruned, incomplete, unknown, no application, nothing serving', async () => {
  const store = await seeded();
  await freezeDeploys(store, 'op-admin', 'release week');
  const frozen = await refuses(
    () => rollback(store, { application: APP, nowMs: 1 }),
    'deploys-frozen',
    'Deploys are frozen',
  );
  assert.match(frozen.detail!, /release week/);
  await store.delete(keys.freeze);

  // Pruned: the note stays, the folder and record are gone.
  for (const key of (await store.list(keys.runtimeDeployment(APP, APP, V1), { recursive: true })).objects)
    await store.delete(key.key);
  await store.delete(keys.runtimeRecord(APP, APP, V1));
  const pruned = await refuses(
    () => rollback(store, { application: APP, to: V1, nowMs: 1 }),
    'not-found',
    'Deployment was pruned',
  );
  assert.match(pruned.detail!, new RegExp(`${APP}\\.1{16}`));

  const inFlight = '019a00000004dddddddd';
  await seedDeployment(store, APP, { script: APP, version: inFlight, createdMs: 4000, manifest: false });
  await refuses(
    () => rollback(store, { application: APP, to: inFlight, nowMs: 1 }),
    'invalid-input',
    'Not a complete deployment',
  );
  // The default skips what is not complete.
  await rollback(store, { application: APP, nowMs: 1 });
  assert.equal(await serving(store), V2);

  await refuses(
    () => rollback(store, { application: APP, to: 'ffff', nowMs: 1 }),
    'not-found',
    'No such deployment',
  );
  await refuses(
    () => rollback(store, { application: 'nosuch', nowMs: 1 }),
    'not-found',
    'No such application',
  );
  await store.delete(keys.runtimeSelector(APP));
  await refuses(() => rollback(store, { application: APP, nowMs: 1 }), 'not-found', 'Nothing to roll back');
  await store.close();
});

test('a selector moved between the read and the write is cas-conflict, and nothing is overwritten', async () => {
  const store = await seeded();
  let raced = false;
  const racing: Store = {
    description: store.description,
    get: (key) => store.get(key),
    stat: (key) => store.stat(key),
    list: (prefix, options) => store.list(prefix, options),
    delete: (key, condition) => store.delete(key, condition),
    close: () => store.close(),
    // A publish lands between the rollback's read of the selector and its write.
    async put(key, body, condition) {
      if (key === keys.runtimeSelector(APP) && !raced) {
        raced = true;
        await seedSelector(store, APP, APP, V1);
      }
      return store.put(key, body, condition);
    },
  };
  await refuses(() => rollback(racing, { application: APP, nowMs: 1 }), 'cas-conflict', 'Selector moved');
  assert.equal(await serving(store), V1, 'the racing write stands');
  await store.close();
});

test('the route body: nothing, or { to } naming a deployment or deploy id; anything else invalid-input', () => {
  assert.equal(parseRollbackBody(undefined), undefined);
  assert.equal(parseRollbackBody({}), undefined);
  assert.equal(parseRollbackBody({ to: V1 }), V1);
  assert.equal(parseRollbackBody({ to: 'shop.0123456789abcdef' }), 'shop.0123456789abcdef');
  fc.assert(
    fc.property(fc.jsonValue(), (body) => {
      try {
        const to = parseRollbackBody(body);
        assert.ok(to === undefined || /^[a-z0-9.-]{1,100}$/.test(to));
      } catch (err) {
        assert.ok(
          isProblem(err) && err.code === 'invalid-input' && err.title === 'Malformed request',
          String(err),
        );
      }
    }),
    { numRuns: 500 },
  );
});
