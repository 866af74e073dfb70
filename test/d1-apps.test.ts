// What Cloudflare's D1 templates rely on (docs/deploys.md "Cloudflare's D1 templates"), in two
// apps of our own under test/fixtures/d1-apps/, deployed with `svc deploy` to a real `svc sail`
// running the real runtime on real MinIO, their migrations applied with the real `svc d1
// migrations apply`, and driven with real requests:
// - `ledger`: D1's Sessions API as apps use it: a session per request continued from the
//   `x-d1-bookmark` header (`first-unconstrained` without one, `first-primary` asked for), its
//   bookmark answered back, read-after-write within a session, a table created on demand by a
//   multi-statement `prepare()` after the app matched D1's "no such table" message.
// - `notes-api`: chanfana's D1 endpoints on Hono (the library Cloudflare's OpenAPI template is
//   built on), installed from the npm registry with its lockfile into a cache under
//   `.tools/framework-builds/` (helpers/framework-build.ts): create, list (search, order, pages),
//   read, update, its validation refusals, and the OpenAPI document and Swagger UI it serves, over
//   a table a migration created and seeded.

import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { keyArg } from './helpers/applications.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { frameworkBuildDir, installFrameworkProject } from './helpers/framework-build.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type RunResult, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const APPS = resolve(import.meta.dirname, 'fixtures', 'd1-apps');
const SERVE_DEADLINE_MS = 60_000;

/** A fixture app's files, by path relative to its folder. */
function appFiles(name: string): Record<string, string> {
  const root = join(APPS, name);
  const files: Record<string, string> = {};
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(root, path)] = readFileSync(path, 'utf8');
  }
  return files;
}

const NOTES_FILES = appFiles('notes-api');
const NOTES_DIR = frameworkBuildDir('d1-notes-api', NOTES_FILES);

// At the top level, so MinIO lives until the file ends.
const minioStarting = useMinio();

let store: Store | undefined;
let node: SailProcess | undefined;
let admin: Signer;
let installProblem: string | null = null;
const home = tempDir('svc-home-');

/** `svc <args>` against the node with the admin key, run in `cwd` (the project's folder). */
function svc(args: string[], cwd?: string): Promise<RunResult> {
  return runSvc([...args, '--node', (node as SailProcess).url, '--key', keyArg(admin)], {
    cwd,
    env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
    timeoutMs: 180_000,
  });
}

/** The port of the application's ready process on the node, once there is one. */
async function portOf(application: string): Promise<number> {
  const ports = (await waitFor(
    async () => {
      const record = await getJson<NodeRecord>(store as Store, keys.nodeRecord((node as SailProcess).nodeId));
      const ready = (record?.value.processes ?? []).filter((p) => p.application === application && p.ready);
      return ready.length > 0 ? ready.map((p) => p.port) : null;
    },
    () => `${application} to be ready\n${node?.log().slice(-3000)}`,
    SERVE_DEADLINE_MS,
  )) as number[];
  return ports[0] as number;
}

/** Deploys the project in `dir` and answers the base URL of its process. */
async function deploy(dir: string, application: string): Promise<string> {
  const deployed = await svc(['deploy', dir]);
  assert.equal(deployed.code, 0, deployed.stderr);
  return `http://127.0.0.1:${await portOf(application)}`;
}

before(async () => {
  installProblem = installFrameworkProject(NOTES_DIR, NOTES_FILES, ['--omit=dev']);
  if (installProblem) return;
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'), 'admin', ['*']);
  node = await startSail([
    '--endpoint',
    options.endpoint,
    '--region',
    options.region,
    '--bucket',
    options.bucket,
    '--access-key',
    options.accessKey,
    '--secret-key',
    options.secretKey,
    '--cell-bin',
    CELL_REAL,
  ]);
});
after(async () => {
  await node?.stop();
  await store?.close();
});

