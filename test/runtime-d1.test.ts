// D1 in real workerd (docs/bindings.md "D1 databases"): examples/d1 published with the real
// `cell publish` and served by `cell serve`, whose private runtime host answers workerd's D1
// binding (workerd's own `cloudflare-internal:d1-api` module), on the local-directory bucket and on
// MinIO. What /conformance must see comes from Cloudflare's D1 docs
// (developers.cloudflare.com/d1/worker-api/prepared-statements/, .../d1-database/, .../return-object/)
// and Miniflare's D1 tests (workers-sdk packages/miniflare/test/plugins/d1/suite.ts): the result
// shapes, D1's types (booleans bound as 1 and 0, a BLOB read back as its bytes), `batch()` all or
// nothing, `D1_ERROR: <SQLite's message>: SQLITE_<CODE>` and `D1_TYPE_ERROR`, and D1's limits
// (developers.cloudflare.com/d1/platform/limits/) at and one past each.
//
// Then the failures: the owner killed with SIGKILL while a client writes (every acknowledged row
// is served by the node that takes over), and the owner stopped with SIGSTOP past its lease (its
// writes after it wakes are refused, and none of them reaches the database).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type BucketEnv,
  type CellProcess,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  processTree,
  publish,
  s3BucketEnv,
  startServing,
} from './helpers/cell.ts';
import { type Minio, useMinio } from './helpers/minio.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const minioStarting = useMinio();
const running: CellProcess[] = [];
after(async () => {
  await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
});

async function serve(application: string, node: string, bucket: BucketEnv): Promise<CellProcess> {
  const cell = await startServing(application, node, bucket);
  running.push(cell);
  return cell;
}

async function json(url: string): Promise<Record<string, unknown>> {
  const answer = await fetchText(url);
  assert.ok(answer, `${url} answered`);
  return JSON.parse(answer.body);
}

type Outcome = { ok?: unknown; error?: string };

function checkConformance(r: Record<string, Outcome>): void {
  assert.deepEqual(r.exec, { ok: { count: 4, hasDuration: true } });
  assert.deepEqual(r.run, {
    ok: {
      success: true,
      changes: 1,
      last_row_id: 1,
      changed_db: true,
      rows_written: 1,
      sizeAfter: true,
      hasDuration: true,
    },
  });
  assert.deepEqual(r.nullAndFloat, { ok: 2 });
  assert.deepEqual(r.all, {
    ok: {
      success: true,
      results: [
        { id: 1, n: 42, nt: 'integer', t: 'héllo', b: [0, 1, 255], f: 1 },
        { id: 2, n: null, nt: 'null', t: 1.5, b: null, f: null },
      ],
      rowsRead: 2,
      hasDuration: true,
    },
  });
  assert.deepEqual(r.first, { ok: { id: 1, t: 'héllo' } });
  assert.deepEqual(r.firstColumn, { ok: 'héllo' });
  assert.deepEqual(r.firstNone, { ok: null });
  assert.deepEqual(r.raw, {
    ok: [
      [1, 42],
      [2, null],
    ],
  });
  assert.deepEqual(r.rawColumns, {
    ok: [
      ['id', 'n'],
      [1, 42],
      [2, null],
    ],
  });
  assert.deepEqual(r.batch, { ok: [[], [], [{ c: 2 }]] });
  assert.deepEqual(r.batchAtomic, { error: 'D1_ERROR: UNIQUE constraint failed: u.a: SQLITE_CONSTRAINT' });
  assert.deepEqual(r.afterFailedBatch, { ok: 2 }, 'the failed batch left nothing behind');
  assert.deepEqual(r.missingTable, { error: 'D1_ERROR: no such table: nope: SQLITE_ERROR' });
  assert.match(r.syntax?.error ?? '', /^D1_ERROR: near "SELEC": syntax error: SQLITE_ERROR$/);
  assert.match(r.badType?.error ?? '', /^D1_TYPE_ERROR: Type 'object' not supported/);
  assert.match(r.execError?.error ?? '', /^D1_EXEC_ERROR: .*no such table: nope/);
  assert.match(r.transaction?.error ?? '', /^D1_ERROR: cannot start a transaction within a transaction/);
  assert.deepEqual(r.session, { ok: { bookmark: true, count: 3 } });
  assert.deepEqual(r.multiStatement, { ok: 4 });
  // D1's limits (developers.cloudflare.com/d1/platform/limits/), failing in D1's words: SQLite's
  // message, then D1's `: SQLITE_<CODE>`.
  assert.deepEqual(r.params100, { ok: 100 });
  assert.match(r.params101?.error ?? '', /^D1_ERROR: too many SQL variables\b.*: SQLITE_ERROR$/);
  assert.deepEqual(r.statement100k, { ok: 1 });
  assert.match(r.statementTooLong?.error ?? '', /^D1_ERROR: statement too long\b.*: SQLITE_TOOBIG$/);
  assert.deepEqual(r.string2m, { ok: 2_000_000 });
  assert.deepEqual(r.stringTooBig, { error: 'D1_ERROR: string or blob too big: SQLITE_TOOBIG' });
  assert.deepEqual(r.blobTooBig, { error: 'D1_ERROR: string or blob too big: SQLITE_TOOBIG' });
  assert.deepEqual(r.madeTooBig, { error: 'D1_ERROR: string or blob too big: SQLITE_TOOBIG' });
  assert.deepEqual(r.afterTooBig, { ok: 2 }, 'no refused value reached the table');
}

