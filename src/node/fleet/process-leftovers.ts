// Runtime processes a previous run of the daemon left behind (docs/supervisor.md "A restarted
// daemon"). Each `cell serve` leads its own process group, so it outlives a daemon that was killed
// (SIGKILL, a crash) or that exited keeping its applications (SIGUSR2), holding its port and its
// node lease and serving on. The supervisor notes the group and port of every process it runs in
// a small file under the node's state directory; the next supervisor reads it before starting
// anything, adopts the processes that still serve an application it wants, and stops the rest
// (SIGTERM, so the runtime releases its lease; SIGKILL after the grace).

import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';

export interface LeftoverEntry {
  application: string;
  /** Process id of the runtime process, which is also its process group id. */
  pid: number;
  /** The port it listens on; absent in files written before adoption existed (never adopted). */
  port?: number;
}

/** The process file's text for the groups running now (docs/supervisor.md "A full disk"). */
export function processFileText(entries: readonly LeftoverEntry[]): string {
  return `${JSON.stringify({ v: 1, processes: entries })}\n`;
}

/** The groups a previous run noted; none when there is no readable file. */
export function readLeftovers(file: string): LeftoverEntry[] {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { processes?: unknown };
    if (!Array.isArray(parsed.processes)) return [];
    return parsed.processes
      .filter(
        (e): e is LeftoverEntry =>
          typeof e?.application === 'string' && Number.isSafeInteger(e?.pid) && e.pid > 1,
      )
      .map((e) => ({
        application: e.application,
        pid: e.pid,
        ...(Number.isSafeInteger(e.port) && e.port! > 0 && e.port! < 65536 ? { port: e.port } : {}),
      }));
  } catch {
    return [];
  }
}

/** Stops the groups still alive; answers the entries that were. */
export async function stopLeftovers(
  entries: readonly LeftoverEntry[],
  graceMs: number,
  pollMs = 50,
): Promise<LeftoverEntry[]> {
  const alive = entries.filter((e) => groupAlive(e.pid));
  for (const e of alive) signalGroup(e.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive.some((e) => groupAlive(e.pid)) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  for (const e of alive) signalGroup(e.pid, 'SIGKILL');
  return alive;
}

export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    // ESRCH: no such group. EPERM: not ours to signal, so not ours to stop either.
    return false;
  }
}

/** Sends `signal` to process group `pgid` (a process started `detached` leads its own); none: nothing. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // Gone meanwhile.
  }
}

/** True while `pid` runs (a zombie waiting for its reaper counts as gone). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/**
 * How often an adopted process is looked at when nothing said it may have exited. Each look is a
 * signal and a /proc read; at 500 ms that was about 0.1 s of CPU per adopted process per hour.
 */
export const ADOPTED_POLL_MS = 5_000;

/**
 * A runtime process this daemon did not start: no pipes and no exit event from the kernel, so
 * its exit is seen by looking: at once when `check` is called (the supervisor calls it when the
 * process's runtime host connection ends), else every `pollMs` as a safety net. Emits `exit`
 * (code and signal unknown: null) once.
 */
export class AdoptedProcess extends EventEmitter {
  readonly pid: number;
  readonly stdout = null;
  readonly stderr = null;
  #timer: NodeJS.Timeout;
  #gone = false;

  constructor(pid: number, pollMs = ADOPTED_POLL_MS) {
    super();
    this.pid = pid;
    this.#timer = setInterval(() => this.check(), pollMs);
    this.#timer.unref();
  }

  /** Looks now whether the process still runs; emits `exit` if it does not (once). */
  check(): void {
    if (this.#gone || processAlive(this.pid)) return;
    this.#gone = true;
    clearInterval(this.#timer);
    this.emit('exit', null, null);
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** Stops looking (the daemon is going away and leaves the process running). */
  release(): void {
    clearInterval(this.#timer);
  }
}
