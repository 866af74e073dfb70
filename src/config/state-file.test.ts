// The state directory's files: replaced and created whole (a full disk leaves the previous file,
// or none, and no temporary file), and the disk's refusals told apart from other failures and
// answered as a refusal naming the state directory.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mountSmallDisk } from '../../test/helpers/small-disk.ts';
import { Problem } from '../problem.ts';
import {
  createStateFile,
  diskRefusal,
  diskUnavailable,
  RetriedStateFile,
  readStateFile,
  replaceStateFile,
  replaceStateFileSync,
} from './state-file.ts';

const errno = (code: string) => Object.assign(new Error(code), { code });

test('diskRefusal names full, over-quota and read-only disks, and nothing else', () => {
  assert.equal(diskRefusal(errno('ENOSPC')), 'ENOSPC');
  assert.equal(diskRefusal(errno('EDQUOT')), 'EDQUOT');
  assert.equal(diskRefusal(errno('EROFS')), 'EROFS');
  for (const other of [
    errno('ENOENT'),
    errno('EACCES'),
    errno('EEXIST'),
    new Error('x'),
    undefined,
    null,
    'ENOSPC',
  ]) {
    assert.equal(diskRefusal(other), null, String(other));
  }
});

test('diskUnavailable is a 503 store-unavailable naming the state directory and why', () => {
  const full = diskUnavailable('/var/lib/svc', 'ENOSPC', 'the artifact could not be staged');
  assert.ok(full instanceof Problem);
  assert.equal(full.code, 'store-unavailable');
  assert.equal(full.status, 503);
  assert.equal(full.title, 'Node disk is full');
  assert.match(
    full.detail ?? '',
    /state directory \/var\/lib\/svc is full \(ENOSPC\): the artifact could not be staged/,
  );
  assert.match(diskUnavailable('/s', 'EDQUOT', 'x').detail ?? '', /is over its quota \(EDQUOT\)/);
  const readOnly = diskUnavailable('/s', 'EROFS', 'x');
  assert.equal(readOnly.title, 'Node disk is read-only');
  assert.match(readOnly.detail ?? '', /is mounted read-only \(EROFS\)/);
});

test('replaceStateFile replaces the file whole, 0600, and leaves no temporary file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-state-'));
  const file = join(dir, 'f.json');
  await replaceStateFile(file, 'one');
  replaceStateFileSync(file, 'two');
  await replaceStateFile(file, 'three');
  assert.equal(readFileSync(file, 'utf8'), 'three');
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(dir), ['f.json']);
  // A rename that fails (a directory holds the name) removes what was written aside.
  const blocked = join(dir, 'blocked');
  mkdirSync(join(blocked, 'inside'), { recursive: true });
  await assert.rejects(replaceStateFile(blocked, 'x'));
  assert.throws(() => replaceStateFileSync(blocked, 'x'));
  assert.deepEqual(readdirSync(dir).sort(), ['blocked', 'f.json']);
  rmSync(dir, { recursive: true });
});

test('createStateFile never overwrites, and leaves no temporary file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-state-'));
  const file = join(dir, 'key.json');
  assert.equal(await createStateFile(file, 'first'), true);
  assert.equal(await createStateFile(file, 'second'), false);
  assert.equal(await readStateFile(file), 'first');
  assert.equal(await readStateFile(join(dir, 'none')), null);
  assert.deepEqual(readdirSync(dir), ['key.json']);
  rmSync(dir, { recursive: true });
});

test('on a full disk the previous file stays whole, a new one is not made, nothing is left aside', {}, async () => {
  const disk = mountSmallDisk(1);
  try {
    const file = join(disk.dir, 'processes.json');
    await replaceStateFile(file, 'before');
    disk.fill();
    const big = 'y'.repeat(64 * 1024);
    await assert.rejects(replaceStateFile(file, big), (err: unknown) => diskRefusal(err) === 'ENOSPC');
    assert.throws(
      () => replaceStateFileSync(file, big),
      (err: unknown) => diskRefusal(err) === 'ENOSPC',
    );
    await assert.rejects(
      createStateFile(join(disk.dir, 'key.json'), big),
      (err: unknown) => diskRefusal(err) === 'ENOSPC',
    );
    assert.equal(readFileSync(file, 'utf8'), 'before');
    assert.deepEqual(readdirSync(disk.dir).sort(), ['filler', 'processes.json']);
    // Space back: the write lands.
    disk.free();
    replaceStateFileSync(file, big);
    assert.equal(readFileSync(file, 'utf8'), big);
  } finally {
    disk.unmount();
  }
});

test('RetriedStateFile keeps a refused write, logs it once, and lands it on the first retry with room', {}, async () => {
  const disk = mountSmallDisk(1);
  const lines: string[] = [];
  const log = {
    error: (_fields: object, message: string) => lines.push(`error ${message}`),
    info: (_fields: object, message: string) => lines.push(`info ${message}`),
  };
  try {
    const file = join(disk.dir, 'processes.json');
    const note = new RetriedStateFile(file, log, 'runtime processes');
    assert.equal(note.write('one'), true);
    disk.fill();
    const big = (n: number) => `${n}`.repeat(16 * 1024);
    assert.equal(note.write(big(2)), false);
    assert.equal(note.write(big(3)), false);
    note.retry();
    assert.equal(note.stale, true);
    assert.equal(readFileSync(file, 'utf8'), 'one', 'the previous file stays whole');
    assert.deepEqual(lines, ['error cannot note runtime processes; trying again every pass']);
    disk.free();
    note.retry();
    assert.equal(note.stale, false);
    assert.equal(readFileSync(file, 'utf8'), big(3), 'the last text lands');
    assert.deepEqual(lines.slice(1), ['info runtime processes noted again']);
    note.retry();
    assert.equal(lines.length, 2, 'nothing more to do');
  } finally {
    disk.unmount();
  }
});
