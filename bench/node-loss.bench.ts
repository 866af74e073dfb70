// the targets in bench/RESULTS.md, Node loss: `kill -9` of one of three serving nodes under load, no failed
// request at the ingress. Real parts: three `svc sail` nodes (distinct 127.0.0.x hosts when the
// machine routes them, distinct port ranges) on one local-directory bucket, each running
// examples/hello (replicas `all`) in the real runtime (runtime/bin/cell, real workerd), and the real
// svc-caddy with adapter/demo.Caddyfile (lb_policy first, lb_retries 2, max_fails 1) in front.
// Run: scripts/with-node node bench/node-loss.bench.ts [concurrency] [min load seconds]
//
// One round per node. The victim is put at the head of every route (Caddy's `prefer` names it),
// so it carries all the traffic when it dies: the worst case under `lb_policy first`. Rounds 1-2:
// Caddy polls a node that survives. Round 3: Caddy polls the victim itself with `prefer self`
// (the default configuration), so its routing source dies with it.
//
// A machine loss: SIGKILL of the daemon and of every runtime process group it started (read from
// its state directory's processes.json; each `cell serve` leads a group holding its workerd), all
// at once, KILL_AFTER_MS into the load. The load keeps running until both surviving nodes' routing
// documents no longer name the victim (no application upstream, no API upstream) plus two Caddy
// polls (at least the minimum load time), so the whole window in which Caddy may still pick the
// dead upstream is under load. The time from the kill until each survivor's document drops the
// victim is the figure of docs/fleet.md "Liveness" (a dead node leaves routing within the dead
// window plus a pass). The victim is then restarted with its state directory and the next round
// waits until all three serve again.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { keyArg, openBucket } from '../test/helpers/applications.ts';
import { type CaddyProcess, ensureCaddyBuilt, startCaddy } from '../test/helpers/caddy.ts';
import { copyProject, EXAMPLES, isRunning } from '../test/helpers/cell.ts';
import { IngressClient } from '../test/helpers/ingress-client.ts';
import { freePort, runSvc, type SailProcess, startSail, tempDir, waitFor } from '../test/helpers/svc.ts';

const [concurrency = 16, minLoadSeconds = 20] = process.argv.slice(2, 4).map(Number);
const ROOT = resolve(import.meta.dirname, '..');
const PLATFORM = 'svc.localhost';
const HOST = `hello.${PLATFORM}`;
const TOKEN = 'bench-ingress-token-0123456789';
const IDS = ['node-a', 'node-b', 'node-c'];
const KILL_AFTER_MS = 5_000;
/** Caddy's routing poll: the adapter's default, as an operator runs it. */
const CADDY_POLL_MS = 5_000;
/** The bench's patience, well past the dead window (`liveness.deadAfterMs`) plus a pass. */
const DROP_DEADLINE_MS = 60_000;
const SERVE_DEADLINE_MS = 150_000;
const WATCH_EVERY_MS = 100;

interface Node {
  id: string;
  host: string;
  port: number;
  stateDir: string;
  flags: string[];
  sail: SailProcess;
}

interface Sample {
  startMs: number;
  ms: number;
  /** HTTP status, or 0 when no answer came (the error is kept in `error`). */
  status: number;
  error?: string;
}

interface Round {
  victim: string;
  source: string;
  prefer: string;
  samples: Sample[];
  killAtMs: number;
  killedPids: number[];
  /** From the kill to each surviving node's routing document naming no upstream of the victim. */
  droppedMs: number[];
  loadMs: number;
  loadBefore: string;
  loadAfter: string;
}

