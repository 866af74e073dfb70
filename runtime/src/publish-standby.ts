// `cell publish --standby` (docs/runtime.md "The environment contract", "A publisher kept
// waiting"): a publish whose process starts before its deploy comes. It loads what a publish
// needs (the publish's modules, esbuild's API, the bucket client the environment names), says
// so with one line on stdout, then reads one job from stdin to its end, `{"cwd","config","env"}`,
// and runs exactly what `cell publish --config <config>` would run in `cwd` with `env`: same
// output, same exit. stdin ending without a job (the node stopped, or is gone) ends the process
// with nothing done. One job per process: nothing of a publish is left for the next one.

import { text as readText } from 'node:stream/consumers';
import { CellError } from './errors.ts';
import type { Published } from './publish.ts';

/** The line a standby publisher writes on stdout once it waits for its job. */
export const STANDBY_READY_LINE = '{"standby":"ready"}';

/** The line it writes next, once it has read its job. */
export const STANDBY_TOOK_LINE = '{"standby":"took"}';

/** What the node hands a standby publisher on stdin. */
export interface StandbyJob {
  /** The unpacked project: the publish's working directory. */
  cwd: string;
  /** `--config`, as the one-shot publish is given it. */
  config?: string;
  /** The publish's whole environment, replacing the one the process started with. */
  env: Record<string, string>;
}

export async function publishStandby(log: (line: string) => void): Promise<Published | null> {
  const esbuild = await import('esbuild');
  const { publish } = await import('./publish.ts');
  // The bucket client the job will open: the environment names the same bucket for every job.
  if (/^https?:/.test(process.env.SVC_S3_ENDPOINT?.trim() ?? '')) await import('../../src/store/s3.ts');
  process.stdout.write(`${STANDBY_READY_LINE}\n`);

  const text = await readText(process.stdin);
  if (text.trim() === '') return null;
  // esbuild's service starts with the job, not before: while it runs it pings this process every
  // second, and a waiting publisher must cost no CPU. A failure to start is the build's to report.
  void esbuild.initialize({}).catch(() => {});
  const job = parseJob(text);
  // First on stdout, before the publish's own output: the node knows the job reached a live process.
  process.stdout.write(`${STANDBY_TOOK_LINE}\n`);
  process.chdir(job.cwd);
  for (const name of Object.keys(process.env)) delete process.env[name];
  Object.assign(process.env, job.env);
  return publish({ cwd: process.cwd(), configPath: job.config, env: process.env, log });
}

export function parseJob(text: string): StandbyJob {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CellError('cell publish --standby was handed no JSON job on stdin');
  }
  const job = value as Partial<StandbyJob> | null;
  const env = job?.env;
  if (
    typeof job?.cwd !== 'string' ||
    (job.config !== undefined && typeof job.config !== 'string') ||
    typeof env !== 'object' ||
    env === null ||
    Object.values(env).some((v) => typeof v !== 'string')
  ) {
    throw new CellError(
      'cell publish --standby needs a job {"cwd": "<dir>", "config"?: "<file>", "env": {"NAME": "value", …}} on stdin',
    );
  }
  return { cwd: job.cwd, ...(job.config !== undefined ? { config: job.config } : {}), env };
}
