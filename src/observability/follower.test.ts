import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, renameSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LogFollower } from './follower.ts';

function follow() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-follower-'));
  const path = join(dir, 'access.log');
  const lines: string[] = [];
  return { dir, path, lines, follower: new LogFollower(path, (line) => lines.push(line)) };
}

test('a file that does not exist yet is read from its start once it appears', async () => {
  const f = follow();
  await f.follower.poll();
  writeFileSync(f.path, 'a\nb\n');
  await f.follower.poll();
  assert.deepEqual(f.lines, ['a', 'b']);
  await f.follower.close();
});

test('an existing file is followed from its end; partial lines wait for their newline', async () => {
  const f = follow();
  writeFileSync(f.path, 'old\n');
  await f.follower.poll();
  appendFileSync(f.path, 'new\npart');
  await f.follower.poll();
  assert.deepEqual(f.lines, ['new']);
  appendFileSync(f.path, 'ial\n');
  await f.follower.poll();
  assert.deepEqual(f.lines, ['new', 'partial']);
  await f.follower.close();
});

test('rotation: the old file is read to its end, then the new one from its start', async () => {
  const f = follow();
  await f.follower.poll();
  writeFileSync(f.path, '1\n');
  await f.follower.poll();
  appendFileSync(f.path, '2\n');
  renameSync(f.path, `${f.path}.1`);
  appendFileSync(`${f.path}.1`, '3\n');
  await f.follower.poll();
  writeFileSync(f.path, '4\n');
  await f.follower.poll();
  appendFileSync(f.path, '5\n');
  await f.follower.poll();
  assert.deepEqual(f.lines, ['1', '2', '3', '4', '5']);
  await f.follower.close();
});

test('truncation in place: read again from the start', async () => {
  const f = follow();
  await f.follower.poll();
  writeFileSync(f.path, 'aaaa\nbbbb\n');
  await f.follower.poll();
  truncateSync(f.path, 0);
  appendFileSync(f.path, 'c\n');
  await f.follower.poll();
  assert.deepEqual(f.lines, ['aaaa', 'bbbb', 'c']);
  await f.follower.close();
});
