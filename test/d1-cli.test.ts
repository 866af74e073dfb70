// `svc d1` (docs/cli.md "svc d1") and the D1 routes under it (docs/api.md "D1 databases") against a
// real `svc sail` over a local-directory bucket, serving a worker in workerd that binds two D1
// databases, deployed by `svc deploy` from a wrangler project (test/fixtures/d1-cli) with an
// operator key scoped to `shop-*` and no bucket credentials: the databases listed, wrangler's
// migrations folder applied unchanged (one transaction per file, its row in `d1_migrations`),
// SQL executed with wrangler's `--json` output, a refused query as one line, an export that
// executes back into an empty database to the same dump, time travel to before a row was
// written, and every refusal of the routes with its status, code and title.

import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { assertProblem, type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { assertRefused, readyPort } from './helpers/binding-data.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir } from './helpers/svc.ts';

const APP = 'shop-notes';
const FIXTURE = join(import.meta.dirname, 'fixtures', 'd1-cli');
const BASE = `/v1/applications/${APP}/d1/databases`;

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let shop: Signer;
let other: Signer;
let port: number;
/** A copy of the fixture: deploys and migrations read it; nothing writes into the repository. */
const project = tempDir('svc-d1-project-');
const env = () => ({
  SVC_HOME: tempDir('svc-home-'),
  SVC_OPERATOR_KEY: undefined,
  SVC_REMOTE: undefined,
  SVC_STATE_DIR: tempDir(),
  SVC_S3_ENDPOINT: undefined,
});

const svc = (args: string[], cwd = project) => runSvc(args, { env: env(), cwd, timeoutMs: 120_000 });
/** Through the node, signed with the `shop-*` key. */
const asShop = () => ['--name', 'shop', '--env', 'notes', '--node', node.url, '--key', keyArg(shop)];

/** `svc d1 execute <db> --command <sql> --json`, parsed; fails the test when the command fails. */
async function execute(sql: string, db = 'notes') {
  const run = await svc(['d1', 'execute', db, '--command', sql, '--json', ...asShop()]);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as { success: boolean; results: Record<string, unknown>[] }[];
}

before(async () => {
  cpSync(FIXTURE, project, { recursive: true });
  // The fixture binds one database; the copy binds a second, empty one the export is replayed into.
  const config = readFileSync(join(project, 'wrangler.jsonc'), 'utf8').replace(
    '"d1_databases": [',
    '"d1_databases": [{ "binding": "ARCHIVE", "database_name": "archive", "migrations_dir": "archive-migrations", "migrations_table": "archive_migrations" }, ',
  );
  writeFileSync(join(project, 'wrangler.jsonc'), config);
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shop = await bucket.operator('op-shop', 'operator', ['shop-*']);
  other = await bucket.operator('op-other', 'operator', ['other-*']);
  node = await bucket.sail(['--cell-bin', CELL_BIN, '--cell-env', 'CELL_DRAIN_MS=2000']);
  const deployed = await svc(['deploy', project, '--node', node.url, '--key', keyArg(shop)]);
  assert.equal(deployed.code, 0, deployed.stderr);
  port = await readyPort(node, admin, APP);
  await bucket.application('shop-empty');
});

after(async () => {
  await bucket?.close();
});

describe('svc d1 through a node', () => {
  test('list: the databases the serving deployment binds, and which node holds each, as a table and as JSON', async () => {
    // A query opens notes on the node (and holds its lease); archive stays closed.
    await execute('SELECT 1');
    const listed = await svc(['d1', 'list', ...asShop()]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(
      listed.stdout,
      [
        'DATABASE  BINDING  MIGRATIONS                               SERVED BY',
        'archive   ARCHIVE  archive-migrations (archive_migrations)  -',
        `notes     DB       migrations (d1_migrations)               ${node.nodeId}`,
        '',
      ].join('\n'),
    );
    const json = JSON.parse((await svc(['d1', 'list', ...asShop(), '--json'])).stdout);
    assert.equal(json.application, APP);
    assert.deepEqual(
      json.databases.map((d: { binding: string; database_name: string }) => [d.binding, d.database_name]),
      [
        ['ARCHIVE', 'archive'],
        ['DB', 'notes'],
      ],
    );
    assert.equal(json.databases[1].database_id, '00000000-0000-0000-0000-000000000001');
    const empty = await svc([
      'd1',
      'list',
      '--name',
      'shop-empty',
      '--node',
      node.url,
      '--key',
      keyArg(shop),
    ]);
    assert.equal(empty.stdout, 'shop-empty has no serving deployment, so no D1 database.\n');
  });

  test("migrations: wrangler's folder applies in order, one row each in d1_migrations; then none is left", async () => {
    const pending = await svc(['d1', 'migrations', 'list', 'notes', ...asShop()]);
    assert.equal(pending.code, 0, pending.stderr);
    assert.equal(pending.stdout, 'NAME\n0001_create_notes.sql\n0002_add_tags.sql\n');
    // -c names the project from elsewhere, as wrangler's --config.
    const applied = await svc(
      ['d1', 'migrations', 'apply', 'notes', '-c', join(project, 'wrangler.jsonc'), ...asShop()],
      tempDir(),
    );
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(
      applied.stdout,
      `applied 0001_create_notes.sql\napplied 0002_add_tags.sql\napplied 2 migrations to D1 database notes of ${APP}\n`,
    );
    const none = await svc(['d1', 'migrations', 'list', 'notes', ...asShop()]);
    assert.equal(
      none.stdout,
      `No migrations to apply to D1 database notes of ${APP} (${join(project, 'migrations')}).\n`,
    );
    const again = await svc(['d1', 'migrations', 'apply', 'notes', ...asShop()]);
    assert.match(again.stdout, /^No migrations to apply/);
    const [rows] = await execute('SELECT id, name, applied_at FROM d1_migrations ORDER BY id');
    assert.deepEqual(
      rows!.results.map((r) => [r.id, r.name]),
      [
        [1, '0001_create_notes.sql'],
        [2, '0002_add_tags.sql'],
      ],
    );
    assert.match(String(rows!.results[0]!.applied_at), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    // The worker reads what the migration wrote, through its own binding.
    const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(10_000) });
    assert.deepEqual(await response.json(), [{ id: 1, body: "it's the first note" }]);
  });

  test('a migration that fails is rolled back whole, row included, and stops the apply with one line', async () => {
    const broken = tempDir('svc-d1-broken-');
    cpSync(project, broken, { recursive: true });
    writeFileSync(
      join(broken, 'migrations', '0003_broken.sql'),
      "INSERT INTO notes (body) VALUES ('half');\nINSERT INTO missing_table VALUES (1);\n",
    );
    writeFileSync(join(broken, 'migrations', '0004_never.sql'), 'CREATE TABLE never (x);\n');
    const run = await svc(['d1', 'migrations', 'apply', 'notes', ...asShop()], broken);
    assertRefused(
      run,
      /^svc: Migration failed: 0003_broken\.sql was rolled back \(D1_ERROR: no such table: missing_table: SQLITE_ERROR\); 0 applied before it stay applied, 1 after it not tried \[urn:svc:invalid-input\]\n$/,
    );
    const [notes] = await execute("SELECT count(*) AS n FROM notes WHERE body = 'half'");
    assert.equal(notes!.results[0]!.n, 0);
    const [names] = await execute('SELECT name FROM d1_migrations ORDER BY id');
    assert.deepEqual(
      names!.results.map((r) => r.name),
      ['0001_create_notes.sql', '0002_add_tags.sql'],
    );
    const pending = await svc(['d1', 'migrations', 'list', 'notes', ...asShop()], broken);
    assert.equal(pending.stdout, 'NAME\n0003_broken.sql\n0004_never.sql\n');
  });

  test("execute --json prints wrangler's list of results, one per statement, run as one transaction", async () => {
    const results = await execute(
      "INSERT INTO notes (body) VALUES ('second'); INSERT INTO tags VALUES (2, 'x'); SELECT n.id, n.body, t.tag FROM notes n JOIN tags t ON t.note_id = n.id",
    );
    assert.equal(results.length, 3);
    assert.ok(results.every((r) => r.success === true));
    assert.deepEqual(results[0]!.results, []);
    assert.deepEqual(results[2]!.results, [{ id: 2, body: 'second', tag: 'x' }]);
    const meta = (results[0] as unknown as { meta: { changes: number; last_row_id: number } }).meta;
    assert.equal(meta.changes, 1);
    assert.equal(meta.last_row_id, 2);
  });

  test('execute prints each result with rows as a table, and what ran on stderr', async () => {
    const run = await svc([
      'd1',
      'execute',
      'notes',
      '--command',
      'SELECT id, body, NULL AS missing FROM notes ORDER BY id',
      ...asShop(),
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      "id  body                 missing\n1   it's the first note  NULL\n2   second               NULL\n",
    );
    assert.match(
      run.stderr,
      new RegExp(
        `^svc: executed 1 statement on D1 database notes of ${APP} in \\d+ ms \\(bookmark [0-9a-f]+\\)\\n$`,
      ),
    );
  });

  test('a refused statement fails the command with one line, D1 words, and rolls back the statements before it', async () => {
    const run = await svc([
      'd1',
      'execute',
      'notes',
      '--command',
      "INSERT INTO notes (body) VALUES ('lost'); INSERT INTO nope VALUES (1)",
      '--json',
      ...asShop(),
    ]);
    assertRefused(
      run,
      /^svc: The query failed: D1_ERROR: no such table: nope: SQLITE_ERROR \[urn:svc:invalid-input\]\n$/,
    );
    const [lost] = await execute("SELECT count(*) AS n FROM notes WHERE body = 'lost'");
    assert.equal(lost!.results[0]!.n, 0);
    const constraint = await svc([
      'd1',
      'execute',
      'notes',
      '--command',
      'INSERT INTO notes (id, body) VALUES (1, NULL)',
      ...asShop(),
    ]);
    assertRefused(
      constraint,
      /^svc: The query failed: D1_ERROR: NOT NULL constraint failed: notes\.body: SQLITE_CONSTRAINT \[urn:svc:invalid-input\]\n$/,
    );
  });

  test('execute --file runs every statement of a file; the command line refuses what it can itself', async () => {
    const file = join(tempDir(), 'seed.sql');
    writeFileSync(
      file,
      "-- seed\nINSERT INTO notes (body) VALUES ('from a file;\nwith a semicolon');\nINSERT INTO tags VALUES (3, 'f');\n",
    );
    const run = await svc(['d1', 'execute', 'notes', '--file', file, '--json', ...asShop()]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(JSON.parse(run.stdout).length, 2);
    const [row] = await execute('SELECT body FROM notes WHERE id = 3');
    assert.equal(row!.results[0]!.body, 'from a file;\nwith a semicolon');

    assertRefused(
      await svc(['d1', 'execute', 'notes', ...asShop()]),
      /^svc: No SQL: give the SQL with --command .* \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['d1', 'execute', 'notes', '--command', 'SELECT 1', '--file', file, ...asShop()]),
      /^svc: No SQL: give --command or --file, not both \[urn:svc:invalid-input\]\n$/,
    );
    assertRefused(
      await svc(['d1', 'execute', 'notes', '--file', join(tempDir(), 'absent.sql'), ...asShop()]),
      /^svc: Unreadable value file: .*absent\.sql: ENOENT \[urn:svc:invalid-input\]\n$/,
    );
    const sqliteFile = join(tempDir(), 'db.sqlite');
    writeFileSync(sqliteFile, Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(100)]));
    assertRefused(
      await svc(['d1', 'execute', 'notes', '--file', sqliteFile, ...asShop()]),
      /^svc: Not an SQL file: .* \[urn:svc:invalid-input\]\n$/,
    );
  });

  test('export writes the schema and rows as SQL, which executes into an empty database to the same dump', async () => {
    const dir = tempDir();
    const out = join(dir, 'notes.sql');
    const run = await svc(['d1', 'export', 'notes', '--output', out, ...asShop()]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, `exported D1 database notes of ${APP} to ${out} (4 tables, 9 rows)\n`);
    const dump = readFileSync(out, 'utf8');
    const lines = dump.split('\n');
    assert.equal(lines[0], 'PRAGMA defer_foreign_keys=TRUE;');
    assert.ok(
      lines.includes('INSERT INTO "notes" ("id","body") VALUES(1,\'it\'\'s the first note\');'),
      dump,
    );
    assert.ok(
      lines.includes(
        'INSERT INTO "notes" ("id","body") VALUES(3,replace(\'from a file;\\nwith a semicolon\',\'\\n\',char(10)));',
      ),
      dump,
    );
    assert.ok(lines.includes('DELETE FROM sqlite_sequence;'), dump);
    assert.equal(lines.at(-2), 'CREATE INDEX tags_by_note ON tags (note_id);');

    const replay = await svc(['d1', 'execute', 'archive', '--file', out, ...asShop()]);
    assert.equal(replay.code, 0, replay.stderr);
    const again = join(dir, 'archive.sql');
    assert.equal((await svc(['d1', 'export', 'archive', '--output', again, ...asShop()])).code, 0);
    assert.equal(readFileSync(again, 'utf8'), dump);

    const schemaOnly = join(dir, 'schema.sql');
    await svc(['d1', 'export', 'notes', '--output', schemaOnly, '--no-data', ...asShop()]);
    assert.doesNotMatch(readFileSync(schemaOnly, 'utf8'), /INSERT INTO/);
    const tagsOnly = join(dir, 'tags.sql');
    await svc(['d1', 'export', 'notes', '--output', tagsOnly, '--table', 'tags', '--no-schema', ...asShop()]);
    assert.equal(
      readFileSync(tagsOnly, 'utf8'),
      'PRAGMA defer_foreign_keys=TRUE;\nINSERT INTO "tags" ("note_id","tag") VALUES(2,\'x\');\nINSERT INTO "tags" ("note_id","tag") VALUES(3,\'f\');\n',
    );
    assertRefused(
      await svc([
        'd1',
        'export',
        'notes',
        '--output',
        join(dir, 'x.sql'),
        '--no-data',
        '--no-schema',
        ...asShop(),
      ]),
      /^svc: Nothing to export: give --no-schema or --no-data, not both \[urn:svc:invalid-input\]\n$/,
    );
  });

  test('time travel: info says how far back; restore to before a row was written and the row is gone', async () => {
    const info = await svc(['d1', 'time-travel', 'info', 'notes', '--json', ...asShop()]);
    assert.equal(info.code, 0, info.stderr);
    const doc = JSON.parse(info.stdout);
    assert.equal(doc.retention_days, 7);
    assert.ok(doc.generations >= 1, info.stdout);
    assert.ok(doc.earliest_ms <= Date.now(), info.stdout);
    const table = await svc(['d1', 'time-travel', 'info', 'notes', ...asShop()]);
    assert.match(
      table.stdout,
      /^DATABASE +EARLIEST +RETENTION +GENERATIONS +SEGMENTS\nnotes +\d{4}-\S+Z +7 days +\d+ +\d+\n$/,
    );

    await execute("INSERT INTO notes (body) VALUES ('kept')");
    const before = Date.now();
    // The next write must carry a later millisecond than the restore point.
    while (Date.now() <= before) await new Promise((r) => setImmediate(r));
    await execute("INSERT INTO notes (body) VALUES ('undone')");
    const restored = await svc([
      'd1',
      'time-travel',
      'restore',
      'notes',
      '--timestamp',
      new Date(before).toISOString(),
      ...asShop(),
    ]);
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(
      restored.stdout,
      new RegExp(
        `^restored D1 database notes of ${APP} to ${new Date(before).toISOString().replace(/\./g, '\\.')} \\(bookmark \\S+\\)\\n$`,
      ),
    );
    const [rows] = await execute("SELECT body FROM notes WHERE body IN ('kept', 'undone')");
    assert.deepEqual(rows!.results, [{ body: 'kept' }]);

    assertRefused(
      await svc(['d1', 'time-travel', 'restore', 'notes', '--timestamp', 'yesterday-ish', ...asShop()]),
      /^svc: Invalid restore point: give "timestamp" as an RFC 3339 time or Unix milliseconds \[urn:svc:invalid-input\]\n$/,
    );
    // Unix seconds, as wrangler takes them, a day ahead: in the future.
    assertRefused(
      await svc([
        'd1',
        'time-travel',
        'restore',
        'notes',
        '--timestamp',
        String(Math.floor(Date.now() / 1000) + 86_400),
        ...asShop(),
      ]),
      /^svc: Invalid restore point: the timestamp is in the future \[urn:svc:invalid-input\]\n$/,
    );
  });

  test('the commands refuse a database the deployment does not bind, and a missing migrations folder', async () => {
    assertRefused(
      await svc(['d1', 'execute', 'nope', '--command', 'SELECT 1', ...asShop()]),
      /^svc: No such D1 database: "nope" is not bound by the serving deployment \S+ of shop-notes \(its databases: archive \(ARCHIVE\), notes \(DB\)\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['d1', 'migrations', 'list', 'nope', ...asShop()]),
      /^svc: No such D1 database: shop-notes binds no database "nope" \(its databases: archive, notes\) \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc(['d1', 'migrations', 'apply', 'archive', ...asShop()]),
      /^svc: No migrations folder: no migrations present at .*archive-migrations; .* \[urn:svc:not-found\]\n$/,
    );
    assertRefused(
      await svc([
        'd1',
        'time-travel',
        'info',
        'notes',
        '--name',
        'other-app',
        '--node',
        node.url,
        '--key',
        keyArg(shop),
      ]),
      /^svc: Out of scope: .* \[urn:svc:auth-scope\]\n$/,
    );
  });
});

