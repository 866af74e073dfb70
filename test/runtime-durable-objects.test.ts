// Durable Objects in real workerd on one node (docs/bindings.md "Durable Objects"): the fixture app
// test/fixtures/durable-objects published with the real `cell publish` to MinIO and served by
// `cell serve`, its storage in the folder under the runtime's CELL_STATE_DIR. What each route must
// answer comes from Cloudflare's Durable Objects API docs (developers.cloudflare.com/durable-objects/
// api/: namespace, id, stub, state, storage, sql-storage, alarms, websockets): ids, stubs and RPC,
// the key-value and SQL storage, alarms (a throwing handler retried), hibernating WebSockets with a
// real WebSocket client, blockConcurrencyWhile, and the storage surviving a restart of the process.
// Then examples/durable-objects: concurrent increments, and a renamed class keeping its objects.
// Then the refusals `cell publish` makes before anything is uploaded.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type BucketEnv,
  type CellProcess,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  runCell,
  s3BucketEnv,
  startCell,
} from './helpers/cell.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const FIXTURE = resolve(import.meta.dirname, 'fixtures', 'durable-objects');
const minioStarting = useMinio();
const running: CellProcess[] = [];
after(async () => {
  await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
});

/** `cell serve` with its state (and so its objects) under `stateDir`, once it serves `deployment`. */
async function serve(
  application: string,
  bucket: BucketEnv,
  stateDir: string,
  deployment?: string,
): Promise<CellProcess> {
  const cell = await startCell(application, 'node-a', bucket, { CELL_STATE_DIR: stateDir });
  running.push(cell);
  await waitFor(
    async () => {
      const answer = await fetchText(`${cell.url}/.well-known/cell/health`);
      if (answer?.status !== 200) return false;
      return deployment === undefined || JSON.parse(answer.body).deployment === deployment;
    },
    () => `cell to serve ${application}\n${cell.stderr()}`,
    60_000,
  );
  return cell;
}

async function stop(cell: CellProcess): Promise<void> {
  await cell.stop('SIGTERM');
  running.splice(running.indexOf(cell), 1);
}

async function json(url: string, init?: RequestInit): Promise<Record<string, unknown>> {
  const answer = await fetchText(url, init);
  assert.ok(answer, `${url} answered`);
  assert.equal(answer.status, 200, `${url}: ${answer.body}`);
  return JSON.parse(answer.body);
}

/** A WebSocket client whose received messages a test can wait for. */
async function connect(url: string): Promise<{ socket: WebSocket; received: string[] }> {
  const socket = new WebSocket(url);
  const received: string[] = [];
  socket.addEventListener('message', (event) => received.push(String(event.data)));
  await new Promise<void>((resolveOpen, reject) => {
    socket.addEventListener('open', () => resolveOpen(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`${url} did not open`)), { once: true });
  });
  return { socket, received };
}

