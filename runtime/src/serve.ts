// `cell serve` (docs/runtime.md "cell serve"): one replica of one application. This file holds the
// process's life (its environment, start, the unsupervised bound, stop); the front that owns
// CELL_PORT is front-proxy.ts, and the choice of the deployment it serves is follower.ts. The
// node's daemon sends SIGHUP when it learns the selector moved; the process's own look at the
// selector is a slow safety net, so an idle replica costs the bucket a few requests an hour.

import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  readServeIdentity,
  readServeOptions,
  type ServeIdentity,
  UNSUPERVISED_EXIT_VARIABLE,
} from '../../src/runtime-contract/environment.ts';
import type { Store } from '../../src/store/store.ts';
import { openBucketFromEnv } from './bucket.ts';
import { CronScheduler } from './cron.ts';
import { CellError } from './errors.ts';
import { SelectorFollower } from './follower.ts';
import { FrontProxy } from './front-proxy.ts';
import { type InstanceContext, killAllWorkerd } from './instance.ts';
import { NodeLease } from './lease.ts';
import { claimStateDir, sweepOrphans } from './orphans.ts';
import { SecretsFile } from './secrets.ts';
import { CELL_VERSION_LINE } from './version.ts';

/** How long requests (WebSockets included) may run on after SIGTERM/SIGINT. */
const STOP_DRAIN_MS = 10_000;

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

/** Runs until SIGTERM or SIGINT; answers the exit code. */
export async function serve(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  // SIGHUP ("the selector moved") must never end the process. One that comes before the server
  // exists needs no action: the server looks at the selector as soon as it listens.
  const early = () => {};
  process.on('SIGHUP', early);
  // The daemon reading our output may be gone (killed, or restarted keeping its applications):
  // a broken pipe loses the output, never the process.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  const identity = identityFromEnv(env);
  const tuning = tuningFromEnv(env);
  const store = await openBucketFromEnv(env);
  const server = new Server(identity, tuning, store, env, log);
  process.on('exit', killAllWorkerd);
  process.removeListener('SIGHUP', early);
  process.on('SIGHUP', () => server.follower.selectorMoved());
  return server.run();
}

class Server {
  private readonly id: ServeIdentity;
  private readonly tuning: ServeTuning;
  private readonly store: Store;
  private readonly log: (line: string) => void;
  private readonly stateDir: string;
  private readonly lease: NodeLease;
  /** Cron triggers of the serving deployment (cron.ts); follows every switch. */
  private readonly crons: CronScheduler;
  readonly follower: SelectorFollower;
  private readonly front: FrontProxy;
  /** The process that started this one: once it is gone, supervision is judged by health probes. */
  private readonly parentPid = process.ppid;

  constructor(
    id: ServeIdentity,
    tuning: ServeTuning,
    store: Store,
    env: NodeJS.ProcessEnv,
    log: (line: string) => void,
  ) {
    this.id = id;
    this.tuning = tuning;
    this.store = store;
    this.log = log;
    this.stateDir = makeStateDir(env, id.application, log);
    const options = readServeOptions(env);
    const context: InstanceContext = {
      store,
      application: id.application,
      stateDir: this.stateDir,
      env,
      log,
      startTimeoutMs: tuning.startTimeoutMs,
    };
    this.follower = new SelectorFollower({
      application: id.application,
      store,
      context,
      secretsFile: new SecretsFile(options.secretsFile),
      tuning,
      log,
      onServing: (manifest) => {
        this.crons.setSchedules(manifest.crons ?? []);
        void this.lease.renew();
      },
    });
    this.front = new FrontProxy(id, this.follower, options.otel, log);
    this.lease = new NodeLease({
      store,
      application: id.application,
      node: id.node,
      ttlMs: tuning.leaseTtlMs,
      log,
      describe: () => {
        const active = this.follower.active;
        return active ? { script: active.manifest.script, deployment: active.manifest.deployment } : {};
      },
    });
    this.crons = new CronScheduler({
      store,
      application: id.application,
      node: id.node,
      log,
      target: () => {
        const active = this.follower.active;
        if (!active || this.follower.stopping) return null;
        return {
          deployment: active.manifest.deployment,
          run: (cron, scheduledMs) => active.runScheduled(cron, scheduledMs),
        };
      },
    });
  }

  async run(): Promise<number> {
    const http = createServer((req, res) => this.front.handle(req, res));
    http.on('upgrade', (req, socket, head) => this.front.upgrade(req, socket as Socket, head));
    http.keepAliveTimeout = 65_000;
    await new Promise<void>((resolveListen, reject) => {
      http.once('error', (err: NodeJS.ErrnoException) => {
        rmSync(this.stateDir, { recursive: true, force: true });
        reject(new CellError(`cannot listen on ${this.id.host}:${this.id.port}: ${err.code ?? err.message}`));
      });
      http.listen(this.id.port, this.id.host, () => resolveListen());
    });
    this.log(
      `${CELL_VERSION_LINE} serving ${this.id.application} on http://${hostForUrl(this.id.host)}:${this.id.port} as node "${this.id.node}"`,
    );
    this.lease.start();
    void this.follower.poll();

    let watch: NodeJS.Timeout | undefined;
    const signal = await new Promise<string>((resolveSignal) => {
      process.once('SIGTERM', () => resolveSignal('SIGTERM'));
      process.once('SIGINT', () => resolveSignal('SIGINT'));
      const bound = this.tuning.unsupervisedExitMs;
      if (bound !== null) {
        watch = setInterval(
          () => {
            if (this.unsupervisedFor() > bound) resolveSignal(`no supervisor for ${bound} ms`);
          },
          Math.min(10_000, Math.max(250, bound / 4)),
        );
      }
    });
    clearInterval(watch);
    this.log(`cell: ${signal}: stopping ${this.id.application}`);
    this.crons.stop();
    const instances = this.follower.stop();
    const closed = new Promise<void>((r) => http.close(() => r()));
    http.closeIdleConnections();
    await Promise.all(instances.map((i) => i.drain(Math.min(this.tuning.drainMs, STOP_DRAIN_MS))));
    // The bound is over: what still runs (WebSockets, long requests) is cut.
    for (const socket of this.front.upgraded) socket.destroy();
    http.closeAllConnections();
    await closed;
    killAllWorkerd();
    await Promise.all(instances.map((i) => i.stop()));
    await this.lease.release();
    await this.store.close();
    rmSync(this.stateDir, { recursive: true, force: true });
    this.log(`cell: stopped ${this.id.application}`);
    return 0;
  }

  /** How long the process has gone without supervision; 0 while the process that started it lives. */
  private unsupervisedFor(): number {
    if (process.ppid === this.parentPid) return 0;
    return Date.now() - this.front.supervisedAtMs;
  }
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

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
