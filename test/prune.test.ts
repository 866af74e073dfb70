// `svc deployment prune`, one test (or more) per rule of docs/cli.md, on seeded layouts in a real
// local-directory bucket. The command's own flags and prompt over a process are in
// test/prune-cli.test.ts.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Problem } from '../src/problem.ts';
import { keys } from '../src/registry/keys.ts';
import { NODE_DEAD_AFTER_MS } from '../src/registry/liveness.ts';
import { requireVerifiedRuntimes } from '../src/runtime-tools/capability.ts';
import type { Answerer } from '../src/runtime-tools/consent.ts';
import { type PruneRun, parseKeep, parseOlderThan, prune } from '../src/runtime-tools/prune.ts';
import { type DirStore, openDirStore } from '../src/store/dir.ts';
import type { Store } from '../src/store/store.ts';
import {
  ageObject,
  DAY_MS,
  seedBlob,
  seedDeployment,
  seedNode,
  seedScriptPointer,
  seedSelector,
} from './helpers/runtime-seed.ts';
import { tempDir } from './helpers/svc.ts';

const APP = 'shop';
const NOW = Date.now();
const v = (n: number) => `0000000000${n.toString(16).padStart(2, '0')}aa`;

let store: DirStore;

const nobody: Answerer = {
  interactive: false,
  ask: () => Promise.reject(new Error('asked nobody')),
};
const answering = (answer: string, during?: () => Promise<void>): Answerer => ({
  interactive: true,
  async ask() {
    await during?.();
    return answer;
  },
});

async function run(options: Partial<PruneRun> = {}): Promise<{ lines: string[]; warnings: string[] }> {
  const lines: string[] = [];
  const warnings: string[] = [];
  await prune({
    store,
    application: APP,
    keep: 10,
    windowMs: DAY_MS,
    yes: true,
    dryRun: false,
    answerer: nobody,
    nowMs: NOW,
    out: (line) => lines.push(line),
    warn: (line) => warnings.push(line),
    ...options,
  });
  return { lines, warnings };
}

/** The same store, with `hook` awaited before every delete. */
function withDeleteHook(inner: Store, hook: (key: string) => Promise<void>): Store {
  return {
    description: inner.description,
    get: (key) => inner.get(key),
    put: (key, body, condition) => inner.put(key, body, condition),
    stat: (key) => inner.stat(key),
    list: (prefix, options) => inner.list(prefix, options),
    close: () => inner.close(),
    async delete(key, condition) {
      await hook(key);
      return inner.delete(key, condition);
    },
  };
}

async function exists(key: string): Promise<boolean> {
  return (await store.stat(key)) !== null;
}

async function deploymentExists(script: string, version: string): Promise<boolean> {
  return (
    (await store.list(keys.runtimeDeployment(APP, script, version), { recursive: true })).objects.length > 0
  );
}

async function refusal(work: Promise<unknown>): Promise<Problem> {
  try {
    await work;
  } catch (err) {
    assert.ok(err instanceof Problem, `expected a Problem, got ${err}`);
    return err;
  }
  assert.fail('expected a refusal');
}

/** Five deployments of `web`, v(1) oldest (10 days) to v(5) newest (now); the selector at v(5). */
async function seedFive(): Promise<void> {
  for (let n = 1; n <= 5; n++) {
    await seedDeployment(store, APP, {
      script: 'web',
      version: v(n),
      createdMs: NOW - (5 - n) * 2.5 * DAY_MS,
    });
  }
  await seedSelector(store, APP, 'web', v(5));
  await seedScriptPointer(store, APP, 'web', v(5));
}