describe('Durable Objects in real workerd, on MinIO', () => {
  let minio: Minio;
  let bucket: BucketEnv;
  let stateDir: string;
  let cell: CellProcess;
  let deployment: string;

  before(async () => {
    minio = await minioStarting;
    bucket = s3BucketEnv(minio.bucketOptions(await minio.createBucket()));
    stateDir = tempDir('do-state-');
    // The load check runs the worker with its objects in its own throwaway folder, never here.
    const published = await runCell(['publish'], {
      cwd: FIXTURE,
      env: { ...bucket, CELL_APP: 'objects', CELL_STATE_DIR: stateDir },
    });
    assert.equal(published.code, 0, published.stderr);
    assert.deepEqual(readdirSync(stateDir), [], 'the load check left nothing in the state folder');
    deployment = JSON.parse(published.stdout.trimEnd().split('\n').at(-1)!).deployment;
    cell = await serve('objects', bucket, stateDir, deployment);
  });

  it('ids: idFromName, idFromString, newUniqueId; get, getByName and a second binding reach one object', async () => {
    const ids = await json(`${cell.url}/ids`);
    assert.equal(ids.nameStable, true);
    assert.equal(ids.namesDiffer, true);
    assert.equal(ids.hex, true, 'ids are 64 hex digits');
    assert.equal(ids.uniqueDiffers, true);
    assert.equal(ids.fromString, true);
    assert.equal(ids.name, 'a');
    assert.deepEqual(ids.badString, { error: 'TypeError: Invalid Durable Object ID: must be 64 hex digits' });
    assert.deepEqual(ids.otherNamespace, {
      error: 'TypeError: Durable Object ID is not valid for this namespace.',
    });
    assert.deepEqual(ids.sameObject, [1, 2, 3], 'one object reached three ways counts 1, 2, 3');
    const unique = ids.uniqueObject as { ok: { count: number; seen: { id: string; name: null } } };
    assert.equal(unique.ok.count, 5, 'idFromString of a unique id reaches the same object');
    assert.match(unique.ok.seen.id, /^[0-9a-f]{64}$/);
    assert.equal(unique.ok.seen.name, null);
    assert.deepEqual(ids.seen, { id: ids.idsId, name: 'ids' }, 'the object sees its own id and name');
  });

  it('stub.fetch and JS RPC: a count per object, an error with its type and message', async () => {
    assert.deepEqual(await json(`${cell.url}/count?name=rpc`), {
      count: 1,
      loadedAtStart: 0,
      path: '/count',
    });
    assert.deepEqual(await json(`${cell.url}/count?name=rpc`), {
      count: 2,
      loadedAtStart: 0,
      path: '/count',
    });
    assert.deepEqual(await json(`${cell.url}/rpc?name=rpc&n=5`), {
      add: 7,
      count: 7,
      fail: { error: 'RangeError: the object refused' },
    });
    assert.deepEqual(await json(`${cell.url}/count?name=other`), {
      count: 1,
      loadedAtStart: 0,
      path: '/count',
    });
  });

  it('ctx.storage key-value API: get and put of one and many, list options, delete, transactions, deleteAll', async () => {
    assert.deepEqual(await json(`${cell.url}/kv?name=kv`), {
      get: { three: [3] },
      getMissing: null,
      getMany: { a: 1, b: 'two' },
      list: ['a', 'b', 'c', 'd', 'e/1', 'e/2'],
      listPrefix: { 'e/1': 5, 'e/2': 6 },
      listRange: ['b', 'c'],
      listReverseLimit: ['e/2', 'e/1'],
      deleteOne: true,
      deleteAbsent: false,
      deleteMany: 2,
      afterDelete: ['d', 'e/1', 'e/2'],
      transactionRolledBack: { error: 'Error: roll back' },
      afterRollback: 4,
      explicitRollback: 'rolled back',
      transactionCommitted: 14,
      afterDeleteAll: 0,
    });
  });

  it('ctx.storage.sql.exec: cursor, toArray, one, raw, rowsRead and rowsWritten, errors, transactionSync', async () => {
    assert.deepEqual(await json(`${cell.url}/sql?name=sql`), {
      inserted: { rowsWritten: 3 },
      columnNames: ['id', 'v'],
      iterated: [
        { id: 2, v: 'b' },
        { id: 3, v: 'c' },
      ],
      cursorRowsRead: 2,
      toArray: [{ v: 'a' }, { v: 'b' }, { v: 'c' }],
      one: { n: 3 },
      raw: [[1, 'a']],
      oneOfNone: 'Expected exactly one result from SQL query, but got no results.',
      updated: { rowsRead: 2, rowsWritten: 2 },
      syntax: 'near "SELEC": syntax error at offset 0: SQLITE_ERROR',
      transactionSync: 0,
      databaseSize: true,
    });
  });

  it('a new_classes class has the key-value API and, as on Cloudflare, no SQL', async () => {
    const notes = await json(`${cell.url}/notes?name=notes`);
    assert.deepEqual(notes.write, { k: 'v' });
    assert.match(
      (notes.sql as { error: string }).error,
      /^Error: SQL is not enabled for this Durable Object class\./,
    );
  });

  it('alarms: setAlarm, getAlarm, deleteAlarm; the alarm runs once and is cleared', async () => {
    const later = (await json(`${cell.url}/alarm/set?name=alarm&in=3600000`)).alarm as number;
    assert.ok(later > Date.now() + 3_500_000, `an alarm an hour on, got ${later}`);
    assert.deepEqual(await json(`${cell.url}/alarm/get?name=alarm`), { alarm: later });
    assert.deepEqual(await json(`${cell.url}/alarm/delete?name=alarm`), { alarm: null });
    await json(`${cell.url}/alarm/set?name=alarm&in=100`);
    const state = await waitFor(async () => {
      const s = await json(`${cell.url}/alarm/state?name=alarm`);
      return s.fired === 1 && s.alarm === null ? s : null;
    }, 'the alarm to run');
    assert.deepEqual(state!.info, { retryCount: 0, isRetry: false });
  });

  it('an alarm handler that throws is run again, told it is a retry', async () => {
    await json(`${cell.url}/flaky/arm?name=flaky`);
    const runs = await waitFor(async () => {
      const r = await json(`${cell.url}/flaky/runs?name=flaky`);
      return r.runs === 2 && r.alarm === null ? r : null;
    }, 'the retry to run and succeed');
    assert.deepEqual(runs!.infos, [
      { retryCount: 0, isRetry: false },
      { retryCount: 1, isRetry: true },
    ]);
  });

  it('blockConcurrencyWhile: a call arriving during the block waits for its end', async () => {
    assert.deepEqual(await json(`${cell.url}/block?name=block`), {
      block: ['block started', 'block ended'],
      after: ['block started', 'block ended', 'after'],
    });
  });

  it('hibernating WebSockets: accepted with tags, messages, getWebSockets, broadcast, webSocketClose', async () => {
    const base = `${cell.url.replace(/^http/, 'ws')}/ws?name=chat`;
    const alice = await connect(`${base}&tag=alice`);
    const bob = await connect(`${base}&tag=bob`);
    try {
      alice.socket.send('hello');
      await waitFor(() => alice.received.includes('echo:hello tag:alice'), 'the echo');
      bob.socket.send('count');
      await waitFor(() => bob.received.includes('sockets:2 tagged:1'), 'the count of sockets');
      alice.socket.send('broadcast');
      await waitFor(
        () =>
          alice.received.includes('broadcast from alice') && bob.received.includes('broadcast from alice'),
        'the broadcast to both',
      );
      alice.socket.close(4000, 'bye');
      const closed = await waitFor(async () => {
        const c = (await json(`${cell.url}/closed?name=chat`)).closed as unknown[];
        return c.length > 0 ? c : null;
      }, 'webSocketClose to run');
      assert.deepEqual(closed, [{ tag: 'alice', code: 4000, reason: 'bye' }]);
      bob.socket.send('count');
      await waitFor(() => bob.received.includes('sockets:1 tagged:1'), 'one socket left');
    } finally {
      alice.socket.close();
      bob.socket.close();
    }
  });

  it('the storage survives the process stopped and started again on the same folder: counts, SQL rows, a pending alarm', async () => {
    for (let i = 1; i <= 3; i++) assert.equal((await json(`${cell.url}/count?name=persist`)).count, i);
    await json(`${cell.url}/sql?name=persist`);
    const alarm = (await json(`${cell.url}/alarm/set?name=persist&in=3600000`)).alarm;
    await stop(cell);

    // workerd's layout (runtime/src/workerd.ts WorkerdPlan.durableObjects): a folder per class, named
    // by its storage key; the renamed class keeps the folder of its first name.
    const objects = join(stateDir, 'objects', 'objects');
    assert.deepEqual(readdirSync(objects).sort(), ['objects-Flaky', 'objects-Notes', 'objects-Room']);
    const room = readdirSync(join(objects, 'objects-Room'));
    assert.ok(room.includes('metadata.sqlite'), room.join(' '));
    assert.ok(
      room.some((f) => /^[0-9a-f]{64}\.sqlite$/.test(f)),
      room.join(' '),
    );

    cell = await serve('objects', bucket, stateDir, deployment);
    assert.deepEqual(await json(`${cell.url}/count?name=persist`), {
      count: 4,
      loadedAtStart: 3,
      path: '/count',
    });
    assert.deepEqual(await json(`${cell.url}/sql/rows?name=persist`), {
      rows: [{ v: 'a' }, { v: 'z' }, { v: 'z' }],
    });
    assert.deepEqual(await json(`${cell.url}/alarm/get?name=persist`), { alarm });
  });
});

