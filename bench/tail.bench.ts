// The targets in bench/RESULTS.md, Live tail: requests per second through the runtime with nobody
// tailing are at least 0.95 of the runtime before the live tail existed, and with one `svc tail`
// attached at least 0.85, measured in one run. Needs wrk (`apt-get install wrk`) and Go.
// Run: scripts/with-node node bench/tail.bench.ts [seconds per round] [rounds] [connections]
//
// Two real nodes (`svc sail`, the checkout's runtime) serve one application that writes one console
// line per request. Node "before" runs the front built from the commit before the live tail (git
// archive of runtime/front, built as scripts/build-front.sh builds it) through CELL_FRONT_BIN; node
// "now" runs runtime/bin/cell-front. Each round measures three sides with wrk on the application's
// port: before, now with nobody tailing, and now with a real `svc tail --format json --node-id now`
// attached to that node (started before the side, its output read and counted by this process,
// stopped after). Rounds rotate which side goes first, so drift from other load hits all alike.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { getJson } from '../src/store/store.ts';
import { keyArg, openBucket, type Signer } from '../test/helpers/applications.ts';
import { projectDir } from '../test/helpers/artifacts.ts';
import { CELL_REAL } from '../test/helpers/deploys.ts';
import { runSvc, type SailProcess, SVC_BIN, tempDir, waitFor } from '../test/helpers/svc.ts';
import { wrkRequestsPerSecond, wrkVersion } from './wrk.ts';

const [seconds = 5, rounds = 3, connections = 32] = process.argv.slice(2, 5).map(Number);
/** The commit that added the live tail; its parent is "before". */
const TAIL_COMMIT = '03ca29b';
const APP = 'tail-bench';
const TARGETS = { now: 0.95, tailed: 0.85 };
const ROOT = join(import.meta.dirname, '..');

const WORKER = `export default {
  async fetch(request) {
    console.log('served ' + new URL(request.url).pathname);
    return new Response('hello from the tail bench\\n');
  },
};
`;

type Side = 'before' | 'now' | 'tailed';

