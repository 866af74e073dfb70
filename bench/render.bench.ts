// the targets in bench/RESULTS.md, Rendering: 10,000 applications on 3 nodes rendered to both formats (docs/ingress.md
// routing document and proxyb) in under 50 ms; also 10, 100 and 1,000 applications, for scale.
// Run: scripts/with-node node bench/render.bench.ts [applications...]
// Besides wall time it reports the process's CPU time per run (user + system, all threads, so the
// garbage collector's helpers count): on a shared machine the wall time also holds the time other
// processes had the core, the CPU time does not.
// The two target lines render the same fleet every run, as a node does from one pass to the next
// while nothing changes, and a rendering keeps what it can reuse from the last (src/routing/render.ts
// "Kept between renderings"); the lines after them say what a pass costs when applications did
// change: 1% of them on a new port every run, or all of them (nothing kept fits any more).
import { renderProxybBytes } from '../src/routing/proxyb.ts';
import { renderRouting, resolvePrefer, serializeRouting } from '../src/routing/render.ts';
import type { RoutingInput } from '../src/routing/types.ts';

const TARGET_MS = 50;
const RUNS = 40;
const WARMUP = 10;

// `size` applications (10,000 for the target), every one on every node (the largest document 3
// nodes can give), one platform domain, api.public on. One in ten claims a custom domain; one in a
// hundred claims it with subdomains and has a serving `<name>-staging`, which is among the `size`.
function fleet(size: number): RoutingInput {
  const count = Math.round(size * 0.99);
  const holders = Array.from({ length: count }, (_, i) => `app-${i.toString(36).padStart(4, '0')}`);
  const envs = holders.filter((_, i) => i % 99 === 0).map((n) => `${n}-staging`);
  const all = [...holders, ...envs];
  return {
    nodes: ['n1', 'n2', 'n3'].map((id, k) => ({
      id,
      address: `10.0.0.${k + 1}:7070`,
      state: 'ready' as const,
      live: true,
      processes: all.map((application, i) => ({ application, port: 20_000 + i, ready: true })),
    })),
    applications: all.map((name) => ({ name, blocked: false, retired: false })),
    claims: holders.flatMap((n, i) =>
      i % 10 === 0 || i % 99 === 0
        ? [{ host: `${n}.example.com`, application: n, wildcard: i % 99 === 0 }]
        : [],
    ),
    platformDomains: ['svc.example.net'],
    apiPublic: true,
    selfNodeId: 'n2',
  };
}

// The fleet after `run` runs in each of which the processes of one application in `every` went to
// a new port: from one run to the next exactly those differ (all of them for `every` = 1).
function moved(input: RoutingInput, run: number, every: number): RoutingInput {
  return {
    ...input,
    nodes: input.nodes.map((node) => ({
      ...node,
      processes: node.processes.map((p, i) => {
        const first = i % every;
        if (run < first) return p;
        const last = run - ((run - first) % every); // the last run that moved it
        return { ...p, port: p.port + 10_000 + last };
      }),
    })),
  };
}

function measure(fleetOf: (run: number) => RoutingInput, prefer: string | undefined) {
  const preferNode = resolvePrefer(prefer, fleetOf(0).selfNodeId);
  const total: number[] = [];
  const cpu: number[] = [];
  const generic: number[] = [];
  let bytes = 0;
  let routes = 0;
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const input = fleetOf(i);
    const cpuStart = process.cpuUsage();
    const start = performance.now();
    const doc = renderRouting(input, prefer);
    const body = serializeRouting(doc);
    const mid = performance.now();
    const proxyb = renderProxybBytes(doc, { entryPoints: ['web'], preferNode });
    const end = performance.now();
    const used = process.cpuUsage(cpuStart);
    if (i < WARMUP) continue; // JIT warm-up
    total.push(end - start);
    cpu.push((used.user + used.system) / 1000);
    generic.push(mid - start);
    bytes = body.length + proxyb.length;
    routes = doc.routes.length;
  }
  const pick = (xs: number[], q: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];
  return {
    min: pick(total, 0),
    median: pick(total, 0.5),
    p95: pick(total, 0.95),
    cpuMedian: pick(cpu, 0.5),
    genericShare: pick(generic, 0.5) / pick(total, 0.5),
    bytes,
    routes,
  };
}

const sizes = process.argv.slice(2).map(Number);
for (const size of sizes.length > 0 ? sizes : [10, 100, 1_000, 10_000]) {
  const input = fleet(size);
  console.log(
    `render bench: ${input.applications.length} applications on ${input.nodes.length} nodes, ` +
      `${RUNS} runs after ${WARMUP} warm-up (node ${process.version}, ${process.arch})`,
  );
  for (const [label, prefer, fleetOf] of [
    ['no prefer', undefined, () => input],
    ['prefer=self (failover services)', 'self', () => input],
    ['no prefer, 1% moved per run', undefined, (run: number) => moved(input, run, 100)],
    ['prefer=self, 1% moved per run', 'self', (run: number) => moved(input, run, 100)],
    ['no prefer, all moved per run', undefined, (run: number) => moved(input, run, 1)],
    ['prefer=self, all moved per run', 'self', (run: number) => moved(input, run, 1)],
  ] as const) {
    const r = measure(fleetOf, prefer);
    const fmt = (ms: number) => (ms < 1 ? ms.toFixed(3) : ms.toFixed(1));
    console.log(
      `  ${label.padEnd(32)} min ${fmt(r.min)} ms  median ${fmt(r.median)} ms  p95 ${fmt(r.p95)} ms  ` +
        `median/target ${(r.median / TARGET_MS).toFixed(3)}  cpu median ${fmt(r.cpuMedian)} ms  document share ${(r.genericShare * 100).toFixed(0)}%  ` +
        `(${r.routes} routes, ${(r.bytes / 1e3).toFixed(1)} kB in both formats)`,
    );
  }
}
