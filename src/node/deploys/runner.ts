// Publishing through the runtime (docs/runtime.md): `cell publish
// --config <file>` run with the unpacked artifact as its working directory, the application in
// `CELL_APP` and the bucket in `SVC_S3_*`. Its last stdout line is JSON naming the deployment
// (`{"application","script","deployment"}`); a non-zero exit is `publish-failed` carrying the tail
// of its output (at most `deploy.outputBytes`). The task deadline kills the whole process group.

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { access, constants, stat } from 'node:fs/promises';
import { Problem } from '../../problem.ts';
import { signalGroup } from '../fleet/process-leftovers.ts';
import { STANDBY_TOOK_LINE, type StandbyPublisher } from './standby.ts';

/** What the runtime's last stdout line names, and the warnings it printed on the way. */
export interface Published {
  application: string;
  script: string;
  deployment: string;
  /** The text of each `cell: warning: <text>` line of its stderr, in order. */
  warnings: string[];
}

/** At most this many warnings are kept, each cut to WARNING_CHARS. */
export const MAX_WARNINGS = 32;
const WARNING_CHARS = 500;
const WARNING_PREFIX = 'cell: warning: ';

export interface PublishOptions {
  cellBin: string;
  /** The unpacked artifact. */
  cwd: string;
  /** The worker config at its root, passed untouched. */
  config: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  outputBytes: number;
  /** Aborting kills the process (the record was failed elsewhere, or the node stops). */
  signal?: AbortSignal;
  /**
   * Told the process id once it runs (the service notes it beside the staged artifact), and whether
   * it is the waiting publisher or a process started for this publish.
   */
  onSpawn?: (pid: number, publisher: 'standby' | 'one-shot') => void;
  /**
   * The node's waiting publisher (standby.ts): when one is ready, it is handed this publish as its
   * job instead of a new process being started; otherwise the publish runs one-shot.
   */
  standby?: StandbyPublisher;
  /**
   * Told once, as soon as a whole stdout line names the deployment: the runtime writes it once the
   * selector has moved, a few milliseconds before its process has exited (docs/deploys.md
   * "Publishing"). What the publish comes to is still its exit's.
   */
  onSelectorMoved?: () => void;
}

const STANDBY_TOOK = Buffer.from(`${STANDBY_TOOK_LINE}\n`);

/** Grace between SIGTERM and SIGKILL when a publish is stopped. */
const KILL_GRACE_MS = 5_000;

/** Runs one publish; answers what it published or throws the failure to record. */
export async function runPublish(options: PublishOptions): Promise<Published> {
  if (options.signal?.aborted)
    throw new Problem('internal', 'Publish stopped', 'the publish was stopped before it started');
  const tail = new OutputTail(options.outputBytes);
  const stdoutTail = new OutputTail(Math.max(options.outputBytes, 4096));
  const taken = (await options.standby?.take()) ?? null;
  let child: ChildProcess;
  if (taken) {
    // The same arguments, environment and working directory a one-shot publish is given (JSON
    // leaves out a variable the environment unsets, as spawn does).
    const job = { cwd: options.cwd, config: options.config, env: options.env };
    taken.stdin!.end(JSON.stringify(job));
    child = taken;
  } else {
    try {
      child = spawn(options.cellBin, ['publish', '--config', options.config], {
        cwd: options.cwd,
        env: options.env,
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its own process group, so a deadline stops the bundler and anything else it started.
        detached: true,
      });
    } catch (err) {
      throw new Problem(
        'internal',
        'Publish could not start',
        `${options.cellBin}: ${(err as Error).message}`,
      );
    }
  }
  if (child.pid !== undefined) options.onSpawn?.(child.pid, taken ? 'standby' : 'one-shot');
  // A waiting publisher says it took the job before anything else: one that ends without saying
  // so died before this deploy reached it, and the publish runs one-shot instead.
  let took = !taken;
  let told = false;
  let before = Buffer.alloc(0);
  child.stdout!.on('data', (chunk: Buffer) => {
    if (!took) {
      before = Buffer.concat([before, chunk]);
      if (before.length < STANDBY_TOOK.length && STANDBY_TOOK.subarray(0, before.length).equals(before))
        return;
      took = true;
      chunk = before.subarray(0, STANDBY_TOOK.length).equals(STANDBY_TOOK)
        ? before.subarray(STANDBY_TOOK.length)
        : before;
      if (chunk.length === 0) return;
    }
    tail.push(chunk);
    stdoutTail.push(chunk);
    if (!told && chunk.at(-1) === 0x0a && lastJsonLine(stdoutTail.text())) {
      told = true;
      options.onSelectorMoved?.();
    }
  });
  const warnings = new WarningLines();
  child.stderr!.on('data', (chunk: Buffer) => {
    tail.push(chunk);
    warnings.push(chunk);
  });
  // A waiting publisher's streams were paused once it said it was ready.
  child.stdout!.resume();
  child.stderr!.resume();

  let timedOut = false;
  let aborted = false;
  const stop = () => {
    signalGroup(child.pid, 'SIGTERM');
    const hard = setTimeout(() => signalGroup(child.pid, 'SIGKILL'), KILL_GRACE_MS);
    hard.unref();
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, options.timeoutMs);
  const onAbort = () => {
    aborted = true;
    stop();
  };
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) onAbort();

  const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
    (resolve) => {
      child.once('error', (error) => resolve({ code: null, signal: null, error }));
      child.once('close', (code, signal) => resolve({ code, signal }));
    },
  );
  clearTimeout(timer);
  options.signal?.removeEventListener('abort', onAbort);
  // Whatever the outcome, nothing of this publish keeps running.
  signalGroup(child.pid, 'SIGKILL');

  if (!took && !timedOut && !aborted) {
    return runPublish({ ...options, standby: undefined });
  }
  if (timedOut) {
    throw new Problem(
      'deploy-timeout',
      'Deploy timed out',
      `cell publish ran longer than ${options.timeoutMs} ms (deploy.taskTimeoutMs) and was stopped${tailText(tail)}`,
    );
  }
  if (aborted) throw new Problem('internal', 'Publish stopped', 'the publish was stopped before it finished');
  if (outcome.error) {
    throw new Problem('internal', 'Publish could not start', `${options.cellBin}: ${outcome.error.message}`);
  }
  if (outcome.code !== 0) {
    const how = outcome.signal ? `was killed by ${outcome.signal}` : `exited with ${outcome.code}`;
    throw new Problem('publish-failed', 'Publish failed', `cell publish ${how}${tailText(tail)}`);
  }
  const published = lastJsonLine(stdoutTail.text());
  if (!published) {
    throw new Problem(
      'publish-failed',
      'Publish failed',
      `cell publish exited 0 but its last stdout line names no deployment${tailText(tail)}`,
    );
  }
  return { ...published, warnings: warnings.done() };
}

