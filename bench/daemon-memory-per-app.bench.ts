// What the `svc sail` daemon itself holds per running application: the daemon's resident set and
// V8 heap at two application counts, their difference divided by the difference in applications,
// and where the heap grew (a heap snapshot at each count, summed by constructor).
//   Target (bench/RESULTS.md "1,000 idle applications on one node"): daemon RSS at most 150 MB at
//   1,000 applications. The 1,000 run with the real runtime needs ~13 GB; this one runs small
//   counts and extrapolates.
// Run: scripts/with-node node bench/daemon-memory-per-app.bench.ts [counts] [idle seconds] [top]
//   counts        comma-separated application counts (default 30,120), each on a fresh bucket and
//                 node, copies of examples/hello (bench/idle-fleet.ts seeds them)
//   idle seconds  default 30: once every application answered through its port, the daemon's
//                 RSS is sampled every 2 s for this long and averaged
//   top           default 25: constructors listed in the heap growth table
// SVC_BENCH_KEEP_SNAPSHOTS=<dir> keeps each count's heap snapshot there (daemon-<count>.heapsnapshot).
//
// Real parts: a local-directory bucket, one `svc sail` with the real runtime (runtime/bin/cell,
// cell-front, workerd). The daemon runs with NODE_OPTIONS=--heapsnapshot-signal=SIGUSR1 and a
// diagnostic directory of its own; after the idle window the bench sends SIGUSR1 and reads the
// snapshot it writes. Every process the node started is killed by PID if the bench fails.

import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type SailProcess, startSail, tempDir, waitFor } from '../test/helpers/svc.ts';
import {
  loadAverage,
  mb,
  memoryOf,
  seededNodeFlags,
  seedHelloApplications,
  untilEveryAnswers,
  watchNodeTree,
} from './idle-fleet.ts';

const counts = (process.argv[2] ?? '30,120').split(',').map(Number);
const idleSeconds = Number(process.argv[3] ?? 30);
const top = Number(process.argv[4] ?? 25);
const PORTS: [number, number] = [35_000, 36_199];
const START_DEADLINE_MS = 20 * 60_000;
const SETTLE_MS = 15_000;

interface Measured {
  applications: number;
  rss: number;
  anon: number;
  heap: Map<string, { size: number; count: number }>;
  heapTotal: number;
}

async function main(): Promise<void> {
  console.log(
    `daemon memory per application: counts ${counts.join(', ')}, ${idleSeconds} s idle, node ${process.version}, load ${loadAverage()}`,
  );
  const results: Measured[] = [];
  for (const n of counts) results.push(await measure(n));
  console.log('');
  console.log('applications  daemon RSS (mean)  anonymous  V8 heap (snapshot)');
  for (const r of results) {
    console.log(
      `${String(r.applications).padStart(12)}  ${mb(r.rss).padStart(17)}  ${mb(r.anon).padStart(9)}  ${mb(r.heapTotal).padStart(18)}`,
    );
  }
  const first = results[0]!;
  const last = results[results.length - 1]!;
  const apps = last.applications - first.applications;
  if (apps <= 0) return;
  const per = (a: number, b: number) => `${((b - a) / apps / 1024).toFixed(1)} kB`;
  console.log(
    `per application (${first.applications} -> ${last.applications}): RSS ${per(first.rss, last.rss)}, ` +
      `anonymous ${per(first.anon, last.anon)}, V8 heap ${per(first.heapTotal, last.heapTotal)}`,
  );
  const at1000 = last.rss + ((last.rss - first.rss) / apps) * (1000 - last.applications);
  console.log(`RSS at 1,000 by linear extrapolation: ${mb(at1000)} (target 150 MB)`);
  const names = new Set([...first.heap.keys(), ...last.heap.keys()]);
  const growth = [...names]
    .map((name) => {
      const a = first.heap.get(name) ?? { size: 0, count: 0 };
      const b = last.heap.get(name) ?? { size: 0, count: 0 };
      return { name, size: b.size - a.size, count: b.count - a.count };
    })
    .sort((x, y) => y.size - x.size)
    .slice(0, top);
  console.log('');
  console.log('heap growth per application, by constructor (self size, objects)');
  for (const g of growth) {
    console.log(
      `  ${(g.size / apps / 1024).toFixed(2).padStart(8)} kB  ${(g.count / apps).toFixed(1).padStart(7)}  ${g.name}`,
    );
  }
  console.log(`load average at the end: ${loadAverage()}`);
}

