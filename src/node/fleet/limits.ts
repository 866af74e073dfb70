// Per-application limits (docs/supervisor.md "Limits"; docs/decisions.md "Application limits"):
// each runtime process group (`cell serve` and the workerd processes it starts) is placed in a
// cgroup of its own with a memory limit and a CPU quota, and a workerd one of whose threads used
// the CPU-time limit without once waiting is killed (its front starts it again). Every breach is an event
// (`limit.memory`, `limit.cpu`) and a log line. Where the machine has no usable controller the
// limit is not enforced and the daemon says so once at start; nothing here stops a process from
// starting.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { EventSink } from '../../observability/events.ts';

/** The node's log, as far as the limits use it. */
interface LimitsLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface LimitSettings {
  /** Memory of one application's process group, in MiB; 0: none. */
  memoryMb: number;
  /** CPU time a workerd thread may use without once waiting, in ms; 0: no limit. */
  cpuMs: number;
  /** Cores one application's process group may use at once; 0: no quota (equal weights only). */
  cpus: number;
}

/** USER_HZ: the unit of /proc/<pid>/stat CPU times, fixed at 100 by the kernel's ABI. */
const TICKS_PER_SECOND = 100;
/**
 * How often the groups' CPU times and OOM counters are read: a tenth of the CPU-time limit, so a
 * looping workerd is killed at most 10% past it, between 1 s and 5 s (every 3 s at the default
 * 30,000 ms); every 5 s with no CPU-time limit, when only the OOM counters are read.
 */
export function limitSampleMs(cpuMs: number): number {
  return cpuMs > 0 ? Math.min(5_000, Math.max(1_000, Math.round(cpuMs / 10))) : 5_000;
}
/**
 * How often every process of the machine is read to find a group's processes not yet in its
 * cgroups (a workerd forked while its group was being placed). Otherwise a group's processes are
 * its cgroup's members: its children inherit the cgroup.
 */
const FULL_SCAN_MS = 30_000;
/**
 * Each sample reads first what the node's applications used all together (the node's own cgroup
 * folder): while that stays under NODE_CPU_GATE_SHARE of a sample interval's worth of CPU since
 * the last look at each application, and no look at them is older than APPLICATIONS_LOOK_MS,
 * none of them is looked at. A workerd thread looping uses CPU at one second a second, so a loop
 * takes the applications' total over the gate within one sample or two, and each application is
 * then looked at every sample, as before; an idle node costs one read a sample.
 */
const NODE_CPU_GATE_SHARE = 0.1;
/**
 * The longest the applications go without a look while the node's total stays under the gate:
 * what bounds a `limit.memory` event (an OOM kill counted in the application's cgroup) when
 * little else moved.
 */
export const APPLICATIONS_LOOK_MS = 30_000;
/** A slow sample waits this many times its own duration before the next (#sampleLater). */
const SAMPLE_SHARE = 20;
const CFS_PERIOD_US = 100_000;

/** One cgroup hierarchy the limits are written into. */
interface Hierarchy {
  version: 1 | 2;
  /** The folder that holds one folder per application (created on first use). */
  base: string;
}

/** Where memory and cpu limits can be written, as found on this machine. */
export interface Controllers {
  memory: Hierarchy | null;
  cpu: Hierarchy | null;
  /**
   * cgroup v1's CPU accounting (`cpuacct.usage`), when it is mounted apart from `cpu` (with it,
   * it is `cpu`'s folder; on v2 every cgroup counts its CPU in `cpu.stat`): the groups are placed
   * in it too, only to read what each used. Absent or null: not found, and the sampler reads
   * every application's processes each time.
   */
  cpuacct?: Hierarchy | null;
  /** What is not enforced and why, for the start-up log line; empty when everything is. */
  missing: string[];
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function tryWrite(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

/** A folder name for one node's groups: several nodes may share a machine (and a cgroup). */
function safeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 120) || '_';
}

