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
//   checksum; a get is read whole with `transformToByteArray`).
// - worker alone: the same bytes through the worker without R2 (examples/r2's /echo: the request
//   body read whole, 1 MiB of zeros answered), with `http` and with `fetch`: what the front and
//   workerd cost alone, the ceiling of the binding's figure.
// One object through every path first warms them up (connections, the host's first bucket calls)
// and is not counted.
// Run: scripts/with-node node bench/r2.bench.ts [objects]   (default 30)
// Real parts: MinIO, the real `cell publish` and `cell serve` (its runtime host answers the R2
// calls), workerd, the AWS SDK's S3 client.

import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { EXAMPLES, publish, s3BucketEnv, startServing } from '../test/helpers/cell.ts';
import { startMinio } from '../test/helpers/minio.ts';

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
    const cell = await startServing(APP, 'node-bench', env);
    stops.unshift(() => cell.stop('SIGTERM'));
    stops.unshift(async () => agent.destroy());
    const s3 = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      forcePathStyle: true,
      credentials: { accessKeyId: options.accessKey, secretAccessKey: options.secretKey },
    });
    stops.unshift(async () => s3.destroy());

    const load = loadavg()[0]!.toFixed(1);
    const puts = { binding: 0, bindingFetch: 0, direct: 0, worker: 0, workerFetch: 0 };
    const gets = { ...puts };
    // Round -1 warms every path up (connections, the host's first bucket calls) and is not counted.
    for (let i = -1; i < objects; i++) {
      const body = randomBytes(SIZE);
      if (i === 0)
        for (const totals of [puts, gets])
          for (const name of Object.keys(totals)) totals[name as keyof typeof totals] = 0;
      const object = (name: string) => `${cell.url}/objects/${name}-${i}`;
      const echo = `${cell.url}/echo`;
      const putSteps: [keyof typeof puts, () => Promise<number>][] = [
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
      const getSteps: [keyof typeof gets, () => Promise<number>][] = [
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
        puts[name] += await timed(run);
      for (const [name, run] of [...getSteps.slice(turn), ...getSteps.slice(0, turn)])
        gets[name] += await timed(run);
    }
    console.log(
      `R2, ${objects} objects of 1 MiB, MinIO on loopback, node ${process.version}, load ${load} -> ${loadavg()[0]!.toFixed(1)}`,
    );
    console.log(
      'MiB/s (ratio to direct)  binding http  direct  binding fetch  worker alone http  worker alone fetch',
    );
    for (const [name, t] of [
      ['put', puts],
      ['get', gets],
    ] as const) {
      const figure = (ms: number, width: number) =>
        `${mibPerSecond(ms)} (${(t.direct / ms).toFixed(2)})`.padStart(width);
      console.log(
        `${name.padEnd(23)}  ${figure(t.binding, 12)}  ${mibPerSecond(t.direct).padStart(6)}  ${figure(t.bindingFetch, 13)}  ${figure(t.worker, 17)}  ${figure(t.workerFetch, 18)}`,
      );
    }
  } finally {
    for (const stop of stops) await stop();
  }
}

await main();
