// The D1 API as a worker uses it (developers.cloudflare.com/d1/worker-api/): /conformance runs
// each method and error once and answers what it saw, so a test can compare it with D1's docs.

async function outcome(run) {
  try {
    return { ok: await run() };
  } catch (err) {
    return { error: String(err?.message) };
  }
}

const SCHEMA = 'CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, v TEXT NOT NULL)';

async function conformance(db) {
  const r = {};
  r.exec = await outcome(async () => {
    const result = await db.exec(
      'DROP TABLE IF EXISTS kinds\nDROP TABLE IF EXISTS u\nCREATE TABLE kinds (id INTEGER PRIMARY KEY, n, t, b BLOB, f)\nCREATE TABLE u (a UNIQUE)',
    );
    return { count: result.count, hasDuration: typeof result.duration === 'number' && result.duration >= 0 };
  });
  r.run = await outcome(async () => {
    const result = await db
      .prepare('INSERT INTO kinds (n, t, b, f) VALUES (?1, ?2, ?3, ?4)')
      .bind(42, 'héllo', new Uint8Array([0, 1, 255]).buffer, true)
      .run();
    const { changes, last_row_id, changed_db, rows_written } = result.meta;
    return {
      success: result.success,
      changes,
      last_row_id,
      changed_db,
      rows_written,
      sizeAfter: result.meta.size_after > 0,
      hasDuration: typeof result.meta.duration === 'number' && result.meta.duration >= 0,
    };
  });
  r.nullAndFloat = await outcome(() =>
    db
      .prepare('INSERT INTO kinds (n, t) VALUES (?, ?)')
      .bind(null, 1.5)
      .run()
      .then((x) => x.meta.last_row_id),
  );
  r.all = await outcome(async () => {
    const result = await db.prepare('SELECT id, n, typeof(n) AS nt, t, b, f FROM kinds ORDER BY id').all();
    return {
      success: result.success,
      results: result.results,
      rowsRead: result.meta.rows_read,
      hasDuration: typeof result.meta.duration === 'number' && result.meta.duration >= 0,
    };
  });
  r.first = await outcome(() => db.prepare('SELECT id, t FROM kinds WHERE id = ?').bind(1).first());
  r.firstColumn = await outcome(() => db.prepare('SELECT id, t FROM kinds WHERE id = ?').bind(1).first('t'));
  r.firstNone = await outcome(() => db.prepare('SELECT id FROM kinds WHERE id = ?').bind(99).first());
  r.raw = await outcome(() => db.prepare('SELECT id, n FROM kinds ORDER BY id').raw());
  r.rawColumns = await outcome(() =>
    db.prepare('SELECT id, n FROM kinds ORDER BY id').raw({ columnNames: true }),
  );
  r.batch = await outcome(async () => {
    const results = await db.batch([
      db.prepare('INSERT INTO u VALUES (?)').bind(1),
      db.prepare('INSERT INTO u VALUES (?)').bind(2),
      db.prepare('SELECT count(*) AS c FROM u'),
    ]);
    return results.map((x) => x.results);
  });
  r.batchAtomic = await outcome(() =>
    db.batch([db.prepare('INSERT INTO u VALUES (3)'), db.prepare('INSERT INTO u VALUES (1)')]),
  );
  r.afterFailedBatch = await outcome(() => db.prepare('SELECT count(*) AS c FROM u').first('c'));
  r.missingTable = await outcome(() => db.prepare('SELECT * FROM nope').all());
  r.syntax = await outcome(() => db.prepare('SELEC 1').all());
  r.badType = await outcome(() => db.prepare('SELECT ?').bind({ a: 1 }).all());
  r.execError = await outcome(() => db.exec('SELECT * FROM nope'));
  r.transaction = await outcome(() => db.prepare('BEGIN TRANSACTION').run());
  r.session = await outcome(async () => {
    const session = db.withSession('first-primary');
    await session.prepare('INSERT INTO u VALUES (?)').bind(10).run();
    const bookmark = session.getBookmark();
    const later = db.withSession(bookmark);
    const count = await later.prepare('SELECT count(*) AS c FROM u').first('c');
    return { bookmark: typeof bookmark === 'string' && bookmark.length > 0, count };
  });
  r.multiStatement = await outcome(() =>
    db.prepare('INSERT INTO u VALUES (20); SELECT count(*) AS c FROM u').first('c'),
  );
  // D1's limits (developers.cloudflare.com/d1/platform/limits/): 100 bound parameters, a statement
  // of 100,000 bytes, a string or BLOB of 2,000,000 bytes; at them a query runs, past them it fails.
  const sum = (n) => `SELECT ${Array(n).fill('?').join(' + ')} AS s`;
  r.params100 = await outcome(() =>
    db
      .prepare(sum(100))
      .bind(...Array(100).fill(1))
      .first('s'),
  );
  r.params101 = await outcome(() =>
    db
      .prepare(sum(101))
      .bind(...Array(101).fill(1))
      .all(),
  );
  const padded = (bytes) => `SELECT 1 AS one /*${'x'.repeat(bytes - 20)}*/`;
  r.statement100k = await outcome(() => db.prepare(padded(100_000)).first('one'));
  r.statementTooLong = await outcome(() => db.prepare(padded(100_001)).all());
  r.string2m = await outcome(() =>
    db.prepare('SELECT length(?) AS n').bind('x'.repeat(2_000_000)).first('n'),
  );
  r.stringTooBig = await outcome(() =>
    db.prepare('INSERT INTO kinds (t) VALUES (?)').bind('x'.repeat(2_000_001)).run(),
  );
  r.blobTooBig = await outcome(() =>
    db.prepare('INSERT INTO kinds (b) VALUES (?)').bind(new Uint8Array(2_000_001)).run(),
  );
  r.madeTooBig = await outcome(() => db.prepare('INSERT INTO kinds (b) VALUES (zeroblob(2000001))').run());
  r.afterTooBig = await outcome(() => db.prepare('SELECT count(*) AS c FROM kinds').first('c'));
  return r;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const db = env.DB;
    try {
      if (url.pathname === '/conformance') return Response.json(await conformance(db));
      if (url.pathname === '/insert') {
        await db.prepare(SCHEMA).run();
        const result = await db
          .prepare('INSERT INTO notes (v) VALUES (?)')
          .bind(url.searchParams.get('v') ?? '')
          .run();
        return Response.json({ id: result.meta.last_row_id });
      }
      if (url.pathname === '/count') {
        await db.prepare(SCHEMA).run();
        const rows = await db.prepare('SELECT v FROM notes ORDER BY id').raw();
        return Response.json({ count: rows.length, values: rows.map((row) => row[0]) });
      }
      return new Response('try /insert?v=text, /count or /conformance\n', { status: 404 });
    } catch (err) {
      return Response.json({ error: String(err?.message) }, { status: 500 });
    }
  },
};