describe('examples/durable-objects', () => {
  it('counts concurrent increments exactly; a renamed class keeps its objects, a deleted one drops them', async () => {
    const bucket = dirBucketEnv(tempDir('do-bucket-'));
    const stateDir = tempDir('do-state-');
    const project = copyProject(join(EXAMPLES, 'durable-objects'));
    const first = await publish(project, 'counter', bucket);
    assert.equal(first.code, 0, first.stderr);
    const cell = await serve('counter', bucket, stateDir, first.published!.deployment);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => json(`${cell.url}/visits`, { method: 'POST' })),
    );
    assert.deepEqual(
      answers.map((a) => a.count).sort((a, b) => Number(a) - Number(b)),
      Array.from({ length: 20 }, (_, i) => i + 1),
      'each increment saw its own count',
    );
    assert.deepEqual(await json(`${cell.url}/visits`), { name: 'visits', count: 20 });

    // The class renamed by a migration: the running process switches to the new deployment and
    // the object answers with the count it kept.
    const config = join(project, 'cell.jsonc');
    writeFileSync(
      config,
      readFileSync(config, 'utf8')
        .replace('"class_name": "Counter"', '"class_name": "Tally"')
        .replace(
          '[{ "tag": "v1", "new_sqlite_classes": ["Counter"] }]',
          '[{ "tag": "v1", "new_sqlite_classes": ["Counter"] }, { "tag": "v2", "renamed_classes": [{ "from": "Counter", "to": "Tally" }] }]',
        ),
    );
    const source = join(project, 'src', 'index.js');
    writeFileSync(source, readFileSync(source, 'utf8').replace('export class Counter', 'export class Tally'));
    assert.match(readFileSync(config, 'utf8'), /"class_name": "Tally".*"renamed_classes"/s);
    assert.match(readFileSync(source, 'utf8'), /export class Tally/);
    const renamed = await publish(project, 'counter', bucket);
    assert.equal(renamed.code, 0, renamed.stderr);
    await waitFor(async () => {
      const health = await fetchText(`${cell.url}/.well-known/cell/health`);
      return health && JSON.parse(health.body).deployment === renamed.published!.deployment;
    }, 'the renamed deployment to serve');
    assert.deepEqual(await json(`${cell.url}/visits`, { method: 'POST' }), { name: 'visits', count: 21 });
    assert.ok(existsSync(join(stateDir, 'objects', 'counter', 'counter-Counter')));

    // The class deleted by a migration (its binding removed): its objects go when that deployment starts.
    writeFileSync(
      config,
      readFileSync(config, 'utf8')
        .replace(/"durable_objects": \{[\s\S]*?\n {2}\},\n/, '')
        .replace('"to": "Tally" }] }]', '"to": "Tally" }] }, { "tag": "v3", "deleted_classes": ["Tally"] }]'),
    );
    assert.match(
      readFileSync(config, 'utf8'),
      /^(?![\s\S]*durable_objects)[\s\S]*"deleted_classes": \["Tally"\]/,
    );
    const deleted = await publish(project, 'counter', bucket);
    assert.equal(deleted.code, 0, deleted.stderr);
    await waitFor(async () => {
      const health = await fetchText(`${cell.url}/.well-known/cell/health`);
      return health && JSON.parse(health.body).deployment === deleted.published!.deployment;
    }, 'the deployment deleting the class to serve');
    assert.deepEqual(readdirSync(join(stateDir, 'objects', 'counter')), []);
  });
});

