// The artifact reader: what it unpacks, every refusal (links, absolute paths, `..`, devices,
// entry floods, gzip and tar bombs, truncated streams, no worker config), and properties: any
// bytes and any entry list answer an unpacked archive or a Problem (`invalid-input` or
// `resource-limit`), never anything else, and nothing is ever written outside the root.

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { create } from 'tar';
import { tarBytes, tgz } from '../../../test/helpers/artifacts.ts';
import { mountSmallDisk } from '../../../test/helpers/small-disk.ts';
import { diskRefusal } from '../../config/state-file.ts';
import { Problem } from '../../problem.ts';
import { type ArchiveLimits, entryPath, receiveArtifact, unpackArtifact, unpackStream } from './archive.ts';

const LIMITS: ArchiveLimits = { artifactBytes: 1024 * 1024, archiveEntries: 100 };

function scratch(): { parent: string; root: string } {
  const parent = mkdtempSync(join(tmpdir(), 'svc-archive-'));
  return { parent, root: join(parent, 'root') };
}

async function unpackBytes(bytes: Buffer, limits: ArchiveLimits = LIMITS) {
  const { parent, root } = scratch();
  await mkdir(root);
  try {
    return { result: await unpackStream(Readable.from([bytes]), root, limits), parent, root };
  } catch (err) {
    return { error: err, parent, root };
  }
}

async function refusedWith(bytes: Buffer, code: string, detail: RegExp, limits: ArchiveLimits = LIMITS) {
  const { error, result, parent } = await unpackBytes(bytes, limits);
  try {
    assert.ok(error instanceof Problem, `expected a Problem, got ${result ? 'success' : String(error)}`);
    assert.equal(error.code, code, `${error.title}: ${error.detail}`);
    assert.match(`${error.title}: ${error.detail}`, detail);
    assert.deepEqual(readdirSync(parent), ['root'], 'nothing written beside the root');
    return error;
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
}

test('a project unpacks with its config found at the root', async () => {
  const bytes = tgz([
    { path: 'cell.jsonc', body: '{ "name": "shop" } // comment' },
    { path: 'src/', type: 'Directory' },
    { path: 'src/index.js', body: 'export default {}' },
    { path: './public/a/b.txt', body: 'deep' },
  ]);
  const { result, parent, root } = await unpackBytes(bytes);
  assert.ok(result, 'unpacked');
  assert.equal(result.config, 'cell.jsonc');
  assert.equal(result.entries, 4);
  assert.equal(readFileSync(join(root, 'cell.jsonc'), 'utf8'), '{ "name": "shop" } // comment');
  assert.equal(readFileSync(join(root, 'public/a/b.txt'), 'utf8'), 'deep');
  await rm(parent, { recursive: true });
});

test('cell.jsonc is preferred, cell.json is found when alone', async () => {
  const both = await unpackBytes(
    tgz([
      { path: 'cell.json', body: '{}' },
      { path: 'cell.jsonc', body: '{}' },
    ]),
  );
  assert.equal(both.result?.config, 'cell.jsonc');
  const json = await unpackBytes(tgz([{ path: 'cell.json', body: '{}' }]));
  assert.equal(json.result?.config, 'cell.json');
  await rm(both.parent, { recursive: true });
  await rm(json.parent, { recursive: true });
});

test('an archive packed by node-tar from a directory unpacks', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-project-'));
  await writeFile(join(dir, 'cell.json'), '{"name":"x"}');
  await mkdir(join(dir, 'src'));
  await writeFile(join(dir, 'src', 'index.js'), 'x'.repeat(5000));
  const chunks: Buffer[] = [];
  for await (const chunk of create({ gzip: true, cwd: dir, portable: true }, ['.']))
    chunks.push(chunk as Buffer);
  const { result, parent } = await unpackBytes(Buffer.concat(chunks));
  assert.equal(result?.config, 'cell.json');
  await rm(parent, { recursive: true });
  await rm(dir, { recursive: true });
});

test('no worker config at the root is invalid-input', async () => {
  await refusedWith(tgz([{ path: 'src/cell.jsonc', body: '{}' }]), 'invalid-input', /No worker config/);
  await refusedWith(tgz([{ path: 'cell.jsonc/', type: 'Directory' }]), 'invalid-input', /No worker config/);
});

test('links are refused', async () => {
  await refusedWith(
    tgz([
      { path: 'cell.json', body: '{}' },
      { path: 'evil', type: 'SymbolicLink', linkpath: '/etc/passwd' },
    ]),
    'invalid-input',
    /is a link/,
  );
  await refusedWith(
    tgz([
      { path: 'cell.json', body: '{}' },
      { path: 'hard', type: 'Link', linkpath: 'cell.json' },
    ]),
    'invalid-input',
    /is a link/,
  );
});

test('devices and fifos are refused', async () => {
  for (const type of ['CharacterDevice', 'BlockDevice', 'FIFO']) {
    await refusedWith(
      tgz([
        { path: 'cell.json', body: '{}' },
        { path: 'dev', type },
      ]),
      'invalid-input',
      /regular files and directories/,
    );
  }
});

