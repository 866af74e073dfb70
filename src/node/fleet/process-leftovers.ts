// Runtime processes a previous run of the daemon left behind. Each `cell serve`
// leads its own process group, so it outlives a daemon killed with SIGKILL, holding its port and
// its node lease. The supervisor notes the group of every process it runs in a small file under
// the node's state directory; the next supervisor reads it before starting anything and stops
// those groups (SIGTERM, so the runtime releases its lease; SIGKILL after the grace).

import { readFileSync, renameSync, writeFileSync } from 'node:fs';

export interface LeftoverEntry {
  application: string;
  /** Process id of the runtime process, which is also its process group id. */
  pid: number;
}

/** Rewrites the file with the groups running now (write then rename, so a crash leaves one whole). */
export function recordProcesses(file: string, entries: readonly LeftoverEntry[]): void {
  const temporary = `${file}.tmp`;
  writeFileSync(temporary, `${JSON.stringify({ v: 1, processes: entries })}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

/** The groups a previous run noted; none when there is no readable file. */
export function readLeftovers(file: string): LeftoverEntry[] {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { processes?: unknown };
    if (!Array.isArray(parsed.processes)) return [];
    return parsed.processes.filter(
      (e): e is LeftoverEntry =>
        typeof e?.application === 'string' && Number.isSafeInteger(e?.pid) && e.pid > 1,
    );
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

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    // ESRCH: no such group. EPERM: not ours to signal, so not ours to stop either.
    return false;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Gone meanwhile.
  }
}
