// The fetch wrapper's cost on requests that fetch nothing (docs/runtime.md "Outbound requests"):
// requests per second of workerd serving examples/hello with the wrapper that `cell` loads ahead of
// the main module, against the same folder with the wrapper taken out of the config; target at
// least 0.95 (the targets in bench/RESULTS.md, Fetch wrapper). Needs wrk (`apt-get install wrk`).
// Run: scripts/with-node node bench/egress-wrapper.bench.ts [seconds per round] [rounds] [connections]
//
// Both sides are bare workerd processes started from copies of the instance folder a real
// `cell serve` writes (as in runtime-throughput.bench.ts), so the front is out of the measure;
// rounds alternate which side goes first.

import { spawn } from 'node:child_process';
import { cpSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EGRESS_ENTRY_MODULE, EGRESS_MODULE } from '../runtime/src/egress.ts';
import { workerdBinary } from '../runtime/src/workerd.ts';
import { dirBucketEnv, EXAMPLES, publish, startCell } from '../test/helpers/cell.ts';
import { freePort, tempDir, waitFor } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond, wrkVersion } from './wrk.ts';

const [seconds = 10, rounds = 5, connections = 32] = process.argv.slice(2, 5).map(Number);
const TARGET = 0.95;
const SIDES = ['plain', 'wrapped'] as const;

/** The config with the wrapper's two modules taken out: the main module is first again. */
function withoutWrapper(config: string): string {
  const literal = '"(?:[^"\\\\]|\\\\.)*"';
  const module = (name: string) => `\\(name = "${name.replaceAll('.', '\\.')}", esModule = ${literal}\\), `;
  const plain = config.replace(new RegExp(module(EGRESS_ENTRY_MODULE) + module(EGRESS_MODULE)), '');
  if (plain === config) throw new Error('the instance config loads no fetch wrapper');
  return plain;
}

async function main(): Promise<void> {
  const bucket = dirBucketEnv(tempDir('bench-egress-bucket-'));
  const published = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
  if (!published.published) throw new Error(`publish failed:\n${published.stderr}`);
  const cell = await startCell('hello', 'bench-node', bucket);
  const children: ReturnType<typeof spawn>[] = [];
  try {
    await waitFor(async () => (await fetch(`${cell.url}/`).catch(() => null))?.ok === true, 'cell serve');
    const pid = cell
      .children()
      .find((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('config.capnp'));
    if (!pid) throw new Error('cell serve has no workerd child');
    const instance = readlinkSync(`/proc/${pid}/cwd`);
    const ports = { plain: await freePort(), wrapped: await freePort() };
    for (const side of SIDES) {
      const dir = tempDir(`bench-egress-${side}-`);
      cpSync(instance, dir, { recursive: true });
      let config = readFileSync(join(dir, 'config.capnp'), 'utf8').replace(
        /(name = "http", address = )"unix:[^"]*"/,
        `$1"127.0.0.1:${ports[side]}"`,
      );
      if (side === 'plain') config = withoutWrapper(config);
      writeFileSync(join(dir, 'config.capnp'), config);
      children.push(
        spawn(workerdBinary(), ['serve', 'config.capnp'], { cwd: resolve(dir), stdio: 'inherit' }),
      );
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${ports[side]}/`).catch(() => null))?.ok === true,
        `the ${side} workerd to answer`,
      );
    }
    console.log(
      `fetch wrapper bench: ${rounds} rounds of ${seconds} s per side, ${connections} connections, wrk -t1 ` +
        `(${await wrkVersion()}; load ${loadAverage()})`,
    );
    const wrk = (port: number, duration: number) =>
      wrkRequestsPerSecond(`http://127.0.0.1:${port}/`, { seconds: duration, connections });
    for (const side of SIDES) await wrk(ports[side], 2); // warm-up
    const results = { plain: [] as number[], wrapped: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      for (const side of i % 2 === 0 ? SIDES : [...SIDES].reverse()) {
        results[side].push(await wrk(ports[side], seconds));
        console.log(`  round ${i + 1} ${side.padEnd(7)} ${results[side].at(-1)!.toFixed(0)} req/s`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ratio = median(results.wrapped.map((rps, i) => rps / results.plain[i]!));
    console.log(
      `plain median ${median(results.plain).toFixed(0)} req/s, wrapped median ${median(results.wrapped).toFixed(0)} ` +
        `req/s, median of per-round ratios ${ratio.toFixed(3)} (target ${TARGET}: ${ratio >= TARGET ? 'met' : 'NOT met'}); ` +
        `load ${loadAverage()}`,
    );
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await cell.stop();
  }
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

await main();