test('absolute paths and .. are refused', async () => {
  await refusedWith(tgz([{ path: '/etc/cron.d/x', body: 'x' }]), 'invalid-input', /absolute path/);
  await refusedWith(tgz([{ path: '../escape', body: 'x' }]), 'invalid-input', /\.\./);
  await refusedWith(tgz([{ path: 'a/../../escape', body: 'x' }]), 'invalid-input', /\.\./);
  await refusedWith(tgz([{ path: 'a/b/..', type: 'Directory' }]), 'invalid-input', /\.\./);
});

test('entry floods are resource-limit', async () => {
  const entries = Array.from({ length: 101 }, (_, i) => ({ path: `f${i}`, body: '' }));
  await refusedWith(tgz(entries), 'resource-limit', /more than 100 entries/);
  const exactly = await unpackBytes(tgz([{ path: 'cell.json', body: '{}' }, ...entries.slice(0, 99)]));
  assert.equal(exactly.result?.entries, 100);
  await rm(exactly.parent, { recursive: true });
});

test('a gzip bomb stops at the expanded limit', async () => {
  const bomb = gzipSync(Buffer.alloc(20 * 1024 * 1024));
  assert.ok(bomb.length < 64 * 1024);
  await refusedWith(bomb, 'resource-limit', /over 1048576 bytes expanded/);
});

test('a tar bomb (one huge file) stops at the expanded limit', async () => {
  const bytes = tgz([
    { path: 'cell.json', body: '{}' },
    { path: 'big', body: Buffer.alloc(2 * 1024 * 1024) },
  ]);
  await refusedWith(bytes, 'resource-limit', /expanded/);
});

test('not gzip, corrupt gzip and truncated streams are invalid-input', async () => {
  await refusedWith(tarBytes([{ path: 'cell.json', body: '{}' }]), 'invalid-input', /not gzip-compressed/);
  const good = tgz([
    { path: 'cell.json', body: '{}' },
    { path: 'a', body: 'x'.repeat(3000) },
  ]);
  await refusedWith(good.subarray(0, good.length - 10), 'invalid-input', /gzip|ended/);
  const corrupt = Buffer.from(good);
  corrupt[20] ^= 0xff;
  corrupt[21] ^= 0xff;
  await refusedWith(corrupt, 'invalid-input', /.+/);
  // A complete gzip stream of a tar cut mid-body.
  const cut = tarBytes(
    [
      { path: 'cell.json', body: '{}' },
      { path: 'a', body: 'x'.repeat(3000) },
    ],
    { end: false },
  );
  await refusedWith(gzipSync(cut.subarray(0, 1500)), 'invalid-input', /tar|Truncated/i);
  await refusedWith(gzipSync(Buffer.from('hello, not a tar')), 'invalid-input', /tar/);
});

test('a file where a directory is, and the reverse, are refused', async () => {
  await refusedWith(
    tgz([
      { path: 'cell.json', body: '{}' },
      { path: 'a', body: 'x' },
      { path: 'a/b', body: 'y' },
    ]),
    'invalid-input',
    /clashes/,
  );
  await refusedWith(
    tgz([
      { path: 'cell.json', body: '{}' },
      { path: 'a/', type: 'Directory' },
      { path: 'a', body: 'y' },
    ]),
    'invalid-input',
    /clashes/,
  );
});

test('entryPath keeps relative paths inside the root', () => {
  assert.deepEqual(entryPath('./a//b/./c'), ['a', 'b', 'c']);
  for (const bad of ['', '.', './', '/a', 'C:/x', 'a/../b', '..', 'a\\b', 'a\0b', 'x'.repeat(2000)]) {
    assert.throws(() => entryPath(bad), Problem, bad);
  }
});

test('receiveArtifact bounds the body, refuses an empty one and answers the byte count', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-receive-'));
  const ok = await receiveArtifact(Readable.from([Buffer.alloc(100), Buffer.alloc(50)]), join(dir, 'a'), {
    limit: 150,
    deadlineMs: 5000,
  });
  assert.equal(ok, 150);
  await assert.rejects(
    receiveArtifact(Readable.from([Buffer.alloc(100), Buffer.alloc(51)]), join(dir, 'b'), {
      limit: 150,
      deadlineMs: 5000,
    }),
    (err: unknown) => err instanceof Problem && err.code === 'resource-limit',
  );
  await assert.rejects(
    receiveArtifact(Readable.from([]), join(dir, 'c'), { limit: 150, deadlineMs: 5000 }),
    (err: unknown) =>
      err instanceof Problem && err.code === 'invalid-input' && /no body/.test(err.detail ?? ''),
  );
  // A body that never ends meets the receive deadline.
  const stalled = new Readable({ read() {} });
  stalled.push(Buffer.alloc(10));
  await assert.rejects(
    receiveArtifact(stalled, join(dir, 'd'), { limit: 150, deadlineMs: 50 }),
    (err: unknown) => err instanceof Problem && err.code === 'deploy-timeout' && err.status === 408,
  );
  // An observer that refuses (a staged-byte limit) stops the transfer with its own problem.
  await assert.rejects(
    receiveArtifact(Readable.from([Buffer.alloc(10)]), join(dir, 'e'), {
      limit: 150,
      deadlineMs: 5000,
      onBytes: () => {
        throw new Problem('deploy-overloaded', 'Deploy capacity full');
      },
    }),
    (err: unknown) => err instanceof Problem && err.code === 'deploy-overloaded',
  );
  await rm(dir, { recursive: true });
});

