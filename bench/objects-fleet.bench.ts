// Durable Objects reached from workers on the fleet (docs/bindings.md "Durable Objects on the
// fleet"): what a call to an object costs from a worker on the holder's node and from a worker on
// another node.
//   Two `svc sail` daemons on one bucket (labels zone=a and zone=b). The counter application
//   (examples/durable-objects: POST /<name> increments that name's object) runs on node a only,
//   so node a holds its objects. A caller application runs on both nodes with a service binding
//   to the counter; each of its requests makes one call:
//     direct      no caller: the counter application's own port on node a (client, front,
//                 workerd, the object)
//     same-node   the caller's copy on node a, env.COUNTER_APP.fetch() to the counter
//     other-node  the caller's copy on node b, the same call, which crosses to node a
//   Each figure: `count` sequential increments of one object per mode after 200 of warm-up, the
//   modes taking turns in rounds of 100; p50/p99 of the client's round trip and the call's own
//   cost over `direct`. The object's count is checked at the end: every increment counted once.
// Run: scripts/with-node node bench/objects-fleet.bench.ts [count]   (default 2000)
// Real parts: a local-directory bucket, two `svc sail` daemons with the real cell and cell-front,
// workerd.

import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { keyArg, openBucket, readyAppUrl } from '../test/helpers/applications.ts';
import { CELL_REAL } from '../test/helpers/deploys.ts';
import { runSvc, tempDir } from '../test/helpers/svc.ts';

const count = Number(process.argv[2] ?? 2000);
const WARM_UP = 200;
const ROUND = 100;
const OBJECT = 'bench';

// Only /inc calls: the runtime's readiness probe (GET /.well-known/cell/health) reaches the
// worker too, and must not count.
const CALLER = `export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname !== '/inc') return new Response('POST /inc', { status: 404 });
    return env.COUNTER_APP.fetch('http://counter/${OBJECT}', { method: 'POST' });
  },
};
`;

const MODES = ['direct', 'same-node', 'other-node'] as const;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One increment through `url`, checked; answers its round trip in ms. */
async function increment(url: string): Promise<number> {
  const t = performance.now();
  const answer = await fetch(url, { method: 'POST' });
  const body = await answer.text();
  const elapsed = performance.now() - t;
  if (answer.status !== 200 || !body.includes(`"name":"${OBJECT}"`))
    throw new Error(`${url} answered ${answer.status} ${body}`);
  return elapsed;
}

async function main(): Promise<void> {
  const bucket = await openBucket();
  try {
    const admin = await bucket.operator('op-objects-fleet-bench', 'admin', ['*']);
    const nodeA = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=a']);
    const nodeB = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=b']);
    const deploy = async (dir: string, ...flags: string[]) => {
      const run = await runSvc(['deploy', dir, ...flags, '--node', nodeA.url, '--key', keyArg(admin)], {
        timeoutMs: 120_000,
      });
      if (run.code !== 0) throw new Error(run.stderr);
    };
    const counterDir = tempDir('objects-fleet-bench-counter-');
    cpSync(resolve(import.meta.dirname, '..', 'examples', 'durable-objects'), counterDir, {
      recursive: true,
    });
    await deploy(counterDir, '--node-selector', 'zone=a');
    const callerDir = tempDir('objects-fleet-bench-caller-');
    mkdirSync(join(callerDir, 'src'));
    writeFileSync(
      join(callerDir, 'cell.jsonc'),
      JSON.stringify({
        name: 'objects-caller',
        main: 'src/index.js',
        compatibility_date: '2025-09-01',
        services: [{ binding: 'COUNTER_APP', service: 'durable-objects' }],
      }),
    );
    writeFileSync(join(callerDir, 'src', 'index.js'), CALLER);
    await deploy(callerDir, '--replicas', 'all');

    const urls: Record<(typeof MODES)[number], string> = {
      direct: `${await readyAppUrl(nodeA, admin, 'durable-objects')}/${OBJECT}`,
      'same-node': `${await readyAppUrl(nodeA, admin, 'objects-caller')}/inc`,
      'other-node': `${await readyAppUrl(nodeB, admin, 'objects-caller')}/inc`,
    };
    const times = new Map<string, number[]>(MODES.map((m) => [m, []]));
    let made = 0;
    for (const mode of MODES) for (let i = 0; i < WARM_UP; i++, made++) await increment(urls[mode]);
    for (let done = 0; done < count; done += ROUND)
      for (const mode of MODES)
        for (let i = 0; i < ROUND; i++, made++) times.get(mode)!.push(await increment(urls[mode]));
    const final = (await (await fetch(urls.direct)).json()) as { count: number };
    if (final.count !== made) throw new Error(`the object counted ${final.count} of ${made} increments`);

    for (const sorted of times.values()) sorted.sort((x, y) => x - y);
    const p50 = (mode: string) => percentile(times.get(mode)!, 50);
    console.log(`objects fleet bench: ${count} increments of one object per mode, sequential`);
    console.log("mode\tp50 ms\tp99 ms\tcall's own p50 ms (over direct)");
    for (const mode of MODES) {
      const sorted = times.get(mode)!;
      console.log(
        [
          mode,
          percentile(sorted, 50).toFixed(2),
          percentile(sorted, 99).toFixed(2),
          (p50(mode) - p50('direct')).toFixed(2),
        ].join('\t'),
      );
    }
    console.log(`the object counted ${final.count} increments, as many as were made`);
  } finally {
    await bucket.close();
  }
}

await main();