/** This process's own cgroup path for a v1 controller, or for v2 (controller ''). */
function ownCgroup(controller: string, procSelfCgroup: string): string | null {
  for (const line of procSelfCgroup.split('\n')) {
    const [, list, path] = line.split(':');
    if (list === undefined || path === undefined) continue;
    if (controller === '' ? line.startsWith('0::') : list.split(',').includes(controller)) return path;
  }
  return null;
}

/** A writable folder under `mount` for this node's groups, or why there is none. */
function makeBase(mount: string, own: string | null, name: string): string | Error {
  const parent = own !== null && existsSync(join(mount, own)) ? join(mount, own) : mount;
  const base = join(parent, name);
  try {
    mkdirSync(base, { recursive: true });
    return base;
  } catch (err) {
    return err as Error;
  }
}

/**
 * Finds the memory and cpu controllers (cgroup v1 mounts, else a cgroup2 mount that offers them)
 * and prepares this node's folder in each. `root` and the /proc texts are parameters for tests.
 */
export function detectControllers(
  nodeId: string,
  input: { mounts?: string; selfCgroup?: string } = {},
): Controllers {
  const mounts = input.mounts ?? readText('/proc/self/mounts') ?? '';
  const self = input.selfCgroup ?? readText('/proc/self/cgroup') ?? '';
  const name = `svc-${safeName(nodeId)}`;
  const found: Controllers = { memory: null, cpu: null, cpuacct: null, missing: [] };
  let v2Mount: string | null = null;
  const v1: Record<string, string> = {};
  for (const line of mounts.split('\n')) {
    const [, dir, type, options] = line.split(' ');
    if (dir === undefined || options === undefined) continue;
    if (type === 'cgroup2') v2Mount ??= dir;
    if (type !== 'cgroup') continue;
    for (const option of options.split(','))
      if (option === 'memory' || option === 'cpu' || option === 'cpuacct') v1[option] ??= dir;
  }
  for (const controller of ['memory', 'cpu'] as const) {
    const mount = v1[controller];
    if (mount !== undefined) {
      const base = makeBase(mount, ownCgroup(controller, self), name);
      if (typeof base === 'string') found[controller] = { version: 1, base };
      else found.missing.push(`${controller}: cannot create a cgroup under ${mount} (${base.message})`);
      continue;
    }
    const v2 = v2Mount === null ? null : v2Hierarchy(v2Mount, ownCgroup('', self), name, controller);
    if (v2 instanceof Error) found.missing.push(`${controller}: ${v2.message}`);
    else if (v2 !== null) found[controller] = v2;
    else found.missing.push(`${controller}: no cgroup controller mounted`);
  }
  // Accounting only, so nothing is missing without it: mounted with cpu it is cpu's folder.
  const acct = v1.cpuacct;
  if (acct !== undefined) {
    if (acct === v1.cpu) found.cpuacct = found.cpu;
    else {
      const base = makeBase(acct, ownCgroup('cpuacct', self), name);
      if (typeof base === 'string') found.cpuacct = { version: 1, base };
    }
  }
  return found;
}

/**
 * cgroup v2: a controller is usable when the parent offers it and lets this node's folder pass
 * it on to the applications' folders below (cgroup.subtree_control).
 */
function v2Hierarchy(mount: string, own: string | null, name: string, controller: string): Hierarchy | Error {
  const parent = own !== null && existsSync(join(mount, own)) ? join(mount, own) : mount;
  const offered = (readText(join(parent, 'cgroup.controllers')) ?? '').split(/\s+/);
  if (!offered.includes(controller))
    return new Error(`the cgroup2 hierarchy at ${parent} does not offer the ${controller} controller`);
  tryWrite(join(parent, 'cgroup.subtree_control'), `+${controller}`);
  const base = makeBase(mount, own, name);
  if (typeof base !== 'string') return new Error(`cannot create a cgroup under ${parent} (${base.message})`);
  if (!tryWrite(join(base, 'cgroup.subtree_control'), `+${controller}`))
    return new Error(`cannot delegate ${controller} below ${base}`);
  return { version: 2, base };
}

