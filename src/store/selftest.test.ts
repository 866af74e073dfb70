// The bucket self-test on the directory store: it passes and leaves nothing
// behind. The refusals need a bucket that drops conditional headers: test/store-selftest.test.ts.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openDirStore } from './dir.ts';
import { selfTestStore } from './selftest.ts';

test('a directory bucket passes the self-test and keeps no scratch object', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'svc-selftest-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const store = await openDirStore(root);
  await selfTestStore(store);
  await selfTestStore(store);
  assert.deepEqual(await store.list('', { recursive: true }), { objects: [], prefixes: [] });
});