/** Collects the `cell: warning: ` lines of a stream split into arbitrary chunks. */
export class WarningLines {
  #partial = '';
  readonly #found: string[] = [];

  push(chunk: Buffer): void {
    const lines = (this.#partial + chunk.toString('utf8')).split('\n');
    this.#partial = lines.pop() ?? '';
    // A line longer than any warning is not one we keep whole: drop what cannot matter.
    if (this.#partial.length > 64 * 1024)
      this.#partial = this.#partial.slice(0, WARNING_CHARS + WARNING_PREFIX.length);
    for (const line of lines) this.#take(line);
  }

  done(): string[] {
    this.#take(this.#partial);
    this.#partial = '';
    return this.#found;
  }

  #take(line: string): void {
    if (!line.startsWith(WARNING_PREFIX) || this.#found.length >= MAX_WARNINGS) return;
    const text = line.slice(WARNING_PREFIX.length).trimEnd();
    if (text !== '')
      this.#found.push(text.length > WARNING_CHARS ? `${text.slice(0, WARNING_CHARS)}…` : text);
  }
}

/** The runtime's version, from `cell --version` (`cell <version>`); cached per executable file. */
export class RuntimeProbe {
  #cache: { bin: string; mtimeMs: number; version: string } | null = null;

  /**
   * The version of the runtime at `bin`; null when there is no runnable runtime there (no file,
   * not executable, or `--version` fails).
   */
  async version(bin: string): Promise<string | null> {
    let mtimeMs: number;
    try {
      await access(bin, constants.X_OK);
      const info = await stat(bin);
      if (!info.isFile()) return null;
      mtimeMs = info.mtimeMs;
    } catch {
      return null;
    }
    if (this.#cache && this.#cache.bin === bin && this.#cache.mtimeMs === mtimeMs) return this.#cache.version;
    const version = await new Promise<string | null>((resolve) => {
      execFile(bin, ['--version'], { timeout: 10_000, maxBuffer: 64 * 1024 }, (err, stdout) => {
        if (err) return resolve(null);
        const match = /^cell (\S+)\s*$/m.exec(String(stdout));
        resolve(match ? match[1]! : null);
      });
    });
    if (version) this.#cache = { bin, mtimeMs, version };
    return version;
  }
}

/** The last `outputBytes` bytes of a stream of chunks. */
export class OutputTail {
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #size = 0;
  truncated = false;

  constructor(limit: number) {
    this.#limit = Math.max(0, limit);
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    while (this.#size > this.#limit && this.#chunks.length > 0) {
      const first = this.#chunks[0]!;
      const excess = this.#size - this.#limit;
      this.truncated = true;
      if (first.length <= excess) {
        this.#chunks.shift();
        this.#size -= first.length;
      } else {
        this.#chunks[0] = first.subarray(excess);
        this.#size -= excess;
      }
    }
  }

  text(): string {
    // A cut may split a UTF-8 sequence: the replacement character marks it.
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

function tailText(tail: OutputTail): string {
  const text = tail.text().trimEnd();
  if (text === '') return '';
  return `; output${tail.truncated ? ' (tail)' : ''}:\n${text}`;
}

function lastJsonLine(stdout: string): Omit<Published, 'warnings'> | null {
  const lines = stdout.split('\n').filter((line) => line.trim() !== '');
  const last = lines[lines.length - 1];
  if (!last) return null;
  try {
    const value = JSON.parse(last) as Partial<Published>;
    if (typeof value?.deployment === 'string' && value.deployment !== '') {
      return {
        application: String(value.application ?? ''),
        script: String(value.script ?? ''),
        deployment: value.deployment,
      };
    }
  } catch {}
  return null;
}
