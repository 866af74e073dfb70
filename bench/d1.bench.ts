// D1 (docs/bindings.md "D1 databases"): what shipping every write to the bucket before answering
// costs, and how fast a database moves when its node dies.
//   Writes:   single-row INSERT transactions on one database through the node's D1 service
//             (the code that answers workerd's binding), one writer after another and 16 at once
//             (group commit), against the same SQLite (WAL mode, same pragmas) without shipping,
//             in one run: transactions/s, p50/p99 latency, the ratio, and bucket requests per
//             1,000 writes, counted by a proxy in front of MinIO.
//   Reads:    a SELECT of a 20-row table through a worker in real workerd (examples/d1 `/count`),
//             p50/p99 from the client: under `cell serve` on the holder, and under two `svc sail`
//             daemons on the holder's node and on the other node (forwarded to the holder).
//   Takeover: the holder (`cell serve`, its runtime host and workerd) killed with SIGKILL; the
//             time until the other node's worker answers with every row.
// Run: scripts/with-node node bench/d1.bench.ts [writes]   (default 1000)
// Real parts: MinIO behind a counting proxy (test/helpers/s3-proxy.ts), node:sqlite, the real
// `cell publish` and `cell serve`, workerd.

import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { D1Service } from '../runtime/src/bindings/d1.ts';
import { runQueries } from '../runtime/src/bindings/d1-engine.ts';
import { openStore } from '../src/store/open.ts';
import { keyArg, openBucket, readyAppUrl } from '../test/helpers/applications.ts';
import {
  EXAMPLES,
  fetchText,
  processTree,
  publish,
  s3BucketEnv,
  startServing,
} from '../test/helpers/cell.ts';
import { CELL_REAL } from '../test/helpers/deploys.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { startS3Proxy } from '../test/helpers/s3-proxy.ts';
import { runSvc, tempDir } from '../test/helpers/svc.ts';

const writes = Number(process.argv[2] ?? 1000);
const CONCURRENCY = 16;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Run {
  perSecond: number;
  p50: number;
  p99: number;
}

/** `count` calls of `one`, `parallel` at a time; each call's latency and the whole rate. */
async function measure(count: number, parallel: number, one: (i: number) => Promise<void>): Promise<Run> {
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        await one(i);
        times.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  return { perSecond: count / seconds, p50: percentile(times, 50), p99: percentile(times, 99) };
}

function plainSqlite(dir: string): (i: number) => Promise<void> {
  const db = new DatabaseSync(join(dir, 'plain.sqlite'));
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA wal_autocheckpoint = 0');
  db.exec('PRAGMA synchronous = OFF');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  return async (i) => {
    runQueries(db, [{ sql: 'INSERT INTO t (v) VALUES (?)', params: [`row-${i}`] }], 'NONE');
  };
}

