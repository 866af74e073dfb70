// Durable Objects on the fleet (docs/bindings.md "Durable Objects on the fleet"): what shipping
// the objects' storage to the bucket costs a busy object, the loss bound it gives, and how fast
// the objects move when their node is lost.
//   Throughput: wrk against one counter object (each request a write) in real workerd with local
//               storage alone, then the same with the holder shipping the folder every second to
//               MinIO, in one run: requests/s and the ratio. Then the same over many objects (each
//               request a write to one of `objects` counters chosen at random), where every pass
//               copies each object written since the last one.
//   Loss bound: during the shipping run, every pass's duration (copy and PUTs): an acknowledged
//               write is in the bucket once the first pass that copies its file after it ends: at
//               most the rest of the pass under way, one interval and one more pass after it was
//               answered.
//   Takeover:   two holders (each a node's ObjectsHolder with its own workerd) on one bucket; the
//               holder's bucket is cut off and its workerd killed with SIGKILL while a client
//               increments; the time until the other node's workerd answers, and how many
//               acknowledged increments it has (the loss, in writes and in time before the kill).
// Run: scripts/with-node node bench/objects.bench.ts [seconds] [objects]   (default 10 per wrk run, 1000 objects)
// Real parts: MinIO, workerd, node:sqlite, wrk.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ObjectsHolder } from '../runtime/src/bindings/objects-holder.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { call, startCounterWorkerd, type Workerd } from '../test/helpers/objects-workerd.ts';
import { tempDir } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond } from './wrk.ts';

const seconds = Number(process.argv[2] ?? 10);
const objects = Number(process.argv[3] ?? 1000);
const CONNECTIONS = 8;