/** A process as /proc shows it: its group, command name and CPU time in ticks. */
export interface ProcessSample {
  pid: number;
  comm: string;
  ticks: number;
}

/** A process from /proc/<pid>/stat with its process group, or null when it is gone. */
function readProcess(pid: number): (ProcessSample & { pgid: number }) | null {
  const stat = readText(`/proc/${pid}/stat`);
  if (stat === null) return null;
  const close = stat.lastIndexOf(')');
  // After the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime.
  const fields = stat.slice(close + 2).split(' ');
  return {
    pid,
    pgid: Number(fields[2]),
    comm: stat.slice(stat.indexOf('(') + 1, close),
    ticks: Number(fields[11]) + Number(fields[12]),
  };
}

/** Every process on the machine, by process group: one read of /proc serves every application. */
export function processesByGroup(): Map<number, ProcessSample[]> {
  const groups = new Map<number, ProcessSample[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return groups;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const found = readProcess(Number(entry));
    if (found === null) continue;
    const list = groups.get(found.pgid) ?? [];
    list.push({ pid: found.pid, comm: found.comm, ticks: found.ticks });
    groups.set(found.pgid, list);
  }
  return groups;
}

/** The processes in a cgroup folder (its `cgroup.procs`), read from /proc. */
function processesIn(dir: string): ProcessSample[] {
  const members: ProcessSample[] = [];
  for (const line of (readText(join(dir, 'cgroup.procs')) ?? '').split('\n')) {
    if (line === '') continue;
    const found = readProcess(Number(line));
    if (found !== null) members.push({ pid: found.pid, comm: found.comm, ticks: found.ticks });
  }
  return members;
}

/** One supervised application: its process group and what was last read of it. */
interface Watched {
  pgid: number;
  memoryDir: string | null;
  cpuDir: string | null;
  /** Its cgroup v1 cpuacct folder (cpuDir when mounted together); null on v2 or where none. */
  acctDir: string | null;
  oomKills: number;
  /** Per workerd pid, per thread: how long it has run without waiting. */
  runs: Map<number, Map<number, ThreadRun>>;
  /** Per workerd pid: its CPU time (all threads) when last read. */
  totals: Map<number, number>;
  /** The group's CPU time as its cgroup counts it when last read; null: not readable. */
  usage: string | null;
}

/**
 * Applies the limits to the process groups the supervisor starts and watches them. The supervisor
 * calls `started` after each spawn or adoption and `exited` after each exit.
 */
export class ApplicationLimits {
  readonly #settings: LimitSettings;
  readonly #controllers: Controllers;
  readonly #log: LimitsLog;
  readonly #events: EventSink | undefined;
  readonly #watched = new Map<string, Watched>();
  readonly #sampleMs: number;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #lastFullScan = Number.NEGATIVE_INFINITY;
  /** Until when whole scans of /proc go on: two of them after the last group was placed. */
  #scanUntil = Number.NEGATIVE_INFINITY;
  /** The node's applications' CPU time (ms) at the last look at each of them; null: unreadable. */
  #nodeUsedMs: number | null = null;
  #lastLook = Number.NEGATIVE_INFINITY;

  constructor(input: {
    settings: LimitSettings;
    controllers: Controllers;
    log: LimitsLog;
    events?: EventSink;
    sampleMs?: number;
    /** The clock samples are timed by (tests); performance.now by default. */
    now?: () => number;
  }) {
    this.#settings = input.settings;
    this.#controllers = input.controllers;
    this.#log = input.log;
    this.#events = input.events;
    this.#now = input.now ?? (() => performance.now());
    this.#sampleMs = input.sampleMs ?? limitSampleMs(input.settings.cpuMs);
    this.#sampleLater(this.#sampleMs);
    this.#weighNode();
    this.#announce();
  }

