// wrangler's migrations folder as `svc d1 migrations` reads it (docs/cli.md "svc d1"): the folder
// under the project, the files in wrangler's order, those not yet applied, and the one request
// that applies a file with its row.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { isProblem } from '../problem.ts';
import {
  applyRequest,
  compareMigrations,
  createTableQuery,
  migrationFiles,
  migrationsFolder,
  quoteIdentifier,
  unapplied,
} from './d1-migrations.ts';

const dir = mkdtempSync(join(tmpdir(), 'd1-migrations-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('the folder is migrations_dir under the project, migrations by default, normalised as wrangler does', () => {
  assert.equal(migrationsFolder('/p', undefined), '/p/migrations');
  assert.equal(migrationsFolder('/p', './db/migrations/'), '/p/db/migrations');
  assert.equal(migrationsFolder('/p', 'db\\migrations'), '/p/db/migrations');
  assert.equal(migrationsFolder('/p', '.'), '/p');
  assert.equal(migrationsFolder('/p', '/abs/m'), '/abs/m');
});

test('the files are the folder’s *.sql, numbered ones by number (not text), then unnumbered by name', async () => {
  const folder = join(dir, 'migrations');
  mkdirSync(join(folder, '0005_a_folder.sql'), { recursive: true });
  for (const name of [
    '10_c.sql',
    '9_b.sql',
    '0001_init.sql',
    'seed.sql',
    'notes.txt',
    '.0000_hidden.sql',
    '1_a.sql',
  ])
    writeFileSync(join(folder, name), '');
  assert.deepEqual(await migrationFiles(folder), [
    '0001_init.sql',
    '1_a.sql',
    '9_b.sql',
    '10_c.sql',
    'seed.sql',
  ]);
  assert.ok(compareMigrations('2_x.sql', '10_x.sql') < 0);
  assert.ok(compareMigrations('abc.sql', '1_x.sql') > 0);
});

test('a missing folder is refused as not-found, naming the folder', async () => {
  await assert.rejects(migrationFiles(join(dir, 'absent')), (err) => {
    assert.ok(isProblem(err));
    assert.equal(err.code, 'not-found');
    assert.equal(err.title, 'No migrations folder');
    assert.match(err.detail ?? '', /absent/);
    return true;
  });
});

test('unapplied keeps the files not in the table, in order', () => {
  assert.deepEqual(unapplied(['1_a.sql', '2_b.sql', '3_c.sql'], ['2_b.sql', 'gone.sql']), [
    '1_a.sql',
    '3_c.sql',
  ]);
});

test("one file's request: each statement, then the INSERT of its row bound as a parameter", () => {
  const sql =
    "-- a comment; not a statement\nCREATE TABLE t (a TEXT DEFAULT 'x;y');\n\nINSERT INTO t VALUES ('it''s');\n";
  assert.deepEqual(applyRequest("0001_it's.sql", sql, 'my "table"'), [
    { sql: "-- a comment; not a statement\nCREATE TABLE t (a TEXT DEFAULT 'x;y')", params: [] },
    { sql: "INSERT INTO t VALUES ('it''s')", params: [] },
    { sql: 'INSERT INTO "my ""table""" (name) VALUES (?)', params: ["0001_it's.sql"] },
  ]);
  assert.deepEqual(applyRequest('0002_empty.sql', '-- nothing yet\n', 'd1_migrations'), [
    { sql: 'INSERT INTO "d1_migrations" (name) VALUES (?)', params: ['0002_empty.sql'] },
  ]);
});

test("the table has wrangler's columns", () => {
  assert.equal(quoteIdentifier('d1_migrations'), '"d1_migrations"');
  const create = createTableQuery('d1_migrations');
  assert.match(create, /^CREATE TABLE IF NOT EXISTS "d1_migrations"\(/);
  assert.match(create, /id\s+INTEGER PRIMARY KEY AUTOINCREMENT/);
  assert.match(create, /name\s+TEXT UNIQUE/);
  assert.match(create, /applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL/);
});