/** A wrk script that sends each request to one of `count` counters, chosen at random. */
function manyObjectsScript(count: number): string {
  const path = join(tempDir('objects-bench-wrk-'), 'many.lua');
  writeFileSync(
    path,
    `request = function() return wrk.format("GET", "/inc?o=many-" .. math.random(1, ${count})) end\n`,
  );
  return path;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** A node: its holder of `application`'s objects and the workerd it runs while it holds them. */
function node(store: Store, application: string, name: string, passes: number[]) {
  let workerd: Workerd | null = null;
  const holder = new ObjectsHolder({
    store,
    application,
    node: name,
    dataDir: tempDir(`objects-bench-${name}-`),
    log: () => {},
    serve: async (dir) => {
      workerd = await startCounterWorkerd(dir);
    },
    stopServing: async () => {
      await workerd?.stop();
      workerd = null;
    },
  });
  let last: number | null = null;
  const timer = setInterval(() => {
    const ship = holder.lastShip;
    if (ship && ship.endedMs !== last) {
      last = ship.endedMs;
      passes.push(ship.endedMs - ship.startedMs);
    }
  }, 20);
  return {
    holder,
    workerd: () => workerd,
    close: async () => {
      clearInterval(timer);
      // A node cut off from the bucket never finishes its step: give it a second.
      await Promise.race([holder.stop(), new Promise((r) => setTimeout(r, 1_000).unref())]);
      await workerd?.stop();
    },
  };
}
type BenchNode = ReturnType<typeof node>;

async function waitUntil<T>(check: () => T | Promise<T>, timeoutMs: number): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * `standby` waits while a client increments one object through `holder`'s workerd; then the holder
 * is cut off from the bucket and its workerd killed. Answers how long until the standby's workerd
 * answers, and what it lost.
 */
async function takeover(holder: BenchNode, holderStore: Store, standby: BenchNode): Promise<string> {
  const served = holder.workerd()!;
  await waitUntil(() => standby.holder.holder?.node === holder.holder.holder?.node, 30_000);
  /** When each acknowledged increment was answered, by its count. */
  const answeredAt = new Map<number, number>();
  for (let i = 0; i < 50; i++)
    answeredAt.set(Number(await call(served, '/inc?o=takeover')), performance.now());
  let acknowledged = 50;
  let killed = false;
  const client = (async () => {
    while (!killed) {
      try {
        const n = Number(await call(served, '/inc?o=takeover'));
        acknowledged = n;
        answeredAt.set(n, performance.now());
      } catch {
        return;
      }
    }
  })();
  await new Promise((r) => setTimeout(r, 2_500));
  cutOff(holderStore);
  killed = true;
  const killedAt = performance.now();
  served.process.kill('SIGKILL');
  await client;
  const taken = await waitUntil(() => standby.workerd(), 180_000);
  const count = Number(await call(taken, '/get?o=takeover'));
  const takeoverS = (performance.now() - killedAt) / 1000;
  const lost =
    acknowledged > count
      ? `, the first lost one answered ${(killedAt - (answeredAt.get(count + 1) ?? killedAt)).toFixed(0)} ms before the holder was cut off`
      : '';
  return `${takeoverS.toFixed(1)} s; acknowledged ${acknowledged}, present after takeover ${count}: lost ${acknowledged - count}${lost}`;
}

async function main(): Promise<void> {
  const minio = await startMinio();
  const stopping: (() => Promise<unknown>)[] = [];
  try {
    const options = minio.bucketOptions(await minio.createBucket());
    const open = () => openStore({ ...options, stateDir: tempDir('objects-bench-store-') });
    const start = async (store: Store, application: string, name: string, passes: number[]) => {
      const n = node(store, application, name, passes);
      stopping.push(() => n.close());
      n.holder.start();
      return n;
    };

    // One object: alone, then shipped, then alone again.
    const alone = await startCounterWorkerd(tempDir('objects-bench-alone-'));
    stopping.push(() => alone.stop());
    await call(alone, '/inc?o=hot');
    const wrkHot = { seconds, connections: CONNECTIONS };
    const aloneRps = await wrkRequestsPerSecond(`${alone.url}/inc?o=hot`, wrkHot);
    const storeA = await open();
    const passes: number[] = [];
    const a = await start(storeA, 'bench', 'a', passes);
    const served = await waitUntil(() => a.workerd(), 30_000);
    await call(served, '/inc?o=hot');
    const shippedRps = await wrkRequestsPerSecond(`${served.url}/inc?o=hot`, wrkHot);
    const sorted = [...passes].sort((x, y) => x - y);
    const aloneAfterRps = await wrkRequestsPerSecond(`${alone.url}/inc?o=hot`, wrkHot);
    const b = await start(await open(), 'bench', 'b', []);
    const hotTakeover = await takeover(a, storeA, b);

    // Many objects, another application: alone, then shipped, then its takeover.
    const many = { seconds, connections: CONNECTIONS, script: manyObjectsScript(objects) };
    const manyAloneRps = await wrkRequestsPerSecond(`${alone.url}/`, many);
    const storeC = await open();
    const manyPasses: number[] = [];
    const c = await start(storeC, 'bench-many', 'c', manyPasses);
    const servedMany = await waitUntil(() => c.workerd(), 30_000);
    const manyShippedRps = await wrkRequestsPerSecond(`${servedMany.url}/`, many);
    const manySorted = [...manyPasses].sort((x, y) => x - y);
    const d = await start(await open(), 'bench-many', 'd', []);
    const manyTakeover = await takeover(c, storeC, d);

    console.log(`objects bench: wrk ${seconds} s, ${CONNECTIONS} connections, every request a write`);
    const aloneMean = (aloneRps + aloneAfterRps) / 2;
    console.log(
      `  one object, workerd alone with local storage: ${aloneRps.toFixed(0)} requests/s before, ${aloneAfterRps.toFixed(0)} after the shipped run`,
    );
    console.log(
      `  one object shipped every second to MinIO: ${shippedRps.toFixed(0)} requests/s (ratio ${(shippedRps / aloneMean).toFixed(2)} of alone's mean)`,
    );
    console.log(
      `  its ship passes: ${passes.length}, duration p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted.at(-1)} ms; loss bound (interval + two of the slowest pass) ${1000 + 2 * (sorted.at(-1) ?? 0)} ms`,
    );
    console.log(`  its takeover after the holder was cut off and its workerd killed: ${hotTakeover}`);
    console.log(
      `  ${objects} objects, each request a write to one at random: alone ${manyAloneRps.toFixed(0)} requests/s, shipped ${manyShippedRps.toFixed(0)} (ratio ${(manyShippedRps / manyAloneRps).toFixed(2)})`,
    );
    console.log(
      `  their ship passes: ${manySorted.length}, p50 ${percentile(manySorted, 50)} ms, p99 ${percentile(manySorted, 99)} ms, max ${manySorted.at(-1)} ms; loss bound ${1000 + 2 * (manySorted.at(-1) ?? 0)} ms`,
    );
    console.log(`  their takeover (every object restored): ${manyTakeover}`);
  } finally {
    for (const stop of stopping.reverse()) await stop().catch(() => {});
    await minio.stop();
  }
}

/** The node loses the bucket: every request from now on never answers, as from a lost machine. */
function cutOff(store: Store): void {
  const never = () => new Promise<never>(() => {});
  Object.assign(store, { get: never, put: never, delete: never, list: never, stat: never });
}

await main();
