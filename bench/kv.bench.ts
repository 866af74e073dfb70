// Workers KV reads (docs/bindings.md "KV namespaces", its consistency paragraph): what a `get` costs a worker,
// hot (the same key again, answered by the node's read cache) and cold (a key not read before, one
// bucket GET), and what 1,000 hot reads cost the bucket.
//   Latency: each read is one HTTP request to the worker, whose handler does one `env.DATA.get`;
//            p50/p99 over the requests, measured from the client (so the worker's own request
//            path is in it, the same for both rows). Also the mean of one `get` inside the worker
//            over a loop of 1,000 (workerd's clock moves only across I/O, so only a mean is exact).
//   Bucket:  requests under `fleets/<app>/kv/` that the 1,000 hot reads caused, counted by a proxy
//            in front of MinIO. Target: a hot read costs no bucket request.
// Run: scripts/with-node node bench/kv.bench.ts [reads]   (default 1000)
// Real parts: MinIO behind a counting proxy (test/helpers/s3-proxy.ts), the real `cell publish`
// and `cell serve` (its runtime host answers the KV calls), workerd.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fetchText, publish, s3BucketEnv, startServing } from '../test/helpers/cell.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { startS3Proxy } from '../test/helpers/s3-proxy.ts';
import { tempDir } from '../test/helpers/svc.ts';

const reads = Number(process.argv[2] ?? 1000);
const APP = 'kv-bench';

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get('key');
    if (url.pathname === '/put') {
      await env.DATA.put(key, url.searchParams.get('value'));
      return new Response('stored');
    }
    if (url.pathname === '/get') return new Response(await env.DATA.get(key));
    if (url.pathname === '/loop') {
      const n = Number(url.searchParams.get('n'));
      const started = Date.now();
      for (let i = 0; i < n; i++) await env.DATA.get(key);
      return Response.json({ ms: Date.now() - started });
    }
    return new Response('no such route', { status: 404 });
  },
};
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function timedGets(url: string, keys: string[]): Promise<number[]> {
  const times: number[] = [];
  for (const key of keys) {
    const started = performance.now();
    const answer = await fetchText(`${url}/get?key=${encodeURIComponent(key)}`);
    times.push(performance.now() - started);
    if (answer?.status !== 200) throw new Error(`get ${key}: ${answer?.status} ${answer?.body}`);
  }
  return times.sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const minio = await startMinio();
  const proxy = await startS3Proxy(minio.endpoint);
  const project = tempDir('kv-bench-');
  const cells: { stop(signal: NodeJS.Signals): Promise<unknown> }[] = [];
  try {
    const bucket = await minio.createBucket();
    const env = s3BucketEnv(minio.bucketOptions(bucket), { endpoint: proxy.endpoint });
    writeFileSync(
      join(project, 'cell.json'),
      JSON.stringify({
        main: 'worker.js',
        compatibility_date: '2025-06-01',
        kv_namespaces: [{ binding: 'DATA', id: 'data' }],
      }),
    );
    writeFileSync(join(project, 'worker.js'), WORKER);
    const published = await publish(project, APP, env);
    if (published.code !== 0) throw new Error(published.stderr);
    const cell = await startServing(APP, 'node-bench', env);
    cells.push(cell);
    const cold = Array.from({ length: reads }, (_, i) => `cold-${i}`);
    for (const key of ['hot', ...cold])
      await fetchText(`${cell.url}/put?key=${key}&value=${'v'.repeat(100)}`);
    // Another process's writes: the cold keys are not in this node's cache yet.
    await cell.stop('SIGTERM');
    cells.pop();
    const reader = await startServing(APP, 'node-bench', env);
    cells.push(reader);
    const kvRequests = () => proxy.seen.filter((r) => r.path.includes(`/fleets/${APP}/kv/`)).length;

    const coldBefore = kvRequests();
    const coldTimes = await timedGets(reader.url, cold);
    const coldRequests = kvRequests() - coldBefore;
    await timedGets(reader.url, ['hot']); // the first read of it fills the cache
    const hotBefore = kvRequests();
    const hotTimes = await timedGets(
      reader.url,
      Array.from({ length: reads }, () => 'hot'),
    );
    const hotRequests = kvRequests() - hotBefore;
    const loop = JSON.parse((await fetchText(`${reader.url}/loop?key=hot&n=${reads}`))!.body) as {
      ms: number;
    };

    console.log(
      `KV get through a worker, ${reads} reads each, MinIO behind a counting proxy, node ${process.version}`,
    );
    console.log('read  p50 ms  p99 ms  bucket requests per 1,000 reads');
    for (const [name, times, requests] of [
      ['hot ', hotTimes, hotRequests],
      ['cold', coldTimes, coldRequests],
    ] as const) {
      console.log(
        `${name}  ${percentile(times, 50).toFixed(2).padStart(6)}  ${percentile(times, 99).toFixed(2).padStart(6)}  ${((requests * 1000) / reads).toFixed(0)}`,
      );
    }
    console.log(
      `inside the worker: ${reads} hot gets in a loop took ${loop.ms} ms, ${(loop.ms / reads).toFixed(3)} ms each`,
    );
  } finally {
    for (const cell of cells) await cell.stop('SIGTERM');
    await proxy.close();
    await minio.stop();
  }
}

await main();