describe("D1's Sessions API as an app uses it (ledger)", () => {
  it('continues a session from the x-d1-bookmark header: bookmarks grow, a write is read back, first-primary sees everything', async () => {
    assert.equal(installProblem, null, 'the apps install from the registry');
    const project = tempDir('svc-d1-ledger-');
    cpSync(join(APPS, 'ledger'), project, { recursive: true });
    const base = await deploy(project, 'd1-ledger');
    const call = async (method: string, path: string, bookmark?: string, body?: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: bookmark === undefined ? {} : { 'x-d1-bookmark': bookmark },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return {
        status: response.status,
        bookmark: response.headers.get('x-d1-bookmark'),
        body: (await response.json()) as Record<string, unknown>,
      };
    };

    // Before its table exists the app sees D1's own message, which apps match on.
    const missing = await call('GET', '/entries');
    assert.equal(missing.status, 500);
    assert.equal(missing.body.error, 'Error: D1_ERROR: no such table: entries: SQLITE_ERROR');

    const reset = await call('POST', '/reset');
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    assert.deepEqual(reset.body, { success: true, changedDb: true });
    const afterReset = reset.bookmark as string;
    assert.match(afterReset, /^[0-9a-f]{16}$/, 'a write leaves a bookmark');

    const first = await call('POST', '/entries', afterReset, { id: 'a', amount: 5 });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(first.body, { changes: 1, entries: [{ id: 'a', amount: 5 }] }, 'read after write');
    const afterFirst = first.bookmark as string;
    assert.ok(afterFirst > afterReset, `bookmarks only grow: ${afterFirst} after ${afterReset}`);

    const second = await call('POST', '/entries', undefined, { id: 'b', amount: 7 });
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.ok(
      (second.bookmark as string) > afterFirst,
      'an unconstrained session answers the newest bookmark',
    );

    // An older bookmark is only a lower bound: the read is at least as new, and answers the newest.
    const read = await call('GET', '/entries', afterFirst);
    assert.deepEqual(read.body, {
      entries: [
        { id: 'a', amount: 5 },
        { id: 'b', amount: 7 },
      ],
    });
    assert.equal(read.bookmark, second.bookmark);
    const primary = await call('GET', '/entries', 'first-primary');
    assert.deepEqual(primary.body, read.body);
    assert.equal(primary.bookmark, second.bookmark);

    // A failed write answers D1's failure and moves no bookmark.
    const duplicate = await call('POST', '/entries', second.bookmark as string, { id: 'a', amount: 1 });
    assert.equal(duplicate.status, 500);
    assert.equal(
      duplicate.body.error,
      'Error: D1_ERROR: UNIQUE constraint failed: entries.id: SQLITE_CONSTRAINT',
    );
    assert.equal((await call('GET', '/entries')).bookmark, second.bookmark);

    // What the worker wrote is what svc d1 reads through the node.
    const executed = await svc(
      [
        'd1',
        'execute',
        'ledger',
        '--command',
        'SELECT sum(amount) AS total FROM entries',
        '--json',
        '--name',
        'd1-ledger',
      ],
      project,
    );
    assert.equal(executed.code, 0, executed.stderr);
    assert.deepEqual((JSON.parse(executed.stdout) as { results: unknown[] }[])[0]?.results, [{ total: 12 }]);

    const again = await call('POST', '/reset', second.bookmark as string);
    assert.ok((again.bookmark as string) > (second.bookmark as string));
    assert.deepEqual((await call('GET', '/entries', again.bookmark as string)).body, { entries: [] });
  });
});

