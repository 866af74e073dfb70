// Service bindings (docs/bindings.md "Service bindings"): what a call from one application to
// another costs, on the same node and across nodes, against a call inside one worker.
//   Two `svc sail` daemons on one bucket (labels zone=a and zone=b). The target B runs on both;
//   caller A on node a only, with one binding to B. A's worker answers one request per call made:
//     none      no call (the request's own cost: client, front, workerd)
//     own-rpc   JS RPC to its own WorkerEntrypoint (workerd's RPC in one process)
//     own-fetch fetch to its own default export, alike
//     fetch     env.B.fetch() to B, a GET
//     fetch-post  the same with a small body (as an RPC call has), a POST
//     rpc       env.B.add(1, 2) to B, JS RPC (svc's wrapped binding, the services socket, B's entry)
//   Same node: B's copy on node a answers (the services socket takes this node's first). Across
//   nodes: B is then moved to node b only (node selector), and the same calls repeat.
//   Each figure: `count` sequential requests per mode after 200 of warm-up, the modes taking turns
//   in rounds of 100; p50/p99 of the client's round trip, the call's own cost (p50 less the
//   `none` p50), and the ratio of each request's p50 to `own-rpc`'s.
// Run: scripts/with-node node bench/services.bench.ts [count]   (default 2000)
// Real parts: a local-directory bucket, two `svc sail` daemons with the real cell and cell-front,
// workerd.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, keyArg, openBucket, readyAppUrl } from '../test/helpers/applications.ts';
import { CELL_REAL } from '../test/helpers/deploys.ts';
import { runSvc, tempDir, waitFor } from '../test/helpers/svc.ts';

const count = Number(process.argv[2] ?? 2000);
const WARM_UP = 200;
const ROUND = 100;

const TARGET = `import { WorkerEntrypoint } from 'cloudflare:workers';
export default class extends WorkerEntrypoint {
  fetch() { return new Response('b'); }
  add(a, b) { return a + b; }
}
`;

const CALLER = `import { WorkerEntrypoint } from 'cloudflare:workers';
export class Own extends WorkerEntrypoint {
  add(a, b) { return a + b; }
}
export default {
  async fetch(request, env) {
    switch (new URL(request.url).pathname) {
      case '/none': return new Response('3');
      case '/own-rpc': return new Response(String(await env.OWN.add(1, 2)));
      case '/own-fetch': return new Response(await (await env.SELF.fetch('http://self/none')).text());
      case '/fetch': return new Response(await (await env.B.fetch('http://b/')).text());
      case '/fetch-post': return new Response(await (await env.B.fetch('http://b/', { method: 'POST', body: '[1,2]' })).text());
      case '/rpc': return new Response(String(await env.B.add(1, 2)));
    }
    return new Response('3');
  },
};
`;

const MODES = ['none', 'own-rpc', 'own-fetch', 'fetch', 'fetch-post', 'rpc'] as const;

function project(config: Record<string, unknown>, source: string): string {
  const dir = tempDir('services-bench-');
  mkdirSync(join(dir, 'src'));
  writeFileSync(
    join(dir, 'cell.jsonc'),
    JSON.stringify({ main: 'src/index.js', compatibility_date: '2025-06-01', ...config }),
  );
  writeFileSync(join(dir, 'src', 'index.js'), source);
  return dir;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One request of `mode`, checked. */
async function once(a: string, mode: string): Promise<number> {
  const t = performance.now();
  const answer = await fetch(`${a}/${mode}`);
  const body = await answer.text();
  const elapsed = performance.now() - t;
  const expected = mode.startsWith('fetch') ? 'b' : '3';
  if (answer.status !== 200 || body !== expected)
    throw new Error(`${mode} answered ${answer.status} ${body}`);
  return elapsed;
}

/** The modes in alternating rounds of ROUND requests, so a change in the machine's load weighs on each alike. */
async function measureAll(a: string, label: string): Promise<void> {
  const times = new Map<string, number[]>(MODES.map((m) => [m, []]));
  for (const mode of MODES) for (let i = 0; i < WARM_UP; i++) await once(a, mode);
  for (let done = 0; done < count; done += ROUND)
    for (const mode of MODES) for (let i = 0; i < ROUND; i++) times.get(mode)!.push(await once(a, mode));
  for (const sorted of times.values()) sorted.sort((x, y) => x - y);
  const p50 = (mode: string) => percentile(times.get(mode)!, 50);
  console.log(`\n${label}: mode\tp50 ms\tp99 ms\tcall's own p50 ms\tp50 / own-rpc p50`);
  for (const mode of MODES) {
    const sorted = times.get(mode)!;
    console.log(
      [
        mode,
        percentile(sorted, 50).toFixed(2),
        percentile(sorted, 99).toFixed(2),
        (p50(mode) - p50('none')).toFixed(2),
        (p50(mode) / p50('own-rpc')).toFixed(2),
      ].join('\t'),
    );
  }
}

async function main(): Promise<void> {
  const bucket = await openBucket();
  try {
    const admin = await bucket.operator('op-services-bench', 'admin', ['*']);
    const nodeA = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=a']);
    const nodeB = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=b']);
    const deploy = async (dir: string, ...flags: string[]) => {
      const run = await runSvc(['deploy', dir, ...flags, '--node', nodeA.url, '--key', keyArg(admin)], {
        timeoutMs: 120_000,
      });
      if (run.code !== 0) throw new Error(run.stderr);
    };
    const target = project({ name: 'bench-b' }, TARGET);
    await deploy(target, '--replicas', 'all');
    await readyAppUrl(nodeA, admin, 'bench-b');
    await readyAppUrl(nodeB, admin, 'bench-b');
    await deploy(
      project(
        {
          name: 'bench-a',
          services: [
            { binding: 'B', service: 'bench-b' },
            { binding: 'OWN', service: 'bench-a', entrypoint: 'Own' },
            { binding: 'SELF', service: 'bench-a' },
          ],
        },
        CALLER,
      ),
      '--node-selector',
      'zone=a',
    );
    const a = await readyAppUrl(nodeA, admin, 'bench-a');
    await measureAll(a, 'same node');

    await deploy(target, '--node-selector', 'zone=b');
    await waitFor(
      async () => {
        const state = (await call(nodeA.url, 'GET', '/v1/state', { signer: admin })).body as {
          processes: { application: string }[];
        };
        return !state.processes.some((p) => p.application === 'bench-b');
      },
      'bench-b to leave node a',
      120_000,
    );
    await readyAppUrl(nodeB, admin, 'bench-b');
    await measureAll(a, 'across nodes');
  } finally {
    await bucket.close();
  }
}

await main();
