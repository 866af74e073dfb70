// `svc deploy [dir]` (docs/cli.md "svc deploy"): packs the project (pack.ts), calls
// `POST /v1/applications/:name/deploys` with the artifact as raw body and the canonical
// `x-svc-deploy` header, waits for a queue place when the node is full, then polls the answered
// `Location` every second until the deploy is `deployed` or `failed`.
//
// The upload sends `Expect: 100-continue`: the node answers 100 only once its pre-body checks
// pass, so a refused deploy (frozen, blocked, full...) costs no upload. Each attempt re-sends the
// same packed file, signed with a fresh token (tokens are single use).

import { createReadStream } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { signToken } from '../auth/token.ts';
import type { DeployMetadata, DeploySource } from '../node/deploys/metadata.ts';
import { encodeDeployMetadata } from '../node/deploys/metadata.ts';
import type { DeployStatus } from '../node/deploys/records.ts';
import { PROBLEM_CONTENT_TYPE, Problem, type ProblemCode } from '../problem.ts';
import { parseReplicas } from '../registry/application-bodies.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { parseConfigSyntax, parseWorkerConfig, WorkerConfigError } from '../runtime-tools/worker-config.ts';
import { buildDependencies } from './build-inputs.ts';
import { hasNode, requestNode, resolveTarget, type Target } from './client.ts';
import { say, warn } from './output.ts';
import { configName, editConfig, packProject, parseVars, readProjectConfig, shown } from './pack.ts';

export interface DeployFlags {
  name?: string;
  env?: string;
  var?: string[];
  bundle?: boolean;
  replicas?: string;
  nodeSelector?: string[];
  wait?: boolean;
  queueTimeout?: string;
  node?: string;
  remote?: string;
  key?: string;
  config?: string;
  token?: string;
}

/** docs/cli.md "Limits": the deploy poll interval. */
export const POLL_INTERVAL_MS = 1_000;
/** Backoff bounds when a full node gives no `retry-after`. */
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** How long to wait for `100 Continue` before sending the body anyway (a proxy may drop it). */
const CONTINUE_WAIT_MS = 3_000;