test('unpackArtifact reads from the received file', async () => {
  const { parent, root } = scratch();
  const file = join(parent, 'artifact.tgz');
  await writeFile(file, tgz([{ path: 'cell.jsonc', body: '{}' }]));
  const result = await unpackArtifact(file, root, LIMITS);
  assert.equal(result.config, 'cell.jsonc');
  await rm(parent, { recursive: true });
});

test('a disk that takes no more bytes is passed on as its own error, not blamed on the artifact', {}, async () => {
  const disk = mountSmallDisk(1);
  try {
    disk.fill();
    // Receiving: the write of the body fails, not the body.
    await assert.rejects(
      receiveArtifact(Readable.from([Buffer.alloc(64 * 1024)]), join(disk.dir, 'artifact.tgz'), {
        limit: 1024 * 1024,
        deadlineMs: 5000,
      }),
      (err: unknown) => !(err instanceof Problem) && diskRefusal(err) === 'ENOSPC',
    );
    // Unpacking: an entry's file cannot be written.
    const { parent } = scratch();
    const file = join(parent, 'artifact.tgz');
    await writeFile(
      file,
      tgz([
        { path: 'cell.json', body: '{}' },
        { path: 'big.bin', body: 'x'.repeat(256 * 1024) },
      ]),
    );
    await assert.rejects(
      unpackArtifact(file, join(disk.dir, 'root'), LIMITS),
      (err: unknown) => !(err instanceof Problem) && diskRefusal(err) === 'ENOSPC',
    );
    await rm(parent, { recursive: true });
  } finally {
    disk.unmount();
  }
});

/** Any outcome but an unpacked archive or a Problem of these codes fails the property. */
async function holdsUp(bytes: Buffer, limits: ArchiveLimits = LIMITS): Promise<void> {
  const { error, parent, root } = await unpackBytes(bytes, limits);
  try {
    if (error !== undefined) {
      assert.ok(error instanceof Problem, `threw a non-Problem: ${String((error as Error)?.stack ?? error)}`);
      assert.ok(['invalid-input', 'resource-limit'].includes(error.code), `${error.code}: ${error.detail}`);
    }
    assert.deepEqual(readdirSync(parent), ['root'], 'nothing written beside the root');
    assert.ok(readdirSync(root).every((name) => !name.includes('/')));
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
}

test('property: any bytes, raw or gzipped, unpack or are refused', async () => {
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), fc.boolean(), async (bytes, gzip) => {
      await holdsUp(gzip ? gzipSync(bytes) : Buffer.from(bytes));
    }),
    { numRuns: 300 },
  );
});

const hostilePath = fc.oneof(
  fc.constantFrom(
    'cell.json',
    'cell.jsonc',
    'a',
    'a/b',
    './c',
    '../x',
    '/abs',
    'a/../../x',
    '..',
    'd/',
    'C:\\x',
  ),
  fc
    .array(fc.constantFrom('a', 'b', '..', '.', '', 'cell.json', 'x y'), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.join('/')),
  fc.string({ minLength: 1, maxLength: 40 }),
);

const hostileEntry = fc.record({
  path: hostilePath,
  type: fc.constantFrom('File', 'File', 'Directory', 'SymbolicLink', 'Link', 'FIFO'),
  body: fc.string({ maxLength: 600 }),
  linkpath: fc.constantFrom('/etc/passwd', '../../x', 'cell.json'),
});

test('property: hostile entry lists unpack inside the root or are refused', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(hostileEntry, { maxLength: 8 }), async (entries) => {
      const raw = entries.map((entry) => ({
        path: entry.path,
        type: entry.type,
        body: entry.type === 'File' ? entry.body : undefined,
        linkpath: entry.type === 'SymbolicLink' || entry.type === 'Link' ? entry.linkpath : undefined,
      }));
      let bytes: Buffer;
      try {
        bytes = tgz(raw);
      } catch {
        return; // node-tar cannot even encode this header; nothing to send.
      }
      await holdsUp(bytes, { artifactBytes: 64 * 1024, archiveEntries: 6 });
    }),
    { numRuns: 300 },
  );
});

test('property: a valid archive cut anywhere is refused, never half-accepted silently', async () => {
  const whole = tgz([
    { path: 'cell.json', body: '{}' },
    { path: 'src/a.js', body: 'a'.repeat(4000) },
    { path: 'src/b.js', body: 'b'.repeat(4000) },
  ]);
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: whole.length - 1 }), async (cut) => {
      const { error, parent } = await unpackBytes(whole.subarray(0, cut));
      await rm(parent, { recursive: true, force: true });
      assert.ok(error instanceof Problem, `a stream cut at ${cut} was accepted`);
      assert.equal(error.code, 'invalid-input');
    }),
    { numRuns: 200 },
  );
});
