// `cell serve` (docs/runtime.md; docs/api.md "What the service does":
// the application's own health at `/.well-known/cell/health`). A small Node front proxy owns
// CELL_PORT for the whole life of the process; behind it each deployment runs in its own
// workerd on a private socket. When the fleet-wide selector moves, the new deployment is
// started and probed while the old one keeps serving; new requests then go to the new one and
// the old one is stopped once its requests have finished, so a switch fails no request.
// The node's daemon sends SIGHUP when it learns the selector moved; the process's own look at the
// selector is a slow safety net, so an idle replica costs the bucket a few requests an hour.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keys } from '../../src/registry/keys.ts';
import {
  HEALTH_PATH,
  readServeIdentity,
  type ServeIdentity,
  SUPERVISOR_HEADER,
} from '../../src/runtime-contract/environment.ts';
import {
  KNOWN_FEATURES,
  type Manifest,
  parseManifest,
  parsePointer,
} from '../../src/runtime-tools/layout.ts';
import type { Store } from '../../src/store/store.ts';
import { openBucketFromEnv } from './bucket.ts';
import { CronScheduler } from './cron.ts';
import { CellError } from './errors.ts';
import { Instance, type InstanceContext, killAllWorkerd } from './instance.ts';
import { NodeLease } from './lease.ts';
import { claimStateDir, sweepOrphans } from './orphans.ts';
import { SecretsFile } from './secrets.ts';
import { CELL_VERSION_LINE } from './version.ts';

/** How long requests (WebSockets included) may run on after SIGTERM/SIGINT. */
const STOP_DRAIN_MS = 10_000;

/** The longest wait before a deployment that failed to start is tried again. */
const MAX_RETRY_MS = 300_000;

/** Features `cell serve` can run; `containers` is understood by prune but not run here. */
const SERVABLE_FEATURES = KNOWN_FEATURES.filter((f) => f !== 'containers');

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
    unsupervisedExitMs: env.CELL_UNSUPERVISED_EXIT_MS ? ms('CELL_UNSUPERVISED_EXIT_MS', 0, 1000) : null,
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
  process.on('SIGHUP', () => server.selectorMoved());
  return server.run();
}

type Status = 'no-deployment' | 'starting' | 'ready' | 'failed';

