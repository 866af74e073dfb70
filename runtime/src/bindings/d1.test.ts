// D1 on one or two nodes over one bucket (docs/bindings.md "D1 databases"): the request and result
// shapes Miniflare's D1 object answers, one transaction per request, the single writer and its
// fence, restore after a node is gone, compaction and time travel. The database runs in real
// SQLite; the bucket is the in-memory store double.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { MemoryStore } from '../../../test/helpers/memory-store.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { type D1Request, D1Service } from './d1.ts';
import { listGenerations } from './d1-log.ts';
import { splitStatements } from './d1-sql.ts';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function node(
  store: MemoryStore,
  name: string,
  extra: Partial<ConstructorParameters<typeof D1Service>[0]> = {},
) {
  const dataDir = await mkdtemp(join(tmpdir(), `d1-${name}-`));
  dirs.push(dataDir);
  return new D1Service({ store, node: name, dataDir, log: () => {}, ...extra });
}

function request(body: unknown, format = 'ARRAY_OF_OBJECTS', endpoint = '/query'): D1Request {
  return { application: 'app', database: 'main', endpoint, format, body: JSON.stringify(body) };
}

async function send(service: D1Service, body: unknown, format?: string) {
  const answer = await service.handle(request(body, format));
  return { ...answer, json: JSON.parse(answer.body) };
}

