// CPU time and resident memory of each runtime process, for the per-application series of the
// node's Prometheus metrics (docs/observability.md "Prometheus metrics":
// svc_runtime_process_cpu_seconds_total, svc_runtime_process_resident_memory_bytes). The
// supervisor starts each `cell serve` as the leader of its own process group, so an application's
// processes (cell-front, its workerd) are the processes of that group; the kernel's /proc says
// what each used. Read only when scraped.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface GroupUsage {
  /** CPU time of the group's processes, their reaped children's included. */
  cpuSeconds: number;
  /** Resident set sizes summed (pages two processes share are counted by each). */
  residentBytes: number;
}

/** USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100 on every Linux architecture. */
const TICKS_PER_SECOND = 100;
/** How many /proc files are read at once. */
const READS_AT_ONCE = 64;

interface ProcStat {
  pid: number;
  group: number;
  ticks: number;
}

/**
 * The usage of each of the process groups led by `leaders`; a group none of whose processes is
 * left (or a system without /proc) is absent from the answer.
 */
export async function processGroupUsage(leaders: number[], proc = '/proc'): Promise<Map<number, GroupUsage>> {
  const usage = new Map<number, GroupUsage>();
  const wanted = new Set(leaders);
  if (wanted.size === 0) return usage;
  let entries: string[];
  try {
    entries = (await readdir(proc)).filter((name) => /^\d+$/.test(name));
  } catch {
    return usage;
  }
  const members: ProcStat[] = [];
  await eachBatch(entries, async (pid) => {
    const stat = parseStat(await readOr(join(proc, pid, 'stat')));
    if (stat && wanted.has(stat.group)) members.push(stat);
  });
  await eachBatch(members, async (member) => {
    const rss = residentBytes(await readOr(join(proc, String(member.pid), 'status')));
    const group = usage.get(member.group) ?? { cpuSeconds: 0, residentBytes: 0 };
    group.cpuSeconds += member.ticks / TICKS_PER_SECOND;
    group.residentBytes += rss;
    usage.set(member.group, group);
  });
  return usage;
}

/** pid, process group and utime + stime + cutime + cstime of a /proc/<pid>/stat line. */
export function parseStat(line: string | null): ProcStat | null {
  if (!line) return null;
  // The command name, in parentheses, may hold spaces and parentheses: fields follow the last `)`.
  const close = line.lastIndexOf(')');
  const pid = Number.parseInt(line, 10);
  const fields = line.slice(close + 2).split(' ');
  // fields[0] is field 3 of proc(5): pgrp is field 5, utime..cstime fields 14 to 17.
  const numbers = [2, 11, 12, 13, 14].map((i) => Number(fields[i]));
  if (close < 0 || !Number.isInteger(pid) || numbers.some((n) => !Number.isFinite(n))) return null;
  const [group, ...times] = numbers as [number, number, number, number, number];
  return { pid, group, ticks: times.reduce((sum, t) => sum + t, 0) };
}

/** VmRSS of a /proc/<pid>/status text in bytes (0 when absent: a zombie has none). */
export function residentBytes(status: string | null): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status ?? '');
  return match ? Number(match[1]) * 1024 : 0;
}

/** A /proc file's text, or null for a process that exited while it was listed. */
async function readOr(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null;
  }
}

async function eachBatch<T>(items: T[], run: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += READS_AT_ONCE)
    await Promise.all(items.slice(i, i + READS_AT_ONCE).map(run));
}