class Server {
  private readonly id: ServeIdentity;
  private readonly tuning: ServeTuning;
  private readonly store: Store;
  private readonly log: (line: string) => void;
  private readonly context: InstanceContext;
  private readonly lease: NodeLease;
  /** Cron triggers of the serving deployment (cron.ts); follows every switch. */
  private readonly crons: CronScheduler;
  private readonly otel: boolean;
  private active: Instance | null = null;
  private readonly draining = new Set<Instance>();
  private status: Status = 'no-deployment';
  private lastError: string | undefined;
  /** The selector's ETag once acted on; a different one means the selector moved. */
  private seenEtag: string | null = null;
  private retryAtMs = 0;
  /** The selection (selector ETag and secrets) that failed to start, and how many times in a row. */
  private failedSelection: string | null = null;
  private readonly secretsFile: SecretsFile;
  private failures = 0;
  private lastLogged = '';
  private pollTimer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** A look was asked for while one was under way: it may have read the selector too early. */
  private lookAgain = false;
  private stopping = false;
  /**
   * Client sockets handed over to an upgrade (WebSocket). The HTTP server no longer manages
   * them, so `closeAllConnections` does not reach them and `close` would wait for them forever.
   */
  private readonly upgraded = new Set<Socket>();
  /** The process that started this one, and when a supervisor last probed the health. */
  private readonly parentPid = process.ppid;
  private supervisedAtMs = Date.now();

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
    this.otel = env.CELL_OTEL === '1';
    this.secretsFile = new SecretsFile(env.CELL_SECRETS_FILE);
    this.context = {
      store,
      application: id.application,
      stateDir: makeStateDir(env, id.application, log),
      env,
      log,
      startTimeoutMs: tuning.startTimeoutMs,
    };
    this.lease = new NodeLease({
      store,
      application: id.application,
      node: id.node,
      ttlMs: tuning.leaseTtlMs,
      log,
      describe: () =>
        this.active
          ? { script: this.active.manifest.script, deployment: this.active.manifest.deployment }
          : {},
    });
    this.crons = new CronScheduler({
      store,
      application: id.application,
      node: id.node,
      log,
      target: () => {
        const active = this.active;
        if (!active || this.stopping) return null;
        return {
          deployment: active.manifest.deployment,
          run: (cron, scheduledMs) => active.runScheduled(cron, scheduledMs),
        };
      },
    });
  }

  async run(): Promise<number> {
    const http = createServer((req, res) => this.handle(req, res));
    http.on('upgrade', (req, socket, head) => this.upgrade(req, socket as Socket, head));
    http.keepAliveTimeout = 65_000;
    await new Promise<void>((resolveListen, reject) => {
      http.once('error', (err: NodeJS.ErrnoException) => {
        rmSync(this.context.stateDir, { recursive: true, force: true });
        reject(new CellError(`cannot listen on ${this.id.host}:${this.id.port}: ${err.code ?? err.message}`));
      });
      http.listen(this.id.port, this.id.host, () => resolveListen());
    });
    this.log(
      `${CELL_VERSION_LINE} serving ${this.id.application} on http://${hostForUrl(this.id.host)}:${this.id.port} as node "${this.id.node}"`,
    );
    this.lease.start();
    void this.poll();

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
    this.stopping = true;
    this.crons.stop();
    if (this.pollTimer) clearTimeout(this.pollTimer);
    const closed = new Promise<void>((r) => http.close(() => r()));
    http.closeIdleConnections();
    const instances = [...(this.active ? [this.active] : []), ...this.draining];
    await Promise.all(instances.map((i) => i.drain(Math.min(this.tuning.drainMs, STOP_DRAIN_MS))));
    // The bound is over: what still runs (WebSockets, long requests) is cut.
    for (const socket of this.upgraded) socket.destroy();
    http.closeAllConnections();
    await closed;
    killAllWorkerd();
    await Promise.all(instances.map((i) => i.stop()));
    await this.lease.release();
    await this.store.close();
    rmSync(this.context.stateDir, { recursive: true, force: true });
    this.log(`cell: stopped ${this.id.application}`);
    return 0;
  }

  /** How long the process has gone without supervision; 0 while the process that started it lives. */
  private unsupervisedFor(): number {
    if (process.ppid === this.parentPid) return 0;
    return Date.now() - this.supervisedAtMs;
  }

  // ---- following the selector ----

  private async poll(): Promise<void> {
    await this.check();
    if (!this.stopping) this.pollTimer = setTimeout(() => void this.poll(), this.tuning.pollMs);
  }

  /** One look at the selector; concurrent calls share it. */
  private check(): Promise<void> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  /**
   * SIGHUP: the node's daemon learned that the selector moved. Looked at now; if a look is under
   * way it may have read the selector before the move, so one more follows it.
   */
  selectorMoved(): void {
    if (this.stopping) return;
    if (!this.checking) {
      void this.check();
      return;
    }
    if (this.lookAgain) return;
    this.lookAgain = true;
    void this.checking.then(() => {
      this.lookAgain = false;
      return this.check();
    });
  }

  private async checkOnce(): Promise<void> {
    if (this.stopping) return;
    const key = keys.runtimeSelector(this.id.application);
    let selection: string | null = null;
    try {
      // One stat of the secrets file and a HEAD per poll; bodies are read only when they moved.
      const secrets = this.secretsFile.read();
      const info = await this.store.stat(key);
      if (!info) return;
      const current = this.active?.secretsDigest === secrets.digest;
      if (info.etag === this.seenEtag && current) return;
      // A selection that failed to start is tried again after a growing wait, or as soon as it moves.
      if (`${info.etag}|${secrets.digest}` === this.failedSelection && Date.now() < this.retryAtMs) return;
      const object = await this.store.get(key);
      if (!object) return;
      selection = `${object.etag}|${secrets.digest}`;
      const pointer = parsePointer(object.body);
      if (!pointer.ok) throw new CellError(`${key} cannot be read: ${pointer.why}`);
      const { script, deployment } = pointer.value;
      const same = this.active?.manifest.script === script && this.active.manifest.deployment === deployment;
      if (same && current) {
        this.seenEtag = object.etag;
        return;
      }
      // Only the secrets changed: the serving deployment starts again beside itself and takes over.
      const manifest =
        same && this.active ? this.active.manifest : await this.readManifest(script, deployment);
      if (this.stopping) return;
      if (!this.active) this.status = 'starting';
      this.log(`cell: starting ${script}/${deployment}${same ? ' (its secrets changed)' : ''}`);
      const next = await Instance.start(this.context, manifest, secrets, (gone) => this.lost(gone));
      if (this.stopping) {
        await next.stop();
        return;
      }
      this.seenEtag = object.etag;
      this.failedSelection = null;
      this.failures = 0;
      this.lastLogged = '';
      this.promote(next);
    } catch (err) {
      const message = err instanceof CellError ? err.message : (err as Error).message;
      if (selection !== null) {
        this.lastError = message;
        if (!this.active) this.status = 'failed';
        this.failures = selection === this.failedSelection ? this.failures + 1 : 1;
        this.failedSelection = selection;
        this.retryAtMs = Date.now() + Math.min(this.tuning.retryMs * 2 ** (this.failures - 1), MAX_RETRY_MS);
      }
      // The same failure once, not once a poll.
      if (message !== this.lastLogged) {
        this.lastLogged = message;
        this.log(`cell: ${message}${this.active ? ` (still serving ${this.active.label})` : ''}`);
      }
    }
  }

  private async readManifest(script: string, deployment: string): Promise<Manifest> {
    const key = keys.runtimeManifest(this.id.application, script, deployment);
    const object = await this.store.get(key);
    if (!object) throw new CellError(`the selector points at ${script}/${deployment}, but ${key} is missing`);
    const parsed = parseManifest(object.body);
    if (!parsed.ok) {
      if (parsed.unknown)
        throw new CellError(`${key} needs a newer runtime (${parsed.why}); upgrade cell on this node`);
      throw new CellError(`${key} cannot be read: ${parsed.why}`);
    }
    const missing = parsed.value.required_features.filter((f) => !SERVABLE_FEATURES.includes(f));
    if (missing.length > 0)
      throw new CellError(`${key} requires ${missing.join(', ')}, which cell serve cannot run`);
    return parsed.value;
  }

  /** Makes `next` the instance new requests go to; the previous one drains, then stops. */
  private promote(next: Instance): void {
    const previous = this.active;
    this.active = next;
    this.status = 'ready';
    this.lastError = undefined;
    this.log(`cell: serving ${next.label}${previous ? ` (was ${previous.label})` : ''}`);
    this.crons.setSchedules(next.manifest.crons ?? []);
    void this.lease.renew();
    if (previous) {
      this.draining.add(previous);
      void previous
        .drain(this.tuning.drainMs)
        .then(() => previous.stop())
        .finally(() => this.draining.delete(previous));
    }
  }

  /** workerd of an instance exited on its own: forget it and start the selected deployment again. */
  private lost(instance: Instance): void {
    if (this.draining.has(instance) || this.stopping) return;
    if (this.active === instance) {
      this.active = null;
      this.status = 'starting';
      this.seenEtag = null;
      this.failedSelection = null;
      this.retryAtMs = 0;
      void instance.stop();
      void this.check();
    }
  }

  // ---- the front proxy ----

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    if (this.otel) res.on('finish', () => this.span(req, res, started));
    const path = (req.url ?? '/').split('?')[0];
    if (path === HEALTH_PATH) this.health(req, res);
    else this.forward(req, res, 0);
  }

  private health(req: IncomingMessage, res: ServerResponse): void {
    if (req.headers[SUPERVISOR_HEADER]) this.supervisedAtMs = Date.now();
    const ready = this.active !== null && !this.stopping;
    const body: Record<string, unknown> = {
      status: this.stopping ? 'stopping' : ready ? 'ready' : this.status,
      application: this.id.application,
      node: this.id.node,
      runtime: CELL_VERSION_LINE,
    };
    if (this.active) {
      body.script = this.active.manifest.script;
      body.deployment = this.active.manifest.deployment;
    }
    if (!ready && this.lastError) body.detail = this.lastError;
    const text = JSON.stringify(body);
    res.writeHead(ready ? 200 : 503, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'content-length': Buffer.byteLength(text),
    });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  private unavailable(res: ServerResponse, why: string): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = `${why}\n`;
    res.writeHead(503, {
      'content-type': 'text/plain; charset=utf-8',
      'retry-after': '1',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }

  /**
   * Streams one request to the active instance. A request without a body that fails before any
   * answer (a kept-alive socket closed under it) is sent once more, to whichever instance is
   * active by then.
   */
  private forward(req: IncomingMessage, res: ServerResponse, attempt: number): void {
    const instance = this.active;
    if (!instance) {
      const why =
        this.status === 'no-deployment'
          ? 'No deployment has been published yet'
          : 'The deployment is starting';
      this.unavailable(res, why);
      return;
    }
    instance.enter();
    let left = false;
    const leave = () => {
      if (!left) {
        left = true;
        instance.leave();
      }
    };
    res.once('close', leave);
    const bodiless = !req.headers['transfer-encoding'] && (req.headers['content-length'] ?? '0') === '0';
    const upstream = request({
      socketPath: instance.socketPath,
      agent: instance.agent,
      method: req.method,
      path: req.url,
      headers: withoutHopByHop(req.headers),
    });
    upstream.on('response', (answer) => {
      const headers: string[] = [];
      for (let i = 0; i < answer.rawHeaders.length; i += 2) {
        if (!HOP_BY_HOP.has(answer.rawHeaders[i]!.toLowerCase()))
          headers.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      if (bodiless && attempt === 0 && !req.destroyed) {
        res.removeListener('close', leave);
        leave();
        this.forward(req, res, 1);
        return;
      }
      this.log(
        `cell: ${instance.label} failed a request: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
      );
      this.unavailable(res, 'The deployment did not answer');
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (bodiless) upstream.end();
    else req.pipe(upstream);
  }

  /** WebSocket and other upgrades: the raw bytes are piped both ways to the active instance. */
  private upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const instance = this.active;
    if (!instance) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    instance.enter();
    this.upgraded.add(socket);
    const upstream = connect(instance.socketPath);
    let left = false;
    const finish = () => {
      if (left) return;
      left = true;
      this.upgraded.delete(socket);
      instance.leave();
      socket.destroy();
      upstream.destroy();
    };
    upstream.on('connect', () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', finish);
    socket.on('error', finish);
    upstream.on('close', finish);
    socket.on('close', finish);
  }

  /** CELL_OTEL=1: one span-shaped JSON line per request on stdout. */
  private span(req: IncomingMessage, res: ServerResponse, started: bigint): void {
    const parent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(
      String(req.headers.traceparent ?? ''),
    );
    const line = {
      kind: 'span',
      name: 'http.request',
      trace_id: parent?.[1] ?? randomBytes(16).toString('hex'),
      parent_span_id: parent?.[2],
      span_id: randomBytes(8).toString('hex'),
      application: this.id.application,
      node: this.id.node,
      deployment: this.active?.manifest.deployment,
      method: req.method,
      path: (req.url ?? '/').split('?')[0],
      status: res.statusCode,
      duration_ms: Number(process.hrtime.bigint() - started) / 1e6,
      time: new Date().toISOString(),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function withoutHopByHop(headers: IncomingMessage['headers']): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
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