  /**
   * The node's folder competes for CPU with every other process beside it as one: it weighs as
   * much as one busy process per core, so the applications together are not worth one process.
   */
  #weighNode(): void {
    const cpu = this.#controllers.cpu;
    if (cpu === null) return;
    const cores = availableParallelism();
    if (cpu.version === 1) tryWrite(join(cpu.base, 'cpu.shares'), String(1024 * cores));
    else tryWrite(join(cpu.base, 'cpu.weight'), String(Math.min(10_000, 100 * cores)));
  }

  /** One line at start saying what is enforced, and one warning naming what is not and why. */
  #announce(): void {
    const { memory, cpu, missing } = this.#controllers;
    this.#log.info(
      {
        memoryMb: this.#settings.memoryMb,
        cpus: this.#settings.cpus,
        cpuMs: this.#settings.cpuMs,
        memoryCgroup: memory ? `v${memory.version} ${memory.base}` : null,
        cpuCgroup: cpu ? `v${cpu.version} ${cpu.base}` : null,
      },
      'application limits',
    );
    if (missing.length > 0)
      this.#log.warn(
        { missing },
        'application limits not enforced on this machine: ' +
          missing.map((m) => m.split(':')[0]).join(', ') +
          ' (docs/supervisor.md "Limits")',
      );
  }

  /** Places the group led by `pgid` in the application's cgroups (creating and limiting them). */
  started(application: string, pgid: number): void {
    const memoryDir = this.#prepare(this.#controllers.memory, application, (dir, version) =>
      this.#limitMemory(dir, version),
    );
    const cpuDir = this.#prepare(this.#controllers.cpu, application, (dir, version) =>
      this.#limitCpu(dir, version),
    );
    const acct = this.#controllers.cpuacct ?? null;
    const acctDir =
      acct === null
        ? null
        : acct === this.#controllers.cpu
          ? cpuDir
          : this.#prepare(acct, application, () => {});
    const w: Watched = {
      pgid,
      memoryDir,
      cpuDir,
      acctDir,
      oomKills: memoryDir === null ? 0 : this.#readOomKills(memoryDir),
      runs: new Map(),
      totals: new Map(),
      usage: null,
    };
    this.#watched.set(application, w);
    this.#enter(w, processesByGroup().get(pgid) ?? []);
    // A process the group forks while it is being placed stays outside: the next two whole scans
    // of /proc move it. After them every process the group starts inherits its cgroups.
    this.#scanUntil = this.#now() + 2 * FULL_SCAN_MS;
  }

  /** Stops watching the application's group once it exited; its cgroups go when empty. */
  exited(application: string, pgid: number): void {
    const w = this.#watched.get(application);
    if (!w || w.pgid !== pgid) return;
    this.#checkMemory(application, w);
    this.#watched.delete(application);
    for (const dir of new Set([w.memoryDir, w.cpuDir, w.acctDir])) {
      if (dir === null) continue;
      try {
        rmdirSync(dir);
      } catch {
        // Still holds a process (a workerd being reaped): the next start reuses the folder.
      }
    }
  }

  /** Stops watching; this node's cgroup folders go if nothing is left in them. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const h of new Set([this.#controllers.memory, this.#controllers.cpu, this.#controllers.cpuacct])) {
      if (h === null || h === undefined) continue;
      let entries: string[] = [];
      try {
        entries = readdirSync(h.base, { withFileTypes: true })
          .filter((e) => e.isDirectory())
          .map((e) => e.name);
      } catch {}
      // An application's folder whose group was still being reaped at its exit goes now; groups
      // left serving (a restart that keeps its applications) keep theirs, and so the node's.
      for (const dir of [...entries.map((e) => join(h.base, e)), h.base]) {
        try {
          rmdirSync(dir);
        } catch {}
      }
    }
  }

  #prepare(
    hierarchy: Hierarchy | null,
    application: string,
    limit: (dir: string, version: 1 | 2) => void,
  ): string | null {
    if (hierarchy === null) return null;
    const dir = join(hierarchy.base, safeName(application));
    try {
      mkdirSync(dir, { recursive: true });
      limit(dir, hierarchy.version);
      return dir;
    } catch (err) {
      this.#log.warn({ application, dir, err: (err as Error).message }, 'cannot limit the application');
      return null;
    }
  }

  #limitMemory(dir: string, version: 1 | 2): void {
    const bytes = this.#settings.memoryMb * 1024 * 1024;
    if (version === 1) {
      writeFileSync(join(dir, 'memory.limit_in_bytes'), bytes > 0 ? String(bytes) : '-1');
      // With swap, the same limit on memory and swap together, else the group swaps past it.
      tryWrite(join(dir, 'memory.memsw.limit_in_bytes'), bytes > 0 ? String(bytes) : '-1');
    } else {
      writeFileSync(join(dir, 'memory.max'), bytes > 0 ? String(bytes) : 'max');
      tryWrite(join(dir, 'memory.swap.max'), bytes > 0 ? '0' : 'max');
    }
  }

  /** Every application weighs the same (the default weight); a quota only when one is set. */
  #limitCpu(dir: string, version: 1 | 2): void {
    const quota = this.#settings.cpus > 0 ? Math.round(this.#settings.cpus * CFS_PERIOD_US) : null;
    if (version === 1) {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), quota === null ? '-1' : String(quota));
    } else {
      writeFileSync(join(dir, 'cpu.max'), `${quota ?? 'max'} ${CFS_PERIOD_US}`);
    }
  }

  /** Moves every process of the group not yet in the application's cgroups into them. */
  #enter(w: Watched, group: readonly ProcessSample[]): void {
    const dirs = [...new Set([w.memoryDir, w.cpuDir, w.acctDir])].filter((dir) => dir !== null);
    if (dirs.length === 0) return;
    const pids = group.map((p) => p.pid);
    for (const dir of dirs) {
      const inside = new Set(
        (readText(join(dir, 'cgroup.procs')) ?? '').split('\n').filter(Boolean).map(Number),
      );
      for (const pid of pids) if (!inside.has(pid)) tryWrite(join(dir, 'cgroup.procs'), String(pid));
    }
  }

  #readOomKills(dir: string): number {
    const text = readText(join(dir, 'memory.oom_control')) ?? readText(join(dir, 'memory.events')) ?? '';
    const match = /^oom_kill (\d+)$/m.exec(text);
    return match ? Number(match[1]) : 0;
  }

  /**
   * The next sample comes `sampleMs` after this one ended, or later when a sample is slow: its reads
   * are synchronous and grow with the processes on the machine, and at 1,000 applications one took
   * longer than the interval, so samples ran back to back and the daemon's event loop stopped
   * answering its runtimes (bench/RESULTS.md "1,000 idle applications on one node"). The sampler
   * keeps at most 1/SAMPLE_SHARE of the loop.
   */
  #sampleLater(delayMs: number): void {
    this.#timer = setTimeout(() => {
      const started = performance.now();
      try {
        this.sampleNow();
      } finally {
        if (this.#timer !== undefined)
          this.#sampleLater(Math.max(this.#sampleMs, (performance.now() - started) * SAMPLE_SHARE));
      }
    }, delayMs);
    this.#timer.unref();
  }

  /**
   * Reads what the limits need (one sample; the timer calls it, and tests). A group in a cgroup
   * is read through its members alone; the whole of /proc is read only every FULL_SCAN_MS in the
   * minute after a group was placed (for a process that escaped placing), or for groups with no
   * cgroup, since its cost grows with every process on the machine. No application is looked at
   * while the node's applications together used too little CPU for any to near a limit
   * (NODE_CPU_GATE_SHARE, APPLICATIONS_LOOK_MS).
   */
  sampleNow(): void {
    if (this.#watched.size === 0) return;
    const now = this.#now();
    const fullScan = now <= this.#scanUntil && now - this.#lastFullScan >= FULL_SCAN_MS;
    if (fullScan) this.#lastFullScan = now;
    const used = this.#nodeUsedNow();
    const gateMs = this.#sampleMs * NODE_CPU_GATE_SHARE;
    if (
      !fullScan &&
      !lookDue({ usedMs: used, lastUsedMs: this.#nodeUsedMs, gateMs, sinceLookMs: now - this.#lastLook }) &&
      ![...this.#watched.values()].some((w) => w.memoryDir === null && w.cpuDir === null)
    )
      return;
    this.#nodeUsedMs = used;
    this.#lastLook = now;
    let everyGroup: Map<number, ProcessSample[]> | undefined;
    const groupOf = (pgid: number) => {
      everyGroup ??= processesByGroup();
      return everyGroup.get(pgid) ?? [];
    };
    for (const [application, w] of this.#watched) {
      const placed = w.memoryDir ?? w.cpuDir;
      // A process the group started before it was placed (or an adopted group's workerd) joins now.
      if (fullScan && placed !== null) this.#enter(w, groupOf(w.pgid));
      // A group that used no CPU since the last look neither looped nor allocated: an idle
      // application costs one read.
      if (!fullScan && this.#unchanged(w)) continue;
      this.#checkMemory(application, w);
      if (this.#settings.cpuMs > 0)
        this.#checkCpu(application, w, placed === null ? groupOf(w.pgid) : processesIn(placed));
    }
  }

  /** What the node's applications used all together (ms), from its own folder; null: unreadable. */
  #nodeUsedNow(): number | null {
    const c = this.#controllers;
    if (c.cpu?.version === 2 || (c.cpu === null && c.memory?.version === 2)) {
      const base = (c.cpu ?? c.memory)!.base;
      const stat = readText(join(base, 'cpu.stat'));
      const usec = stat === null ? undefined : /^usage_usec (\d+)$/m.exec(stat)?.[1];
      return usec === undefined ? null : Number(usec) / 1000;
    }
    if (!c.cpuacct) return null;
    const ns = readText(join(c.cpuacct.base, 'cpuacct.usage'))?.trim();
    return ns === undefined || ns === '' ? null : Number(ns) / 1e6;
  }

  /** Whether the group's cgroup counts the same CPU time as at the last look (false: unknown). */
  #unchanged(w: Watched): boolean {
    const usage = groupCpuUsage(w, this.#controllers.cpu?.version ?? this.#controllers.memory?.version);
    const same = usage !== null && usage === w.usage;
    w.usage = usage;
    return same;
  }

  #checkMemory(application: string, w: Watched): void {
    if (w.memoryDir === null) return;
    const kills = this.#readOomKills(w.memoryDir);
    if (kills <= w.oomKills) return;
    const killed = kills - w.oomKills;
    w.oomKills = kills;
    this.#log.warn(
      { application, memoryMb: this.#settings.memoryMb, killed },
      'application over its memory limit: the kernel killed its largest process',
    );
    this.#events?.emit({ kind: 'limit.memory', application, limitMb: this.#settings.memoryMb, killed });
  }

  /**
   * Kills a workerd one of whose threads used more than the CPU-time limit without once waiting
   * (no voluntary context switch: it never blocked, as a JavaScript loop that never yields).
   */
  #checkCpu(application: string, w: Watched, group: readonly ProcessSample[]): void {
    const limitTicks = (this.#settings.cpuMs * TICKS_PER_SECOND) / 1000;
    const seen = new Set<number>();
    for (const p of group) {
      if (p.comm !== 'workerd') continue;
      seen.add(p.pid);
      const runs = w.runs.get(p.pid) ?? new Map<number, ThreadRun>();
      w.runs.set(p.pid, runs);
      const idle = w.totals.get(p.pid) === p.ticks;
      w.totals.set(p.pid, p.ticks);
      if (idle) {
        // No thread used anything since the last look, so none is looping: its threads' files
        // need no reading (an idle workerd is most of them).
        for (const run of runs.values()) run.sinceTicks = run.ticks;
        continue;
      }
      const usedTicks = longestRun(p.pid, runs);
      if (usedTicks < limitTicks) continue;
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        continue;
      }
      w.runs.delete(p.pid);
      w.totals.delete(p.pid);
      const usedMs = Math.round((usedTicks * 1000) / TICKS_PER_SECOND);
      this.#log.warn(
        { application, pid: p.pid, cpuMs: this.#settings.cpuMs, usedMs },
        'application over its CPU-time limit: killed its workerd, which ran that long without waiting',
      );
      this.#events?.emit({
        kind: 'limit.cpu',
        application,
        pid: p.pid,
        limitMs: this.#settings.cpuMs,
        usedMs,
      });
    }
    for (const pid of w.runs.keys()) if (!seen.has(pid)) w.runs.delete(pid);
    for (const pid of w.totals.keys()) if (!seen.has(pid)) w.totals.delete(pid);
  }
}

