// R2 through the binding against the same bucket through a direct S3 client (docs/bindings.md
// "R2 buckets"): 1 MiB objects put and read back by a worker (`env.BUCKET.put(key,
// request.body)`, `get(key).body`, examples/r2's object API) and by `@aws-sdk/client-s3` from Node
// straight to the same MinIO, alternating object by object (each object starting with the next
// side) so that all see the same machine.
//
// What is compared, per operation, as MiB/s and as the ratio binding / direct (target: at least
// 0.8):
// - binding: the bench's requests to the worker made with Node's `http` (one keep-alive agent),
//   the HTTP client the AWS SDK itself uses (@smithy/node-http-handler), so that both sides pay
//   the same client. The same requests made with `fetch` (undici) are shown beside it, and their
//   ratio, since a worker's callers use either.
// - direct: the SDK with its defaults (it hashes a put's body for the signature and adds a CRC32
//   checksum, checked again on a get when the bucket returns it; a get is read whole with
//   `transformToByteArray`), in the bench's own Node process with Node's default flags.
// - worker alone: the same bytes through the worker without R2 (examples/r2's /echo: the request
//   body read whole, 1 MiB of zeros answered), with `http` and with `fetch`: what the front and
//   workerd cost alone, the ceiling of the binding's figure.
// Each figure is printed twice: as MiB/s over all objects (the total time, so one slow operation
// counts whole), and as the median time of one operation, which moves less with the machine's other
// load. One object through every path first warms them up (connections, the host's first bucket
// calls) and is not counted. `cell serve` runs as it ships (see below).
// Run: scripts/with-node node bench/r2.bench.ts [objects]   (default 30)
// Real parts: MinIO, the real `cell publish` and `cell serve` (its runtime host answers the R2
// calls), workerd, the AWS SDK's S3 client.

import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { CELL_BIN, EXAMPLES, publish, s3BucketEnv, startCell } from '../test/helpers/cell.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { waitFor } from '../test/helpers/svc.ts';

const objects = Number(process.argv[2] ?? 30);
const SIZE = 1024 * 1024;
const APP = 'r2-bench';
const agent = new Agent({ keepAlive: true });

async function timed(run: () => Promise<number>): Promise<number> {
  const started = performance.now();
  const bytes = await run();
  if (bytes !== SIZE) throw new Error(`moved ${bytes} bytes, not ${SIZE}`);
  return performance.now() - started;
}

function mibPerSecond(totalMs: number): string {
  return ((objects * SIZE) / 1024 / 1024 / (totalMs / 1000)).toFixed(1);
}

/** One request with Node's `http`; the answer's body whole. */
function httpCall(url: string, method: 'GET' | 'PUT', body?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const call = request(
      url,
      { method, agent, headers: body ? { 'content-length': String(body.length) } : {} },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () =>
          (answer.statusCode ?? 0) < 300
            ? resolve(Buffer.concat(chunks))
            : reject(new Error(`${method} ${url}: ${answer.statusCode} ${Buffer.concat(chunks)}`)),
        );
        answer.on('error', reject);
      },
    );
    call.on('error', reject);
    call.end(body);
  });
}

const sizeOf = (answer: Buffer | string) => (JSON.parse(answer.toString()) as { size: number }).size;