export async function deployAction(dirArg: string | undefined, flags: DeployFlags): Promise<void> {
  // Everything the command line alone can refuse is refused before any file is read or sent.
  const dir = resolve(dirArg ?? '.');
  const vars = parseVars(flags.var ?? []);
  const noBundle = flags.bundle === false;
  const queueTimeoutMs = parseQueueTimeout(flags.queueTimeout ?? '600');
  const metadata: DeployMetadata = {};
  if (flags.replicas !== undefined) metadata.replicas = parseReplicasFlag(flags.replicas);
  if (flags.nodeSelector !== undefined) metadata.nodeSelector = parseSelectorFlags(flags.nodeSelector);
  const source = sourceFromEnvironment(process.env);
  if (source) metadata.source = source;
  const header = encodeDeployMetadata(metadata);

  const config = await readProjectConfig(dir);
  if (!config) {
    throw new Problem(
      'invalid-input',
      'No worker config',
      `${shown(dir)} has no cell.jsonc, cell.json or wrangler config (wrangler.jsonc, wrangler.json, wrangler.toml); deploy the directory that holds the worker config`,
    );
  }
  if (config.convertedFrom) {
    progress(
      `svc: no cell.jsonc in ${shown(dir)}; using ${config.convertedFrom}, converted to cell.jsonc in the artifact (the project is not changed)`,
    );
  }
  // The config is read with the runtime's own parser: a syntax error is reported as one, at its
  // line and column, before its name is looked for. A converted wrangler config is checked as
  // the cell.jsonc it became, and named so.
  const configFile = config.convertedFrom
    ? `${shown(join(dir, config.convertedFrom))} (converted to cell.jsonc)`
    : shown(join(dir, config.file));
  const configText = config.bytes.toString('utf8');
  checkConfig(() => parseConfigSyntax(configText, configFile));
  const application = applicationName(flags, configName(config), config.convertedFrom ?? config.file);

  const target = await resolveTarget(flags);
  if (!hasNode(target)) {
    throw new Problem(
      'invalid-input',
      'No node to deploy to',
      'pass --node <url>, or add a remote with svc remote add (or name one with --remote)',
    );
  }
  if (flags.token === undefined && !target.key) {
    throw new Problem(
      'invalid-input',
      'No operator key',
      'pass --key, set SVC_OPERATOR_KEY, add a remote with svc remote add, or present a token with --token',
    );
  }

  // Everything the runtime would refuse in the config is refused here, before anything is sent.
  checkConfig(() => parseWorkerConfig(configText, configFile));
  const configBytes = editConfig(config, { vars, noBundle });
  const dependencies = await buildDependencies(dir, configBytes);
  const packed = await packProject(dir, config, configBytes, dependencies);
  try {
    progress(
      `svc: packed ${packed.files} files (${formatBytes(packed.bytes)}) from ${shown(dir)} for ${application}`,
    );
    const accepted = await submit(target, application, header, packed, {
      wait: flags.wait !== false,
      queueTimeoutMs,
      token: flags.token,
    });
    await packed.dispose();
    progress(`svc: deploy ${accepted.status.id} accepted by ${accepted.endpoint}`);
    const done = await watch(target, accepted, flags.token);
    // The runtime's warnings (config keys it ignores, ...) are the user's to read, whatever the outcome.
    for (const warning of done.warnings ?? []) warn(warning);
    if (done.state === 'failed') {
      const code = (done.code ?? 'internal') as ProblemCode;
      throw new Problem(code, 'Deploy failed', `deploy ${done.id}: ${done.detail ?? 'no detail recorded'}`);
    }
    say(`deployed ${done.application} ${done.deployment ?? ''} (deploy ${done.id})`.replace('  ', ' '));
    // Published is not yet serving: say so when no placed node turns it ready.
    if (flags.token === undefined && done.deployment) {
      const verdict = await watchServing(target, accepted.endpoint, done.application, done.deployment);
      if (verdict) progress(verdict);
    }
  } finally {
    await packed.dispose();
  }
}

/** Runs a step of the shared config parser; its refusal is the user's to fix (Invalid worker config). */
function checkConfig(step: () => unknown): void {
  try {
    step();
  } catch (err) {
    if (err instanceof WorkerConfigError)
      throw new Problem('invalid-input', 'Invalid worker config', err.message);
    throw err;
  }
}

function applicationName(flags: DeployFlags, fromConfig: string | null, file: string): string {
  if (flags.name !== undefined) return resolveApplicationName(flags.name, flags.env);
  if (fromConfig === null) {
    throw new Problem(
      'invalid-input',
      'No application to deploy to',
      `${file} has no usable "name" (1-63 lowercase letters or digits, single hyphens); set it there or pass --name`,
    );
  }
  return resolveApplicationName(fromConfig, flags.env);
}

function parseQueueTimeout(value: string): number {
  const seconds = value.trim() === '' ? Number.NaN : Number(value);
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new Problem(
      'invalid-input',
      'Invalid queue timeout',
      `--queue-timeout ${JSON.stringify(value)} is not a non-negative number of seconds`,
    );
  }
  return seconds * 1000;
}

function parseReplicasFlag(value: string): DeployMetadata['replicas'] {
  const parsed = parseReplicas(value === 'all' ? 'all' : /^\d+$/.test(value) ? Number(value) : Number.NaN);
  if (parsed === null) {
    throw new Problem(
      'invalid-input',
      'Invalid --replicas',
      `${JSON.stringify(value)} is neither "all" nor a whole number >= 1`,
    );
  }
  return parsed;
}

