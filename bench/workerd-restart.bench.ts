// The figures for bench/RESULTS.md, Workerd restart: a serving workerd killed under load costs no
// request (docs/runtime.md "The request path": the front holds requests while it starts the
// workerd again). Real parts: `cell publish` of examples/hello and `cell serve` (the Go front,
// real workerd) on the local-directory bucket; keep-alive GET loops straight to the front.
// Each round: load for LOAD_BEFORE_KILL_MS, SIGKILL to the serving workerd, load on until a new
// workerd has answered for AFTER_RESTART_MS. A request fails on any answer but 200, or a client
// error. CELL_FRONT_BIN picks another build of the front to compare with.
// Run: scripts/with-node node bench/workerd-restart.bench.ts [rounds=5] [concurrency=4]

import { Agent, request as httpRequest } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { dirBucketEnv, EXAMPLES, fetchText, publish, startCell } from '../test/helpers/cell.ts';
import { tempDir, waitFor } from '../test/helpers/svc.ts';

const [rounds = 5, concurrency = 4] = process.argv.slice(2, 4).map(Number);
const LOAD_BEFORE_KILL_MS = 1_000;
const AFTER_RESTART_MS = 1_000;

function get(url: string, agent: Agent): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

async function main(): Promise<void> {
  const bucket = dirBucketEnv(tempDir('cell-restart-bench-'));
  const published = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
  if (published.code !== 0) throw new Error(published.stderr);
  const cell = await startCell('hello', 'node-a', bucket);
  console.log(
    `workerd-restart bench: ${rounds} rounds, ${concurrency} loops, front ${process.env.CELL_FRONT_BIN ?? 'runtime/bin/cell-front'}, node ${process.version}`,
  );
  try {
    await waitFor(
      async () => (await fetchText(`${cell.url}/.well-known/cell/health`))?.status === 200,
      'hello served',
    );
    for (let round = 1; round <= rounds; round++) {
      const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
      const samples: { status: number; ms: number }[] = [];
      let stop = false;
      const loops = Array.from({ length: concurrency }, async () => {
        while (!stop) {
          const started = performance.now();
          const status = await get(`${cell.url}/`, agent);
          samples.push({ status, ms: performance.now() - started });
        }
      });
      const load = loadavg()[0]!.toFixed(1);
      await new Promise((r) => setTimeout(r, LOAD_BEFORE_KILL_MS));
      const [dead] = cell.children();
      const killed = performance.now();
      process.kill(dead!, 'SIGKILL');
      await waitFor(
        async () => {
          const now = cell.children();
          return now.length === 1 && now[0] !== dead && (await fetchText(`${cell.url}/`))?.status === 200;
        },
        'a new workerd answering',
        30_000,
      );
      const back = performance.now() - killed;
      await new Promise((r) => setTimeout(r, AFTER_RESTART_MS));
      stop = true;
      await Promise.all(loops);
      agent.destroy();
      const failed = samples.filter((s) => s.status !== 200);
      const slowest = Math.max(...samples.map((s) => s.ms));
      console.log(
        `  round ${round}: requests ${samples.length}, failed ${failed.length}` +
          ` (${[...new Set(failed.map((s) => s.status))].join(', ') || 'none'}); a new workerd answered` +
          ` ${(back / 1000).toFixed(2)} s after the kill; slowest request ${(slowest / 1000).toFixed(2)} s; load ${load}`,
      );
    }
  } finally {
    await cell.stop();
  }
}

await main();
