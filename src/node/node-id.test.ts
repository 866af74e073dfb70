// The node id kept in the state directory: made once, kept across starts, and never left empty
// by a disk that refused to write it (the next start would otherwise not start at all).

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mountSmallDisk } from '../../test/helpers/small-disk.ts';
import { diskRefusal } from '../config/state-file.ts';
import { ensureNodeId } from './node-id.ts';

test('a generated id is kept and read back on the next start', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-node-id-'));
  const id = await ensureNodeId(dir, undefined);
  assert.match(id, /^node-[0-9a-f]{8}$/);
  assert.equal(await ensureNodeId(dir, undefined), id);
  assert.equal(readFileSync(join(dir, 'node-id'), 'utf8'), `${id}\n`);
  assert.equal(await ensureNodeId(dir, 'node-given'), 'node-given');
  rmSync(dir, { recursive: true });
});

test('a full disk leaves no node-id file behind; with room the next start makes one', {}, async () => {
  const disk = mountSmallDisk(1);
  try {
    disk.fill();
    await assert.rejects(ensureNodeId(disk.dir, undefined), (err: unknown) => diskRefusal(err) === 'ENOSPC');
    assert.equal(existsSync(join(disk.dir, 'node-id')), false);
    disk.free();
    assert.match(await ensureNodeId(disk.dir, undefined), /^node-[0-9a-f]{8}$/);
  } finally {
    disk.unmount();
  }
});
