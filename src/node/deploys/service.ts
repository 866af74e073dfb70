// The deploy runner of one node (docs/deploys.md "Intake", "Capacity", "Publishing", "Deploy
// records"; docs/cli.md "svc sail" deploy limits and deadlines): the staging directory,
// the queue and its limits, `cell publish` for each accepted deploy, and the record of each state.
//
// Staging lives in `<state dir>/deploys/<deploy id>/`: the received `artifact.tar.gz`, then the
// unpacked `root/`. It is removed when the deploy ends, whatever the outcome, and everything in
// it is removed at start: a deploy whose node crashed leaves nothing behind, and its record, when
// still in flight, is failed `internal` naming the restart.

import { writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isProblem, Problem } from '../../problem.ts';
import { updateApplication } from '../../registry/applications.ts';
import { writeDeploymentNote } from '../../registry/deployments.ts';
import {
  bucketEnvironment,
  publishEnvironment,
  runtimeBaseEnvironment,
} from '../../runtime-contract/environment.ts';
import { readSecrets } from '../../secrets/secrets.ts';
import type { DaemonService, Deploys, NodeContext, StagedDeploy } from '../context.ts';
import { DeployLimits } from './limits.ts';
import {
  applicationOfDeployId,
  DeployRecordWriter,
  type DeployStatus,
  isTerminal,
  PROGRESS_BEAT_MS,
  readDeployRecord,
  statusOf,
} from './records.ts';
import { type Published, RuntimeProbe, runPublish } from './runner.ts';
import { findSkew, readNodeRecords, readRuntimePairs, versionSkew } from './skew.ts';

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

  async start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    this.#limits = new DeployLimits(ctx.settings.deploy);
    const staging = join(ctx.settings.node.stateDir, 'deploys');
    try {
      const leftovers = await clearStaging(staging);
      await mkdir(staging, { recursive: true, mode: 0o700 });
      this.#staging = staging;
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
    await Promise.allSettled(tasks.map((task) => task.done));
    if (this.#staging) await clearStaging(this.#staging).catch(() => {});
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

  /** Whether this node runs this deploy now (queued or active). */
  runs(id: string): boolean {
    return this.#tasks.has(id);
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
      if (!(await task.writer.update({ state: 'uploading' }))) return await this.#end(task, null);
      const published = await runPublish({
        cellBin: ctx.settings.runtime.cellBin,
        cwd: task.root,
        config: task.config,
        env: publishEnv(ctx, task.application, await secretNames(ctx, task.application)),
        timeoutMs: ctx.settings.deploy.taskTimeoutMs,
        outputBytes: ctx.settings.deploy.outputBytes,
        signal: task.abort.signal,
        // Noted beside the artifact: a restart after a crash stops a publish still running.
        onSpawn: (pid) => writeFileSync(join(task.dir, PID_FILE), String(pid)),
      });
      // The runtime has moved the selector: this node's runtime process looks at it at once (other
      // nodes follow the application record). The deployment is live whatever the record says,
      // so failing to note it there is logged, not recorded as a failed deploy.
      ctx.fleet?.selectorMoved(task.application);
      await recordDeployment(ctx, task.application, published.deployment).catch((err) =>
        ctx.log.warn({ err, deploy: task.id }, 'could not note the deployment on the application record'),
      );
      // Its provenance outlives the deploy record (reaped after 7 days): history reads it.
      const { by, source } = task.writer.record;
      await writeDeploymentNote(ctx.store, {
        v: 1,
        application: task.application,
        script: published.script,
        deployment: published.deployment,
        deploy: task.id,
        by,
        deployedAt: new Date().toISOString(),
        ...(source ? { source } : {}),
      }).catch((err) => ctx.log.warn({ err, deploy: task.id }, 'could not note who made the deployment'));
      // A first deploy should answer through the ingress within a poll, not a resync interval.
      ctx.fleet?.changed();
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
    try {
      if (outcome instanceof Problem) {
        await task.writer.fail(outcome.code, outcome.detail ?? outcome.title);
      } else if (outcome) {
        await task.writer.update({
          state: 'deployed',
          deployment: outcome.deployment,
          script: outcome.script,
          ...(outcome.warnings.length > 0 ? { warnings: outcome.warnings } : {}),
        });
      }
    } catch (err) {
      ctx.log.error({ err, deploy: task.id }, 'could not record the end of a deploy');
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
    await rm(task.dir, { recursive: true, force: true }).catch(() => {});
    task.ticket.release();
    this.#tasks.delete(task.id);
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

  /** Fails the in-flight records of deploys a previous run of this node left staged. */
  async #failLeftovers(ids: string[]): Promise<void> {
    const ctx = this.#context();
    for (const id of ids) {
      const application = applicationOfDeployId(id);
      if (!application) continue;
      try {
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

/**
 * The staging entries a previous run left, removed; answers their names (deploy ids). A publish
 * the previous run left running (its node was killed) is stopped first: its process group, when
 * that process still works inside the entry.
 */
async function clearStaging(staging: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(staging);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  for (const name of names) {
    const entry = join(staging, name);
    await stopLeftoverPublish(entry);
    await rm(entry, { recursive: true, force: true });
  }
  return names;
}

async function stopLeftoverPublish(entry: string): Promise<void> {
  const pid = Number((await readFile(join(entry, PID_FILE), 'utf8').catch(() => '')).trim());
  if (!Number.isSafeInteger(pid) || pid <= 1) return;
  // Only a process still working in this entry: a recycled pid belongs to someone else.
  const cwd = await realpath(`/proc/${pid}/cwd`).catch(() => null);
  const root = await realpath(entry).catch(() => entry);
  if (!cwd || !(cwd === root || cwd.startsWith(`${root}/`))) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Gone meanwhile.
  }
}

/** The application's secret names, for the runtime to refuse a var of the same name. */
async function secretNames(ctx: NodeContext, application: string): Promise<string[]> {
  const found = await readSecrets(ctx.store, application);
  return Object.keys(found?.doc.secrets ?? {});
}

/** The application record names the deployment the last successful deploy produced. */
async function recordDeployment(ctx: NodeContext, application: string, deployment: string): Promise<void> {
  try {
    await updateApplication(ctx.store, application, (current) =>
      current.deployment === deployment ? null : { ...current, deployment },
    );
  } catch (err) {
    // Deleted meanwhile: the deploy still published; the record says so.
    if (isProblem(err) && err.code === 'not-found') return;
    throw err;
  }
}

/**
 * The runtime's environment for one publish: the node's own environment without its `SVC_*`
 * settings (the bucket credentials are handed over explicitly, nothing else of svc's), the
 * `--cell-env` values, the application, and the bucket.
 */
export function publishEnv(ctx: NodeContext, application: string, secrets: string[]): NodeJS.ProcessEnv {
  return {
    ...runtimeBaseEnvironment(process.env, ctx.settings.runtime.cellEnv),
    ...publishEnvironment(application, secrets),
    ...bucketEnvironment(ctx.settings.bucket, ctx.store.description),
  };
}
