// What the node-start and thousand-applications benches share: a local-directory bucket holding
// many copies of examples/hello, one `svc sail` on it, and the node's process tree measured.
//
// Seeding: one real `cell publish` of examples/hello as the first application, then its
// `fleets/<name>/` objects copied for every other name with the application's name rewritten in
// the manifest and record (what `cell publish` writes differs between applications by that name
// alone), and each application record written straight into the bucket naming that deployment,
// as a first deploy leaves it (test/helpers/applications.ts ensureDeployedApplication). A real
// publish costs ~0.4 s of CPU each; 1,000 of them would be the bench's longest part.

import { cpSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { call, ensureDeployedApplication, type Signer } from '../test/helpers/applications.ts';
import { copyProject, EXAMPLES, publish } from '../test/helpers/cell.ts';
import { signerFor, trustOperator } from '../test/helpers/in-process-node.ts';
import { type SailProcess, tempDir } from '../test/helpers/svc.ts';

export const MB = 1024 * 1024;

export interface ProcessMemory {
  pid: number;
  command: string;
  pss: number;
  rss: number;
}

/** Every process below `root` (children, their children, ...), root excluded. */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command sits in parentheses and may hold spaces; ppid is the second field after it.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(root);
  return out;
}

/** PSS and RSS in bytes from smaps_rollup; null for a process gone meanwhile. */
export function memoryOf(pid: number): ProcessMemory | null {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const field = (name: string) =>
      Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0) * 1024;
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
    return { pid, command, pss: field('Pss'), rss: field('Rss') };
  } catch {
    return null;
  }
}

/** CPU time (ms) of one process itself, its children apart. */
export function ownCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export interface SeededBucket {
  endpoint: string;
  store: Store;
  signer: Signer;
  names: string[];
}

/** `svc sail`'s flags for a node on a seeded bucket, its runtimes' ports in `ports` (first, last). */
export function seededNodeFlags(
  seeded: Pick<SeededBucket, 'endpoint'>,
  ports: readonly [number, number],
): string[] {
  return [
    '--endpoint',
    seeded.endpoint,
    '--port-range-start',
    String(ports[0]),
    '--port-range-end',
    String(ports[1]),
  ];
}

/** A fresh local-directory bucket with `count` hello applications named `<prefix><i>`, deployed. */
export async function seedHelloApplications(count: number, prefix: string): Promise<SeededBucket> {
  const dir = tempDir('svc-bench-bucket-');
  const root = join(dir, 'bucket');
  const endpoint = `file://${root}`;
  const store = await openStore({ endpoint, stateDir: join(dir, 'tool-state') });
  const signer = await trustOperator(store, signerFor('bench-admin'));
  const names = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const first = names[0]!;
  const published = await publish(copyProject(join(EXAMPLES, 'hello')), first, { SVC_S3_ENDPOINT: endpoint });
  if (!published.published) throw new Error(`cell publish exited ${published.code}:\n${published.stderr}`);
  const deployment = published.published.deployment;
  const source = join(root, 'fleets', first);
  for (const name of names.slice(1)) {
    const target = join(root, 'fleets', name);
    cpSync(source, target, { recursive: true });
    for (const file of filesUnder(target)) {
      if (!file.includes(`${join(target, 'deploy')}/`) && !file.includes(`${join(target, 'records')}/`))
        continue;
      if (!file.endsWith('.json~')) continue;
      const text = readFileSync(file, 'utf8');
      const renamed = text.replaceAll(`"application":"${first}"`, `"application":"${name}"`);
      if (renamed !== text) writeFileSync(file, renamed);
    }
  }
  const WRITERS = 16;
  let next = 0;
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (next < names.length) await ensureDeployedApplication(store, names[next++]!, {}, deployment);
    }),
  );
  return { endpoint, store, signer, names };
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

export interface ProcessView {
  application: string;
  port: number;
  ready: boolean;
  pid?: number;
}

export async function processesOf(url: string, signer: Signer): Promise<ProcessView[]> {
  const state = (await call(url, 'GET', '/v1/state', { signer })).body as { processes?: ProcessView[] };
  return state.processes ?? [];
}

/**
 * Polls until every one of `names` answers 200 on GET / through its own port (the port the node's
 * state names), asking at most `parallel` at once; answers when the last one did.
 */