test('a query answers D1 result shape: results, success, meta; integers stay integers, blobs are byte lists', async () => {
  const d1 = await node(new MemoryStore(), 'n1');
  try {
    await send(d1, { sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n, b BLOB)' });
    const insert = await send(d1, {
      sql: 'INSERT INTO t (name, n, b) VALUES (?, ?, ?)',
      params: ['a', 7, [1, 2, 255]],
    });
    assert.equal(insert.json.success, true);
    assert.equal(insert.json.meta.changes, 1);
    assert.equal(insert.json.meta.last_row_id, 1);
    assert.equal(insert.json.meta.changed_db, true);
    assert.ok(insert.json.meta.size_after > 0);
    assert.match(insert.headers['x-cf-d1-session-commit-token'] ?? '', /^[0-9a-f]{16}$/);
    const select = await send(d1, { sql: 'SELECT id, name, n, typeof(n) AS type, b FROM t', params: [] });
    assert.deepEqual(select.json.results, [{ id: 1, name: 'a', n: 7, type: 'integer', b: [1, 2, 255] }]);
    assert.equal(select.json.meta.changed_db, false);
    const raw = await send(d1, { sql: 'SELECT 1 AS x, 2 AS x' }, 'ROWS_AND_COLUMNS');
    assert.deepEqual(raw.json.results, { columns: ['x', 'x'], rows: [[1, 2]] });
  } finally {
    await d1.close();
  }
});

test("SQLite's refusals come back as D1's failure, with SQLite's code; a batch is all or nothing", async () => {
  const d1 = await node(new MemoryStore(), 'n1');
  try {
    await send(d1, { sql: 'CREATE TABLE u (a UNIQUE)' });
    const missing = await send(d1, { sql: 'SELECT * FROM nope' });
    assert.deepEqual(missing.json, { success: false, error: 'no such table: nope: SQLITE_ERROR' });
    const batch = await send(d1, [{ sql: 'INSERT INTO u VALUES (1)' }, { sql: 'INSERT INTO u VALUES (1)' }]);
    assert.deepEqual(batch.json, {
      success: false,
      error: 'UNIQUE constraint failed: u.a: SQLITE_CONSTRAINT',
    });
    const count = await send(d1, { sql: 'SELECT count(*) AS c FROM u' });
    assert.deepEqual(count.json.results, [{ c: 0 }]);
    const empty = await send(d1, { sql: '  -- nothing\n' });
    assert.deepEqual(empty.json, { success: false, error: 'No SQL statements detected.' });
    const notJson = await d1.handle({ ...request({}), body: '{' });
    assert.equal(JSON.parse(notJson.body).success, false);
    const tooMany = await send(d1, { sql: 'SELECT 1', params: Array(101).fill(1) });
    assert.match(tooMany.json.error, /too many SQL variables/);
  } finally {
    await d1.close();
  }
});

test('a node that takes the database over restores every acknowledged write, and its former owner can write no more', async () => {
  const store = new MemoryStore();
  const first = await node(store, 'n1');
  const second = await node(store, 'n2');
  try {
    await send(first, { sql: 'CREATE TABLE t (v)' });
    for (let i = 0; i < 20; i++) await send(first, { sql: 'INSERT INTO t VALUES (?)', params: [i] });
    const refused = await send(second, { sql: 'SELECT count(*) AS c FROM t' });
    assert.match(refused.json.error, /served by node n1/);
    // n1 stops renewing (as if stopped): its lease runs out in the bucket.
    const lease = keys.runtimeD1Lease('app', 'main');
    const record = JSON.parse(Buffer.from((await store.get(lease))?.body ?? []).toString());
    await store.put(lease, JSON.stringify({ ...record, expires_ms: 0 }));
    const taken = await send(second, { sql: 'SELECT count(*) AS c, sum(v) AS s FROM t' });
    assert.deepEqual(taken.json.results, [{ c: 20, s: 190 }]);
    // n1 still believes its lease valid (its clock says so), runs the write, but the bucket refuses
    // its segment: the write is not acknowledged, and n2 never sees it.
    const late = await send(first, { sql: 'INSERT INTO t VALUES (100)' });
    assert.equal(late.json.success, false);
    assert.match(late.json.error, /another node took the database over/);
    const after = await send(second, { sql: 'SELECT count(*) AS c FROM t' });
    assert.deepEqual(after.json.results, [{ c: 20 }]);
    const moved = await send(first, { sql: 'SELECT 1' });
    assert.match(moved.json.error, /served by node n2/);
  } finally {
    await first.close();
    await second.close();
  }
});

test('a closed node releases the lease; the next node restores across generations after compaction', async () => {
  const store = new MemoryStore();
  const first = await node(store, 'n1', { compactWalBytes: 32 * 1024 });
  try {
    await send(first, { sql: 'CREATE TABLE t (v TEXT)' });
    for (let i = 0; i < 30; i++)
      await send(first, { sql: 'INSERT INTO t VALUES (?)', params: ['x'.repeat(5000)] });
  } finally {
    await first.close();
  }
  const generationsBefore = (await listGenerations({ store, application: 'app', database: 'main' })).length;
  assert.ok(generationsBefore > 2, `the WAL was compacted into new generations (${generationsBefore})`);
  const second = await node(store, 'n2');
  try {
    const count = await send(second, { sql: 'SELECT count(*) AS c FROM t' });
    assert.deepEqual(count.json.results, [{ c: 30 }]);
    assert.equal(
      (await listGenerations({ store, application: 'app', database: 'main' })).length,
      generationsBefore + 1,
    );
  } finally {
    await second.close();
  }
});

test('time travel: the database as it was at a moment becomes its state, and the restore can itself be undone', async () => {
  const store = new MemoryStore();
  const d1 = await node(store, 'n1');
  try {
    await send(d1, { sql: 'CREATE TABLE t (v)' });
    await send(d1, { sql: 'INSERT INTO t VALUES (1)' });
    const t1 = Date.now();
    while (Date.now() === t1) await new Promise((r) => setImmediate(r));
    await send(d1, { sql: 'INSERT INTO t VALUES (2)' });
    await d1.restore('app', 'main', t1);
    assert.deepEqual((await send(d1, { sql: 'SELECT v FROM t' })).json.results, [{ v: 1 }]);
    await send(d1, { sql: 'INSERT INTO t VALUES (3)' });
    assert.deepEqual((await send(d1, { sql: 'SELECT v FROM t ORDER BY v' })).json.results, [
      { v: 1 },
      { v: 3 },
    ]);
  } finally {
    await d1.close();
  }
});

test('statements split at semicolons outside quotes, comments and trigger bodies', () => {
  assert.deepEqual(splitStatements('SELECT \'a;b\'; SELECT "c;" -- x;y\n; /* ; */ SELECT 2;'), [
    "SELECT 'a;b'",
    'SELECT "c;" -- x;y',
    '/* ; */ SELECT 2',
  ]);
  assert.deepEqual(
    splitStatements(
      'CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET v = 1; DELETE FROM u; END; SELECT 1',
    ),
    ['CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET v = 1; DELETE FROM u; END', 'SELECT 1'],
  );
  assert.deepEqual(splitStatements("INSERT INTO t VALUES ('it''s;')"), ["INSERT INTO t VALUES ('it''s;')"]);
});

/** The store double, with a switch that makes every call fail as an unreachable bucket does. */
class FreezableStore extends MemoryStore {
  frozen = false;
  #check() {
    if (this.frozen) throw new Error('the bucket did not answer');
  }
  override async get(key: string) {
    this.#check();
    return super.get(key);
  }
  override async put(key: string, body: Uint8Array | string, condition?: Parameters<MemoryStore['put']>[2]) {
    this.#check();
    return super.put(key, body, condition);
  }
  override async list(prefix: string, options: Parameters<MemoryStore['list']>[1]) {
    this.#check();
    return super.list(prefix, options);
  }
}

