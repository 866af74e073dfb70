// `cell serve` (docs/runtime.md "cell serve"): one replica of one application. This file is the
// start of the process only: it checks the environment, opens the bucket once, makes the private
// state folder, and then replaces itself (execve: same pid, same stdio) with the front, the small
// Go program in runtime/front/ that owns CELL_PORT, runs workerd and stays resident. What needs the
// bucket afterwards (looking at the selector, the lease, cron claims) the front asks of the runtime
// host (host/host.ts): the node daemon's, on the socket CELL_HOST_SOCKET names, so an idle replica
// keeps no Node process; without one, a private `cell host --stdio` the front starts. The node's
// daemon sends SIGHUP when it learns the selector moved; the front's own look at the selector is a
// slow safety net, so an idle replica costs the bucket a few requests an hour.

import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  HEALTH_PATH,
  readServeIdentity,
  readServeOptions,
  type ServeIdentity,
  SUPERVISOR_HEADER,
  UNSUPERVISED_EXIT_VARIABLE,
} from '../../src/runtime-contract/environment.ts';
import { openBucketFromEnv } from './bucket.ts';
import { CellError } from './errors.ts';
import { MAX_RETRY_MS } from './follower.ts';
import { FRONT_BIN_VARIABLE, frontBinary } from './front-binary.ts';
import type { HelloRequest } from './host/protocol.ts';
import { claimStateDir, sweepOrphans } from './orphans.ts';
import { CELL_VERSION_LINE } from './version.ts';
import { workerdBinary } from './workerd.ts';

export { FRONT_BIN_VARIABLE, frontBinary };

/** How long requests (WebSockets included) may run on after SIGTERM/SIGINT. */
const STOP_DRAIN_MS = 10_000;

/** The variable the front reads its configuration from. */
export const FRONT_CONFIG_VARIABLE = 'CELL_FRONT_CONFIG';

/** Knobs an operator may set with `--cell-env`; the defaults suit a fleet. */
export interface ServeTuning {
  pollMs: number;
  leaseTtlMs: number;
  drainMs: number;
  startTimeoutMs: number;
  retryMs: number;
  /**
   * Once the process that started this one is gone: how long to keep serving without a
   * supervisor's health probe before draining and exiting. Null: never (a process run by hand).
   */
  unsupervisedExitMs: number | null;
}

/**
 * The idle schedule. The node's daemon signals the process (SIGHUP) when it learns the selector
 * moved, so the selector poll is only a safety net and the lease lives long: an idle replica
 * costs one HEAD per poll and one PUT per third of a lease lifetime, about 24 requests an hour.
 */
export const DEFAULT_SELECTOR_POLL_MS = 300_000;
export const DEFAULT_LEASE_TTL_MS = 900_000;

export function tuningFromEnv(env: NodeJS.ProcessEnv): ServeTuning {
  const ms = (name: string, fallback: number, min: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min)
      throw new CellError(
        `${name} must be a whole number of milliseconds >= ${min}, got ${JSON.stringify(raw)}`,
      );
    return Number(raw);
  };
  return {
    pollMs: ms('CELL_SELECTOR_POLL_MS', DEFAULT_SELECTOR_POLL_MS, 50),
    leaseTtlMs: ms('CELL_LEASE_TTL_MS', DEFAULT_LEASE_TTL_MS, 3000),
    drainMs: ms('CELL_DRAIN_MS', 30_000, 0),
    startTimeoutMs: ms('CELL_START_TIMEOUT_MS', 60_000, 1000),
    retryMs: ms('CELL_RETRY_MS', 10_000, 100),
    unsupervisedExitMs: env[UNSUPERVISED_EXIT_VARIABLE] ? ms(UNSUPERVISED_EXIT_VARIABLE, 0, 1000) : null,
  };
}

function identityFromEnv(env: NodeJS.ProcessEnv): ServeIdentity {
  const identity = readServeIdentity(env);
  if (typeof identity === 'string') throw new CellError(identity);
  return identity;
}

/** Everything the front is told, as JSON in CELL_FRONT_CONFIG. */
export interface FrontConfig {
  application: string;
  node: string;
  host: string;
  port: number;
  versionLine: string;
  healthPath: string;
  supervisorHeader: string;
  otel: boolean;
  stateDir: string;
  pollMs: number;
  leaseTtlMs: number;
  drainMs: number;
  stopDrainMs: number;
  startTimeoutMs: number;
  retryMs: number;
  maxRetryMs: number;
  unsupervisedExitMs: number | null;
  /** The node's runtime host socket; null: the front starts `privateHost`. */
  hostSocket: string | null;
  /** The command that starts a private `cell host --stdio` (argv, the program first). */
  privateHost: string[];
  /** What the front's hello tells its host, as is (host/protocol.ts `HelloRequest.context`). */
  hostContext: HelloRequest['context'];
  /** The MaxMind DB request.cf is filled from (CELL_GEOIP_DB); null: none. */
  geoipDb: string | null;
}