async function main(): Promise<void> {
  ensureCaddyBuilt();
  const bucket = await openBucket();
  const signer = await bucket.operator('bench-admin', 'admin', ['*']);
  const nodes: Node[] = [];
  let caddy: CaddyProcess | undefined;
  try {
    for (const [index, id] of IDS.entries()) nodes.push(await startNode(bucket.endpoint, id, index));
    console.log(
      `node-loss bench: 3 nodes (${nodes.map((n) => `${n.id} ${n.host}:${n.port}`).join(', ')}), dir bucket, ` +
        `runtime/bin/cell, svc-caddy demo.Caddyfile, concurrency ${concurrency}, node ${process.version}`,
    );
    const project = copyProject(join(EXAMPLES, 'hello'));
    const deployed = await runSvc(
      ['deploy', project, '--node', nodes[0]!.sail.url, '--key', keyArg(signer), '--replicas', 'all'],
      { timeoutMs: 120_000 },
    );
    if (deployed.code !== 0) throw new Error(`svc deploy exited ${deployed.code}:\n${deployed.stderr}`);
    const plan = [
      { victim: 'node-b', source: 'node-a', prefer: 'node-b' },
      { victim: 'node-c', source: 'node-a', prefer: 'node-c' },
      { victim: 'node-a', source: 'node-a', prefer: 'self' },
    ];
    const rounds: Round[] = [];
    for (const step of plan) {
      const byId = (id: string) => nodes.find((n) => n.id === id)!;
      await allServe(nodes);
      const httpPort = await freePort();
      caddy = await startIngress(byId(step.source), step.prefer, httpPort);
      const round = await runRound(nodes, byId(step.victim), step, httpPort);
      rounds.push(round);
      printRound(rounds.length, round);
      await caddy.stop();
      caddy = undefined;
      const victim = byId(step.victim);
      victim.sail = await startSail(victim.flags, { stateDir: victim.stateDir, port: victim.port });
    }
    printSummary(rounds);
  } catch (err) {
    for (const n of nodes) console.error(`--- ${n.id} log (tail) ---\n${n.sail.log().slice(-3000)}`);
    if (caddy) console.error(`--- caddy (tail) ---\n${caddy.log().slice(-3000)}`);
    throw err;
  } finally {
    await caddy?.stop();
    await Promise.all(nodes.map((n) => n.sail.stop()));
    // The killed nodes' runtimes died with them; a restarted node's are stopped by its SIGTERM.
    await bucket.close();
  }
}

async function startNode(endpoint: string, id: string, index: number): Promise<Node> {
  const host = await loopbackHost(index);
  const port = await freePort();
  const stateDir = tempDir(`svc-bench-${id}-`);
  const flags = [
    '--endpoint',
    endpoint,
    '--node-id',
    id,
    // After startSail's own --listen 127.0.0.1:<port>: the last one counts, and the advertised
    // address (the routing document's upstream host) follows it.
    '--listen',
    `${host}:${port}`,
    '--bind-host',
    host,
    '--port-range-start',
    String(32000 + index * 100),
    '--port-range-end',
    String(32099 + index * 100),
    '--platform-domains',
    PLATFORM,
    '--ingress-token',
    TOKEN,
    // Only so that the deploy reaches the other two nodes quickly; liveness does not depend on it.
    '--registry-resync-ms',
    '2000',
  ];
  return { id, host, port, stateDir, flags, sail: await startSail(flags, { stateDir, port }) };
}

/** 127.0.0.x when this machine routes the whole loopback /8, else 127.0.0.1 for all. */
function loopbackHost(index: number): Promise<string> {
  const host = `127.0.0.${index + 2}`;
  return new Promise((resolveHost) => {
    const server = createServer();
    server.once('error', () => resolveHost('127.0.0.1'));
    server.listen(0, host, () => server.close(() => resolveHost(host)));
  });
}

/** Waits until every node routes hello to all three nodes and each of their processes answers it. */
async function allServe(nodes: Node[]): Promise<void> {
  for (const source of nodes) {
    const ingress = new IngressClient(source.sail.url, TOKEN);
    await waitFor(
      async () => {
        const route = (await ingress.routes()).routes.find((r) => r.host === HOST);
        if (!route || nodes.some((n) => !route.upstreams.some((u) => u.node === n.id))) return false;
        const answers = await Promise.all(route.upstreams.map((u) => get(u.address, HOST)));
        return answers.every((a) => a.status === 200 && a.body.startsWith('Hello from svc!'));
      },
      `${source.id} to route ${HOST} to all three nodes, each answering`,
      SERVE_DEADLINE_MS,
    );
  }
}

async function startIngress(source: Node, prefer: string, httpPort: number): Promise<CaddyProcess> {
  const caddyHome = tempDir('svc-bench-caddy-');
  const caddy = await startCaddy(readFileSync(join(ROOT, 'adapter', 'demo.Caddyfile'), 'utf8'), httpPort, {
    DEMO_HTTP_PORT: String(httpPort),
    DEMO_ADMIN_PORT: String(await freePort()),
    SVC_FLEET_ENDPOINT: source.sail.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_FLEET_PREFER: prefer,
    SVC_FLEET_POLL_INTERVAL: `${CADDY_POLL_MS / 1000}s`,
    SVC_ACCESS_LOG: join(caddyHome, 'access.log'),
  });
  await waitFor(
    async () => (await get(`127.0.0.1:${httpPort}`, HOST)).status === 200,
    'hello through Caddy',
    30_000,
  );
  return caddy;
}

