// The figures for bench/RESULTS.md, Streamed request bodies: how long a piece of a request body
// takes to come back from a worker that echoes it as it reads (target: each within 100 ms of its
// sending), through the front alone and through Caddy and the front. Real parts
// (test/helpers/streaming.ts): the real runtime (`cell serve`, the Go front, real workerd) and the
// real svc-caddy with the shipped global options. A piece is sent every 200 ms (or once the one
// before came back, if later), chunked and with a Content-Length.
// Run: scripts/with-node node bench/streaming.bench.ts [pieces=50] [rounds=3]

import { loadavg } from 'node:os';
import { echoInLockstep, echoPieces, type Framing, startEchoPath } from '../test/helpers/streaming.ts';

const [pieceCount = 50, rounds = 3] = process.argv.slice(2, 4).map(Number);
const PACE_MS = 200;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function main(): Promise<void> {
  console.log(
    `streaming bench: ${rounds} rounds of ${pieceCount} pieces every ${PACE_MS} ms per path and framing, node ${process.version}, load ${loadavg()[0]!.toFixed(1)}`,
  );
  const path = await startEchoPath();
  try {
    for (const [label, base] of [
      ['front', path.front],
      ['caddy + front', path.caddy],
    ] as const) {
      for (const framing of ['chunked', 'content-length'] as Framing[]) {
        const latencies: number[] = [];
        for (let i = 0; i < rounds; i++) {
          const pieces = echoPieces(pieceCount);
          const { echo, latenciesMs } = await echoInLockstep(`${base}/echo`, framing, pieces, PACE_MS);
          if (echo !== pieces.join('')) throw new Error(`${label} ${framing}: the echo differs`);
          latencies.push(...latenciesMs);
        }
        latencies.sort((a, b) => a - b);
        const over = latencies.filter((ms) => ms > 100).length;
        console.log(
          `  ${label}, ${framing}: ${latencies.length} pieces, echo p50 ${quantile(latencies, 0.5)} ms, ` +
            `p99 ${quantile(latencies, 0.99)} ms, max ${latencies.at(-1)} ms, over 100 ms ${over}`,
        );
      }
    }
  } finally {
    await path.stop();
  }
  console.log(`  load after ${loadavg()[0]!.toFixed(1)}`);
}

await main();
