// The node's port assignments on disk (docs/supervisor.md "The supervisor"): which application holds or
// last released each runtime port, and when. Read when the supervisor is made, before any process
// starts, so a restarted node gives each application the port it had and keeps the quarantine it
// was in; rewritten whole after every change (RetriedStateFile: a crash or a full disk leaves
// the old file or the new one, and a refused write is tried again every pass until it lands).

import { readFileSync } from 'node:fs';
import { RetriedStateFile, replaceStateFileSync, type StateFileLog } from '../../config/state-file.ts';
import { type PortAssignment, PortPool } from './process-policy.ts';

/** The assignments a previous run noted; none when there is no readable file. */
export function readPortFile(file: string): PortAssignment[] {
  let parsed: { ports?: unknown };
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as { ports?: unknown };
  } catch {
    return [];
  }
  if (!Array.isArray(parsed?.ports)) return [];
  return parsed.ports.flatMap((e: Partial<PortAssignment> | null): PortAssignment[] => {
    if (typeof e?.application !== 'string' || !isPort(e.port)) return [];
    const released = Number.isSafeInteger(e.releasedAtMs) ? { releasedAtMs: e.releasedAtMs } : {};
    return [{ port: e.port, application: e.application, ...released }];
  });
}

export function writePortFile(file: string, assignments: readonly PortAssignment[]): void {
  replaceStateFileSync(file, portFileText(assignments));
}

function portFileText(assignments: readonly PortAssignment[]): string {
  return `${JSON.stringify({ v: 1, ports: assignments })}\n`;
}

/**
 * A port pool that starts from `file` and keeps it current. A write that fails is logged once and
 * the pool goes on: the ports in memory stay right, and `note.retry()` (the supervisor calls it
 * every pass) writes the file again until it lands (docs/supervisor.md "A full disk").
 */
export function persistentPortPool(
  file: string,
  range: readonly [number, number],
  quarantineMs: number,
  log: StateFileLog,
  nowMs = Date.now(),
): PortPool & { note: RetriedStateFile } {
  const note = new RetriedStateFile(file, log, 'the runtime port assignments');
  const pool = new PortPool(range, quarantineMs, {
    restored: { assignments: readPortFile(file), nowMs },
    onChange: (assignments) => note.write(portFileText(assignments)),
  });
  return Object.assign(pool, { note });
}

function isPort(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0 && (value as number) < 65536;
}