async function runRound(
  nodes: Node[],
  victim: Node,
  step: { victim: string; source: string; prefer: string },
  httpPort: number,
): Promise<Round> {
  // The victim must head the route Caddy uses, or its death costs nothing by construction.
  const source = nodes.find((n) => n.id === step.source)!;
  const preferred = (await new IngressClient(source.sail.url, TOKEN).routes(step.prefer)).routes.find(
    (r) => r.host === HOST,
  );
  if (preferred?.upstreams[0]?.node !== victim.id)
    throw new Error(
      `${victim.id} does not head ${HOST} with prefer=${step.prefer}: ${JSON.stringify(preferred)}`,
    );
  const watchers = nodes
    .filter((n) => n.id !== victim.id)
    .map((n) => ({ id: n.id, client: new IngressClient(n.sail.url, TOKEN) }));
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const samples: Sample[] = [];
  const started = performance.now();
  const loadBefore = uptime();
  let stop = false;
  const workers = Array.from({ length: concurrency }, async () => {
    while (!stop) samples.push(await timedGet(agent, httpPort, started));
  });
  let killAtMs = Number.NaN;
  let droppedMs: number[] = [];
  let killedPids: number[] = [];
  const killing = (async () => {
    await new Promise((r) => setTimeout(r, KILL_AFTER_MS));
    killedPids = machineLoss(victim);
    killAtMs = performance.now() - started;
    await waitFor(() => killedPids.every((pid) => !isRunning(pid)), `${victim.id}'s processes gone`, 10_000);
    droppedMs = await Promise.all(watchers.map((w) => watchDrop(w.client, victim.id, started + killAtMs)));
  })();
  try {
    await killing;
    // Two Caddy polls after the drop, so Caddy has the document without the victim for a while.
    const until = Math.max(
      minLoadSeconds * 1000,
      killAtMs + Math.max(...droppedMs) + 2 * CADDY_POLL_MS + 1_000,
    );
    await waitFor(() => performance.now() - started >= until, 'the load window', until + 10_000);
  } finally {
    stop = true;
    await Promise.all(workers);
    agent.destroy();
  }
  return {
    ...step,
    samples,
    killAtMs,
    killedPids,
    droppedMs,
    loadMs: performance.now() - started,
    loadBefore,
    loadAfter: uptime(),
  };
}

/** SIGKILL of the daemon and of each runtime process group it noted, back to back. */
function machineLoss(victim: Node): number[] {
  const noted = JSON.parse(readFileSync(join(victim.stateDir, 'processes.json'), 'utf8')) as {
    processes: { pid: number }[];
  };
  const groups = noted.processes.map((p) => p.pid);
  if (groups.length === 0) throw new Error(`${victim.id} notes no runtime process`);
  const daemon = victim.sail.child.pid!;
  // The daemon shares the bench's process group (startSail does not detach it): kill it alone.
  process.kill(daemon, 'SIGKILL');
  for (const pgid of groups) process.kill(-pgid, 'SIGKILL');
  return [daemon, ...groups.flatMap((pgid) => [pgid, ...groupMembers(pgid)])];
}

/** Pids in a process group (the workerd children of a `cell serve`), for the "gone" check. */
function groupMembers(pgid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '-g', String(pgid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((n) => n > 0 && n !== pgid);
  } catch {
    return [];
  }
}

/** Polls a survivor's routing document until the victim is no upstream of anything; answers ms since `from`. */
async function watchDrop(watcher: IngressClient, victim: string, from: number): Promise<number> {
  const deadline = from + DROP_DEADLINE_MS;
  while (performance.now() < deadline) {
    const doc = await watcher.routes().catch(() => null);
    const upstreams = doc ? [...doc.routes.flatMap((r) => r.upstreams), ...(doc.api?.upstreams ?? [])] : null;
    if (upstreams && upstreams.length > 0 && !upstreams.some((u) => u.node === victim))
      return performance.now() - from;
    await new Promise((r) => setTimeout(r, WATCH_EVERY_MS));
  }
  throw new Error(`${victim} still routed ${DROP_DEADLINE_MS} ms after the kill`);
}