test('the bucket frozen: a write fails with D1 failure, reads on the holder go on past its lease, and the write ships once the bucket is back', async () => {
  const store = new FreezableStore();
  const d1 = await node(store, 'n1', { leaseTtlMs: 1_000 });
  try {
    await send(d1, { sql: 'CREATE TABLE t (v)' });
    await send(d1, { sql: 'INSERT INTO t VALUES (1)' });
    store.frozen = true;
    const refused = await send(d1, { sql: 'INSERT INTO t VALUES (2)' });
    assert.equal(refused.json.success, false);
    assert.match(refused.json.error, /^the bucket did not take the write: .*SQLITE_IOERR$/);
    const lease = keys.runtimeD1Lease('app', 'main');
    await waitFor(async () => {
      const record = store.objects.get(lease);
      return record !== undefined && JSON.parse(Buffer.from(record.body).toString()).expires_ms < Date.now();
    }, 'the lease to run out');
    const read = await send(d1, { sql: 'SELECT count(*) AS c FROM t' });
    assert.equal(
      read.json.success,
      true,
      `the holder answers reads from its copy while the bucket is down: ${read.body}`,
    );
    const write = await send(d1, { sql: 'INSERT INTO t VALUES (3)' });
    assert.equal(write.json.success, false, 'and no write');
    store.frozen = false;
    assert.equal((await send(d1, { sql: 'INSERT INTO t VALUES (4)' })).json.success, true);
  } finally {
    await d1.close();
  }
  // Whatever the failures left on the holder's copy was shipped with the write that succeeded.
  const next = await node(store, 'n2');
  try {
    const rows = await send(next, { sql: 'SELECT v FROM t ORDER BY v' });
    assert.deepEqual(rows.json.results, [{ v: 1 }, { v: 2 }, { v: 3 }, { v: 4 }]);
  } finally {
    await next.close();
  }
});

test('closing leaves no copy of a database on the node', async () => {
  const store = new MemoryStore();
  const d1 = await node(store, 'n1');
  await send(d1, { sql: 'CREATE TABLE t (v)' });
  const dataDir = dirs.at(-1)!;
  assert.deepEqual(readdirSync(join(dataDir, 'app', 'main')).length, 1, 'one copy while open');
  await d1.close();
  assert.deepEqual(readdirSync(join(dataDir, 'app', 'main')), []);
});

test("a query past D1's time limit fails, and the next one is answered from the database as the bucket holds it", async () => {
  const d1 = await node(new MemoryStore(), 'n1', { queryTimeoutMs: 3_000 });
  try {
    await send(d1, { sql: 'CREATE TABLE t (v)' });
    await send(d1, { sql: 'INSERT INTO t VALUES (1)' });
    const endless = await send(d1, {
      sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c',
    });
    assert.equal(endless.json.success, false);
    assert.match(endless.json.error, /ran past D1's 3 s, D1's limit for one query: SQLITE_INTERRUPT$/);
    assert.deepEqual((await send(d1, { sql: 'SELECT v FROM t' })).json.results, [{ v: 1 }]);
  } finally {
    await d1.close();
  }
});
