// R2 through the binding against the same bucket through a direct S3 client (docs/bindings.md
// "R2 buckets"): 1 MiB objects put and read back by a worker (`env.BUCKET.put(key,
// request.body)`, `get(key).body`, examples/r2's object API) and by `@aws-sdk/client-s3` from Node
// straight to the same MinIO, alternating object by object so that both see the same machine.
// Reported as MiB/s and as the ratio binding / direct for each operation. Target: at least 0.8.
// Beside them, the same bytes through the worker without R2 (examples/r2's /echo): what the
// front and workerd cost alone, the ceiling of the binding's figure.
// Run: scripts/with-node node bench/r2.bench.ts [objects]   (default 30)
// Real parts: MinIO, the real `cell publish` and `cell serve` (its runtime host answers the R2
// calls), workerd, the AWS SDK's S3 client.

import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { EXAMPLES, publish, s3BucketEnv, startServing } from '../test/helpers/cell.ts';
import { startMinio } from '../test/helpers/minio.ts';

const objects = Number(process.argv[2] ?? 30);
const SIZE = 1024 * 1024;
const APP = 'r2-bench';

async function timed(run: () => Promise<number>): Promise<number> {
  const started = performance.now();
  const bytes = await run();
  if (bytes !== SIZE) throw new Error(`moved ${bytes} bytes, not ${SIZE}`);
  return performance.now() - started;
}

function mibPerSecond(totalMs: number): string {
  return ((objects * SIZE) / 1024 / 1024 / (totalMs / 1000)).toFixed(1);
}

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
    const s3 = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      forcePathStyle: true,
      credentials: { accessKeyId: options.accessKey, secretAccessKey: options.secretKey },
    });
    stops.unshift(async () => s3.destroy());

    const totals = { bindingPut: 0, bindingGet: 0, directPut: 0, directGet: 0, workerPut: 0, workerGet: 0 };
    for (let i = 0; i < objects; i++) {
      const body = randomBytes(SIZE);
      const url = `${cell.url}/objects/bench-${i}`;
      totals.bindingPut += await timed(async () => {
        const answer = await fetch(url, { method: 'PUT', body });
        const stored = (await answer.json()) as { size: number };
        return stored.size;
      });
      totals.directPut += await timed(async () => {
        await s3.send(new PutObjectCommand({ Bucket: options.bucket, Key: `direct/bench-${i}`, Body: body }));
        return body.length;
      });
      totals.workerPut += await timed(async () => {
        const answer = await fetch(`${cell.url}/echo`, { method: 'PUT', body });
        return ((await answer.json()) as { size: number }).size;
      });
      totals.bindingGet += await timed(async () => (await (await fetch(url)).arrayBuffer()).byteLength);
      totals.directGet += await timed(async () => {
        const answer = await s3.send(
          new GetObjectCommand({ Bucket: options.bucket, Key: `direct/bench-${i}` }),
        );
        return (await answer.Body!.transformToByteArray()).byteLength;
      });
      totals.workerGet += await timed(
        async () => (await (await fetch(`${cell.url}/echo?bytes=${SIZE}`)).arrayBuffer()).byteLength,
      );
    }
    console.log(`R2, ${objects} objects of 1 MiB, MinIO on loopback, node ${process.version}`);
    console.log('operation  binding MiB/s  direct MiB/s  ratio  worker alone MiB/s  ratio');
    for (const [name, binding, direct, worker] of [
      ['put', totals.bindingPut, totals.directPut, totals.workerPut],
      ['get', totals.bindingGet, totals.directGet, totals.workerGet],
    ] as const) {
      console.log(
        `${name.padEnd(9)}  ${mibPerSecond(binding).padStart(13)}  ${mibPerSecond(direct).padStart(12)}  ${(direct / binding).toFixed(2).padStart(5)}  ${mibPerSecond(worker).padStart(18)}  ${(direct / worker).toFixed(2)}`,
      );
    }
  } finally {
    for (const stop of stops) await stop();
  }
}

await main();
