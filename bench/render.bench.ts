// DESIGN.md "Targets", Rendering: 10,000 applications on 3 nodes rendered to both formats (spec 2
// routing document and proxyb) in under 50 ms. Run: scripts/with-node node bench/render.bench.ts
import { renderProxybBytes } from '../src/routing/proxyb.ts';
import { renderRouting, resolvePrefer, serializeRouting } from '../src/routing/render.ts';
import type { RoutingInput } from '../src/routing/types.ts';

const TARGET_MS = 50;
const APPS = 10_000;
const RUNS = 30;

// Every application on every node (the largest document 3 nodes can give): one platform domain,
// one in ten with a custom domain, one in a hundred claiming with subdomains and one env app each.
function fleet(): RoutingInput {
  const names = Array.from({ length: APPS }, (_, i) => `app-${i.toString(36).padStart(4, '0')}`);
  const envs = names.filter((_, i) => i % 100 === 0).map((n) => `${n}-staging`);
  const all = [...names, ...envs];
  return {
    nodes: ['n1', 'n2', 'n3'].map((id, k) => ({
      id,
      address: `10.0.0.${k + 1}:7070`,
      state: 'ready' as const,
      live: true,
      processes: all.map((application, i) => ({ application, port: 20_000 + i, ready: true })),
    })),
    applications: all.map((name) => ({ name, blocked: false, retired: false })),
    claims: names.flatMap((n, i) =>
      i % 10 === 0 ? [{ host: `${n}.example.com`, application: n, wildcard: i % 100 === 0 }] : [],
    ),
    platformDomains: ['svc.example.net'],
    apiPublic: true,
    selfNodeId: 'n2',
  };
}

function measure(input: RoutingInput, prefer: string | undefined) {
  const preferNode = resolvePrefer(prefer, input.selfNodeId);
  const times: number[] = [];
  let bytes = 0;
  let routes = 0;
  for (let i = 0; i < RUNS + 5; i++) {
    const start = performance.now();
    const doc = renderRouting(input, prefer);
    const generic = serializeRouting(doc);
    const proxyb = renderProxybBytes(doc, { entryPoints: ['web'], preferNode });
    const ms = performance.now() - start;
    if (i >= 5) times.push(ms); // the first runs pay for JIT warm-up
    bytes = generic.length + proxyb.length;
    routes = doc.routes.length;
  }
  times.sort((a, b) => a - b);
  return {
    median: times[Math.floor(RUNS / 2)],
    p95: times[Math.floor(RUNS * 0.95)],
    max: times[RUNS - 1],
    bytes,
    routes,
  };
}

const input = fleet();
console.log(
  `render bench: ${input.applications.length} applications on ${input.nodes.length} nodes, ${RUNS} runs each (node ${process.version})`,
);
for (const [label, prefer] of [
  ['no prefer', undefined],
  ['prefer=self (failover services)', 'self'],
] as const) {
  const r = measure(input, prefer);
  console.log(
    `${label.padEnd(34)} median ${r.median.toFixed(1)} ms  p95 ${r.p95.toFixed(1)} ms  max ${r.max.toFixed(1)} ms  ` +
      `= ${((r.median / TARGET_MS) * 100).toFixed(0)}% of the ${TARGET_MS} ms target  ` +
      `(${r.routes} routes, ${(r.bytes / 1e6).toFixed(1)} MB both formats)`,
  );
}
