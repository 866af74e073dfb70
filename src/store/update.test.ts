// updateJson's own rules on the directory store (the store contract suite in test/ runs its
// create, replace, delete and conflict-retry cases on both backends): what the change sees
// through `parse`, and that a refusal or a failing store writes nothing and is not retried.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { Problem } from '../problem.ts';
import { openDirStore } from './dir.ts';
import type { Store } from './store.ts';
import { updateJson } from './update.ts';

async function tempStore(t: TestContext): Promise<Store> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-update-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return openDirStore(join(dir, 'bucket'));
}

test('parse decides what the change sees; an unreadable object is still replaced only on its ETag', async (t) => {
  const store = await tempStore(t);
  const etag = await store.put('torn.json', '{"n": ');
  const seen: unknown[] = [];
  const updated = await updateJson<{ n: number } | null>(
    store,
    'torn.json',
    (current) => {
      seen.push(current);
      return { put: { n: 1 } };
    },
    {
      parse: (body) => {
        try {
          return JSON.parse(Buffer.from(body).toString('utf8'));
        } catch {
          return null;
        }
      },
    },
  );
  assert.deepEqual(seen, [{ value: null, etag }]);
  assert.deepEqual([updated.value, updated.changed, updated.created], [{ n: 1 }, true, false]);
  // Without a parse that tolerates it, a body that is not JSON throws and nothing is written.
  await store.put('torn.json', '{"n": ');
  await assert.rejects(
    updateJson(store, 'torn.json', () => ({ put: { n: 2 } })),
    SyntaxError,
  );
  assert.equal(Buffer.from((await store.get('torn.json'))!.body).toString('utf8'), '{"n": ');
});

test('a Problem the change throws refuses the update once, writing nothing', async (t) => {
  const store = await tempStore(t);
  await store.put('record.json', '{"n": 1}');
  let calls = 0;
  await assert.rejects(
    updateJson<{ n: number }>(store, 'record.json', async () => {
      calls++;
      throw new Problem('invalid-input', 'Refused', 'the change said no');
    }),
    (err: unknown) => err instanceof Problem && err.title === 'Refused',
  );
  assert.equal(calls, 1);
  assert.equal(Buffer.from((await store.get('record.json'))!.body).toString('utf8'), '{"n": 1}');
});

test('a store failure is not a lost race: it surfaces at once, not retried', async (t) => {
  const store = await tempStore(t);
  let puts = 0;
  const failing: Store = {
    description: store.description,
    get: (key) => store.get(key),
    put: async () => {
      puts++;
      throw new Problem('store-unavailable', 'Bucket is unavailable', 'write refused');
    },
    delete: (key, condition) => store.delete(key, condition),
    list: (prefix, options) => store.list(prefix, options),
    stat: (key) => store.stat(key),
    close: () => store.close(),
  };
  await assert.rejects(
    updateJson(failing, 'x.json', () => ({ put: { n: 1 } })),
    (err: unknown) => err instanceof Problem && err.title === 'Bucket is unavailable',
  );
  assert.equal(puts, 1);
});
