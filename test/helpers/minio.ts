// A real MinIO for integration tests (docs/architecture.md),
// built by scripts/install-minio.sh into .tools/bin/minio (or $SVC_MINIO_BIN).
//
//   const minio = await useMinio();             // started once per test file, stopped in `after`
//   const bucket = await minio.createBucket();  // a fresh, empty bucket per call
//   openStore({ ...minio.bucketOptions(bucket), stateDir })
//
// No sleeps: readiness is polled on MinIO's health endpoint with a deadline.

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { after } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort, tempDir } from './svc.ts';

const START_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 10_000;
const POLL_EVERY_MS = 50;

export const MINIO_BIN =
  process.env.SVC_MINIO_BIN ?? resolve(import.meta.dirname, '..', '..', '.tools', 'bin', 'minio');

/** The bucket settings (the `bucket` group of svc's settings) that reach one MinIO bucket. */
export interface MinioBucketOptions {
  endpoint: string;
  region: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
}

/** A running MinIO on a loopback port with its own temporary data directory. */
export interface Minio {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  region: string;
  accessKey: string;
  secretKey: string;
  /** Creates an empty bucket (random name unless given) and answers its name. */
  createBucket(name?: string): Promise<string>;
  /** The settings an S3Store or `openStore` takes for one bucket. */
  bucketOptions(bucket: string): MinioBucketOptions;
  /** Everything MinIO wrote to its stdout and stderr so far. */
  log(): string;
  /** Stalls the server (SIGSTOP): connections open, nothing answers, as a frozen bucket. */
  freeze(): void;
  /** Lets a frozen server run on (SIGCONT). */
  thaw(): void;
  /** Stops MinIO and removes its data directory. */
  stop(): Promise<void>;
}

/** How many MinIO servers this process started: each gets a loopback address of its own. */
let started = 0;

/**
 * A loopback address (Linux routes all of 127.0.0.0/8 to lo) no other test process uses: MinIO
 * sets SO_REUSEPORT on its listeners, so two servers handed the same free port by chance (test
 * files run in parallel processes) would both bind it and share its connections silently, and a
 * test would talk to another test's server. Made of this process's pid and a count.
 */
function ownLoopbackAddress(): string {
  const count = started++;
  return `127.${100 + (count % 100)}.${(process.pid >> 8) & 255}.${process.pid & 255 || 1}`;
}

/** Starts MinIO and resolves once it answers its readiness probe. */
export async function startMinio(): Promise<Minio> {
  if (!existsSync(MINIO_BIN)) {
    throw new Error(`MinIO is not installed at ${MINIO_BIN}: run scripts/install-minio.sh (or make tools)`);
  }
  const host = ownLoopbackAddress();
  const port = await freePort(host);
  const consolePort = await freePort(host);
  const dataDir = tempDir('svc-minio-');
  const accessKey = 'svc-test';
  const secretKey = randomBytes(16).toString('hex');
  const region = 'us-east-1';
  const endpoint = `http://${host}:${port}`;
  const child: ChildProcess = spawn(
    MINIO_BIN,
    [
      'server',
      dataDir,
      '--quiet',
      '--address',
      `${host}:${port}`,
      '--console-address',
      `${host}:${consolePort}`,
    ],
    {
      env: {
        ...process.env,
        MINIO_ROOT_USER: accessKey,
        MINIO_ROOT_PASSWORD: secretKey,
        MINIO_BROWSER: 'off',
        MINIO_UPDATE: 'off',
        MINIO_REGION: region,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    output += chunk;
  });
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((resolveExit) =>
    child.once('exit', (code) => {
      exitCode = code;
      resolveExit();
    }),
  );

  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`MinIO exited with ${exitCode} while starting:\n${output}`);
    if (await isReady(endpoint)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`MinIO did not become ready within ${START_DEADLINE_MS} ms:\n${output}`);
    }
    await delay(POLL_EVERY_MS);
  }

  const client = new S3Client({
    endpoint,
    region,
    forcePathStyle: true,
    credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
  });
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    region,
    accessKey,
    secretKey,
    async createBucket(name = `svc-${randomBytes(6).toString('hex')}`) {
      await client.send(new CreateBucketCommand({ Bucket: name }));
      return name;
    },
    bucketOptions: (bucket) => ({ endpoint, region, bucket, accessKey, secretKey }),
    log: () => output,
    freeze: () => child.kill('SIGSTOP'),
    thaw: () => child.kill('SIGCONT'),
    stop() {
      stopped ??= (async () => {
        client.destroy();
        if (exitCode === undefined) {
          child.kill('SIGCONT');
          child.kill('SIGTERM');
          const killer = setTimeout(() => child.kill('SIGKILL'), STOP_DEADLINE_MS);
          await exited;
          clearTimeout(killer);
        }
        rmSync(dataDir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

let shared: Promise<Minio> | undefined;

/**
 * The test file's one MinIO: started on first use, stopped by a node:test `after` hook
 * registered at that first call. That hook belongs to whatever runs the first call: the
 * file (top level), a suite (its `before` hook), or a single test, after which MinIO is
 * gone for the rest of the file; so make the first call at the top level or in a `before`.
 */
export function useMinio(): Promise<Minio> {
  if (!shared) {
    const starting = startMinio();
    shared = starting;
    after(async () => {
      await (await starting.catch(() => null))?.stop();
    });
  }
  return shared;
}

async function isReady(endpoint: string): Promise<boolean> {
  try {
    const response = await fetch(`${endpoint}/minio/health/ready`, { signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}
