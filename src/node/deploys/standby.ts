// The publisher kept waiting (docs/deploys.md "Publishing", docs/runtime.md "A publisher kept
// waiting"): one `cell publish --standby` process the node starts before any deploy comes, so a
// deploy's publish finds Node started, the publish's modules loaded and esbuild's service running.
// It takes exactly one job (handed on its stdin by runPublish) and exits after it; the next one is
// started once that deploy has ended. A runtime that does not offer `--standby` (it exits before
// saying it is ready) is published with one-shot `cell publish` as before. The waiting process
// reads its stdin and nothing else: it uses no CPU while it waits, and it ends when the node
// stops it or, should the node die, when its stdin closes.

import { type ChildProcess, spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { signalGroup } from '../fleet/process-leftovers.ts';

/** The line `cell publish --standby` writes once it waits for its job (runtime/src/publish-standby.ts). */
export const STANDBY_READY_LINE = '{"standby":"ready"}';
/** The line it writes first once it has read its job: until then, a publisher that ends never took it. */
export const STANDBY_TOOK_LINE = '{"standby":"took"}';
/** How long a deploy waits for a standby that is still loading before it publishes one-shot. */
const READY_WAIT_MS = 10_000;
/**
 * How long after a deploy ended the next publisher starts: its loading (about 0.1 s of a core)
 * then does not compete with the runtime switching to the deployment just published.
 */
export const FILL_DELAY_MS = 250;
/** Standby starts that may fail (exit before ready) in a row before the node stops trying. */
const MAX_FAILED_STARTS = 3;

interface Waiting {
  child: ChildProcess;
  /** The runtime file's modification time when the process started: a replaced runtime is not used. */
  mtimeMs: number;
  /** True once it said it is ready; false when it exited first. */
  ready: Promise<boolean>;
  exited: boolean;
  /** Stopped by the node (a replaced runtime, a node stopping): no failure of the runtime's. */
  discarded: boolean;
}

export interface StandbyOptions {
  cellBin: string;
  /** Where the waiting process runs until its job names the project (any existing folder). */
  cwd: string;
  /** The environment every publish of this node shares (bucket, runtime settings); a job brings its own whole. */
  env: () => NodeJS.ProcessEnv;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** How long a deploy waits for a publisher still loading (default READY_WAIT_MS; tests shorten it). */
  readyWaitMs?: number;
}

export class StandbyPublisher {
  readonly #options: StandbyOptions;
  #waiting: Waiting | null = null;
  #failedStarts = 0;
  /** The runtime file (by modification time) found not to offer `--standby`. */
  #refusedBy: number | null = null;
  #stopped = false;
  #fillTimer: NodeJS.Timeout | undefined;

  constructor(options: StandbyOptions) {
    this.#options = options;
  }

  /** The waiting process's id (tests and docs' measurements), if one waits. */
  get pid(): number | undefined {
    return this.#waiting?.child.pid;
  }

  /** fill(), after FILL_DELAY_MS (a deploy has just ended). */
  fillSoon(): void {
    if (this.#stopped || this.#fillTimer) return;
    this.#fillTimer = setTimeout(() => {
      this.#fillTimer = undefined;
      this.fill();
    }, FILL_DELAY_MS);
    this.#fillTimer.unref();
  }

  /** Starts a waiting publisher unless one waits, the node stops, or the runtime offers none. */
  fill(): void {
    clearTimeout(this.#fillTimer);
    this.#fillTimer = undefined;
    if (this.#stopped || this.#waiting !== null) return;
    const mtimeMs = runtimeMtime(this.#options.cellBin);
    if (mtimeMs === null) return;
    if (this.#refusedBy !== null) {
      if (this.#refusedBy === mtimeMs) return;
      // The runtime was replaced: the new one may offer it.
      this.#refusedBy = null;
      this.#failedStarts = 0;
    }
    let child: ChildProcess;
    try {
      child = spawn(this.#options.cellBin, ['publish', '--standby'], {
        cwd: this.#options.cwd,
        env: this.#options.env(),
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group, as a one-shot publish: a deadline stops what it started too.
        detached: true,
      });
    } catch {
      return;
    }
    child.stdin!.on('error', () => {});
    const stderr: string[] = [];
    const onStderr = (chunk: Buffer) => {
      if (stderr.join('').length < 4096) stderr.push(chunk.toString('utf8'));
    };
    child.stderr!.on('data', onStderr);
    const waiting: Waiting = {
      child,
      mtimeMs,
      exited: false,
      discarded: false,
      ready: Promise.resolve(false),
    };
    waiting.ready = new Promise<boolean>((resolve) => {
      let seen = '';
      let said = false;
      const onData = (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        if (!seen.split('\n').slice(0, -1).includes(STANDBY_READY_LINE)) return;
        // What comes next is the job's output, for runPublish to read.
        child.stdout!.off('data', onData);
        child.stdout!.pause();
        child.stderr!.off('data', onStderr);
        child.stderr!.pause();
        said = true;
        this.#failedStarts = 0;
        resolve(true);
      };
      child.stdout!.on('data', onData);
      child.once('error', () => resolve(false));
      child.once('exit', (code, signal) => {
        waiting.exited = true;
        if (this.#waiting === waiting) this.#waiting = null;
        resolve(false);
        // Exited before it said it was ready: the runtime does not offer it (or cannot start).
        if (!said && !waiting.discarded && !this.#stopped)
          this.#failedStart(mtimeMs, code, signal, stderr.join(''));
      });
    });
    this.#waiting = waiting;
  }

  /**
   * The waiting publisher, taken out of the pool (the caller hands it its job and owns it); null
   * when there is none ready, and the deploy publishes one-shot.
   */
  async take(): Promise<ChildProcess | null> {
    const waiting = this.#waiting;
    if (!waiting || waiting.exited) return null;
    if (runtimeMtime(this.#options.cellBin) !== waiting.mtimeMs) {
      // The runtime was replaced while it waited: its job would run the old release.
      this.#discard(waiting);
      return null;
    }
    let timer: NodeJS.Timeout | undefined;
    const ready = await Promise.race([
      waiting.ready,
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), this.#options.readyWaitMs ?? READY_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (this.#waiting !== waiting) return null;
    this.#waiting = null;
    if (!ready || waiting.exited) {
      // Loading that long without a word counts as a refusal, as an exit would: a runtime
      // that does not understand the flag must not hold up every deploy.
      if (!waiting.exited) this.#failedStart(waiting.mtimeMs, null, null, 'not ready in time');
      this.#discard(waiting);
      return null;
    }
    return waiting.child;
  }

  /** Stops the waiting publisher, if any, and starts no other; resolves once it has exited. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#fillTimer);
    const waiting = this.#waiting;
    this.#waiting = null;
    if (!waiting || waiting.exited) return;
    const exited = new Promise<void>((resolve) => waiting.child.once('exit', () => resolve()));
    this.#discard(waiting);
    const hard = setTimeout(() => signalGroup(waiting.child.pid, 'SIGKILL'), 5_000);
    await exited;
    clearTimeout(hard);
  }

  #discard(waiting: Waiting): void {
    waiting.discarded = true;
    if (this.#waiting === waiting) this.#waiting = null;
    // Its stdin ending is already "no job"; the signal makes sure, esbuild's service included.
    waiting.child.stdin?.end();
    signalGroup(waiting.child.pid, 'SIGTERM');
  }

  #failedStart(mtimeMs: number, code: number | null, signal: NodeJS.Signals | null, stderr: string): void {
    this.#failedStarts++;
    if (this.#failedStarts < MAX_FAILED_STARTS) return;
    this.#refusedBy = mtimeMs;
    this.#options.log.info(
      {
        cellBin: this.#options.cellBin,
        exit: signal ?? code,
        output: stderr.trim().slice(-500),
      },
      'the runtime offers no waiting publisher (cell publish --standby); deploys publish one-shot',
    );
  }
}

function runtimeMtime(bin: string): number | null {
  try {
    return statSync(bin).mtimeMs;
  } catch {
    return null;
  }
}