describe('the D1 routes refuse with a problem document', () => {
  const query = (db: string) => `${BASE}/${db}/query`;

  test('an unbound database: 404 not-found, No such D1 database, on every route', async () => {
    for (const [method, path, body] of [
      ['POST', query('nope'), { sql: 'SELECT 1' }],
      ['GET', `${BASE}/nope/time-travel`, undefined],
      ['POST', `${BASE}/nope/time-travel/restore`, { timestamp: Date.now() - 1000 }],
      ['POST', '/v1/applications/shop-empty/d1/databases/notes/query', { sql: 'SELECT 1' }],
    ] as const) {
      assertProblem(
        await call(node.url, method, path, { signer: shop, body }),
        404,
        'not-found',
        'No such D1 database',
      );
    }
    assertProblem(
      await call(node.url, 'GET', '/v1/applications/shop-empty/d1/databases/notes/time-travel', {
        signer: shop,
      }),
      404,
      'not-found',
      'No such D1 database',
      /^shop-empty has no serving deployment; deploy one whose d1_databases binds "notes"$/,
    );
  });

  test('a failing query: 400 invalid-input, The query failed, D1_ERROR with the SQLite code', async () => {
    assertProblem(
      await call(node.url, 'POST', query('notes'), { signer: shop, body: { sql: 'SELECT * FROM nope' } }),
      400,
      'invalid-input',
      'The query failed',
      /^D1_ERROR: no such table: nope: SQLITE_ERROR$/,
    );
    assertProblem(
      await call(node.url, 'POST', query('notes'), { signer: shop, rawBody: 'not json' }),
      400,
      'invalid-input',
      'The query failed',
      /^D1_ERROR: the request is not JSON$/,
    );
    assertProblem(
      await call(node.url, 'POST', query('notes'), {
        signer: shop,
        body: [{ sql: 'SELECT 1' }, { sql: 'SELEC 2' }],
      }),
      400,
      'invalid-input',
      'The query failed',
      /^D1_ERROR: near "SELEC": syntax error: SQLITE_ERROR$/,
    );
  });

  test('a query answers D1 result JSON with the session bookmark header', async () => {
    const response = await fetch(`${node.url}${query('notes')}?resultsFormat=ROWS_AND_COLUMNS`, {
      method: 'POST',
      headers: { authorization: await shop.bearer(), 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT ? AS a, ? AS b', params: [1, 'two'] }),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('x-cf-d1-session-commit-token') ?? '', /^[0-9a-f]+$/);
    const result = await response.json();
    assert.equal(result.success, true);
    assert.deepEqual(result.results, { columns: ['a', 'b'], rows: [[1, 'two']] });
  });

  test('a bad restore point: 400 invalid-input, Invalid restore point', async () => {
    const restore = `${BASE}/notes/time-travel/restore`;
    for (const [body, detail] of [
      [{}, /RFC 3339 time or Unix milliseconds/],
      [{ timestamp: 'soon' }, /RFC 3339 time or Unix milliseconds/],
      [{ timestamp: Date.now() + 3_600_000 }, /in the future/],
      [{ timestamp: new Date(Date.now() - 8 * 24 * 3_600_000).toISOString() }, /7 days/],
    ] as const) {
      assertProblem(
        await call(node.url, 'POST', restore, { signer: shop, body }),
        400,
        'invalid-input',
        'Invalid restore point',
        detail,
      );
    }
    assertProblem(
      await call(node.url, 'POST', restore, { signer: shop, rawBody: '{' }),
      400,
      'invalid-input',
      'Invalid restore point',
    );
  });

  test('scope: a key scoped to other-* and no token are refused on every route; a node token on the listing and info', async () => {
    for (const [method, path, body] of [
      ['GET', BASE, undefined],
      ['POST', query('notes'), { sql: 'SELECT 1' }],
      ['GET', `${BASE}/notes/time-travel`, undefined],
      ['POST', `${BASE}/notes/time-travel/restore`, { timestamp: Date.now() - 1000 }],
    ] as const) {
      assertProblem(
        await call(node.url, method, path, { signer: other, body }),
        403,
        'auth-scope',
        'Out of scope',
      );
      assertProblem(await call(node.url, method, path, { body }), 401, 'auth-invalid', 'Token rejected');
    }
    // Nodes send workers' queries and restores on to the holder; the listing and info are operators'.
    const nodeToken = await bucket.node('node-caller');
    for (const path of [BASE, `${BASE}/notes/time-travel`])
      assertProblem(
        await call(node.url, 'GET', path, { signer: nodeToken }),
        403,
        'auth-scope',
        'Operator key required',
      );
  });
});

describe('svc app delete', () => {
  test("removes the D1 databases' history with the application, and says so", async () => {
    const d1Prefix = `${keys.fleetPrefix(APP)}d1/`;
    assert.ok((await bucket.store.list(d1Prefix, { recursive: true })).objects.length > 0, 'history before');
    const deleted = await svc(['app', 'delete', '--force', ...asShop()]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(
      deleted.stdout.split('\n')[0]!,
      new RegExp(`^Deleted ${APP}: \\d+ store keys removed \\(the whole history of \\d D1 databases?\\)$`),
    );
    assert.deepEqual((await bucket.store.list(d1Prefix, { recursive: true })).objects, []);
  });
});
