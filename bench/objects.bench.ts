// Durable Objects on the fleet (docs/bindings.md "Durable Objects on the fleet"): what shipping
// the objects' storage to the bucket costs a busy object, the loss bound it gives, and how fast
// the objects move when their node is lost.
//   Throughput: wrk against one counter object (each request a write) in real workerd with local
//               storage alone, then the same with the holder shipping the folder every second to
//               MinIO, in one run: requests/s and the ratio. Then the same over many objects (each
//               request a write to one of `objects` counters chosen at random), where every pass
//               copies each object written since the last one.
//   Loss bound: during the shipping run, every pass's duration (copy and PUTs): an acknowledged
//               write is in the bucket at most one interval plus one pass after it was answered.
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

/** A node: its holder and the workerd it runs while it holds the objects. */
function node(store: Store, name: string, passes: number[]) {
  let workerd: Workerd | null = null;
  const holder = new ObjectsHolder({
    store,
    application: 'bench',
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

async function waitUntil<T>(check: () => T | Promise<T>, timeoutMs: number): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<void> {
  const minio = await startMinio();
  const stopping: (() => Promise<unknown>)[] = [];
  try {
    const options = minio.bucketOptions(await minio.createBucket());
    const open = () => openStore({ ...options, stateDir: tempDir('objects-bench-store-') });

    // Throughput: alone, then shipped.
    const alone = await startCounterWorkerd(tempDir('objects-bench-alone-'));
    await call(alone, '/inc?o=hot');
    const aloneRps = await wrkRequestsPerSecond(`${alone.url}/inc?o=hot`, {
      seconds,
      connections: CONNECTIONS,
    });

    const storeA = await open();
    const passes: number[] = [];
    const a = node(storeA, 'a', passes);
    stopping.push(() => a.close());
    a.holder.start();
    const served = await waitUntil(() => a.workerd(), 30_000);
    await call(served, '/inc?o=hot');
    const shippedRps = await wrkRequestsPerSecond(`${served.url}/inc?o=hot`, {
      seconds,
      connections: CONNECTIONS,
    });
    const sorted = [...passes].sort((x, y) => x - y);
    const many = { seconds, connections: CONNECTIONS, script: manyObjectsScript(objects) };
    const manyFrom = passes.length;
    const manyShippedRps = await wrkRequestsPerSecond(`${served.url}/`, many);
    const manySorted = passes.slice(manyFrom).sort((x, y) => x - y);
    const aloneAfterRps = await wrkRequestsPerSecond(`${alone.url}/inc?o=hot`, {
      seconds,
      connections: CONNECTIONS,
    });
    const manyAloneRps = await wrkRequestsPerSecond(`${alone.url}/`, many);
    await alone.stop();

    // Takeover: b stands by; a's bucket is cut off and its workerd killed while a client increments.
    const storeB = await open();
    const b = node(storeB, 'b', []);
    stopping.push(() => b.close());
    b.holder.start();
    await waitUntil(() => b.holder.holder?.node === 'a', 30_000);
    for (let i = 0; i < 50; i++) await call(served, '/inc?o=takeover');
    let acknowledged = 50;
    /** When each acknowledged increment was answered, by its count. */
    const answeredAt = new Map<number, number>();
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
    cutOff(storeA);
    killed = true;
    const killedAt = performance.now();
    served.process.kill('SIGKILL');
    await client;
    const taken = await waitUntil(() => b.workerd(), 60_000);
    const count = Number(await call(taken, '/get?o=takeover'));
    const takeoverS = (performance.now() - killedAt) / 1000;

    console.log(
      `objects bench: wrk ${seconds} s, ${CONNECTIONS} connections, one object, every request a write`,
    );
    const aloneMean = (aloneRps + aloneAfterRps) / 2;
    console.log(
      `  workerd alone, local storage: ${aloneRps.toFixed(0)} requests/s before, ${aloneAfterRps.toFixed(0)} after the shipped run`,
    );
    console.log(
      `  shipped every second to MinIO: ${shippedRps.toFixed(0)} requests/s (ratio ${(shippedRps / aloneMean).toFixed(2)} of alone's mean)`,
    );
    console.log(
      `  ship passes under that load: ${passes.length}, duration p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted.at(-1)} ms`,
    );
    console.log(
      `  loss bound (interval + slowest pass): ${1000 + (sorted.at(-1) ?? 0)} ms of acknowledged writes`,
    );
    console.log(
      `  ${objects} objects, each request a write to one at random: alone ${manyAloneRps.toFixed(0)} requests/s (after the shipped run), shipped ${manyShippedRps.toFixed(0)} (ratio ${(manyShippedRps / manyAloneRps).toFixed(2)}); passes ${manySorted.length}, p50 ${percentile(manySorted, 50)} ms, p99 ${percentile(manySorted, 99)} ms, max ${manySorted.at(-1)} ms: loss bound ${1000 + (manySorted.at(-1) ?? 0)} ms`,
    );
    console.log(`  takeover after the holder was cut off and its workerd killed: ${takeoverS.toFixed(1)} s`);
    console.log(
      `  acknowledged ${acknowledged}, present after takeover ${count}: lost ${acknowledged - count}${
        acknowledged > count
          ? `, the first lost one answered ${(killedAt - (answeredAt.get(count + 1) ?? killedAt)).toFixed(0)} ms before the holder was cut off`
          : ''
      }`,
    );
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