function parseSelectorFlags(pairs: readonly string[]): Record<string, string> {
  const selector: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) {
      throw new Problem(
        'invalid-input',
        'Invalid --node-selector',
        `${JSON.stringify(pair)} is not key=value`,
      );
    }
    const key = pair.slice(0, at);
    if (Object.hasOwn(selector, key)) {
      throw new Problem('invalid-input', 'Invalid --node-selector', `${key} is given more than once`);
    }
    Object.defineProperty(selector, key, {
      value: pair.slice(at + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return selector;
}

/**
 * Where the code came from, when a CI system says: GitHub Actions or GitLab CI. Elsewhere the
 * deploy carries no source.
 */
export function sourceFromEnvironment(env: NodeJS.ProcessEnv): DeploySource | undefined {
  if (env.GITHUB_ACTIONS === 'true' && env.GITHUB_REPOSITORY && env.GITHUB_REF && env.GITHUB_SHA) {
    return { provider: 'github', repo: env.GITHUB_REPOSITORY, ref: env.GITHUB_REF, commit: env.GITHUB_SHA };
  }
  if (env.GITLAB_CI === 'true' && env.CI_PROJECT_PATH && env.CI_COMMIT_REF_NAME && env.CI_COMMIT_SHA) {
    return {
      provider: 'gitlab',
      repo: env.CI_PROJECT_PATH,
      ref: env.CI_COMMIT_REF_NAME,
      commit: env.CI_COMMIT_SHA,
    };
  }
  return undefined;
}

interface Accepted {
  status: DeployStatus;
  location: string;
  endpoint: string;
}

/** Uploads until admitted: a full node is retried per `retry-after` until the queue timeout. */
async function submit(
  target: Target,
  application: string,
  header: string,
  packed: { file: string; bytes: number },
  options: { wait: boolean; queueTimeoutMs: number; token?: string },
): Promise<Accepted> {
  const started = Date.now();
  let waiting = false;
  let attempt = 0;
  for (;;) {
    try {
      const accepted = await uploadOnce(target, application, header, packed, options.token);
      if (waiting) progress(`svc: admitted after ${Math.round((Date.now() - started) / 1000)} s`);
      return accepted;
    } catch (err) {
      if (!(err instanceof Problem) || err.code !== 'deploy-overloaded' || !options.wait) throw err;
      const pause = retryDelay(err.headers['retry-after'], attempt++);
      const waited = Date.now() - started;
      if (waited + pause > options.queueTimeoutMs) {
        throw new Problem(
          'deploy-overloaded',
          err.title,
          `${err.detail ?? 'the node is full'}; gave up after ${Math.round(waited / 1000)} s (--queue-timeout ${options.queueTimeoutMs / 1000})`,
        );
      }
      if (!waiting) {
        waiting = true;
        progress(
          `svc: the node is at deploy capacity; waiting for a queue place (up to ${options.queueTimeoutMs / 1000} s)`,
        );
      }
      await delay(pause);
    }
  }
}

/**
 * The pause before the next try: never sooner than `retry-after` asks, plus up to half of it
 * again as jitter; without one, an exponential backoff with the same jitter.
 */
export function retryDelay(
  retryAfter: string | undefined,
  attempt: number,
  random: () => number = Math.random,
): number {
  let base: number | null = null;
  if (retryAfter !== undefined) {
    const seconds = Number(retryAfter);
    if (/^\d+$/.test(retryAfter.trim()) && Number.isFinite(seconds)) base = seconds * 1000;
    else {
      const at = Date.parse(retryAfter);
      if (Number.isFinite(at)) base = Math.max(0, at - Date.now());
    }
  }
  if (base === null) base = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.min(attempt, 10));
  return Math.ceil(base + base * 0.5 * random());
}

/** One upload to the first endpoint that answers. */
async function uploadOnce(
  target: Target,
  application: string,
  header: string,
  packed: { file: string; bytes: number },
  token: string | undefined,
): Promise<Accepted> {
  const failures: string[] = [];
  for (const endpoint of target.endpoints) {
    const bearer =
      token ?? (await signToken({ id: target.key!.id, privateKey: target.key!.pair.privateKey }));
    let answer: RawAnswer;
    try {
      answer = await postArtifact(`${endpoint}/v1/applications/${application}/deploys`, packed, {
        authorization: `Bearer ${bearer}`,
        'x-svc-deploy': header,
      });
    } catch (err) {
      failures.push(`${endpoint}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      continue;
    }
    if (answer.status === 202) {
      const status = JSON.parse(answer.body) as DeployStatus;
      return { status, location: answer.headers.location ?? `/v1/deploys/${status.id}`, endpoint };
    }
    throw problemOf(answer);
  }
  throw new Problem('not-found', 'Node is not answering', failures.join('; '));
}

interface RawAnswer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

function problemOf(answer: RawAnswer): Problem {
  let document: unknown = {};
  const type = String(answer.headers['content-type'] ?? '');
  if (type.startsWith(PROBLEM_CONTENT_TYPE) || type.startsWith('application/json')) {
    try {
      document = JSON.parse(answer.body);
    } catch {}
  }
  const problem = Problem.fromDocument(document, answer.status);
  const retryAfter = answer.headers['retry-after'];
  if (typeof retryAfter === 'string')
    (problem as { headers: Record<string, string> }).headers = { 'retry-after': retryAfter };
  return problem;
}

/** POSTs the packed file with `Expect: 100-continue`, showing progress on a TTY. */
function postArtifact(
  url: string,
  packed: { file: string; bytes: number },
  headers: Record<string, string>,
): Promise<RawAnswer> {
  return new Promise((resolveAnswer, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const request = send(target, {
      method: 'POST',
      headers: {
        ...headers,
        accept: 'application/json',
        'content-type': 'application/octet-stream',
        'content-length': String(packed.bytes),
        expect: '100-continue',
      },
    });
    let answered = false;
    let sending = false;
    const meter = new UploadMeter(packed.bytes);
    const startBody = () => {
      if (sending || answered) return;
      sending = true;
      clearTimeout(fallback);
      const body = createReadStream(packed.file);
      body.on('data', (chunk) => meter.add((chunk as Buffer).length));
      body.on('end', () => meter.done());
      body.pipe(request);
    };
    // Without a 100 in a while (a proxy that drops Expect), send anyway.
    const fallback = setTimeout(startBody, CONTINUE_WAIT_MS);
    request.on('continue', startBody);
    request.on('response', (response) => {
      answered = true;
      clearTimeout(fallback);
      meter.stop();
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        resolveAnswer({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        // An answer that came before the whole body was sent (a refusal): stop sending.
        if (!request.writableFinished) request.destroy();
      });
      response.on('error', reject);
    });
    request.on('error', (err) => {
      clearTimeout(fallback);
      meter.stop();
      if (!answered) reject(err);
    });
  });
}

/** Upload progress: a line rewritten in place on a TTY, nothing otherwise. */
class UploadMeter {
  readonly #total: number;
  readonly #tty = process.stderr.isTTY === true;
  #sent = 0;
  #last = 0;
  #shown = false;

  constructor(total: number) {
    this.#total = total;
  }

  add(bytes: number): void {
    this.#sent += bytes;
    if (!this.#tty) return;
    const now = Date.now();
    if (now - this.#last < 100 && this.#sent < this.#total) return;
    this.#last = now;
    const percent = this.#total ? Math.floor((this.#sent / this.#total) * 100) : 100;
    process.stderr.write(
      `\rsvc: uploading ${formatBytes(this.#sent)} / ${formatBytes(this.#total)} (${percent}%)`,
    );
    this.#shown = true;
  }

  done(): void {
    this.stop();
  }

  stop(): void {
    if (this.#shown) process.stderr.write('\n');
    this.#shown = false;
  }
}

/**
 * Polls the deploy's `Location` every second until it is terminal, printing each new state. Any
 * node answers a poll: the accepting node is asked first, the other endpoints when it does not
 * answer. A single-use token given with `--token` cannot poll.
 */
async function watch(target: Target, accepted: Accepted, token: string | undefined): Promise<DeployStatus> {
  const endpoints = [accepted.endpoint, ...target.endpoints.filter((e) => e !== accepted.endpoint)];
  const pollTarget: Target = { ...target, endpoints };
  let last = accepted.status.state;
  for (;;) {
    await delay(POLL_INTERVAL_MS);
    let status: DeployStatus;
    try {
      status = (await requestNode(pollTarget, 'GET', accepted.location, token === undefined ? {} : { token }))
        .body as DeployStatus;
    } catch (err) {
      if (token !== undefined && err instanceof Problem && err.code === 'auth-invalid') {
        throw new Problem(
          'auth-invalid',
          'Deploy accepted, but it cannot be watched',
          `deploy ${accepted.status.id} was accepted by ${accepted.endpoint}, but the token given with --token is single use and cannot also poll ${accepted.location}; poll it with a fresh token`,
        );
      }
      throw err;
    }
    if (status.state !== last) {
      last = status.state;
      if (status.state !== 'deployed' && status.state !== 'failed')
        progress(`svc: deploy ${status.id} ${status.state}`);
    }
    if (status.state === 'deployed' || status.state === 'failed') return status;
  }
}

/** How long `svc deploy` watches a new deployment turn ready on the nodes it is placed on. */
export const SERVE_WAIT_MS = 60_000;

/** How long a placement on no node must stand before the watch gives up early. */
const NOWHERE_GRACE_MS = 10_000;

/** A process as GET /v1/applications/:name reports it. */
interface NodeProcessView {
  node: string;
  state: string;
  ready: boolean;
  deployment?: string;
  detail?: string;
}

/**
 * Watches the application's processes (GET /v1/applications/:name, every second, at most
 * SERVE_WAIT_MS) until one serves `deployment`; answers null then, else the line that says
 * where it is not serving and why. Stops early when every process failed to start it. A node
 * that cannot answer (or reports no processes at all) ends the watch quietly.
 */
async function watchServing(
  target: Target,
  endpoint: string,
  application: string,
  deployment: string,
): Promise<string | null> {
  const pollTarget: Target = {
    ...target,
    endpoints: [endpoint, ...target.endpoints.filter((e) => e !== endpoint)],
  };
  const deadline = Date.now() + SERVE_WAIT_MS;
  let last: NodeProcessView[] | null = null;
  let nowhereSince: number | null = null;
  for (;;) {
    try {
      const answer = await requestNode(pollTarget, 'GET', `/v1/applications/${application}`, {});
      const body = answer.body as {
        processes?: NodeProcessView[];
        placement?: { state: string; nodes: string[] };
      };
      if (!Array.isArray(body.processes)) return null;
      last = body.processes;
      // Placed on no node for a while (a node that just joined may not be weighed yet): nothing
      // will run it until the fleet or its selector changes.
      const nowhere =
        body.placement?.state === 'placed' && body.placement.nodes.length === 0 && last.length === 0;
      nowhereSince = nowhere ? (nowhereSince ?? Date.now()) : null;
      if (nowhereSince !== null && Date.now() - nowhereSince >= NOWHERE_GRACE_MS) {
        return `svc: ${application} ${deployment} is deployed but placed on no node: no live node matches its --replicas and --node-selector (see svc fleet nodes)`;
      }
    } catch {
      return null;
    }
    const serving = last.some((p) => p.ready && (p.deployment === undefined || p.deployment === deployment));
    if (serving) return null;
    const failedHere = (p: NodeProcessView) =>
      p.state === 'crashloop' || (p.detail ?? '').includes(`${deployment} failed`);
    if ((last.length > 0 && last.every(failedHere)) || Date.now() >= deadline) break;
    await delay(POLL_INTERVAL_MS);
  }
  if (last.length === 0) {
    return `svc: ${application} ${deployment} is not served: no node runs it yet (see svc app show --name ${application} and svc fleet nodes)`;
  }
  const why = last.map((p) => `${p.node}: ${p.state}${p.detail ? ` (${p.detail})` : ''}`).join('; ');
  return `svc: ${application} ${deployment} is deployed but not serving on any node: ${why}`;
}

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
