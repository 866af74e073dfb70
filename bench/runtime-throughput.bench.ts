// the targets in bench/RESULTS.md, Runtime throughput: requests per second through the runtime's
// public port (`cell serve`: the Go front that switches deployments, then workerd) are at least
// 0.95 of a bare workerd serving the same bundle, measured in one run. Needs wrk (`apt-get install wrk`).
// Run: scripts/with-node node bench/runtime-throughput.bench.ts [seconds per round] [rounds] [connections] [checkout|dist]
//
// examples/hello is published into a local-directory bucket and served by a real `cell serve`.
// The bare side is a second workerd started from a copy of the very folder that `cell serve`'s own
// workerd runs from (its generated config.capnp and embedded files), with the socket moved from
// the instance's unix socket to a loopback TCP port: same code, same config, no front. Rounds
// alternate which side goes first so drift from other load on the machine hits both alike.

import { spawn } from 'node:child_process';
import { cpSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { workerdBinary } from '../runtime/src/workerd.ts';
import { buildDist, DIST_CELL } from '../scripts/build-dist.ts';
import { dirBucketEnv, EXAMPLES, publish, startCell } from '../test/helpers/cell.ts';
import { freePort, tempDir, waitFor } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond, wrkVersion } from './wrk.ts';

const [seconds = 10, rounds = 3, connections = 32] = process.argv.slice(2, 5).map(Number);
const runner = process.argv[5] ?? 'dist';
const TARGET = 0.95;

async function main(): Promise<void> {
  const bucket = dirBucketEnv(tempDir('bench-throughput-bucket-'));
  const published = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
  if (!published.published) throw new Error(`publish failed:\n${published.stderr}`);
  if (runner === 'dist') await buildDist();
  const cell = await startCell('hello', 'bench-node', bucket, {}, runner === 'dist' ? DIST_CELL : undefined);
  const bare = { child: null as ReturnType<typeof spawn> | null, port: await freePort() };
  try {
    await waitFor(
      async () => (await fetch(`${cell.url}/`).catch(() => null))?.ok === true,
      'cell serve to answer',
    );
    bare.child = startBareWorkerd(cell.children(), bare.port);
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${bare.port}/`).catch(() => null))?.ok === true,
      'the bare workerd to answer',
    );
    const [cellBody, bareBody] = await Promise.all(
      [cell.url, `http://127.0.0.1:${bare.port}`].map(async (u) => (await fetch(`${u}/`)).text()),
    );
    if (cellBody !== bareBody) throw new Error(`the two sides answer differently: ${cellBody} / ${bareBody}`);
    const version = await wrkVersion();
    console.log(
      `runtime throughput bench: ${rounds} rounds of ${seconds} s per side, ${connections} connections, wrk -t1 ` +
        `(${version}; node ${process.version}; runtime ${runner}; load ${loadAverage()})`,
    );
    await wrk(cell.port, 2); // warm-up, both sides
    await wrk(bare.port, 2);
    const results = { bare: [] as number[], runtime: [] as number[] };
    // The front's own CPU per request: steadier than the ratio on a small machine, where wrk, the
    // front and workerd share the cores and any neighbour moves the ratio.
    const frontCost: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? (['bare', 'runtime'] as const) : (['runtime', 'bare'] as const);
      for (const side of order) {
        const before = cpuMs(cell.child.pid!);
        const rps = await wrk(side === 'bare' ? bare.port : cell.port, seconds);
        results[side].push(rps);
        let cost = '';
        if (side === 'runtime') {
          frontCost.push((cpuMs(cell.child.pid!) - before) / ((rps * seconds) / 1000));
          cost = `, the front ${frontCost.at(-1)!.toFixed(0)} ms of CPU per 1,000 requests`;
        }
        console.log(`  round ${i + 1} ${side.padEnd(7)} ${rps.toFixed(0)} req/s${cost}`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const paired = median(results.runtime.map((rps, i) => rps / results.bare[i]!));
    console.log(
      `bare workerd median ${median(results.bare).toFixed(0)} req/s, runtime median ` +
        `${median(results.runtime).toFixed(0)} req/s, median of per-round ratios ${paired.toFixed(3)} ` +
        `(target ${TARGET}: ${paired >= TARGET ? 'met' : 'NOT met'}); the front's CPU per 1,000 requests ` +
        `median ${median(frontCost).toFixed(0)} ms; load ${loadAverage()}`,
    );
  } finally {
    bare.child?.kill('SIGTERM');
    await cell.stop();
  }
}

/** Starts workerd from a copy of the instance folder `cell serve`'s workerd runs in, on `port`. */
function startBareWorkerd(cellChildren: number[], port: number): ReturnType<typeof spawn> {
  const pid = cellChildren.find((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('config.capnp'));
  if (!pid) throw new Error('cell serve has no workerd child');
  const dir = tempDir('bench-bare-workerd-');
  cpSync(readlinkSync(`/proc/${pid}/cwd`), dir, { recursive: true });
  const config = readFileSync(join(dir, 'config.capnp'), 'utf8');
  const moved = config.replace(/(name = "http", address = )"unix:[^"]*"/, `$1"127.0.0.1:${port}"`);
  if (moved === config) throw new Error('no unix socket address for "http" in the instance config');
  writeFileSync(join(dir, 'config.capnp'), moved);
  const child = spawn(workerdBinary(), ['serve', 'config.capnp'], { cwd: resolve(dir), stdio: 'inherit' });
  return child;
}

/** CPU time (user and system) a process has used, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

/** Requests per second wrk measured against `port`. */
function wrk(port: number, duration: number): Promise<number> {
  return wrkRequestsPerSecond(`http://127.0.0.1:${port}/`, { seconds: duration, connections });
}

await main();
