// `cell publish` proves a deployment loads before it publishes it (docs/runtime.md "The worker
// config", the load check): a worker that throws while its modules are evaluated (a bad import, a
// dynamic `require` of a Node built-in, a missing module) would otherwise be published, selected,
// and then never turn ready on any node. The check writes the built code into an instance folder
// as `cell serve`'s runtime host would (`materialize`: same generated configuration) and has the
// front start it (`cell-front check`, runtime/front/check.go): the very code that starts, probes,
// judges and stops every workerd `cell serve` runs. The private folder is removed whatever happens.

import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HEALTH_PATH } from '../../src/runtime-contract/environment.ts';
import type { Manifest } from '../../src/runtime-tools/layout.ts';
import { CellError } from './errors.ts';
import type { Prepared } from './follower.ts';
import { frontBinary } from './front-binary.ts';
import { instancePaths, materialize, NO_SECRETS, workerdArgs } from './instance.ts';
import { workerdBinary } from './workerd.ts';

/** How long the check waits for the worker to answer, unless `CELL_START_TIMEOUT_MS` says. */
const DEFAULT_TIMEOUT_MS = 60_000;

/** What `cell-front check` reads on its stdin (check.go `CheckRequest`). */
interface CheckRequest {
  /** The front's `Prepared`: what the runtime host answers for a deployment to start. */
  prepared: Prepared;
  stateDir: string;
  timeoutMs: number;
  healthPath: string;
}

/** The one line `cell-front check` answers: ok, or why the worker did not answer. */
interface CheckResult {
  ok: boolean;
  error?: string;
}

/** Resolves once the worker answers its probe in workerd; throws a CellError naming why not. */
export async function proveLoads(options: {
  manifest: Manifest;
  code: ReadonlyMap<string, Uint8Array>;
  env: NodeJS.ProcessEnv;
}): Promise<void> {
  const raw = options.env.CELL_START_TIMEOUT_MS;
  const timeoutMs = raw && /^\d+$/.test(raw) && Number(raw) >= 1000 ? Number(raw) : DEFAULT_TIMEOUT_MS;
  const front = frontBinary(options.env, process.argv[1] ?? '');
  try {
    accessSync(front, constants.X_OK);
  } catch {
    throw new CellError(
      `cell publish needs its front binary ${front} for the load check; build it with make setup (or make dist)`,
    );
  }
  // Short: workerd's Unix socket lives in it.
  const stateDir = mkdtempSync(join(options.env.CELL_STATE_DIR || tmpdir(), 'cell-check-'));
  let why: string | null;
  try {
    why = await startOnce(front, stateDir, timeoutMs, options);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
  if (why !== null) {
    throw new CellError(
      `the worker cannot serve: it was started in workerd and ${why}; nothing was published`,
    );
  }
}

/** Materializes the code and has the front start it: null once it answered, else why not. */
async function startOnce(
  front: string,
  stateDir: string,
  timeoutMs: number,
  options: { manifest: Manifest; code: ReadonlyMap<string, Uint8Array>; env: NodeJS.ProcessEnv },
): Promise<string | null> {
  const m = options.manifest;
  const paths = instancePaths(stateDir, 1, m);
  try {
    // Secrets are the node's, handed to `cell serve` only; a worker reads them per request.
    await materialize(
      {
        store: null,
        application: m.application,
        stateDir,
        env: options.env,
        log: (line) => process.stderr.write(`${line}\n`),
        // Durable Objects the worker touches while it loads are stored here and go with the folder.
        durableObjectsDir: async () => join(stateDir, 'objects'),
      },
      m,
      NO_SECRETS,
      paths,
      options.code,
    );
  } catch (err) {
    return (err as Error).message;
  }
  const result = await runCheck(front, {
    prepared: {
      seenEtag: '',
      script: m.script,
      deployment: m.deployment,
      label: `${m.script}/${m.deployment}`,
      secretsDigest: NO_SECRETS.digest,
      dir: paths.dir,
      socket: paths.socketPath,
      cronSocket: paths.cronSocketPath,
      command: [workerdBinary(options.env), ...workerdArgs(paths)],
      crons: m.crons ?? [],
    },
    stateDir,
    timeoutMs,
    healthPath: HEALTH_PATH,
  });
  return result.ok ? null : (result.error ?? 'the front gave no reason');
}

/**
 * Runs `cell-front check` to its end: the request on its stdin, its answer the last line of its
 * stdout; workerd's output and the front's log lines go to our stderr as they come.
 */
function runCheck(front: string, request: CheckRequest): Promise<CheckResult> {
  // workerd is run with only PATH and HOME; the front needs nothing more.
  const child = spawn(front, ['check'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
  });
  // Should this process exit first, the front stops its workerd on SIGTERM.
  const stopFront = () => child.kill('SIGTERM');
  process.on('exit', stopFront);
  let stdout = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stdin!.on('error', () => {}); // a front that exits at once is reported by its exit below
  child.stdin!.end(JSON.stringify(request));
  return new Promise((resolveResult, reject) => {
    child.on('error', (err) => {
      process.off('exit', stopFront);
      reject(new CellError(`cannot run the load check (${front} check): ${err.message}`));
    });
    child.on('close', (code, signal) => {
      process.off('exit', stopFront);
      const result = parseResult(stdout.trimEnd().split('\n').at(-1) ?? '');
      if (result) resolveResult(result);
      else
        reject(
          new CellError(
            `the load check (${front} check) ended (${signal ?? `code ${code}`}) without an answer; nothing was published`,
          ),
        );
    });
  });
}

function parseResult(line: string): CheckResult | null {
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value !== 'object' || value === null || typeof (value as CheckResult).ok !== 'boolean')
      return null;
    return value as CheckResult;
  } catch {
    return null;
  }
}
