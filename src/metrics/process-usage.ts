// CPU time and resident memory of each runtime process, for the per-application series of the
// node's Prometheus metrics (docs/observability.md "Prometheus metrics":
// svc_runtime_process_cpu_seconds_total, svc_runtime_process_resident_memory_bytes). The
// supervisor starts each `cell serve` as the leader of its own process group, so an application's
// processes (cell-front, its workerd) are the processes of that group; the kernel's /proc says
// what each used. Read only when scraped: one read of /proc/<pid>/stat per process of the machine,
// synchronous (as the limits' scan of /proc is), which costs less CPU than as many async reads.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface GroupUsage {
  /** CPU time of the group's processes, their reaped children's included. */
  cpuSeconds: number;
  /** Resident set sizes summed (pages two processes share are counted by each). */
  residentBytes: number;
}

/** The units of /proc/<pid>/stat: clock ticks per second (USER_HZ) and bytes per page. */
export interface StatUnits {
  ticksPerSecond: number;
  pageBytes: number;
}

interface ProcStat {
  group: number;
  ticks: number;
  residentPages: number;
}

/**
 * The usage of each of the process groups led by `leaders`; a group none of whose processes is
 * left (or a system without /proc) is absent from the answer.
 */
export function processGroupUsage(
  leaders: number[],
  proc = '/proc',
  units: StatUnits = statUnits(),
): Map<number, GroupUsage> {
  const usage = new Map<number, GroupUsage>();
  const wanted = new Set(leaders);
  if (wanted.size === 0) return usage;
  let entries: string[];
  try {
    entries = readdirSync(proc);
  } catch {
    return usage;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = parseStat(readOr(join(proc, entry, 'stat')));
    if (!stat || !wanted.has(stat.group)) continue;
    const group = usage.get(stat.group) ?? { cpuSeconds: 0, residentBytes: 0 };
    group.cpuSeconds += stat.ticks / units.ticksPerSecond;
    group.residentBytes += stat.residentPages * units.pageBytes;
    usage.set(stat.group, group);
  }
  return usage;
}

/**
 * Process group, utime + stime + cutime + cstime and rss (in pages) of a /proc/<pid>/stat line. The
 * children's times keep the sum from going down when a workerd exits and its parent reaps it.
 */
export function parseStat(line: string | null): ProcStat | null {
  if (!line) return null;
  // The command name, in parentheses, may hold spaces and parentheses: fields follow the last `)`.
  const close = line.lastIndexOf(')');
  if (close < 0) return null;
  const fields = line.slice(close + 2).split(' ');
  // fields[0] is field 3 of proc(5): pgrp is field 5, utime..cstime fields 14 to 17, rss field 24.
  const numbers = [2, 11, 12, 13, 14, 21].map((i) => Number(fields[i]));
  if (numbers.some((n) => !Number.isFinite(n))) return null;
  const [group, utime, stime, cutime, cstime, residentPages] = numbers as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return { group, ticks: utime + stime + cutime + cstime, residentPages };
}

let units: StatUnits | undefined;

/**
 * This machine's units, from the auxiliary vector the kernel gave this process (AT_PAGESZ 6,
 * AT_CLKTCK 17; 64-bit pairs), else 4 KiB pages and 100 ticks, Linux's values on amd64 and arm64.
 */
export function statUnits(): StatUnits {
  if (units) return units;
  units = { ticksPerSecond: 100, pageBytes: 4096 };
  try {
    const auxv = readFileSync('/proc/self/auxv');
    for (let at = 0; at + 16 <= auxv.length; at += 16) {
      const key = auxv.readBigUInt64LE(at);
      const value = Number(auxv.readBigUInt64LE(at + 8));
      if (key === 6n && value > 0) units.pageBytes = value;
      if (key === 17n && value > 0) units.ticksPerSecond = value;
    }
  } catch {
    // No /proc: the defaults stand, and no group will be found anyway.
  }
  return units;
}

/** A /proc file's text, or null for a process that exited while it was listed. */
function readOr(path: string): string | null {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return null;
  }
}
