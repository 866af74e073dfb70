// Leftovers of a `cell serve` that died without cleaning up (SIGKILL, a crash): its private
// folder and the workerd processes it started, which would otherwise run on unsupervised. Each
// process writes its pid to `owner` and every workerd pid to `workerd.pids` in its folder; the
// next `cell serve` on the machine kills what a dead owner left and removes the folder.

import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const PREFIX = 'cell-';

/** Marks `dir` as this process's folder. */
export function claimStateDir(dir: string): void {
  writeFileSync(join(dir, 'owner'), String(process.pid));
}

/** Kills the workerd processes of dead owners under `base` and removes their folders. */
export function sweepOrphans(base: string, log: (line: string) => void): void {
  let names: string[];
  try {
    names = readdirSync(base).filter((name) => name.startsWith(PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(base, name);
    const owner = readNumber(join(dir, 'owner'));
    if (owner === null || isAlive(owner)) continue;
    for (const pid of killRecordedWorkerds(dir))
      log(`cell: stopped workerd ${pid} left behind by cell ${owner}`);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Kills (SIGKILL) the workerd processes a `cell serve` recorded in its folder `dir` that still run;
 * answers their pids. Also how a node that lost its Durable Objects stops their workerd at once.
 */
export function killRecordedWorkerds(dir: string): number[] {
  let pids: number[] = [];
  try {
    pids = readFileSync(join(dir, 'workerd.pids'), 'utf8')
      .split('\n')
      .map(Number)
      .filter((n) => Number.isSafeInteger(n) && n > 0);
  } catch {
    return []; // no workerd was started
  }
  // A pid may have been reused since: only a process that is still a workerd is killed.
  const killed = pids.filter((pid) => isAlive(pid) && commandOf(pid).includes('workerd'));
  for (const pid of killed) process.kill(pid, 'SIGKILL');
  return killed;
}

function readNumber(path: string): number | null {
  try {
    const n = Number(readFileSync(path, 'utf8').trim());
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}