describe('D1 in real workerd', () => {
  it('answers the D1 API as Cloudflare documents it, on the local-directory bucket', async () => {
    const bucket = dirBucketEnv(tempDir('d1-dir-'));
    const published = await publish(join(EXAMPLES, 'd1'), 'd1-dir', bucket);
    assert.equal(published.code, 0, published.stderr);
    const cell = await serve('d1-dir', 'node-a', bucket);
    checkConformance((await json(`${cell.url}/conformance`)) as Record<string, Outcome>);
  });

  describe('on MinIO', () => {
    let minio: Minio;
    before(async () => {
      minio = await minioStarting;
    });

    it('with the bucket frozen, a write fails with D1_ERROR and never hangs, reads on the holder go on, and nothing is lost once it thaws', async () => {
      const name = await minio.createBucket();
      const bucket = s3BucketEnv(minio.bucketOptions(name));
      assert.equal((await publish(join(EXAMPLES, 'd1'), 'd1-frozen', bucket)).code, 0);
      const a = await serve('d1-frozen', 'node-a', bucket);
      assert.ok((await json(`${a.url}/insert?v=before`)).id);
      minio.freeze();
      try {
        const refused = await fetchText(`${a.url}/insert?v=during`, { signal: AbortSignal.timeout(60_000) });
        assert.ok(refused, 'the write was answered');
        assert.match(
          JSON.parse(refused.body).error,
          /^D1_ERROR: the bucket did not take the write: .*SQLITE_IOERR$/,
        );
        // The failed write took the store's whole deadline, longer than the lease: reads go on past it.
        const read = (await json(`${a.url}/count`)) as { count: number; values: string[] };
        assert.deepEqual(read.values.slice(0, 1), ['before']);
      } finally {
        minio.thaw();
      }
      // The freeze outlasted the lease, so the node may take the database again first: a write
      // refused on the way says it may not have been applied, so each try writes its own value.
      let tries = 0;
      const after = await waitFor(
        async () => {
          const value = `after-${tries++}`;
          return (await json(`${a.url}/insert?v=${value}`)).id ? value : undefined;
        },
        'a write acknowledged once the bucket answers again',
        60_000,
      );
      await a.stop('SIGTERM');
      const b = await serve('d1-frozen', 'node-b', bucket);
      const rows = (await json(`${b.url}/count`)) as { values: string[] };
      const refused = (v: string) => v === 'during' || (v.startsWith('after-') && v !== after);
      assert.deepEqual(
        rows.values.filter((v) => !refused(v)),
        ['before', after],
        'every acknowledged row; the refused ones may or may not be there',
      );
    });

    it('answers the same on a real S3 server, and another node restores every row after a clean stop', async () => {
      const name = await minio.createBucket();
      const bucket = s3BucketEnv(minio.bucketOptions(name), { prefix: 'fleet-d1/' });
      const published = await publish(join(EXAMPLES, 'd1'), 'd1-m', bucket);
      assert.equal(published.code, 0, published.stderr);
      const a = await serve('d1-m', 'node-a', bucket);
      checkConformance((await json(`${a.url}/conformance`)) as Record<string, Outcome>);
      for (const v of ['one', 'two', 'three']) assert.ok((await json(`${a.url}/insert?v=${v}`)).id);
      await a.stop('SIGTERM');
      const b = await serve('d1-m', 'node-b', bucket);
      assert.deepEqual(await json(`${b.url}/count`), { count: 3, values: ['one', 'two', 'three'] });
    });
  });
});