async function timedGet(agent: Agent, port: number, started: number): Promise<Sample> {
  const t0 = performance.now();
  const startMs = t0 - started;
  try {
    const answer = await get(`127.0.0.1:${port}`, HOST, agent);
    const ok = answer.status === 200 && answer.body.startsWith('Hello from svc!');
    return { startMs, ms: performance.now() - t0, status: ok ? 200 : answer.status || -1 };
  } catch (err) {
    return { startMs, ms: performance.now() - t0, status: 0, error: (err as Error).message };
  }
}

/** A plain-HTTP GET with the application's Host header (fetch cannot set Host). */
function get(address: string, host: string, agent?: Agent): Promise<{ status: number; body: string }> {
  const [hostname, port] = [
    address.slice(0, address.lastIndexOf(':')),
    address.slice(address.lastIndexOf(':') + 1),
  ];
  return new Promise((resolveAnswer, reject) => {
    const req = request(
      { host: hostname, port: Number(port), path: '/', headers: { host }, agent: agent ?? false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, body }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('timed out after 10 s')));
    req.on('error', reject);
    req.end();
  });
}

function printRound(index: number, round: Round): void {
  const failed = round.samples.filter((s) => s.status !== 200);
  const before = round.samples.filter((s) => s.startMs + s.ms < round.killAtMs);
  const after = round.samples.filter((s) => s.startMs >= round.killAtMs);
  const around = round.samples.filter(
    (s) => s.startMs < round.killAtMs && s.startMs + s.ms >= round.killAtMs,
  );
  const seconds = round.loadMs / 1000;
  console.log(
    `round ${index}: kill -9 ${round.victim} (${round.killedPids.length} pids) at ${s(round.killAtMs)}; ` +
      `Caddy polls ${round.source} with prefer=${round.prefer}; load ${s(round.loadMs)} ` +
      `(uptime load ${round.loadBefore} -> ${round.loadAfter})`,
  );
  console.log(
    `  requests ${round.samples.length} (${Math.round(round.samples.length / seconds)}/s), failed ${failed.length}` +
      `${failed.length ? ` (${breakdown(failed)})` : ''}`,
  );
  console.log(
    `  routing documents without ${round.victim}: ${round.droppedMs.map(s).join(' and ')} after the kill (the two survivors)`,
  );
  console.log(`  latency before the kill  ${latency(before)}`);
  console.log(`  in flight at the kill    ${latency(around)}`);
  console.log(`  after the kill           ${latency(after)}`);
  console.log(
    `  after the kill, >= 200 ms (bursts: start, count): ${bursts(after.filter((x) => x.ms >= 200))}`,
  );
}

function printSummary(rounds: Round[]): void {
  const drops = rounds.flatMap((r) => r.droppedMs).sort((a, b) => a - b);
  console.log(
    `dead node out of routing (target <= 15 s): ${drops.map(s).join(', ')}; ` +
      `max ${s(drops.at(-1)!)}: ${drops.at(-1)! <= 15_000 ? 'met' : 'NOT met'}`,
  );
  const total = rounds.reduce((n, r) => n + r.samples.length, 0);
  const failed = rounds.reduce((n, r) => n + r.samples.filter((x) => x.status !== 200).length, 0);
  console.log(
    `node-loss target (no failed request at the ingress): ${failed === 0 ? 'met' : 'NOT met'}: ` +
      `${failed} failed of ${total} over ${rounds.length} kills`,
  );
}

/** Slow requests grouped by the tenth of a second they started in: where Caddy paid a retry. */
function bursts(slow: Sample[]): string {
  if (slow.length === 0) return 'none';
  const counts = new Map<string, number>();
  for (const x of slow) counts.set(s(x.startMs), (counts.get(s(x.startMs)) ?? 0) + 1);
  return [...counts].map(([at, n]) => `${at} x${n}`).join(', ');
}

function breakdown(samples: Sample[]): string {
  const counts = new Map<string, number>();
  for (const x of samples) {
    const why =
      x.status === 0 ? (x.error ?? 'error') : `HTTP ${x.status === -1 ? 'unexpected body' : x.status}`;
    counts.set(why, (counts.get(why) ?? 0) + 1);
  }
  return [...counts].map(([why, n]) => `${n} x ${why}`).join(', ');
}

function latency(samples: Sample[]): string {
  if (samples.length === 0) return 'no requests';
  const sorted = samples.map((x) => x.ms).sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `n ${String(sorted.length).padStart(6)}  p50 ${ms(at(0.5))}  p99 ${ms(at(0.99))}  max ${ms(sorted.at(-1)!)}`;
}

function uptime(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`;
}

function s(value: number): string {
  return `${(value / 1000).toFixed(1)} s`;
}

await main();