describe('a cron trigger reaches the same objects', () => {
  it("the scheduled handler (run in a copy of the worker) increments the serving worker's object", {
    timeout: 120_000,
  }, async () => {
    const bucket = dirBucketEnv(tempDir('do-bucket-'));
    const project = copyProject(join(EXAMPLES, 'durable-objects'));
    const config = join(project, 'cell.jsonc');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(
        '"compatibility_date": "2025-09-01",',
        '"compatibility_date": "2025-09-01", "triggers": { "crons": ["* * * * *"] },',
      ),
    );
    const source = join(project, 'src', 'index.js');
    writeFileSync(
      source,
      readFileSync(source, 'utf8').replace(
        'export default {\n',
        "export default {\n  async scheduled(event, env) {\n    await env.COUNTER.getByName('cron').increment();\n  },\n",
      ),
    );
    assert.match(readFileSync(source, 'utf8'), /async scheduled/);
    const published = await publish(project, 'cron-objects', bucket);
    assert.equal(published.code, 0, published.stderr);
    const cell = await serve('cron-objects', bucket, tempDir('do-state-'), published.published!.deployment);
    assert.deepEqual(await json(`${cell.url}/cron`, { method: 'POST' }), { name: 'cron', count: 1 });
    // The next minute's run adds one to the object the fetch handler reached: one instance, not two.
    await waitFor(
      async () => (await json(`${cell.url}/cron`)).count === 2,
      () => `the cron run to increment the object\n${cell.stderr()}`,
      75_000,
    );
  });
});