/** The front's configuration; pure, so what the front is told is checked without starting it. */
export function frontConfig(
  identity: ServeIdentity,
  tuning: ServeTuning,
  options: { otel: boolean; hostSocket?: string; geoipDb?: string },
  stateDir: string,
  privateHost: string[],
  hostContext: HelloRequest['context'],
): FrontConfig {
  return {
    application: identity.application,
    node: identity.node,
    host: identity.host,
    port: identity.port,
    versionLine: CELL_VERSION_LINE,
    healthPath: HEALTH_PATH,
    supervisorHeader: SUPERVISOR_HEADER,
    otel: options.otel,
    stateDir,
    pollMs: tuning.pollMs,
    leaseTtlMs: tuning.leaseTtlMs,
    drainMs: tuning.drainMs,
    stopDrainMs: STOP_DRAIN_MS,
    startTimeoutMs: tuning.startTimeoutMs,
    retryMs: tuning.retryMs,
    maxRetryMs: MAX_RETRY_MS,
    unsupervisedExitMs: tuning.unsupervisedExitMs,
    hostSocket: options.hostSocket ?? null,
    privateHost,
    hostContext,
    geoipDb: options.geoipDb ?? null,
  };
}

/** The command that runs `cell host --stdio` the way this process was run (same Node, flags and entry). */
export function privateHostCommand(execPath: string, execArgv: readonly string[], entry: string): string[] {
  return [execPath, ...execArgv, entry, 'host', '--stdio'];
}

/** What the host must know of this process's environment: its workerd, its secrets, its `CELL_*` variables. */
export function hostContext(env: NodeJS.ProcessEnv): HelloRequest['context'] {
  const cellEnv: Record<string, string> = {};
  for (const [name, value] of Object.entries(env))
    if (name.startsWith('CELL_') && name !== FRONT_CONFIG_VARIABLE && value !== undefined)
      cellEnv[name] = value;
  return {
    workerd: workerdBinary(env),
    secretsFile: readServeOptions(env).secretsFile ?? null,
    env: cellEnv,
  };
}

/**
 * Checks the environment, makes the state folder and becomes the front; answers (an exit code)
 * only if it cannot. Refusals are CellErrors, as before anything is started.
 */
export async function serve(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  // SIGHUP ("the selector moved") must never end the process; the front looks at the selector as
  // soon as it listens, so one that comes before needs no action.
  process.on('SIGHUP', () => {});
  const identity = identityFromEnv(env);
  const tuning = tuningFromEnv(env);
  const options = readServeOptions(env);
  // Without the node's host, a bucket the environment names wrongly fails here, at start, not in
  // the private host.
  if (!options.hostSocket) await (await openBucketFromEnv(env)).close();
  const entry = process.argv[1] ?? '';
  const front = frontBinary(env, entry);
  try {
    accessSync(front, constants.X_OK);
  } catch {
    throw new CellError(
      `cell serve needs its front binary ${front}; build it with make setup (or make dist)`,
    );
  }
  const stateDir = makeStateDir(env, identity.application, log);
  const config = frontConfig(
    identity,
    tuning,
    options,
    stateDir,
    privateHostCommand(process.execPath, process.execArgv, entry),
    hostContext(env),
  );
  try {
    process.execve!(front, [front, 'serve', identity.application], {
      ...env,
      [FRONT_CONFIG_VARIABLE]: JSON.stringify(config),
    });
  } catch (err) {
    rmSync(stateDir, { recursive: true, force: true });
    throw new CellError(`cannot start the front ${front}: ${(err as Error).message}`);
  }
  return 1; // not reached: execve replaced this process
}

/** A private folder for this process; short, since workerd's Unix sockets live in it. */
function makeStateDir(env: NodeJS.ProcessEnv, application: string, log: (line: string) => void): string {
  let base = env.CELL_STATE_DIR || tmpdir();
  if (base.length > 60) base = '/tmp';
  sweepOrphans(base, log);
  const dir = mkdtempSync(join(base, `cell-${application.slice(0, 12)}-`));
  claimStateDir(dir);
  return dir;
}
