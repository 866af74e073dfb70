// DELETE and UPDATE with LIMIT (docs/bindings.md "D1 databases"): the rewrite to a rowid subquery,
// and the statements run in real SQLite, which without the rewrite refuses them.

import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { runQueries } from './d1-engine.ts';
import { rewriteLimitedWrite } from './d1-limit.ts';

test('moves ORDER BY and LIMIT into a rowid subquery, numbering bare parameters first', () => {
  assert.equal(
    rewriteLimitedWrite('DELETE FROM tasks WHERE id = ? RETURNING * LIMIT 1'),
    'DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks WHERE id = ?1 LIMIT 1) RETURNING *',
  );
  assert.equal(
    rewriteLimitedWrite('UPDATE OR IGNORE t SET v = ? WHERE k > ? RETURNING v, ? ORDER BY k DESC LIMIT ?;'),
    'UPDATE OR IGNORE t SET v = ?1 WHERE rowid IN (SELECT rowid FROM t WHERE k > ?2 ORDER BY k DESC LIMIT ?4) RETURNING v, ?3',
  );
  assert.equal(rewriteLimitedWrite('SELECT * FROM t LIMIT 1'), 'SELECT * FROM t LIMIT 1');
  assert.equal(
    rewriteLimitedWrite('DELETE FROM t WHERE id IN (SELECT id FROM u LIMIT 2)'),
    'DELETE FROM t WHERE id IN (SELECT id FROM u LIMIT 2)',
  );
  assert.equal(
    rewriteLimitedWrite('UPDATE t SET v = u.v FROM u LIMIT 1'),
    'UPDATE t SET v = u.v FROM u LIMIT 1',
  );
});

test('the rewritten statements delete and update the rows D1 would', () => {
  const db = new DatabaseSync(':memory:');
  db.exec(
    "CREATE TABLE tasks (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO tasks (name) VALUES ('a'), ('b'), ('c'), ('d')",
  );
  assert.throws(() => db.prepare('DELETE FROM tasks WHERE id = 1 LIMIT 1'), /near "LIMIT": syntax error/);
  const deleted = runQueries(
    db,
    [{ sql: 'DELETE FROM tasks WHERE id = ? RETURNING * LIMIT 1', params: [2] }],
    'ARRAY_OF_OBJECTS',
  );
  assert.deepEqual(deleted[0]?.results, [{ id: 2, name: 'b' }]);
  const updated = runQueries(
    db,
    [
      {
        sql: 'UPDATE tasks SET name = ? WHERE id > ? RETURNING id ORDER BY id DESC LIMIT ?',
        params: ['z', 1, 1],
      },
    ],
    'ARRAY_OF_OBJECTS',
  );
  assert.deepEqual(updated[0]?.results, [{ id: 4 }]);
  const rows = runQueries(
    db,
    [{ sql: 'SELECT id, name FROM tasks ORDER BY id', params: [] }],
    'ROWS_AND_COLUMNS',
  );
  assert.deepEqual(rows[0]?.results, {
    columns: ['id', 'name'],
    rows: [
      [1, 'a'],
      [3, 'c'],
      [4, 'z'],
    ],
  });
});
