// Runs the real `cell` runtime for integration tests: `cell publish` to completion and
// `cell serve` as a long-running process on a free loopback port. No sleeps: readiness is
// polled with a deadline (waitFor).

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cpSync } from 'node:fs';
import { resolve } from 'node:path';
import type { MinioBucketOptions } from './minio.ts';
import { freePort, type RunResult, runToEnd, tempDir, waitFor } from './svc.ts';

export const CELL_BIN = resolve(import.meta.dirname, '..', '..', 'runtime', 'bin', 'cell');
export const EXAMPLES = resolve(import.meta.dirname, '..', '..', 'examples');

const PUBLISH_DEADLINE_MS = 60_000;
const STOP_DEADLINE_MS = 30_000;

/** The bucket a test's runtime processes share: the environment svc hands to `cell`. */
export type BucketEnv = Record<string, string>;

export function dirBucketEnv(dir: string): BucketEnv {
  return { SVC_S3_ENDPOINT: `file://${dir}` };
}

/** A MinIO bucket as `cell` is given it; `overrides` change a field (an endpoint through a proxy). */
export function s3BucketEnv(
  options: MinioBucketOptions,
  overrides: { endpoint?: string; prefix?: string } = {},
): BucketEnv {
  return {
    SVC_S3_ENDPOINT: overrides.endpoint ?? options.endpoint,
    SVC_S3_REGION: options.region,
    SVC_S3_BUCKET: options.bucket,
    ...(overrides.prefix !== undefined ? { SVC_S3_PREFIX: overrides.prefix } : {}),
    SVC_S3_ACCESS_KEY: options.accessKey,
    SVC_S3_SECRET_KEY: options.secretKey,
  };
}

/** Copies an example (or any project) into a fresh folder the test may edit. */
export function copyProject(from: string): string {
  const to = tempDir('cell-project-');
  cpSync(from, to, { recursive: true });
  return to;
}

/** Runs `cell <args>` in `cwd` to completion. */
export function runCell(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<RunResult> {
  return runToEnd(process.execPath, [CELL_BIN, ...args], {
    ...options,
    timeoutMs: options.timeoutMs ?? PUBLISH_DEADLINE_MS,
  });
}

/** `cell publish` of a project for an application; answers the run and the parsed last line. */
export async function publish(
  project: string,
  application: string,
  bucket: BucketEnv,
  args: string[] = [],
): Promise<RunResult & { published?: { application: string; script: string; deployment: string } }> {
  const result = await runCell(['publish', ...args], {
    cwd: project,
    env: { ...bucket, CELL_APP: application },
  });
  if (result.code !== 0) return result;
  const last = result.stdout.trimEnd().split('\n').at(-1)!;
  return { ...result, published: JSON.parse(last) };
}

/** A running `cell serve`. */
export interface CellProcess {
  url: string;
  port: number;
  child: ChildProcess;
  stderr(): string;
  stdout(): string;
  /** Pids of the process's workerd instances (its direct children, a private runtime host left out). */
  children(): number[];
  /** Sends `signal`, waits for exit; answers the exit code and signal. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function startCell(
  application: string,
  node: string,
  bucket: BucketEnv,
  env: NodeJS.ProcessEnv = {},
  /** An executable runtime to run instead of the checkout's (e.g. dist/cell.mjs, run through its shebang). */
  bin?: string,
): Promise<CellProcess> {
  const port = await freePort();
  const [command, args] = bin ? [bin, ['serve']] : [process.execPath, [CELL_BIN, 'serve']];
  const child = spawn(command, args, {
    env: {
      ...process.env,
      ...bucket,
      CELL_APP: application,
      CELL_NODE: node,
      CELL_PORT: String(port),
      CELL_BIND_HOST: '127.0.0.1',
      CELL_SELECTOR_POLL_MS: '100',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  child.stdout!.on('data', (chunk) => {
    stdout += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) =>
    child.on('exit', (code, signal) => resolveExit({ code, signal })),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    stderr: () => stderr,
    stdout: () => stdout,
    children: () => childPids(child.pid!),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_DEADLINE_MS);
      const outcome = await exited;
      clearTimeout(timer);
      return outcome;
    },
  };
}

function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=,comm=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .filter(([, command]) => command === 'workerd')
      .map(([n]) => Number(n))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when there is no child
  }
}

/** A process and every process below it (a `cell serve`: front, private host, workerd, D1), deepest first. */
export function processTree(pid: number): number[] {
  let children: number[] = [];
  try {
    children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((n) => n > 0);
  } catch {
    // ps exits 1 when there is no child
  }
  return [...children.flatMap(processTree), pid];
}

/** True while a process with this pid exists. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** GET a URL; answers status and body text, or null when nothing answered. */
export async function fetchText(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; body: string } | null> {
  try {
    const response = await fetch(url, init);
    return { status: response.status, body: await response.text() };
  } catch {
    return null;
  }
}

/**
 * Starts `cell serve` for an application and waits until its health answers 200 naming
 * `deployment` (any deployment when not given).
 */
export async function startServing(
  application: string,
  node: string,
  bucket: BucketEnv,
  options: { deployment?: string; deadlineMs?: number } = {},
): Promise<CellProcess> {
  const cell = await startCell(application, node, bucket);
  try {
    await waitFor(
      async () => {
        const answer = await fetchText(`${cell.url}/.well-known/cell/health`);
        if (answer?.status !== 200) return false;
        return options.deployment === undefined || JSON.parse(answer.body).deployment === options.deployment;
      },
      () => `cell to serve ${application}\n${cell.stderr()}`,
      options.deadlineMs ?? 60_000,
    );
  } catch (err) {
    await cell.stop('SIGTERM');
    throw err;
  }
  return cell;
}
