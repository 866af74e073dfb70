import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { persistentPortPool, readPortFile } from './port-file.ts';

const silent = { error: () => {} };

function withDir(run: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'svc-ports-'));
  try {
    run(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a pool made from the file of a previous pool gives every application the same port', () => {
  withDir((dir) => {
    const file = join(dir, 'ports.json');
    const first = persistentPortPool(file, [24000, 24009], 30_000, silent, 0);
    assert.equal(first.take('a', 0), 24000);
    assert.equal(first.take('b', 0), 24001);
    assert.equal(first.take('c', 0), 24002);
    first.release(24000, 50);
    // The next run starts its applications in another order, and with one more.
    const second = persistentPortPool(file, [24000, 24009], 30_000, silent, 1000);
    assert.equal(second.take('new', 1000), 24003, 'no other application takes a noted port');
    assert.equal(second.take('c', 1000), 24002);
    assert.equal(second.take('a', 1000), 24000);
    assert.equal(second.take('b', 1000), 24001);
    assert.deepEqual(readdirSync(dir), ['ports.json'], 'no temporary file is left beside it');
  });
});

test('a missing, malformed or foreign file restores nothing; bad entries are skipped', () => {
  withDir((dir) => {
    const file = join(dir, 'ports.json');
    assert.deepEqual(readPortFile(file), []);
    writeFileSync(file, '{"ports": [');
    assert.deepEqual(readPortFile(file), []);
    writeFileSync(file, 'null');
    assert.deepEqual(readPortFile(file), []);
    writeFileSync(
      file,
      JSON.stringify({
        v: 1,
        ports: [
          { port: 24000, application: 'a' },
          { port: 70000, application: 'b' },
          { port: 24002 },
          null,
          { port: 24003, application: 'd', releasedAtMs: 'soon' },
          { port: 24004, application: 'e', releasedAtMs: 7 },
        ],
      }),
    );
    assert.deepEqual(readPortFile(file), [
      { port: 24000, application: 'a' },
      { port: 24003, application: 'd' },
      { port: 24004, application: 'e', releasedAtMs: 7 },
    ]);
  });
});

test('a write that fails is logged once, the pool goes on, and a retry lands it once it can', () => {
  withDir((dir) => {
    const errors: string[] = [];
    const file = join(dir, 'gone', 'ports.json');
    const pool = persistentPortPool(file, [24000, 24001], 1000, {
      error: (_fields: unknown, message: string) => errors.push(message),
    } as never);
    assert.equal(pool.take('a', 0), 24000);
    assert.equal(pool.take('b', 0), 24001);
    assert.deepEqual(errors, ['cannot note the runtime port assignments; trying again every pass']);
    mkdirSync(join(dir, 'gone'));
    pool.note.retry();
    assert.equal(pool.note.stale, false);
    assert.deepEqual(readPortFile(file), [
      { port: 24000, application: 'a' },
      { port: 24001, application: 'b' },
    ]);
  });
});