describe('deployment prune', () => {
  beforeEach(async () => {
    store = await openDirStore(tempDir('svc-prune-'));
    await seedNode(store, 'n1', { cell: '0.6.2' });
  });
  afterEach(async () => {
    await store.close();
  });

  describe('flags', () => {
    it('--keep takes whole numbers >= 0', () => {
      assert.equal(parseKeep('0'), 0);
      assert.equal(parseKeep('10'), 10);
      for (const bad of ['-1', '1.5', 'ten', '', '1e3']) {
        assert.throws(() => parseKeep(bad), { code: 'invalid-input', title: 'Invalid --keep' });
      }
    });

    it('--older-than takes 30d, 12h, 45m, whole seconds or 0', () => {
      assert.equal(parseOlderThan('30d'), 30 * DAY_MS);
      assert.equal(parseOlderThan('12h'), 12 * 3_600_000);
      assert.equal(parseOlderThan('45m'), 45 * 60_000);
      assert.equal(parseOlderThan('90'), 90_000);
      assert.equal(parseOlderThan('0'), 0);
      for (const bad of ['1w', '1.5h', '-1', 'h', '', '24 h', '10s']) {
        assert.throws(() => parseOlderThan(bad), { code: 'invalid-input', title: 'Invalid --older-than' });
      }
    });
  });

  describe('rule 1: the count and age gates', () => {
    it('deletes only what is past the count and older than the window', async () => {
      await seedFive();
      // Ages: v1 10d, v2 7.5d, v3 5d, v4 2.5d, v5 0d. Keep 2, window 6d: v1 and v2 go.
      const { lines } = await run({ keep: 2, windowMs: 6 * DAY_MS });
      assert.deepEqual(await Promise.all([1, 2, 3, 4, 5].map((n) => deploymentExists('web', v(n)))), [
        false,
        false,
        true,
        true,
        true,
      ]);
      assert.ok(lines.some((l) => l.includes(`keep    web/${v(4)}  within the newest 2 deployments`)));
      assert.ok(lines.some((l) => l.includes(`keep    web/${v(3)}  younger than 6d`)));
      assert.equal(await exists(keys.runtimeRecord(APP, 'web', v(1))), false);
    });

    it('--keep 0 lifts the count gate', async () => {
      await seedFive();
      await run({ keep: 0, windowMs: 6 * DAY_MS });
      assert.deepEqual(await Promise.all([1, 2, 3, 4, 5].map((n) => deploymentExists('web', v(n)))), [
        false,
        false,
        true,
        true,
        true,
      ]);
    });

    it('--older-than 0 lifts the age gate, with a warning', async () => {
      await seedFive();
      const { warnings } = await run({ keep: 2, windowMs: 0 });
      assert.deepEqual(await Promise.all([1, 2, 3, 4, 5].map((n) => deploymentExists('web', v(n)))), [
        false,
        false,
        false,
        true,
        true,
      ]);
      assert.ok(warnings.some((w) => /deploy in flight can be damaged/.test(w)));
    });

    it('weighs a deployment with no record as the oldest', async () => {
      await seedFive();
      await seedDeployment(store, APP, { script: 'web', version: v(9), createdMs: null });
      // Its objects were written just now, yet it is the first to go and the age gate passes it.
      const { lines } = await run({ keep: 5, windowMs: DAY_MS });
      assert.equal(await deploymentExists('web', v(9)), false);
      assert.ok(lines.some((l) => l.includes(`delete  web/${v(9)}  no record: weighed as the oldest`)));
      assert.equal(await deploymentExists('web', v(1)), true);
    });
  });

  describe('rule 2: pointers', () => {
    it('the selector and a script pointer protect absolutely', async () => {
      await seedFive();
      await seedDeployment(store, APP, { script: 'admin', version: v(20), createdMs: NOW - 30 * DAY_MS });
      await seedScriptPointer(store, APP, 'admin', v(20));
      await seedSelector(store, APP, 'web', v(1));
      const { lines } = await run({ keep: 0, windowMs: 0 });
      assert.equal(await deploymentExists('web', v(1)), true);
      assert.equal(await deploymentExists('admin', v(20)), true);
      assert.equal(await deploymentExists('web', v(5)), true, 'the web pointer still names v5');
      for (const n of [2, 3, 4]) assert.equal(await deploymentExists('web', v(n)), false);
      assert.ok(lines.some((l) => l.includes(`web/${v(1)}  the fleet's selector points at it`)));
    });

    it('a missing or unreadable fleet-wide selector is store-nonconforming', async () => {
      await seedFive();
      await store.delete(keys.runtimeSelector(APP));
      assert.equal((await refusal(run())).code, 'store-nonconforming');
      await store.put(keys.runtimeSelector(APP), '{"schema_version":1,"script":"web"');
      assert.equal((await refusal(run())).code, 'store-nonconforming');
      await store.put(
        keys.runtimeSelector(APP),
        '{"schema_version":1,"script":"web","deployment":"NOT-HEX"}',
      );
      assert.equal((await refusal(run())).code, 'store-nonconforming');
      assert.equal(await deploymentExists('web', v(1)), true);
    });

    it('an application without deployments has nothing to prune', async () => {
      const { lines } = await run();
      assert.ok(lines.includes('Nothing to delete.'));
    });
  });

  describe('rule 3: blobs', () => {
    it('collects unreferenced blobs once older than the window; unknown or young age keeps them', async () => {
      const shared = await seedBlob(store, APP, 'shared');
      const onlyOld = await seedBlob(store, APP, 'only-old');
      const orphanOld = await seedBlob(store, APP, 'orphan-old');
      const orphanYoung = await seedBlob(store, APP, 'orphan-young');
      for (const hash of [shared, onlyOld, orphanOld]) {
        await ageObject(store.root, keys.runtimeBlob(APP, hash), NOW - 3 * DAY_MS);
      }
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW - 9 * DAY_MS,
        blobs: [shared, onlyOld],
      });
      await seedDeployment(store, APP, { script: 'web', version: v(2), createdMs: NOW, blobs: [shared] });
      await seedSelector(store, APP, 'web', v(2));
      await run({ keep: 1, windowMs: DAY_MS });
      assert.equal(await deploymentExists('web', v(1)), false);
      assert.equal(await exists(keys.runtimeBlob(APP, shared)), true, 'referenced by a kept deployment');
      assert.equal(await exists(keys.runtimeBlob(APP, onlyOld)), false, 'referenced only by a deleted one');
      assert.equal(await exists(keys.runtimeBlob(APP, orphanOld)), false);
      assert.equal(await exists(keys.runtimeBlob(APP, orphanYoung)), true, 'younger than the window');
    });

    it('an unreadable or malformed kept assets.json is store-nonconforming', async () => {
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        assetsBody: '{"schema_version":1,',
      });
      await seedSelector(store, APP, 'web', v(1));
      const problem = await refusal(run());
      assert.equal(problem.code, 'store-nonconforming');
      assert.match(problem.detail!, /assets\.json/);
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        assetsBody: JSON.stringify({
          schema_version: 1,
          required_features: [],
          files: { '/a': { blob: 'zz' } },
        }),
      });
      assert.equal((await refusal(run())).code, 'store-nonconforming');
    });
  });

  describe('rule 4: container images', () => {
    it('collects images no kept manifest names, after the blobs', async () => {
      const image = (name: string) => `${'ab'.repeat(4)}${name}`;
      for (const name of ['01', '02', '03', '04']) {
        await store.put(keys.runtimeImage(APP, image(name)), 'tar');
        await ageObject(store.root, keys.runtimeImage(APP, image(name)), NOW - 3 * DAY_MS);
      }
      await store.put(keys.runtimeImage(APP, image('05')), 'tar'); // young
      const containers = { required_features: ['modules', 'containers'] };
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW - 9 * DAY_MS,
        manifestExtra: { ...containers, containers: [{ image: `cell-image:${image('01')}` }] },
      });
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(2),
        createdMs: NOW,
        manifestExtra: {
          ...containers,
          containers: [{ image: `cell-image:${image('02')}` }],
          fence_image: `cell-image:${image('03')}`,
        },
      });
      await seedSelector(store, APP, 'web', v(2));
      await run({ keep: 1 });
      const left = await Promise.all(
        ['01', '02', '03', '04', '05'].map((n) => exists(keys.runtimeImage(APP, image(n)))),
      );
      assert.deepEqual(left, [false, true, true, false, true]);
    });

    it('an image reference that is not cell-image: plus lowercase hex is store-nonconforming', async () => {
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        manifestExtra: { required_features: ['modules', 'containers'], fence_image: 'cell-image:ABCDEF' },
      });
      await seedSelector(store, APP, 'web', v(1));
      const problem = await refusal(run());
      assert.equal(problem.code, 'store-nonconforming');
      assert.match(problem.detail!, /fence_image/);
    });
  });

  describe('rule 5: only deploy/<script>/<hex version>/ is weighed', () => {
    it('skips images/, queues/ and folders that are no hex version', async () => {
      await seedFive();
      await store.put(`${keys.runtimeQueuesPrefix(APP)}orders/0001/state.json`, '{}');
      await store.put(`${keys.runtimeDeployPrefix(APP)}web/not-a-version/x.js`, 'x');
      await store.put(`${keys.runtimeDeployPrefix(APP)}web/README`, 'x');
      const { lines } = await run({ keep: 0, windowMs: 0 });
      assert.equal(await exists(`${keys.runtimeQueuesPrefix(APP)}orders/0001/state.json`), true);
      assert.equal(await exists(`${keys.runtimeDeployPrefix(APP)}web/not-a-version/x.js`), true);
      assert.ok(lines[0]!.startsWith(`Deployments of ${APP}: 5,`));
    });
  });

  describe('rule 7: consent', () => {
    it('input that is no terminal, without --yes, is invalid-input and deletes nothing', async () => {
      await seedFive();
      const problem = await refusal(run({ keep: 0, windowMs: 0, yes: false, answerer: nobody }));
      assert.equal(problem.code, 'invalid-input');
      assert.equal(problem.title, 'Nothing to answer with');
      assert.equal(await deploymentExists('web', v(1)), true);
    });

    for (const answer of ['y', 'Y', 'yes', 'YeS', ' yes ']) {
      it(`${JSON.stringify(answer)} consents`, async () => {
        await seedFive();
        await run({ keep: 0, windowMs: 0, yes: false, answerer: answering(answer) });
        assert.equal(await deploymentExists('web', v(1)), false);
      });
    }

    for (const answer of ['', 'n', 'no', 'yep', 'ye', 'y y']) {
      it(`${JSON.stringify(answer)} declines`, async () => {
        await seedFive();
        const { lines } = await run({ keep: 0, windowMs: 0, yes: false, answerer: answering(answer) });
        assert.equal(await deploymentExists('web', v(1)), true);
        assert.equal(lines.at(-1), 'Nothing deleted.');
      });
    }

    it('--dry-run prints the plan and deletes nothing, asking nobody', async () => {
      await seedFive();
      const { lines } = await run({ keep: 0, windowMs: 0, yes: false, dryRun: true, answerer: nobody });
      assert.equal(await deploymentExists('web', v(1)), true);
      assert.ok(lines.some((l) => l.startsWith(`  delete  web/${v(1)}`)));
      assert.equal(lines.at(-1), 'Dry run: nothing deleted.');
    });
  });

  describe('rule 8: deletion order', () => {
    it('deletes each record before its objects, then blobs, then images', async () => {
      const blob = await seedBlob(store, APP, 'old');
      await ageObject(store.root, keys.runtimeBlob(APP, blob), NOW - 3 * DAY_MS);
      await store.put(keys.runtimeImage(APP, 'abcdef'), 'tar');
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW - 9 * DAY_MS,
        blobs: [blob],
      });
      await seedDeployment(store, APP, { script: 'web', version: v(2), createdMs: NOW - 8 * DAY_MS });
      await seedDeployment(store, APP, { script: 'web', version: v(3), createdMs: NOW });
      await seedSelector(store, APP, 'web', v(3));
      const deleted: string[] = [];
      const recording = withDeleteHook(store, async (key) => {
        deleted.push(key);
      });
      await run({ store: recording, keep: 1, windowMs: 0 });
      const kinds = deleted.map((key) =>
        key.includes('/records/')
          ? 'record'
          : key.includes('/deploy-blobs/')
            ? 'blob'
            : key.includes('/images/')
              ? 'image'
              : 'object',
      );
      assert.deepEqual(kinds, [
        'record',
        'object',
        'object',
        'object',
        'record',
        'object',
        'object',
        'blob',
        'image',
      ]);
      assert.ok(deleted[1]!.endsWith('/manifest.json'), 'the manifest goes first of the objects');
    });

    it('a pointer moved onto a deployment mid-prune is cas-conflict, and nothing of it is deleted', async () => {
      await seedFive();
      const problem = await refusal(
        run({
          keep: 0,
          windowMs: 0,
          yes: false,
          // Someone rolls the fleet back to v(2) while the operator reads the plan.
          answerer: answering('y', () => seedSelector(store, APP, 'web', v(2))),
        }),
      );
      assert.equal(problem.code, 'cas-conflict');
      assert.equal(problem.title, 'Deployment is in use again');
      assert.equal(await deploymentExists('web', v(1)), false, 'deleted before the pointer moved onto v(2)');
      assert.equal(await deploymentExists('web', v(2)), true);
      assert.equal(await exists(keys.runtimeRecord(APP, 'web', v(2))), true);
      assert.equal(await deploymentExists('web', v(3)), true, 'the run stops at the conflict');
    });

    it('each deployment re-reads the pointers: a script pointer moved after the first deletion stops the next', async () => {
      await seedFive();
      let moved = false;
      const hooked = withDeleteHook(store, async (key) => {
        // Once v(1) is gone, someone points the web script at v(3), which is next in line.
        if (!moved && key.startsWith(keys.runtimeDeployment(APP, 'web', v(2)))) {
          moved = true;
          await seedScriptPointer(store, APP, 'web', v(3));
        }
      });
      const problem = await refusal(run({ store: hooked, keep: 0, windowMs: 0 }));
      assert.equal(problem.code, 'cas-conflict');
      assert.match(problem.detail!, /web pointer/);
      assert.equal(await deploymentExists('web', v(1)), false);
      assert.equal(await deploymentExists('web', v(2)), false);
      assert.equal(await deploymentExists('web', v(3)), true);
      assert.equal(await exists(keys.runtimeRecord(APP, 'web', v(3))), true);
    });
  });

  describe('rule 9: verified runtime releases and known documents', () => {
    it('refuses unless every answering node reports a verified release', async () => {
      const guard = () => requireVerifiedRuntimes(store, Date.now(), 'svc deployment prune');
      await guard(); // n1 reports 0.6.2
      for (const release of ['0.5.0', '0.5.1', '0.6.0', '0.6.1', 'cell 0.6.2', '0.7.0', '0.8.0', '0.8.1']) {
        await seedNode(store, 'n2', { cell: release });
        await guard();
      }
      await seedNode(store, 'n2', { cell: '0.9.0' });
      assert.equal((await refusal(guard())).code, 'capability-missing');
      await seedNode(store, 'n2', { cell: '0.9.0', beatMs: Date.now() - NODE_DEAD_AFTER_MS - 1_000 }); // not answering
      await guard();
      await seedNode(store, 'n3', {}); // answering, no release reported
      assert.equal((await refusal(guard())).code, 'capability-missing');
    });

    it('refuses when no node answers', async () => {
      await seedNode(store, 'n1', { cell: '0.6.2', beatMs: Date.now() - NODE_DEAD_AFTER_MS - 1_000 });
      const problem = await refusal(requireVerifiedRuntimes(store, Date.now(), 'svc deployment prune'));
      assert.equal(problem.code, 'capability-missing');
    });

    it('refuses a manifest or assets.json with an unknown schema version or required feature', async () => {
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        manifestExtra: { required_features: ['modules', 'teleport'] },
      });
      await seedSelector(store, APP, 'web', v(1));
      assert.equal((await refusal(run({ dryRun: true }))).code, 'capability-missing');
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        manifestExtra: { schema_version: 2 },
      });
      assert.equal((await refusal(run({ dryRun: true }))).code, 'capability-missing');
      await seedDeployment(store, APP, {
        script: 'web',
        version: v(1),
        createdMs: NOW,
        assetsBody: JSON.stringify({ schema_version: 1, required_features: ['brotli'], files: {} }),
      });
      assert.equal((await refusal(run({ dryRun: true }))).code, 'capability-missing');
    });

    it('weighs a folder without a manifest as a deploy in flight, by the age window', async () => {
      await seedFive();
      await seedDeployment(store, APP, { script: 'web', version: v(30), createdMs: null, manifest: false });
      const { lines } = await run({ keep: 0, windowMs: DAY_MS });
      assert.equal(await deploymentExists('web', v(30)), true);
      assert.ok(lines.some((l) => l.includes(`keep    web/${v(30)}  younger than 1d`)));
      await run({ keep: 0, windowMs: DAY_MS, nowMs: NOW + 2 * DAY_MS });
      assert.equal(await deploymentExists('web', v(30)), false);
    });
  });
});