async function main(): Promise<void> {
  const minio = await startMinio();
  const proxy = await startS3Proxy(minio.endpoint);
  const stopping: (() => Promise<unknown>)[] = [];
  try {
    const bucket = await minio.createBucket();
    const options = minio.bucketOptions(bucket);
    const store = await openStore({
      ...options,
      endpoint: proxy.endpoint,
      stateDir: tempDir('d1-bench-store-'),
    });
    stopping.push(() => store.close());
    const d1 = new D1Service({ store, node: 'bench', dataDir: tempDir('d1-bench-'), log: () => {} });
    stopping.push(() => d1.close());
    const send = async (sql: string, params: unknown[] = []) => {
      const answer = await d1.handle({
        application: 'bench',
        database: 'main',
        endpoint: '/query',
        format: 'NONE',
        body: JSON.stringify({ sql, params }),
      });
      const result = JSON.parse(answer.body);
      if (result.success === false) throw new Error(result.error);
    };
    await send('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const d1Requests = () => proxy.seen.filter((r) => r.path.includes('/fleets/bench/d1/')).length;
    const plain = plainSqlite(tempDir('d1-bench-plain-'));

    const rows: [string, Run, Run, number][] = [];
    for (const parallel of [1, CONCURRENCY]) {
      const base = await measure(writes, parallel, plain);
      const before = d1Requests();
      const shipped = await measure(writes, parallel, (i) =>
        send('INSERT INTO t (v) VALUES (?)', [`row-${i}`]),
      );
      rows.push([`${parallel} at once`, shipped, base, ((d1Requests() - before) * 1000) / writes]);
    }

    // Reads and takeover through real workerd: examples/d1 on two `cell serve` nodes.
    const env = s3BucketEnv(options);
    const published = await publish(join(EXAMPLES, 'd1'), 'd1-bench', env);
    if (published.code !== 0) throw new Error(published.stderr);
    const a = await startServing('d1-bench', 'node-a', env);
    stopping.push(() => a.stop('SIGTERM'));
    const b = await startServing('d1-bench', 'node-b', env);
    stopping.push(() => b.stop('SIGTERM'));
    for (let i = 0; i < 20; i++) await fetchText(`${a.url}/insert?v=row-${i}`);
    const reads = await measure(writes, 1, async () => {
      const answer = await fetchText(`${a.url}/count`);
      if (answer?.status !== 200) throw new Error(`read: ${answer?.body}`);
    });
    const killedAt = performance.now();
    for (const pid of processTree(a.child.pid!)) process.kill(pid, 'SIGKILL');
    let takeoverMs = 0;
    for (;;) {
      const answer = await fetchText(`${b.url}/count`);
      if (answer?.status === 200 && JSON.parse(answer.body).count === 20) {
        takeoverMs = performance.now() - killedAt;
        break;
      }
      if (performance.now() - killedAt > 60_000) throw new Error('node b did not take the database over');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    console.log(
      `D1 writes: ${writes} single-row INSERTs per row, MinIO behind a counting proxy, node ${process.version}`,
    );
    console.log(
      'writers       D1 tx/s  p50 ms  p99 ms | SQLite tx/s  p50 ms | ratio  bucket requests per 1,000 writes',
    );
    for (const [name, shipped, base, requests] of rows)
      console.log(
        `${name.padEnd(12)} ${shipped.perSecond.toFixed(0).padStart(8)} ${shipped.p50.toFixed(2).padStart(7)} ${shipped.p99.toFixed(2).padStart(7)} | ${base.perSecond.toFixed(0).padStart(11)} ${base.p50.toFixed(3).padStart(7)} | ${(shipped.perSecond / base.perSecond).toFixed(4)}  ${requests.toFixed(0)}`,
      );
    const daemons = await forwardedReads(writes);
    console.log(
      `reads through a worker on the holder: p50 ${reads.p50.toFixed(2)} ms, p99 ${reads.p99.toFixed(2)} ms`,
    );
    console.log(
      `two svc daemons: read on the holder's node p50 ${daemons.holder.p50.toFixed(2)} ms, p99 ${daemons.holder.p99.toFixed(2)} ms; forwarded from the other node p50 ${daemons.forwarded.p50.toFixed(2)} ms, p99 ${daemons.forwarded.p99.toFixed(2)} ms`,
    );
    console.log(`takeover after SIGKILL of the holder: ${takeoverMs.toFixed(0)} ms (lease 10 s)`);
  } finally {
    for (const stop of stopping.reverse()) await stop().catch(() => {});
    await proxy.close();
    await minio.stop();
  }
}

/** examples/d1 on two `svc sail` daemons: reads on the holder's node and on the other, forwarded. */
async function forwardedReads(count: number): Promise<{ holder: Run; forwarded: Run }> {
  const bucket = await openBucket();
  try {
    const admin = await bucket.operator('op-bench', 'admin', ['*']);
    const nodes = [
      await bucket.sail(['--cell-bin', CELL_REAL]),
      await bucket.sail(['--cell-bin', CELL_REAL]),
    ];
    const run = await runSvc(
      [
        'deploy',
        join(EXAMPLES, 'd1'),
        '--name',
        'd1-fw',
        '--replicas',
        'all',
        '--node',
        nodes[0]!.url,
        '--key',
        keyArg(admin),
      ],
      { timeoutMs: 120_000 },
    );
    if (run.code !== 0) throw new Error(run.stderr);
    const [a, b] = await Promise.all(nodes.map((node) => readyAppUrl(node, admin, 'd1-fw')));
    for (let i = 0; i < 20; i++) await fetchText(`${a}/insert?v=row-${i}`);
    const read = (url: string | undefined) => async () => {
      const answer = await fetchText(`${url}/count`);
      if (answer?.status !== 200 || JSON.parse(answer.body).count !== 20)
        throw new Error(`read: ${answer?.body}`);
    };
    return { holder: await measure(count, 1, read(a)), forwarded: await measure(count, 1, read(b)) };
  } finally {
    await bucket.close();
  }
}

await main();