export async function untilEveryAnswers(
  url: string,
  signer: Signer,
  names: string[],
  deadlineMs: number,
  onProgress: (answered: number) => void = () => {},
): Promise<number> {
  const pending = new Set(names);
  const deadline = Date.now() + deadlineMs;
  const parallel = 32;
  while (pending.size > 0) {
    if (Date.now() > deadline)
      throw new Error(`${pending.size} of ${names.length} applications never answered`);
    let processes: ProcessView[] = [];
    try {
      processes = await processesOf(url, signer);
    } catch {
      // The node is busy starting; ask again.
    }
    const ask = processes.filter((p) => pending.has(p.application) && p.ready && p.port > 0);
    for (let i = 0; i < ask.length; i += parallel) {
      await Promise.all(
        ask.slice(i, i + parallel).map(async (p) => {
          try {
            const response = await fetch(`http://127.0.0.1:${p.port}/`, {
              signal: AbortSignal.timeout(5_000),
            });
            await response.text();
            if (response.status === 200) pending.delete(p.application);
          } catch {
            // Not yet.
          }
        }),
      );
    }
    onProgress(names.length - pending.size);
    if (pending.size > 0) await new Promise((r) => setTimeout(r, 500));
  }
  return Date.now();
}

export interface TreeMemory {
  /** PSS of the daemon and everything below it. */
  pss: number;
  /** PSS of what the daemon started (the daemon apart). */
  childrenPss: number;
  daemonRss: number;
  daemonPss: number;
  processes: number;
}

export function treeMemory(daemonPid: number): TreeMemory {
  const daemon = memoryOf(daemonPid);
  const children = descendants(daemonPid)
    .map(memoryOf)
    .filter((p) => p !== null);
  const childrenPss = children.reduce((s, p) => s + p.pss, 0);
  return {
    pss: childrenPss + (daemon?.pss ?? 0),
    childrenPss,
    daemonRss: daemon?.rss ?? 0,
    daemonPss: daemon?.pss ?? 0,
    processes: children.length,
  };
}

/** Kills by PID whatever is left of a tree the bench started (the daemon's runtime processes). */
export function killLeftovers(pids: number[]): number {
  let killed = 0;
  for (const pid of pids) {
    try {
      // A PID may have been reused since: only a runtime process is ours.
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!/workerd|cell/.test(command)) continue;
      process.kill(pid, 'SIGKILL');
      killed++;
    } catch {
      // Already gone.
    }
  }
  return killed;
}

export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

export function mb(bytes: number): string {
  return `${(bytes / MB).toFixed(1)} MB`;
}

/**
 * On SIGINT or SIGTERM, runs `cleanup` (stop the node, kill what is left by PID) before exiting,
 * so an interrupted bench leaves no daemon or runtime process behind.
 */
export function cleanUpOnSignal(cleanup: () => Promise<void>): void {
  const handler = (signal: NodeJS.Signals) => {
    console.log(`  ${signal}: stopping what the bench started`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
}

/**
 * Keeps track of every process under the node `current()` answers (a look every 5 s and on
 * `note()`), so `cleanup` can stop the node and kill by PID whatever it leaves; `cleanup` also
 * runs on SIGINT or SIGTERM. A node that does not drain in time (its event loop overrun) is
 * killed with what it started.
 */
export function watchNodeTree(current: () => SailProcess | null): {
  note: () => void;
  cleanup: () => Promise<void>;
} {
  const seen = new Set<number>();
  const note = () => {
    const pid = current()?.child.pid;
    if (pid) for (const child of descendants(pid)) seen.add(child);
  };
  const watcher = setInterval(note, 5_000);
  const cleanup = async () => {
    clearInterval(watcher);
    note();
    const node = current();
    const stopped = node?.stop();
    const dead = await Promise.race([stopped, new Promise((r) => setTimeout(() => r('late'), 90_000))]);
    if (dead === 'late' && node?.child.pid) node.child.kill('SIGKILL');
    const killed = killLeftovers([...seen]);
    if (killed > 0) console.log(`  killed ${killed} leftover processes by PID`);
  };
  cleanUpOnSignal(cleanup);
  return { note, cleanup };
}