describe('cell publish refuses what it cannot run, before anything is uploaded', () => {
  it('a class the main module does not export fails the load check, naming it', async () => {
    const bucketDir = tempDir('do-bucket-');
    const project = copyProject(join(EXAMPLES, 'durable-objects'));
    const source = join(project, 'src', 'index.js');
    writeFileSync(source, readFileSync(source, 'utf8').replace('export class Counter', 'class Counter'));
    const result = await publish(project, 'counter', dirBucketEnv(bucketDir));
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /^cell: the worker cannot serve: it was started in workerd and .*the main module index\.js does not export the Durable Object class Counter, which the migrations create: export it \(export class Counter extends DurableObject \{ \.\.\. \}\), or delete it with a deleted_classes migration/m,
    );
    assert.deepEqual(readdirSync(bucketDir), [], 'nothing was uploaded');
  });

  it("a binding to another worker's class is refused at its key", async () => {
    const bucketDir = tempDir('do-bucket-');
    const project = copyProject(join(EXAMPLES, 'durable-objects'));
    const config = join(project, 'cell.jsonc');
    const text = readFileSync(config, 'utf8').replace(
      '"class_name": "Counter" }',
      '"class_name": "Counter", "script_name": "billing" }',
    );
    writeFileSync(config, text);
    const result = await publish(project, 'counter', dirBucketEnv(bucketDir));
    assert.equal(result.code, 1);
    const line = text.split('\n').findIndex((l) => l.includes('"script_name"')) + 1;
    const column = text.split('\n')[line - 1]!.indexOf('"script_name"') + 1;
    assert.equal(
      result.stderr.trim().split('\n').at(-1),
      `cell: cell.jsonc:${line}:${column}: "durable_objects.bindings[0].script_name" is not supported: a binding reaches this worker's own Durable Object classes only (each application runs its own); reach "billing"'s objects through a service binding to it`,
    );
    assert.deepEqual(readdirSync(bucketDir), [], 'nothing was uploaded');
  });
});
