// Fleet-wide token use records (token-uses.ts) on the local-directory store: a second record of
// one jti is a replay; a write refuses when the bucket cannot record; reaping drops dead minutes only.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { keys } from '../registry/keys.ts';
import { openDirStore } from '../store/dir.ts';
import type { Store } from '../store/store.ts';
import { deadMinute, reapTokenUses, recordTokenUse } from './token-uses.ts';

const store = () => openDirStore(mkdtempSync(join(tmpdir(), 'svc-token-uses-')));

test('the first record of a jti is accepted, every later one (read or write) is a replay', async () => {
  const s = await store();
  const token = { jti: 'AAAAAAAAAAAAAAAAAAAAAA', exp: 1_000_000 };
  assert.equal(await recordTokenUse(s, token, false), 'recorded');
  assert.equal(await recordTokenUse(s, token, true), 'replayed');
  assert.equal(await recordTokenUse(s, token, false), 'replayed');
  assert.ok(await s.stat(keys.tokenUse(deadMinute(token.exp), token.jti)));
});

test('a bucket that cannot record refuses a write with store-unavailable and lets a read through', async () => {
  const working = await store();
  const broken: Store = {
    get: (key) => working.get(key),
    put: () => Promise.reject(new Error('connection refused')),
    delete: (key) => working.delete(key),
    list: (prefix, options) => working.list(prefix, options),
    stat: (key) => working.stat(key),
    close: () => working.close(),
    description: working.description,
  };
  const token = { jti: 'BBBBBBBBBBBBBBBBBBBBBB', exp: 1_000_000 };
  await assert.rejects(recordTokenUse(broken, token, true), { code: 'store-unavailable' });
  assert.equal(await recordTokenUse(broken, token, false), 'unrecorded');
});

test('reaping deletes the records of dead minutes and keeps the live ones', async () => {
  const s = await store();
  const nowMs = 100 * 60_000;
  const dead = { jti: 'CCCCCCCCCCCCCCCCCCCCCC', exp: 90 * 60 - 31 };
  const live = { jti: 'DDDDDDDDDDDDDDDDDDDDDD', exp: nowMs / 1000 + 30 };
  await recordTokenUse(s, dead, true);
  await recordTokenUse(s, live, true);
  assert.equal(await reapTokenUses(s, nowMs), 1);
  assert.equal(await s.stat(keys.tokenUse(deadMinute(dead.exp), dead.jti)), null);
  assert.ok(await s.stat(keys.tokenUse(deadMinute(live.exp), live.jti)));
});