/**
 * The CPU time a group's cgroup counts, as its text: `cpu.stat`'s `usage_usec` on cgroup v2 (there
 * in every cgroup, whatever its controllers), `cpuacct.usage` on v1 (where cpuacct is mounted with
 * cpu); null when neither is readable.
 */
function groupCpuUsage(w: Watched, version: 1 | 2 | undefined): string | null {
  if (version === 2) {
    const dir = w.cpuDir ?? w.memoryDir;
    const stat = dir === null ? null : readText(join(dir, 'cpu.stat'));
    return stat === null ? null : (/^usage_usec (\d+)$/m.exec(stat)?.[1] ?? null);
  }
  return w.acctDir === null ? null : (readText(join(w.acctDir, 'cpuacct.usage'))?.trim() ?? null);
}

/**
 * Whether a sample looks at each application: when the node's applications' CPU time is
 * unknown (`usedMs` or `lastUsedMs` null), when it grew by `gateMs` or more since the last look
 * (something may be looping: a thread uses at most a second a second), or when the last look is
 * APPLICATIONS_LOOK_MS old.
 */
export function lookDue(input: {
  usedMs: number | null;
  lastUsedMs: number | null;
  gateMs: number;
  sinceLookMs: number;
}): boolean {
  if (input.usedMs === null || input.lastUsedMs === null) return true;
  return input.usedMs - input.lastUsedMs >= input.gateMs || input.sinceLookMs >= APPLICATIONS_LOOK_MS;
}