async function main(): Promise<void> {
  const minio = await startMinio();
  const stops: (() => Promise<unknown>)[] = [() => minio.stop()];
  try {
    const options = minio.bucketOptions(await minio.createBucket());
    const env = s3BucketEnv(options);
    const published = await publish(join(EXAMPLES, 'r2'), APP, env);
    if (published.code !== 0) throw new Error(published.stderr);
    // `cell serve` as it ships: run through its shebang (runtime/bin/cell), so with its small young
    // generation (--max-semi-space-size=1), which the runtime host it starts inherits, as `svc
    // sail`'s daemon, a node's runtime host, has its own; and the selector looked at as often as
    // in production (every 5 minutes), not every 100 ms as the tests' helper asks (each look is a
    // bucket request of the host's).
    const cell = await startCell(APP, 'node-bench', env, { CELL_SELECTOR_POLL_MS: '300000' }, CELL_BIN);
    stops.unshift(() => cell.stop('SIGTERM'));
    await waitFor(
      async () => (await fetch(`${cell.url}/.well-known/cell/health`)).status === 200,
      `cell to serve ${APP}`,
      60_000,
    );
    stops.unshift(async () => agent.destroy());
    const s3 = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      forcePathStyle: true,
      credentials: { accessKeyId: options.accessKey, secretAccessKey: options.secretKey },
    });
    stops.unshift(async () => s3.destroy());

    const load = loadavg()[0]!.toFixed(1);
    const sides = ['binding', 'direct', 'bindingFetch', 'worker', 'workerFetch'] as const;
    type Side = (typeof sides)[number];
    const times = () =>
      Object.fromEntries(sides.map((side) => [side, [] as number[]])) as Record<Side, number[]>;
    const puts = times();
    const gets = times();
    // Round -1 warms every path up (connections, the host's first bucket calls) and is not counted.
    for (let i = -1; i < objects; i++) {
      const body = randomBytes(SIZE);
      if (i === 0) for (const side of sides) puts[side].length = gets[side].length = 0;
      const object = (name: string) => `${cell.url}/objects/${name}-${i}`;
      const echo = `${cell.url}/echo`;
      const putSteps: [Side, () => Promise<number>][] = [
        ['binding', async () => sizeOf(await httpCall(object('http'), 'PUT', body))],
        [
          'direct',
          async () => {
            await s3.send(
              new PutObjectCommand({ Bucket: options.bucket, Key: `direct/bench-${i}`, Body: body }),
            );
            return body.length;
          },
        ],
        [
          'bindingFetch',
          async () => sizeOf(await (await fetch(object('fetch'), { method: 'PUT', body })).text()),
        ],
        ['worker', async () => sizeOf(await httpCall(echo, 'PUT', body))],
        ['workerFetch', async () => sizeOf(await (await fetch(echo, { method: 'PUT', body })).text())],
      ];
      const getSteps: [Side, () => Promise<number>][] = [
        ['binding', async () => (await httpCall(object('http'), 'GET')).byteLength],
        [
          'direct',
          async () => {
            const answer = await s3.send(
              new GetObjectCommand({ Bucket: options.bucket, Key: `direct/bench-${i}` }),
            );
            return (await answer.Body!.transformToByteArray()).byteLength;
          },
        ],
        ['bindingFetch', async () => (await (await fetch(object('fetch'))).arrayBuffer()).byteLength],
        ['worker', async () => (await httpCall(`${echo}?bytes=${SIZE}`, 'GET')).byteLength],
        ['workerFetch', async () => (await (await fetch(`${echo}?bytes=${SIZE}`)).arrayBuffer()).byteLength],
      ];
      // Each object starts with the next side, so that no side always follows the same one.
      const turn = (i + putSteps.length) % putSteps.length;
      for (const [name, run] of [...putSteps.slice(turn), ...putSteps.slice(0, turn)])
        puts[name].push(await timed(run));
      for (const [name, run] of [...getSteps.slice(turn), ...getSteps.slice(0, turn)])
        gets[name].push(await timed(run));
    }
    console.log(
      `R2, ${objects} objects of 1 MiB, MinIO on loopback, node ${process.version}, load ${load} -> ${loadavg()[0]!.toFixed(1)}`,
    );
    console.log(
      'MiB/s (ratio to direct)  binding http  direct  binding fetch  worker alone http  worker alone fetch',
    );
    const total = (ms: number[]) => ms.reduce((sum, one) => sum + one, 0);
    const median = (ms: number[]) => [...ms].sort((a, b) => a - b)[ms.length >> 1]!;
    for (const [name, t] of [
      ['put', puts],
      ['get', gets],
    ] as const) {
      const figure = (side: Side, width: number) =>
        `${mibPerSecond(total(t[side]))} (${(total(t.direct) / total(t[side])).toFixed(2)})`.padStart(width);
      console.log(
        `${name.padEnd(23)}  ${figure('binding', 12)}  ${mibPerSecond(total(t.direct)).padStart(6)}  ${figure('bindingFetch', 13)}  ${figure('worker', 17)}  ${figure('workerFetch', 18)}`,
      );
    }
    // The median of one operation's time moves less with the machine's other load than the total.
    console.log(
      'median ms (ratio)      binding http  direct  binding fetch  worker alone http  worker alone fetch',
    );
    for (const [name, t] of [
      ['put', puts],
      ['get', gets],
    ] as const) {
      const figure = (side: Side, width: number) =>
        `${median(t[side]).toFixed(1)} (${(median(t.direct) / median(t[side])).toFixed(2)})`.padStart(width);
      console.log(
        `${name.padEnd(21)}  ${figure('binding', 12)}  ${median(t.direct).toFixed(1).padStart(6)}  ${figure('bindingFetch', 13)}  ${figure('worker', 17)}  ${figure('workerFetch', 18)}`,
      );
    }
  } finally {
    for (const stop of stops) await stop();
  }
}

await main();