describe('D1 when its owner fails', () => {
  it('SIGKILL of the owner under writes: the next node serves every acknowledged row', async () => {
    const bucket = dirBucketEnv(tempDir('d1-kill-'));
    assert.equal((await publish(join(EXAMPLES, 'd1'), 'd1-kill', bucket)).code, 0);
    const a = await serve('d1-kill', 'node-a', bucket);
    const b = await serve('d1-kill', 'node-b', bucket);
    const acknowledged: string[] = [];
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop; i++) {
        const answer = await fetchText(`${a.url}/insert?v=row-${i}`);
        if (answer?.status === 200 && JSON.parse(answer.body).id) acknowledged.push(`row-${i}`);
      }
    })();
    await waitFor(async () => acknowledged.length >= 30, 'the writer to have 30 acknowledged rows', 60_000);
    const killedAt = Date.now();
    for (const pid of processTree(a.child.pid!)) process.kill(pid, 'SIGKILL');
    stop = true;
    await writer;
    const served = await waitFor(
      async () => {
        const answer = await fetchText(`${b.url}/count`);
        if (answer?.status !== 200) return undefined;
        const body = JSON.parse(answer.body);
        return body.values ? (body as { count: number; values: string[] }) : undefined;
      },
      'node b to take the database over',
      60_000,
    );
    const takeoverMs = Date.now() - killedAt;
    const missing = acknowledged.filter((v) => !served?.values.includes(v));
    assert.deepEqual(missing, [], `every acknowledged row survives (${acknowledged.length} acknowledged)`);
    console.log(`# takeover after SIGKILL: ${takeoverMs} ms, ${acknowledged.length} rows acknowledged`);
  });

  it('SIGSTOP of the owner past its lease: once woken, its writes are refused and reach nothing', async () => {
    const bucket = dirBucketEnv(tempDir('d1-stop-'));
    assert.equal((await publish(join(EXAMPLES, 'd1'), 'd1-stop', bucket)).code, 0);
    const a = await serve('d1-stop', 'node-a', bucket);
    const b = await serve('d1-stop', 'node-b', bucket);
    assert.ok((await json(`${a.url}/insert?v=before`)).id);
    const stopped = processTree(a.child.pid!);
    for (const pid of stopped) process.kill(pid, 'SIGSTOP');
    try {
      await waitFor(
        async () => ((await json(`${b.url}/count`)) as { count?: number }).count === 1,
        'node b to take the database over',
        60_000,
      );
      assert.ok((await json(`${b.url}/insert?v=from-b`)).id);
    } finally {
      for (const pid of stopped) process.kill(pid, 'SIGCONT');
    }
    const late = await json(`${a.url}/insert?v=late`);
    assert.match(String(late.error), /^D1_ERROR: /, 'the woken owner refuses the write');
    assert.deepEqual(await json(`${b.url}/count`), { count: 2, values: ['before', 'from-b'] });
  });
});