/** One thread of a workerd: its CPU time and voluntary switches when last read, and since when it ran unbroken. */
interface ThreadRun {
  ticks: number;
  voluntary: number;
  /** Its CPU time at its last voluntary switch (or when first seen). */
  sinceTicks: number;
}

function voluntarySwitches(pid: number, tid: number): number {
  const status = readText(`/proc/${pid}/task/${tid}/status`) ?? '';
  const match = /^voluntary_ctxt_switches:\s*(\d+)$/m.exec(status);
  return match ? Number(match[1]) : 0;
}

/**
 * Updates `runs` from /proc and answers the most CPU time (ticks) any thread of `pid` used since
 * it last waited. Only a thread whose CPU time moved has its switches read.
 */
function longestRun(pid: number, runs: Map<number, ThreadRun>): number {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  let longest = 0;
  const alive = new Set<number>();
  for (const entry of tids) {
    const tid = Number(entry);
    const stat = readText(`/proc/${pid}/task/${tid}/stat`);
    if (stat === null) continue;
    alive.add(tid);
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const run = runs.get(tid);
    if (!run) {
      runs.set(tid, { ticks, voluntary: voluntarySwitches(pid, tid), sinceTicks: ticks });
      continue;
    }
    if (ticks !== run.ticks) {
      const voluntary = voluntarySwitches(pid, tid);
      if (voluntary !== run.voluntary) run.sinceTicks = ticks;
      run.voluntary = voluntary;
      run.ticks = ticks;
    } else {
      // It used nothing since the last look: whatever it did, it is not looping now.
      run.sinceTicks = ticks;
    }
    longest = Math.max(longest, run.ticks - run.sinceTicks);
  }
  for (const tid of runs.keys()) if (!alive.has(tid)) runs.delete(tid);
  return longest;
}