describe("chanfana's D1 endpoints (notes-api)", () => {
  it('migrations applied with svc d1, then create, list, search, pages, read, update, delete and the OpenAPI document', async () => {
    assert.equal(installProblem, null, 'the apps install from the registry');
    const base = await deploy(NOTES_DIR, 'd1-notes-api');

    const pending = await svc(['d1', 'migrations', 'list', 'notes-db', '--name', 'd1-notes-api'], NOTES_DIR);
    assert.equal(pending.code, 0, pending.stderr);
    assert.match(pending.stdout, /^NAME\s*\n0001_create_notes\.sql\s*\n$/);
    const applied = await svc(['d1', 'migrations', 'apply', 'notes-db', '--name', 'd1-notes-api'], NOTES_DIR);
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(applied.stdout, /^applied 0001_create_notes\.sql\n/);
    const none = await svc(['d1', 'migrations', 'apply', 'notes-db', '--name', 'd1-notes-api'], NOTES_DIR);
    assert.match(none.stdout, /^No migrations to apply to D1 database notes-db of d1-notes-api /);

    const json = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const seeded = { id: 1, title: 'Welcome', body: 'Seeded by the first migration', pinned: true };
    const listed = await json('GET', '/notes');
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.deepEqual(listed.body.result, [seeded]);

    const created = [];
    for (const note of [
      { title: 'Groceries', body: 'milk, bread', pinned: false },
      { title: 'Trip', body: 'book the train', pinned: true },
    ]) {
      const answer = await json('POST', '/notes', note);
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
      assert.equal(answer.body.success, true);
      created.push(answer.body.result as { id: number });
    }
    assert.deepEqual(
      created.map((n) => n.id),
      [2, 3],
      'AUTOINCREMENT ids, answered by INSERT … RETURNING',
    );

    const all = await json('GET', '/notes');
    assert.deepEqual(
      (all.body.result as { id: number }[]).map((n) => n.id),
      [3, 2, 1],
      'id DESC',
    );
    assert.deepEqual(all.body.result_info, { count: 3, page: 1, per_page: 20, total_count: 3 });
    const searched = await json('GET', '/notes?search=bread');
    assert.deepEqual(
      (searched.body.result as { title: string }[]).map((n) => n.title),
      ['Groceries'],
    );
    const page = await json('GET', '/notes?page=2&per_page=2');
    assert.deepEqual(page.body.result, [seeded]);
    assert.deepEqual(page.body.result_info, { count: 1, page: 2, per_page: 2, total_count: 3 });

    const read = await json('GET', '/notes/2');
    assert.equal(read.status, 200);
    assert.deepEqual(read.body.result, { id: 2, title: 'Groceries', body: 'milk, bread', pinned: false });
    const absent = await json('GET', '/notes/99');
    assert.equal(absent.status, 404);
    assert.equal(absent.body.success, false);

    const updated = await json('PUT', '/notes/2', {
      title: 'Groceries',
      body: 'milk, bread, eggs',
      pinned: true,
    });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    assert.deepEqual(updated.body.result, {
      id: 2,
      title: 'Groceries',
      body: 'milk, bread, eggs',
      pinned: true,
    });
    assert.deepEqual((await json('GET', '/notes/2')).body.result, updated.body.result);

    const invalid = await json('POST', '/notes', { title: 1 });
    assert.equal(invalid.status, 400, 'chanfana refuses a body its schema does not take');
    assert.equal(invalid.body.success, false);
    assert.equal(((await json('GET', '/notes')).body.result as unknown[]).length, 3, 'nothing written');

    const deleted = await json('DELETE', '/notes/3');
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.deepEqual(deleted.body.result, { id: 3, title: 'Trip', body: 'book the train', pinned: true });
    assert.equal((await json('GET', '/notes/3')).status, 404);
    assert.equal((await json('DELETE', '/notes/3')).status, 404, 'a second delete finds nothing');

    const document = await json('GET', '/openapi.json');
    assert.equal(document.status, 200);
    assert.equal((document.body.info as { title: string }).title, 'Notes');
    assert.deepEqual(Object.keys(document.body.paths as object).sort(), ['/notes', '/notes/{id}']);
    const docs = await fetch(`${base}/docs`);
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /<title>SwaggerUI<\/title>/);
  });
});