async function measure(applications: number): Promise<Measured> {
  const seeded = await seedHelloApplications(applications, 'm-');
  const diagnostics = tempDir('svc-bench-heap-');
  let node: SailProcess | null = null;
  const { note, cleanup } = watchNodeTree(() => node);
  try {
    const started = Date.now();
    node = await startSail(seededNodeFlags(seeded, PORTS), {
      timeoutMs: 120_000,
      env: {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR1 --diagnostic-dir=${diagnostics}`,
      },
    });
    const pid = node.child.pid!;
    const answeredAt = await untilEveryAnswers(node.url, seeded.signer, seeded.names, START_DEADLINE_MS);
    console.log(
      `  ${applications}: every application answered ${((answeredAt - started) / 1000).toFixed(1)} s after start`,
    );
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    note();
    let rss = 0;
    let anon = 0;
    let samples = 0;
    const idleStarted = Date.now();
    while (Date.now() - idleStarted < idleSeconds * 1000) {
      rss += memoryOf(pid)?.rss ?? 0;
      anon += anonymous(pid);
      samples++;
      // A timing loop, not a readiness wait: one sample every 2 s.
      await new Promise((r) => setTimeout(r, 2_000));
    }
    rss /= samples;
    anon /= samples;
    process.kill(pid, 'SIGUSR1');
    const file = await waitFor(
      () => {
        const name = readdirSync(diagnostics).find((f) => f.endsWith('.heapsnapshot'));
        if (!name) return undefined;
        const path = join(diagnostics, name);
        // Written when its size stops changing.
        const size = statSync(path).size;
        if (size > 0 && sizes.get(path) === size) return path;
        sizes.set(path, size);
        return undefined;
      },
      'the daemon to write its heap snapshot',
      300_000,
    );
    if (process.env.SVC_BENCH_KEEP_SNAPSHOTS)
      copyFileSync(file!, join(process.env.SVC_BENCH_KEEP_SNAPSHOTS, `daemon-${applications}.heapsnapshot`));
    const heap = byConstructor(file!);
    const heapTotal = [...heap.values()].reduce((s, v) => s + v.size, 0);
    console.log(
      `  ${applications}: daemon RSS ${mb(rss)} (anonymous ${mb(anon)}), V8 heap ${mb(heapTotal)}, ${readdirSync(`/proc/${pid}/fd`).length} open files, load ${loadAverage()}`,
    );
    return { applications, rss, anon, heap, heapTotal };
  } finally {
    await cleanup();
    await seeded.store.close();
    if (existsSync(diagnostics)) rmSync(diagnostics, { recursive: true, force: true });
  }
}

const sizes = new Map<string, number>();

/** Anonymous memory (heap, Buffers, malloc) of a process, from smaps_rollup. */
function anonymous(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Anonymous:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
}

/**
 * A .heapsnapshot summed by node: objects by constructor name, everything else by its type
 * (`(string)`, `(code)`, `(closure) <name>`...). Self sizes, not retained sizes.
 */
function byConstructor(file: string): Map<string, { size: number; count: number }> {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const out = new Map<string, { size: number; count: number }>();
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]!]!;
    const name = strings[nodes[i + nameAt]!]!;
    let key: string;
    if (type === 'object' || type === 'native') key = name.split(' ')[0]!.slice(0, 60);
    else if (type === 'closure') key = `(closure) ${name.slice(0, 50)}`;
    else key = `(${type})`;
    const entry = out.get(key) ?? { size: 0, count: 0 };
    entry.size += nodes[i + sizeAt]!;
    entry.count += 1;
    out.set(key, entry);
  }
  return out;
}

await main();