async function main(): Promise<void> {
  const beforeFront = buildFrontAt(`${TAIL_COMMIT}^`);
  const bucket = await openBucket();
  try {
    const admin = await bucket.operator('op-admin', 'admin', ['*']);
    const before = await bucket.sail([
      '--cell-bin',
      CELL_REAL,
      '--cell-env',
      `CELL_FRONT_BIN=${beforeFront}`,
    ]);
    const now = await bucket.sail(['--cell-bin', CELL_REAL]);
    const project = projectDir({
      'cell.json': JSON.stringify({ name: APP, main: 'w.js', compatibility_date: '2025-06-01' }),
      'w.js': WORKER,
    });
    const deployed = await runSvc(
      ['deploy', project, '--node', now.url, '--key', keyArg(admin), '--replicas', 'all'],
      {
        env: { SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
        timeoutMs: 180_000,
      },
    );
    if (deployed.code !== 0) throw new Error(`deploy failed:\n${deployed.stderr}`);
    const ports = { before: await portOn(bucket.store, before), now: await portOn(bucket.store, now) };
    // CPU per request is steadier than requests/s on a machine other work shares.
    const fronts = { before: await pidOn(bucket.store, before), now: await pidOn(bucket.store, now) };
    const daemonPid = now.child.pid!;
    const cpu: Record<Side, number[]> = { before: [], now: [], tailed: [] };
    const daemonCpu: number[] = [];
    console.log(
      `live tail bench: ${rounds} rounds of ${seconds} s per side, ${connections} connections, wrk -t1 ` +
        `(${await wrkVersion()}; node ${process.version}; before = ${TAIL_COMMIT}^; load ${loadAverage()})`,
    );
    await wrk(ports.before, 2); // warm-up
    await wrk(ports.now, 2);
    const results: Record<Side, number[]> = { before: [], now: [], tailed: [] };
    const sides: Side[] = ['before', 'now', 'tailed'];
    let records = 0;
    let dropped = 0;
    for (let i = 0; i < rounds; i++) {
      const order = [...sides.slice(i % 3), ...sides.slice(0, i % 3)];
      for (const side of order) {
        const tail = side === 'tailed' ? await attachTail(now, admin) : null;
        const front = side === 'before' ? fronts.before : fronts.now;
        const [frontBefore, daemonBefore] = [cpuMs(front), cpuMs(daemonPid)];
        const rps = await wrk(side === 'before' ? ports.before : ports.now, seconds);
        results[side].push(rps);
        const thousands = (rps * seconds) / 1000;
        cpu[side].push((cpuMs(front) - frontBefore) / thousands);
        if (side === 'tailed') daemonCpu.push((cpuMs(daemonPid) - daemonBefore) / thousands);
        let seen = `, the front ${cpu[side].at(-1)!.toFixed(0)} ms of CPU per 1,000 requests`;
        if (tail) {
          const counted = await tail.stop();
          records += counted.requests;
          dropped += counted.dropped;
          seen += `, the node's daemon ${daemonCpu.at(-1)!.toFixed(0)} ms; the tail showed ${counted.requests} request records, ${counted.dropped} dropped`;
        }
        console.log(`  round ${i + 1} ${side.padEnd(6)} ${rps.toFixed(0)} req/s${seen}`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ratio = (side: Side) => median(results[side].map((rps, i) => rps / results.before[i]!));
    const verdict = (side: 'now' | 'tailed') =>
      `${ratio(side).toFixed(3)} (target ${TARGETS[side]}: ${ratio(side) >= TARGETS[side] ? 'met' : 'NOT met'})`;
    console.log(
      `medians: before ${median(results.before).toFixed(0)} req/s, now ${median(results.now).toFixed(0)}, ` +
        `tailed ${median(results.tailed).toFixed(0)}; per-round ratios to before: nobody tailing ${verdict('now')}, ` +
        `one tail ${verdict('tailed')}; the front's CPU per 1,000 requests: before ${median(cpu.before).toFixed(0)} ms, ` +
        `now ${median(cpu.now).toFixed(0)}, tailed ${median(cpu.tailed).toFixed(0)} (and the daemon ${median(daemonCpu).toFixed(0)}); ` +
        `the tail showed ${records} request records and was told of ${dropped} dropped; ` +
        `load ${loadAverage()}`,
    );
  } finally {
    await bucket.close();
  }
}

/** The front as it was at `commit`, built with scripts/build-front.sh's flags; answers its path. */
function buildFrontAt(commit: string): string {
  const dir = tempDir('bench-tail-front-');
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive "${commit}" runtime/front | tar -x -C "${dir}"`]);
  const out = join(dir, 'cell-front');
  execFileSync('go', ['build', '-trimpath', '-ldflags', '-s -w', '-buildvcs=false', '-o', out, '.'], {
    cwd: join(dir, 'runtime', 'front'),
    env: { ...process.env, CGO_ENABLED: '0' },
  });
  return out;
}

async function portOn(store: Parameters<typeof getJson>[0], node: SailProcess): Promise<number> {
  return (await waitFor(
    async () => {
      const record = await getJson<NodeRecord>(store, keys.nodeRecord(node.nodeId));
      return record?.value.processes?.find((p) => p.application === APP && p.ready)?.port ?? null;
    },
    `${APP} to be ready on ${node.nodeId}`,
    90_000,
  )) as number;
}

async function pidOn(store: Parameters<typeof getJson>[0], node: SailProcess): Promise<number> {
  const record = await getJson<NodeRecord>(store, keys.nodeRecord(node.nodeId));
  const pid = record?.value.processes?.find((p) => p.application === APP)?.pid;
  if (pid === undefined) throw new Error(`no pid for ${APP} on ${node.nodeId}`);
  return pid;
}

/** CPU time (user and system) a process has used, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** A real `svc tail` of the node's own process, counted line by line until stopped. */
async function attachTail(node: SailProcess, signer: Signer) {
  const child: ChildProcess = spawn(
    process.execPath,
    [SVC_BIN, 'tail', '--name', APP, '--format', 'json', '--node', node.url, '--key', keyArg(signer)],
    {
      env: { ...process.env, SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: '', SVC_REMOTE: '' },
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const counted = { requests: 0, dropped: 0, attached: false };
  let pending = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      if (line.includes('"kind":"request"')) counted.requests++;
      else if (line.includes('"kind":"dropped"'))
        counted.dropped += Number(/"dropped":(\d+)/.exec(line)?.[1] ?? 0);
      else if (line.includes('tail: attached')) counted.attached = true;
    }
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  await waitFor(() => counted.attached, 'the tail to attach');
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      return counted;
    },
  };
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

function wrk(port: number, duration: number): Promise<number> {
  return wrkRequestsPerSecond(`http://127.0.0.1:${port}/`, { seconds: duration, connections });
}

await main();
