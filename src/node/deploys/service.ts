// The deploy runner of one node (docs/deploys.md "Intake", "Capacity", "Publishing", "Deploy
// records"; docs/cli.md "svc sail" deploy limits and deadlines): the staging directory,
// the queue and its limits, `cell publish` for each accepted deploy, and the record of each state.
//
// Staging lives in `<state dir>/deploys/<deploy id>/`: the received `artifact.tar.gz`, then the
// unpacked `root/`. It is removed when the deploy ends, whatever the outcome, and everything in
// it is removed at start: a deploy whose node crashed leaves nothing behind, and its record, when
// still in flight, is failed `internal` naming the restart.
//
// A publish that exits 0 has moved the fleet-wide selector: the deployment serves, whatever the
// bucket does next (docs/deploys.md "A publish the bucket cut short"). The selector is the truth
// and the records follow it: the outcome is noted in the staging entry (`published.json`) before
// anything else, and the application record, the deployment note and the deploy record are then
// written, each step retried while the bucket does not answer, the deploy counting as in flight
// meanwhile. A node stopped or killed before they are written settles them from the note when it
// starts again.

import { writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { isProblem, Problem } from '../../problem.ts';
import {
  bucketEnvironment,
  publishEnvironment,
  runtimeBaseEnvironment,
} from '../../runtime-contract/environment.ts';
import { readSecrets } from '../../secrets/secrets.ts';
import type { DaemonService, Deploys, NodeContext, StagedDeploy } from '../context.ts';
import { signalGroup } from '../fleet/process-leftovers.ts';
import { DeployLimits } from './limits.ts';
import { publishedSteps } from './published.ts';
import {
  type AcceptorView,
  applicationOfDeployId,
  type DeployRecord,
  DeployRecordWriter,
  type DeployStatus,
  isTerminal,
  PROGRESS_BEAT_MS,
  readDeployRecord,
  statusOf,
} from './records.ts';
import { type Published, RuntimeProbe, runPublish } from './runner.ts';
import { findSkew, readNodeRecords, readRuntimePairs, versionSkew } from './skew.ts';
import { StandbyPublisher } from './standby.ts';

/** One accepted deploy on this node, from acceptance to its end: what intake staged, and its run. */
interface Task extends StagedDeploy {
  phase: 'queued' | 'active' | 'ending';
  queuedTimer?: NodeJS.Timeout;
  beat?: NodeJS.Timeout;
  abort: AbortController;
  done?: Promise<void>;
}

export class DeployService implements DaemonService, Deploys {
  readonly name = 'deploys';
  readonly probe = new RuntimeProbe();
  #ctx: NodeContext | null = null;
  #staging: string | null = null;
  #limits: DeployLimits | null = null;
  readonly #queue: Task[] = [];
  readonly #tasks = new Map<string, Task>();
  readonly #stopping = new AbortController();
  /** Deploys a previous run left published, whose records this run is writing. */
  readonly #settling = new Set<string>();
  #startedMs = Date.now();
  /** The publisher kept waiting for the next deploy (standby.ts). */
  #standby: StandbyPublisher | null = null;

  async start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    this.#startedMs = Date.now();
    this.#limits = new DeployLimits(ctx.settings.deploy);
    const staging = join(ctx.settings.node.stateDir, 'deploys');
    try {
      const leftovers = await clearStaging(staging);
      await mkdir(staging, { recursive: true, mode: 0o700 });
      this.#staging = staging;
      this.#standby = new StandbyPublisher({
        cellBin: ctx.settings.runtime.cellBin,
        cwd: staging,
        env: () => ({
          ...runtimeBaseEnvironment(process.env, ctx.settings.runtime.cellEnv),
          ...bucketEnvironment(ctx.settings.bucket, ctx.store.description),
        }),
        log: ctx.log,
      });
      this.#standby.fill();
      if (leftovers.length > 0) {
        // Records are settled in the background: the node serves meanwhile.
        void this.#failLeftovers(leftovers);
      }
    } catch (err) {
      ctx.log.error({ err, staging }, 'deploy staging directory unavailable; deploys are refused');
    }
    ctx.deploys = this;
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    const standbyStopped = this.#standby?.stop();
    const ctx = this.#ctx;
    const tasks = [...this.#tasks.values()];
    for (const task of tasks) {
      if (task.phase === 'queued') {
        this.#removeFromQueue(task);
        task.done = this.#end(task, new Problem('internal', 'Node stopped', this.#stoppedDetail(task)));
      } else {
        task.abort.abort();
      }
    }
    await Promise.allSettled([...tasks.map((task) => task.done), standbyStopped]);
    // A publish whose records could not be written yet keeps its note for the next start.
    if (this.#staging) await clearStaging(this.#staging, { keepPublished: true }).catch(() => {});
    if (ctx?.deploys === this) ctx.deploys = undefined;
  }

  /** The limits (for tests and /v1/state). */
  get limits(): DeployLimits {
    if (!this.#limits) throw new Error('the deploy service has not started');
    return this.#limits;
  }

  /** Aborted when the node stops: intake gives up receiving. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /** Whether this node runs this deploy now (queued, active, or writing how it ended). */
  runs(id: string): boolean {
    return this.#tasks.has(id) || this.#settling.has(id);
  }

  /**
   * Calls `watcher` with each record this node writes or finds written for a deploy it runs, from
   * now on; answers the record as it stands and how to stop, or null when it does not run the
   * deploy (then the bucket holds its last record).
   */
  watchRecord(
    id: string,
    watcher: (record: DeployRecord) => void,
  ): { record: DeployRecord; stop: () => void } | null {
    const task = this.#tasks.get(id);
    if (!task) return null;
    return { record: task.writer.record, stop: task.writer.watch(watcher) };
  }

  /**
   * What this node says of a deploy it accepted: it works on it, or why not. A deploy it no
   * longer runs was accepted by an earlier run of the node (it restarted), or ended while its
   * record could not be written and the node is stopping.
   */
  view(record: DeployRecord): AcceptorView {
    if (this.runs(record.id)) return { answering: true };
    const accepted = Date.parse(record.createdAt);
    if (Number.isFinite(accepted) && accepted < this.#startedMs) {
      return {
        answering: false,
        why: `it restarted at ${new Date(this.#startedMs).toISOString()}, after accepting the deploy`,
      };
    }
    return { answering: false, why: 'it stopped working on the deploy without recording how it ended' };
  }

  /**
   * The staging directory and the runtime's version: both must be there to accept a deploy,
   * else `capability-missing` (docs/api.md: no deploy runner, or no file-backed artifact stager).
   */
  async capabilities(): Promise<{ staging: string; runtimeVersion: string }> {
    const ctx = this.#context();
    if (!this.#staging || this.#stopping.signal.aborted) {
      throw new Problem(
        'capability-missing',
        'No artifact stager',
        `node ${ctx.nodeId} has no usable staging directory under ${ctx.settings.node.stateDir}; see its log`,
      );
    }
    const bin = ctx.settings.runtime.cellBin;
    const runtimeVersion = await this.probe.version(bin);
    if (!runtimeVersion) {
      throw new Problem(
        'capability-missing',
        'No deploy runner',
        `node ${ctx.nodeId} has no runnable runtime at ${bin} (--cell-bin): \`cell --version\` did not answer`,
      );
    }
    return { staging: this.#staging, runtimeVersion };
  }

  /** `version-skew` when another answering node serves or crash-loops the application on another runtime. */
  async checkVersionSkew(application: string, runtimeVersion: string): Promise<void> {
    const ctx = this.#context();
    const [nodes, pairs] = await Promise.all([readNodeRecords(ctx.store), readRuntimePairs(ctx.store)]);
    const skewed = findSkew(application, runtimeVersion, ctx.nodeId, nodes, pairs, Date.now());
    if (skewed.length > 0) throw versionSkew(application, runtimeVersion, ctx.nodeId, skewed, pairs);
  }

  /** Takes a staged, recorded deploy into the queue; it runs when a runner slot is free. */
  enqueue(staged: StagedDeploy): DeployStatus {
    const ctx = this.#context();
    const task: Task = { ...staged, phase: 'queued', abort: new AbortController() };
    this.#tasks.set(task.id, task);
    this.#queue.push(task);
    const queueMs = ctx.settings.deploy.queueTimeoutMs;
    task.queuedTimer = setTimeout(() => {
      if (task.phase !== 'queued') return;
      this.#removeFromQueue(task);
      task.done = this.#end(
        task,
        new Problem(
          'deploy-timeout',
          'Deploy timed out',
          `the deploy waited ${queueMs} ms in the queue of node ${ctx.nodeId} for a runner (deploy.queueTimeoutMs)`,
        ),
      );
    }, queueMs);
    task.beat = setInterval(() => void this.#beat(task), PROGRESS_BEAT_MS);
    const status = statusOf(task.writer.record);
    this.#pump();
    return status;
  }

  /** Starts queued deploys, oldest first, while runner slots are free. */
  #pump(): void {
    for (const task of [...this.#queue]) {
      if (this.#stopping.signal.aborted) return;
      if (!this.limits.canActivate(task.application)) continue;
      this.#removeFromQueue(task);
      task.phase = 'active';
      task.ticket.activate();
      task.done = this.#run(task);
    }
  }

  async #run(task: Task): Promise<void> {
    const ctx = this.#context();
    let outcome: Published | Problem;
    try {
      // The record's move and the secrets' names are two bucket round trips: taken at once.
      const [current, secrets] = await Promise.all([
        task.writer.update({ state: 'uploading' }),
        secretNames(ctx, task.application),
      ]);
      if (!current) return await this.#end(task, null);
      // This node's runtime process is told to look as soon as the runtime says the selector
      // moved, before the publisher has exited; the deploy's outcome is still its exit's.
      let told = false;
      const tellRuntime = () => {
        if (told) return;
        told = true;
        ctx.fleet?.selectorMoved(task.application);
      };
      const published = await runPublish({
        cellBin: ctx.settings.runtime.cellBin,
        cwd: task.root,
        config: task.config,
        env: publishEnv(ctx, task.application, secrets, task.id),
        timeoutMs: ctx.settings.deploy.taskTimeoutMs,
        outputBytes: ctx.settings.deploy.outputBytes,
        signal: task.abort.signal,
        // Noted beside the artifact: a restart after a crash stops a publish still running.
        onSpawn: (pid, publisher) => {
          writeFileSync(join(task.dir, PID_FILE), String(pid));
          ctx.log.info({ deploy: task.id, pid, publisher }, `deploy ${task.id} publishing`);
        },
        standby: this.#standby ?? undefined,
        onSelectorMoved: tellRuntime,
      });
      // The runtime has moved the selector: the deployment is live. Noted, so that even a restart
      // settles the deploy as what it is. Telling the runtime processes (this node's, and the
      // other nodes running it, which also follow the application record) needs no note first:
      // they follow the selector, which names the deployment already.
      try {
        writeFileSync(join(task.dir, PUBLISHED_FILE), JSON.stringify(published));
      } catch (err) {
        ctx.log.warn({ err, deploy: task.id }, 'could not note a finished publish beside its artifact');
      }
      tellRuntime();
      outcome = published;
    } catch (err) {
      if (this.#stopping.signal.aborted) {
        outcome = new Problem('internal', 'Node stopped', this.#stoppedDetail(task));
      } else if (isProblem(err)) {
        outcome = err;
      } else {
        ctx.log.error({ err, deploy: task.id }, 'deploy failed unexpectedly');
        outcome = new Problem(
          'internal',
          'Deploy failed',
          `node ${ctx.nodeId} failed to run the deploy; see its log`,
        );
      }
    }
    await this.#end(task, outcome);
  }

  /** Records how a task ended (nothing when null), removes its staging and frees its slot. */
  async #end(task: Task, outcome: Published | Problem | null): Promise<void> {
    const ctx = this.#context();
    task.phase = 'ending';
    clearTimeout(task.queuedTimer);
    clearInterval(task.beat);
    let settled = true;
    if (outcome instanceof Problem) {
      // Retried while the bucket does not answer: a record left in flight would be judged later
      // with a reason that is not the deploy's.
      for (let attempt = 0; ; attempt++) {
        try {
          await task.writer.fail(outcome.code, outcome.detail ?? outcome.title);
          break;
        } catch (err) {
          if (attempt === 0) ctx.log.error({ err, deploy: task.id }, 'could not record the end of a deploy');
          if (!(await this.#waitToRetry(attempt))) break;
        }
      }
    } else if (outcome) {
      // The artifact has served its purpose; the note beside it stays until the records agree.
      await rm(task.root, { recursive: true, force: true }).catch(() => {});
      settled = await this.#settlePublished(task.writer, outcome);
    }
    const ended = task.writer.record;
    if (ended.state === 'deployed' || ended.state === 'failed') {
      ctx.events?.emit({
        kind: `deploy.${ended.state}`,
        application: task.application,
        actor: ended.by,
        deploy: task.id,
        ...(ended.deployment ? { deployment: ended.deployment } : {}),
        ...(ended.code ? { code: ended.code, detail: ended.detail } : {}),
      });
    }
    ctx.log.info(
      {
        deploy: task.id,
        application: task.application,
        state: task.writer.record.state,
        code: task.writer.record.code,
      },
      `deploy ${task.id} ${task.writer.record.state}`,
    );
    if (settled) await rm(task.dir, { recursive: true, force: true }).catch(() => {});
    task.ticket.release();
    this.#tasks.delete(task.id);
    // The next deploy's publisher starts once this one has ended, and the runtime has switched to
    // what it published: not while they still need the CPU.
    this.#standby?.fillSoon();
    this.#pump();
  }

  /** Refreshes an in-flight record; a record changed by someone else stops the task. */
  async #beat(task: Task): Promise<void> {
    if (task.phase === 'ending') return;
    try {
      if (await task.writer.update()) return;
    } catch (err) {
      this.#context().log.warn({ err, deploy: task.id }, 'could not refresh a deploy record');
      return;
    }
    // The record was failed elsewhere (the reaper judged this node dead): stop working on it.
    if (task.phase === 'queued') {
      this.#removeFromQueue(task);
      task.done = this.#end(task, null);
    } else if (task.phase === 'active') {
      task.abort.abort();
    }
  }

  #removeFromQueue(task: Task): void {
    const at = this.#queue.indexOf(task);
    if (at >= 0) this.#queue.splice(at, 1);
    clearTimeout(task.queuedTimer);
  }

  #stoppedDetail(task: Task): string {
    return `node ${this.#context().nodeId} stopped while the deploy was ${task.phase === 'queued' ? 'queued' : 'publishing'}; deploy again`;
  }

  /**
   * Settles the records of deploys a previous run of this node left staged: one whose publish
   * moved the selector (its note is there) as deployed, retrying while the bucket does not
   * answer; any other in flight is failed.
   */
  async #failLeftovers(leftovers: Leftover[]): Promise<void> {
    const ctx = this.#context();
    for (const { id, published } of leftovers) {
      const application = applicationOfDeployId(id);
      if (!application) continue;
      try {
        if (published) {
          this.#settling.add(id);
          await this.#settleLeftover(id, published).finally(() => this.#settling.delete(id));
          continue;
        }
        const found = await readDeployRecord(ctx.store, application, id);
        if (!found || isTerminal(found.record.state) || found.record.node !== ctx.nodeId) continue;
        // Conditional on the record as read: a concurrent reaper's judgement stands.
        const writer = new DeployRecordWriter(ctx.store, found.record, found.etag);
        await writer.update({
          state: 'failed',
          code: 'internal',
          detail: `node ${ctx.nodeId} restarted while the deploy was ${found.record.state}; deploy again`,
        });
      } catch (err) {
        ctx.log.warn({ err, deploy: id }, 'could not settle a deploy left by a previous run');
      }
    }
  }

  /** A leftover whose publish moved the selector: its records are written as for any publish. */
  async #settleLeftover(id: string, published: Published): Promise<void> {
    const ctx = this.#context();
    const dir = join(this.#staging!, id);
    let found: Awaited<ReturnType<typeof readDeployRecord>> = null;
    for (let attempt = 0; !found; attempt++) {
      try {
        found = await readDeployRecord(ctx.store, published.application, id);
        if (!found) break;
      } catch (err) {
        if (!(await this.#retryLater(attempt, id, err))) return;
      }
    }
    if (found && found.record.node === ctx.nodeId) {
      const writer = new DeployRecordWriter(ctx.store, found.record, found.etag);
      if (!(await this.#settlePublished(writer, published))) return;
      ctx.events?.emit({
        kind: 'deploy.deployed',
        application: published.application,
        actor: writer.record.by,
        deploy: id,
        deployment: published.deployment,
      });
    }
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }

  /**
   * Brings the registry in line with a publish that moved the selector: the application record
   * names what the selector names, the deployment note says who made it, and the deploy record
   * is `deployed`. Each step is retried while the bucket does not answer, until it lands or this
   * node stops (then the staging note settles it at the next start); answers whether it landed.
   * A `deploy-timeout` judgement written meanwhile (the record stood still while the bucket was
   * away) is replaced: the deployment serves, so the deploy did not time out.
   */
  async #settlePublished(writer: DeployRecordWriter, published: Published): Promise<boolean> {
    const ctx = this.#context();
    const id = writer.record.id;
    // A first deploy should answer through the ingress within a poll, not a resync interval.
    const steps = publishedSteps(ctx.store, writer, published, () => ctx.fleet?.changed());
    for (const step of steps) {
      for (let attempt = 0; ; attempt++) {
        try {
          await step();
          break;
        } catch (err) {
          if (isProblem(err) && err.code === 'not-found') break; // the application was deleted meanwhile
          if (!(await this.#retryLater(attempt, id, err))) return false;
        }
      }
    }
    return true;
  }

  /**
   * After a failed write of a published deploy's records: logs the first failure, waits a little
   * longer each time (at most SETTLE_RETRY_MAX_MS, so the bucket's return is seen within a pass),
   * and answers false once the node stops.
   */
  async #retryLater(attempt: number, id: string, err: unknown): Promise<boolean> {
    if (attempt === 0 && !this.#stopping.signal.aborted) {
      this.#context().log.warn(
        { err, deploy: id },
        'the deployment is live, but its records could not be written; retrying until the bucket answers',
      );
    }
    return this.#waitToRetry(attempt);
  }

  /** Waits before another attempt (250 ms doubling to 2 s); false once the node stops. */
  async #waitToRetry(attempt: number): Promise<boolean> {
    if (this.#stopping.signal.aborted) return false;
    const wait = Math.min(SETTLE_RETRY_FIRST_MS * 2 ** attempt, SETTLE_RETRY_MAX_MS);
    await delay(wait, undefined, { signal: this.#stopping.signal }).catch(() => {});
    return !this.#stopping.signal.aborted;
  }

  #context(): NodeContext {
    if (!this.#ctx) throw new Error('the deploy service has not started');
    return this.#ctx;
  }
}

/** The deploy service of a daemon. */
export function deployService(): DeployService {
  return new DeployService();
}

const PID_FILE = 'publish.pid';
/** The outcome of a publish that moved the selector, until its records say so. */
const PUBLISHED_FILE = 'published.json';
/** Waits between attempts to write a published deploy's records: 250 ms doubling to 2 s. */
const SETTLE_RETRY_FIRST_MS = 250;
const SETTLE_RETRY_MAX_MS = 2_000;

/** A staging entry a previous run left: its deploy, and what its publish moved the selector to. */
interface Leftover {
  id: string;
  published?: Published;
}

/**
 * The staging entries a previous run left, removed; answers them. A publish the previous run
 * left running (its node was killed) is stopped first: its process group, when that process
 * still works inside the entry. An entry with a publish's outcome (`published.json`) is kept
 * for its records to be written; with `keepPublished` (a node stopping) it is not even read.
 */
async function clearStaging(staging: string, options: { keepPublished?: boolean } = {}): Promise<Leftover[]> {
  let names: string[];
  try {
    names = await readdir(staging);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const leftovers: Leftover[] = [];
  for (const name of names) {
    const entry = join(staging, name);
    const published = await readPublished(entry);
    if (published) {
      if (!options.keepPublished) leftovers.push({ id: name, published });
      continue;
    }
    await stopLeftoverPublish(entry);
    await rm(entry, { recursive: true, force: true });
    leftovers.push({ id: name });
  }
  return leftovers;
}

async function readPublished(entry: string): Promise<Published | undefined> {
  try {
    const value = JSON.parse(await readFile(join(entry, PUBLISHED_FILE), 'utf8')) as Published;
    const fields = [value.application, value.script, value.deployment];
    if (fields.every((f) => typeof f === 'string' && f !== '') && Array.isArray(value.warnings)) return value;
  } catch {
    // None, or unreadable: not a publish that finished.
  }
  return undefined;
}

async function stopLeftoverPublish(entry: string): Promise<void> {
  const pid = Number((await readFile(join(entry, PID_FILE), 'utf8').catch(() => '')).trim());
  if (!Number.isSafeInteger(pid) || pid <= 1) return;
  // Only a process still working in this entry: a recycled pid belongs to someone else.
  const cwd = await realpath(`/proc/${pid}/cwd`).catch(() => null);
  const root = await realpath(entry).catch(() => entry);
  if (!cwd || !(cwd === root || cwd.startsWith(`${root}/`))) return;
  signalGroup(pid, 'SIGKILL');
}

/** The application's secret names, for the runtime to refuse a var of the same name. */
async function secretNames(ctx: NodeContext, application: string): Promise<string[]> {
  const found = await readSecrets(ctx.store, application);
  return Object.keys(found?.doc.secrets ?? {});
}

/**
 * The runtime's environment for one publish: the node's own environment without its `SVC_*`
 * settings (the bucket credentials are handed over explicitly, nothing else of svc's), the
 * `--cell-env` values, the application, and the bucket.
 */
export function publishEnv(
  ctx: NodeContext,
  application: string,
  secrets: string[],
  deploy?: string,
): NodeJS.ProcessEnv {
  return {
    ...runtimeBaseEnvironment(process.env, ctx.settings.runtime.cellEnv),
    ...publishEnvironment(application, secrets, deploy),
    ...bucketEnvironment(ctx.settings.bucket, ctx.store.description),
  };
}
