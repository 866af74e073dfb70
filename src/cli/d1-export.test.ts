// The SQL dump of `svc d1 export` (docs/cli.md "svc d1"), laid out as D1's export and SQLite's
// `.dump`: statement order, quoting of text and BLOBs, IF NOT EXISTS for a quoted table name,
// the internal tables, and --no-schema, --no-data and --table.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isProblem } from '../problem.ts';
import { dumpStatements, type SchemaRow, sqlLiteral, type TableRows, tableQueries } from './d1-export.ts';

const table = (name: string, sql: string): SchemaRow => ({ name, tbl_name: name, type: 'table', sql });

const tables = [
  table('d1_migrations', 'CREATE TABLE "d1_migrations"(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)'),
  table(
    'notes',
    'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, size INTEGER GENERATED ALWAYS AS (length(body)))',
  ),
  table('_cf_KV', 'CREATE TABLE _cf_KV (key TEXT)'),
  table('sqlite_sequence', 'CREATE TABLE sqlite_sequence(name,seq)'),
];
const rest: SchemaRow[] = [
  {
    name: 'notes_by_body',
    tbl_name: 'notes',
    type: 'index',
    sql: 'CREATE INDEX notes_by_body ON notes (body)',
  },
  {
    name: 'm_by_name',
    tbl_name: 'd1_migrations',
    type: 'index',
    sql: 'CREATE INDEX m_by_name ON d1_migrations (name)',
  },
];
const data = new Map<string, TableRows>([
  ['d1_migrations', { columns: ['id', 'name'], stored: ['id', 'name'], rows: [[1, '0001_init.sql']] }],
  [
    'notes',
    {
      columns: ['id', 'body', 'size'],
      stored: ['id', 'body'],
      rows: [
        [1, "it's\nhere", 9],
        [2, null, null],
      ],
    },
  ],
  ['sqlite_sequence', { columns: ['name', 'seq'], stored: ['name', 'seq'], rows: [['d1_migrations', 1]] }],
]);

test('a whole dump: tables with their rows (generated columns left out), sqlite_sequence last, then indexes', () => {
  assert.deepEqual(dumpStatements(tables, rest, data, {}), [
    'PRAGMA defer_foreign_keys=TRUE;',
    'CREATE TABLE IF NOT EXISTS "d1_migrations"(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT);',
    'INSERT INTO "d1_migrations" ("id","name") VALUES(1,\'0001_init.sql\');',
    'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, size INTEGER GENERATED ALWAYS AS (length(body)));',
    'INSERT INTO "notes" ("id","body") VALUES(1,replace(\'it\'\'s\\nhere\',\'\\n\',char(10)));',
    'INSERT INTO "notes" ("id","body") VALUES(2,NULL);',
    'DELETE FROM sqlite_sequence;',
    'INSERT INTO "sqlite_sequence" ("name","seq") VALUES(\'d1_migrations\',1);',
    'CREATE INDEX notes_by_body ON notes (body);',
    'CREATE INDEX m_by_name ON d1_migrations (name);',
  ]);
});

test('--no-data, --no-schema and --table', () => {
  assert.deepEqual(dumpStatements(tables, rest, data, { noData: true, tables: ['notes'] }), [
    'PRAGMA defer_foreign_keys=TRUE;',
    'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, size INTEGER GENERATED ALWAYS AS (length(body)));',
    'CREATE INDEX notes_by_body ON notes (body);',
  ]);
  assert.deepEqual(dumpStatements(tables, rest, data, { noSchema: true, tables: ['d1_migrations'] }), [
    'PRAGMA defer_foreign_keys=TRUE;',
    'INSERT INTO "d1_migrations" ("id","name") VALUES(1,\'0001_init.sql\');',
  ]);
});

test('values as .dump writes them: numbers bare, text quoted, CR and LF spelled out, BLOBs in hex', () => {
  assert.equal(sqlLiteral(null), 'NULL');
  assert.equal(sqlLiteral(-1.5), '-1.5');
  assert.equal(sqlLiteral("O'Brien"), "'O''Brien'");
  assert.equal(sqlLiteral('a\r\nb'), "replace(replace('a\\r\\nb','\\r',char(13)),'\\n',char(10))");
  assert.equal(sqlLiteral([0, 15, 255]), "X'000fff'");
});

test('a virtual table cannot be exported, as on D1', () => {
  assert.throws(
    () =>
      dumpStatements([table('search', 'CREATE VIRTUAL TABLE search USING fts5(body)')], [], new Map(), {}),
    (err) => isProblem(err) && err.code === 'invalid-input' && err.title === 'Cannot export',
  );
});

test("a table's rows are read with its stored columns, by a quoted name", () => {
  assert.deepEqual(tableQueries('my "t"'), [
    { sql: 'PRAGMA table_info("my ""t""")', params: [] },
    { sql: 'SELECT * FROM "my ""t"""', params: [] },
  ]);
});
