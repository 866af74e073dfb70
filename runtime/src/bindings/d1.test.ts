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
import { keys, logKeys } from '../../../src/registry/keys.ts';
import { MemoryStore } from '../../../test/helpers/memory-store.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { type D1Request, D1Service } from './d1.ts';
import {
  D1_RETENTION_MS,
  type DatabaseRef,
  decodeObject,
  listGenerations,
  listSegments,
  logBase,
  pruneGenerations,
  RestorePointError,
  readSnapshotHeader,
  restore,
  writeSegment,
  writeSnapshot,
} from './d1-log.ts';
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

/** The store double whose next segment write lands but answers a failure, as one answered past its deadline. */
class LateAnswerStore extends MemoryStore {
  landThenFail = false;
  override async put(key: string, body: Uint8Array | string, condition?: Parameters<MemoryStore['put']>[2]) {
    const put = await super.put(key, body, condition);
    if (this.landThenFail && key.includes('/wal/')) {
      this.landThenFail = false;
      throw new Error('the bucket did not answer in time');
    }
    return put;
  }
}

test('a write the bucket took but answered as failed: the holder finds its own segment there and goes on writing', async () => {
  const store = new LateAnswerStore();
  const d1 = await node(store, 'n1');
  try {
    await send(d1, { sql: 'CREATE TABLE t (v)' });
    await send(d1, { sql: 'INSERT INTO t VALUES (1)' });
    store.landThenFail = true;
    const late = await send(d1, { sql: 'INSERT INTO t VALUES (2)' });
    assert.match(late.json.error, /^the bucket did not take the write: the bucket did not answer in time/);
    const next = await send(d1, { sql: 'INSERT INTO t VALUES (3)' });
    assert.equal(next.json.success, true, `the next write is taken, not refused as a takeover: ${next.body}`);
    assert.deepEqual((await send(d1, { sql: 'SELECT v FROM t ORDER BY v' })).json.results, [
      { v: 1 },
      { v: 2 },
      { v: 3 },
    ]);
  } finally {
    await d1.close();
  }
  const other = await node(store, 'n2');
  try {
    const rows = await send(other, { sql: 'SELECT v FROM t ORDER BY v' });
    assert.deepEqual(rows.json.results, [{ v: 1 }, { v: 2 }, { v: 3 }], 'each byte of the WAL once');
  } finally {
    await other.close();
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

test("D1's byte limits: a statement past 100,000 bytes and a string or BLOB past 2,000,000 bytes (bound, or made by the statement) fail with SQLITE_TOOBIG; at the limits they run", async () => {
  const d1 = await node(new MemoryStore(), 'n1');
  /** `SELECT 1 AS one` padded with a comment to exactly `bytes` bytes, `fill` a character of it. */
  const statement = (bytes: number, fill = 'x') => {
    const head = 'SELECT 1 AS one /*';
    const room = bytes - Buffer.byteLength(head) - 2;
    const pad = fill.repeat(Math.floor(room / Buffer.byteLength(fill)));
    return `${head}${pad}${'x'.repeat(room - Buffer.byteLength(pad))}*/`;
  };
  try {
    await send(d1, { sql: 'CREATE TABLE t (v)' });
    const atLimit = await send(d1, { sql: statement(100_000) });
    assert.deepEqual(atLimit.json.results, [{ one: 1 }], 'a statement of 100,000 bytes runs');
    const long = await send(d1, { sql: statement(100_001) });
    assert.deepEqual(long.json, {
      success: false,
      error: 'statement too long: 100001 bytes, D1 allows 100000: SQLITE_TOOBIG',
    });
    // Bytes, not characters: 'é' is two bytes in UTF-8, so this is 100,001 bytes in ~50,000 characters.
    const wide = statement(100_001, 'é');
    assert.ok(wide.length < 60_000);
    assert.match(
      (await send(d1, { sql: wide })).json.error,
      /^statement too long: 100001 bytes.*SQLITE_TOOBIG$/,
    );

    const length = (value: unknown) => send(d1, { sql: 'SELECT length(?) AS n', params: [value] });
    assert.deepEqual((await length('x'.repeat(2_000_000))).json.results, [{ n: 2_000_000 }]);
    assert.deepEqual((await length(Array(2_000_000).fill(7))).json.results, [{ n: 2_000_000 }]);
    const tooBig = { success: false, error: 'string or blob too big: SQLITE_TOOBIG' };
    assert.deepEqual((await length('x'.repeat(2_000_001))).json, tooBig, 'a string one byte past');
    assert.deepEqual(
      (await length('é'.repeat(1_000_001))).json,
      tooBig,
      '2,000,002 bytes in 1,000,001 characters',
    );
    assert.deepEqual((await length(Array(2_000_001).fill(7))).json, tooBig, 'a BLOB one byte past');
    const insertBound = await send(d1, { sql: 'INSERT INTO t VALUES (?)', params: ['x'.repeat(2_000_001)] });
    assert.deepEqual(insertBound.json, tooBig);

    // A value the statement makes is held to the same limit as D1's SQLite holds it.
    assert.deepEqual((await send(d1, { sql: 'SELECT length(zeroblob(2000000)) AS n' })).json.results, [
      { n: 2_000_000 },
    ]);
    const made = await send(d1, { sql: 'INSERT INTO t VALUES (zeroblob(2000001))' });
    assert.deepEqual(made.json, tooBig);
    const grown = await send(d1, {
      sql: "INSERT INTO t VALUES (? || 'yy')",
      params: ['x'.repeat(1_999_999)],
    });
    assert.deepEqual(grown.json, tooBig, 'a bound value under the limit made longer than it');
    assert.deepEqual((await send(d1, { sql: 'SELECT count(*) AS c FROM t' })).json.results, [{ c: 0 }]);
  } finally {
    await d1.close();
  }
});

test("D1's parameter limit: 100 run; past 100 placeholders the statement fails, whatever was bound", async () => {
  const d1 = await node(new MemoryStore(), 'n1');
  const placeholders = (n: number) => `SELECT ${Array(n).fill('?').join(' + ')} AS s`;
  try {
    const hundred = await send(d1, { sql: placeholders(100), params: Array(100).fill(1) });
    assert.deepEqual(hundred.json.results, [{ s: 100 }]);
    const bound = await send(d1, { sql: placeholders(101), params: Array(101).fill(1) });
    assert.deepEqual(bound.json, {
      success: false,
      error: 'too many SQL variables: 101, D1 allows 100: SQLITE_ERROR',
    });
    const unbound = await send(d1, { sql: placeholders(101), params: [1] });
    assert.deepEqual(unbound.json, { success: false, error: 'too many SQL variables: SQLITE_ERROR' });
    const numbered = await send(d1, { sql: 'SELECT ?101 AS s', params: [] });
    assert.equal(numbered.json.success, false);
    assert.match(numbered.json.error, /\?100: SQLITE_ERROR$/);
  } finally {
    await d1.close();
  }
});

/** Each generation in the bucket, oldest first: its snapshot's time and its segments' times. */
async function history(ref: DatabaseRef) {
  const out: { generation: number; snapshotMs: number; segmentsMs: number[] }[] = [];
  for (const generation of await listGenerations(ref)) {
    const segmentsMs: number[] = [];
    for (const segment of await listSegments(ref, generation)) {
      const object = await ref.store.get(logKeys.segment(logBase(ref), generation, segment));
      assert.ok(object, `segment ${segment} of generation ${generation}`);
      segmentsMs.push(decodeObject(object.body).header.time_ms);
    }
    const snapshot = await readSnapshotHeader(ref, generation);
    out.push({ generation, snapshotMs: snapshot?.time_ms ?? Number.NaN, segmentsMs });
  }
  return out;
}

test('time travel to a moment inside an older generation: the rows are exactly those of that moment', async (t) => {
  // The clock is the test's: every write is stamped with the time it sets, one second apart.
  const start = Math.floor(Date.now() / 1000) * 1000;
  t.mock.timers.enable({ apis: ['Date'], now: start });
  const at = (i: number) => start + 1000 * (i + 1);
  const store = new MemoryStore();
  const ref = { store, application: 'app', database: 'main' };
  // A small WAL limit: a new generation every few rows (each row a page of its own).
  const d1 = await node(store, 'n1', { compactWalBytes: 24 * 1024 });
  try {
    await send(d1, { sql: 'CREATE TABLE t (i INTEGER, pad TEXT)' });
    for (let i = 0; i < 24; i++) {
      t.mock.timers.setTime(at(i));
      const insert = await send(d1, { sql: 'INSERT INTO t VALUES (?, ?)', params: [i, 'x'.repeat(3000)] });
      assert.equal(insert.json.success, true, insert.body);
    }
    const before = await history(ref);
    assert.ok(before.length >= 4, `the WAL rolled into new generations (${before.length})`);
    // A moment between two rows of a generation that is neither the first nor the newest.
    const older = before.find((g, n) => n > 0 && n < before.length - 2 && g.segmentsMs.length >= 2);
    assert.ok(older, JSON.stringify(before));
    const rowAt = (ms: number) => (ms - start) / 1000 - 1;
    const last = rowAt(older.segmentsMs[0] as number);
    const moment = at(last) + 500;
    assert.ok(moment < (older.segmentsMs[1] as number), 'the moment is inside the generation');
    assert.ok(
      before.some((g) => g.generation > older.generation && g.snapshotMs > moment),
      'newer generations started after the moment',
    );

    t.mock.timers.setTime(at(100));
    await d1.restore('app', 'main', moment);
    const rows = await send(d1, { sql: 'SELECT i FROM t ORDER BY i' });
    assert.deepEqual(
      rows.json.results.map((r: { i: number }) => r.i),
      Array.from({ length: last + 1 }, (_, i) => i),
      `the rows written by ${new Date(moment).toISOString()} (row ${last}), no more`,
    );
    // The restore is a new generation on top of the history: the rows after the moment are still there.
    await d1.restore('app', 'main', at(23));
    const all = await send(d1, { sql: 'SELECT count(*) AS c FROM t' });
    assert.deepEqual(all.json.results, [{ c: 24 }]);
  } finally {
    await d1.close();
  }
});

test('pruneGenerations: what is older than the retention goes, what a restore within it needs stays, the newest always stays', async () => {
  const day = 24 * 3600 * 1000;
  const now = Date.UTC(2026, 0, 31);
  const bytes = (n: number) => new Uint8Array(n).fill(n);
  /** A history of generations, each `[snapshot time, ...segment times]` before `now`. */
  async function build(generations: number[][]): Promise<DatabaseRef> {
    const ref = { store: new MemoryStore(), application: 'app', database: 'main' };
    for (const [g, [snapshotAgo, ...segmentsAgo]] of generations.entries()) {
      await writeSnapshot(ref, g + 1, { time_ms: now - (snapshotAgo as number), index: g * 10 }, bytes(4));
      let offset = 0;
      for (const [s, ago] of segmentsAgo.entries()) {
        await writeSegment(
          ref,
          g + 1,
          s + 1,
          { time_ms: now - ago, index: g * 10 + s + 1, offset },
          bytes(8),
        );
        offset += 8;
      }
    }
    return ref;
  }
  const objects = (ref: DatabaseRef) => [...(ref.store as MemoryStore).objects.keys()].sort();
  assert.equal(D1_RETENTION_MS, 7 * day);

  // Generations 1 and 2 were replaced more than 7 days ago; 3 began 8 days ago and was replaced
  // 5 days ago, so a restore to 7 days ago needs it; 4 and 5 are recent.
  const ref = await build([
    [30 * day, 29 * day],
    [20 * day, 19 * day, 18 * day],
    [8 * day, 6 * day, 5.5 * day],
    [5 * day, 4 * day],
    [1 * day, 0.5 * day],
  ]);
  const kept = objects(ref).filter((key) => !/\/generations\/0*[12]\//.test(key));
  assert.equal(await pruneGenerations(ref, D1_RETENTION_MS, now), 2);
  assert.deepEqual(await listGenerations(ref), [3, 4, 5]);
  assert.deepEqual(
    objects(ref),
    kept,
    'generations 1 and 2 went whole (snapshot and segments), nothing else',
  );
  const file = join(await mkdtemp(join(tmpdir(), 'd1-prune-')), 'db');
  dirs.push(join(file, '..'));
  const sevenDaysAgo = await restore(ref, file, now - 7 * day);
  assert.deepEqual([sevenDaysAgo.generation, sevenDaysAgo.walBytes], [3, 0]);
  const sixDaysAgo = await restore(ref, file, now - 6 * day);
  assert.deepEqual([sixDaysAgo.generation, sixDaysAgo.walBytes, sixDaysAgo.index], [3, 8, 21]);
  await assert.rejects(restore(ref, file, now - 9 * day), RestorePointError);
  assert.equal(await pruneGenerations(ref, D1_RETENTION_MS, now), 0, 'a second pass removes nothing');

  // The boundary: a generation replaced exactly 7 days ago stays; 1 ms more and it goes.
  const edge = await build([[10 * day], [7 * day], [1 * day]]);
  assert.equal(await pruneGenerations(edge, D1_RETENTION_MS, now), 0);
  assert.equal(await pruneGenerations(edge, D1_RETENTION_MS, now + 1), 1);
  assert.deepEqual(await listGenerations(edge), [2, 3]);

  // Every generation older than the retention: the newest stays, with its segments.
  const old = await build([
    [40 * day, 39 * day],
    [30 * day, 29 * day, 28 * day],
  ]);
  assert.equal(await pruneGenerations(old, D1_RETENTION_MS, now), 1);
  assert.deepEqual(await listGenerations(old), [2]);
  assert.deepEqual(await listSegments(old, 2), [1, 2]);
  const latest = await restore(old, file);
  assert.deepEqual([latest.generation, latest.walBytes, latest.index], [2, 16, 12]);
  const single = await build([[100 * day]]);
  assert.equal(await pruneGenerations(single, D1_RETENTION_MS, now), 0);
  assert.deepEqual(await listGenerations(single), [1]);
});
