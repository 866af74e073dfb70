// the targets in bench/RESULTS.md, Redeploy and First deploy, on one node with real parts: a real `svc sail` on
// a local-directory bucket running the real runtime (runtime/bin/cell, the default --cell-bin, so
// real esbuild and workerd), the real svc-caddy with adapter/demo.Caddyfile in front, and the real
// `svc deploy` CLI as an operator runs it.
//   Redeploy: `svc deploy` of a new version of a small live worker to that version answering
//             through the ingress, under 2 s median.
//   First deploy: a new application's first 200 through the ingress within the ingress poll
//             interval (SVC_FLEET_POLL_INTERVAL) plus 2 s.
// Run: scripts/with-node node bench/deploy.bench.ts [redeploys] [first deploys] [poll interval] [nodes]
//   SVC_BENCH_RELEASE=1: `svc deploy` is the release bundle (dist/svc.mjs, run through its shebang,
//   as operators run it) and the node's runtime is dist/cell.mjs (`--cell-bin`); build them first
//   with `make dist`. The node daemon itself runs from the checkout either way.
//   nodes 2: a second `svc sail` on the same bucket runs hello too (`--replicas all`), and each
//   redeploy is also timed until that node's own runtime process answers the new version (asked
//   on its port directly): the switch on a node that did not take the deploy.
//
// Each run starts its clock as `svc deploy` is spawned and, at the same time, asks Caddy for the
// application every POLL_MS; the clock stops at the first answer carrying the new greeting (a 200),
// and separately when `svc deploy` exits; the difference (new answer -> svc deploy exit) is how long
// the command keeps its operator waiting once the new version serves. Nothing waits blindly for
// readiness: every wait has a deadline.

import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { keys } from '../src/registry/keys.ts';
import { keyArg, openBucket } from '../test/helpers/applications.ts';
import { ensureCaddyBuilt, startCaddy } from '../test/helpers/caddy.ts';
import { copyProject, EXAMPLES } from '../test/helpers/cell.ts';
import { IngressClient } from '../test/helpers/ingress-client.ts';
import { freePort, runSvc, runToEnd, tempDir, waitFor } from '../test/helpers/svc.ts';

const [redeploys = 10, firstDeploys = 5] = process.argv.slice(2, 4).map(Number);
const pollInterval = process.argv[4] ?? '5s';
const nodeCount = Number(process.argv[5] ?? 1);
const ROOT = resolve(import.meta.dirname, '..');
const PLATFORM = 'svc.localhost';
const TOKEN = 'bench-ingress-token-0123456789';
/** How often the bench asks Caddy during a run: the resolution of the "answers" clock. */
const POLL_MS = 20;
const RUN_DEADLINE_MS = 60_000;
const REDEPLOY_TARGET_MS = 2_000;
/** The release bundle instead of the checkout's executables (see the top). */
const RELEASE = process.env.SVC_BENCH_RELEASE === '1';
const releaseFlags = RELEASE ? ['--cell-bin', join(ROOT, 'dist', 'cell.mjs')] : [];

interface Timing {
  /** From spawning `svc deploy` to the first answer with the new body through Caddy. */
  answeredMs: number;
  /** From spawning `svc deploy` to its exit. */
  deployExitMs: number;
  /** Answers other than the old or new body seen while switching, by status (0: no connection). */
  otherAnswers: Map<number, number>;
  /** From spawning `svc deploy` to the node's routing document (prefer=self, as Caddy asks) naming an upstream for the host. */
  routedMs?: number;
}

async function main(): Promise<void> {
  ensureCaddyBuilt();
  const bucket = await openBucket();
  const signer = await bucket.operator('bench-admin', 'admin', ['*']);
  const key = keyArg(signer);
  const node = await bucket.sail(['--platform-domains', PLATFORM, '--ingress-token', TOKEN, ...releaseFlags]);
  const second =
    nodeCount > 1
      ? await bucket.sail([
          ...['--platform-domains', PLATFORM, '--ingress-token', TOKEN],
          ...['--port-range-start', '33000', '--port-range-end', '33099'],
          ...releaseFlags,
        ])
      : null;
  const httpPort = await freePort();
  const caddyHome = tempDir('svc-bench-caddy-');
  const caddy = await startCaddy(readFileSync(join(ROOT, 'adapter', 'demo.Caddyfile'), 'utf8'), httpPort, {
    DEMO_HTTP_PORT: String(httpPort),
    DEMO_ADMIN_PORT: String(await freePort()),
    SVC_FLEET_ENDPOINT: node.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_FLEET_POLL_INTERVAL: pollInterval,
    SVC_ACCESS_LOG: join(caddyHome, 'access.log'),
  });
  const deploy = async (project: string, extra: string[] = []) => {
    const args = ['deploy', project, '--node', node.url, '--key', key, ...extra];
    const run = RELEASE
      ? await runToEnd(join(ROOT, 'dist', 'svc.mjs'), args, { timeoutMs: RUN_DEADLINE_MS })
      : await runSvc(args, { timeoutMs: RUN_DEADLINE_MS });
    if (run.code !== 0) throw new Error(`svc deploy exited ${run.code}:\n${run.stderr}`);
  };
  const ask = (host: string) => viaCaddy(httpPort, host);
  try {
    console.log(
      `deploy bench: one node (dir bucket, ${RELEASE ? 'release bundle: dist/svc.mjs deploy, dist/cell.mjs' : 'checkout: bin/svc deploy, runtime/bin/cell'}), svc-caddy demo.Caddyfile, ` +
        `SVC_FLEET_POLL_INTERVAL=${pollInterval}, node ${process.version}`,
    );
    const secondPort = second ? () => runtimePort(second.url, signer) : null;
    const load: Load = {
      requests: async () =>
        (await bucket.store.list(keys.tokenUsesPrefix, { recursive: true })).objects.length,
      cpuMs: () => processCpuMs(node.child.pid!),
    };
    if (redeploys > 0) await benchRedeploy(deploy, ask, redeploys, secondPort, load);
    const ingress = new IngressClient(node.url, TOKEN);
    const routed = async (host: string) =>
      (await ingress.routes('self')).routes.some(
        (route) => route.host === host && route.upstreams.length > 0,
      );
    if (firstDeploys > 0) await benchFirstDeploy(deploy, ask, routed, firstDeploys);
  } catch (err) {
    console.error(
      `--- node log (tail) ---\n${node.log().slice(-4000)}\n--- caddy (tail) ---\n${caddy.log().slice(-4000)}`,
    );
    throw err;
  } finally {
    await caddy.stop();
    await bucket.close();
  }
}

type Deploy = (project: string, extra?: string[]) => Promise<void>;

/** What the runs cost: the signed requests the node took (token uses in the bucket), the daemon's CPU. */
interface Load {
  requests: () => Promise<number>;
  cpuMs: () => number;
}

/** A process's own CPU time (user + system, not its children's), from /proc/<pid>/stat. */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces), counted from field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1_000) / CLOCK_TICKS_PER_S;
}

/** The kernel's USER_HZ, 100 on every Linux this runs on. */
const CLOCK_TICKS_PER_S = 100;
type Ask = (host: string) => Promise<{ status: number; body: string }>;

/** Deploys hello once, then `count` times a new greeting in the same project, timed. */
async function benchRedeploy(
  deploy: Deploy,
  ask: Ask,
  count: number,
  secondPort: (() => Promise<number | null>) | null,
  load: Load,
): Promise<void> {
  const project = copyProject(join(EXAMPLES, 'hello'));
  const host = `hello.${PLATFORM}`;
  setGreeting(project, 'Hello v0');
  const extra = secondPort ? ['--replicas', 'all'] : [];
  await deploy(project, extra);
  // The first deploy's answer may wait for a Caddy poll; that is the other target, not this one.
  await waitFor(
    async () => (await ask(host)).body.startsWith('Hello v0!'),
    'hello v0 through Caddy',
    RUN_DEADLINE_MS,
  );
  const port = secondPort ? await waitFor(secondPort, 'hello on the second node', RUN_DEADLINE_MS) : null;
  const askSecond = port === null ? null : () => viaPort(port);
  if (askSecond) await waitFor(async () => (await askSecond()).body.startsWith('Hello v0!'), 'v0 on node 2');
  const timings: Timing[] = [];
  const onSecond: number[] = [];
  const requestsBefore = await load.requests();
  const cpuBefore = load.cpuMs();
  for (let i = 1; i <= count; i++) {
    setGreeting(project, `Hello v${i}`);
    const started = performance.now();
    const isNew = (a: { status: number; body: string }) =>
      a.status === 200 && a.body.startsWith(`Hello v${i}!`);
    const second = askSecond ? firstAnswer(askSecond, isNew).then((at) => at - started) : null;
    const timing = await timed(
      deploy(project, extra),
      ask,
      host,
      isNew,
      (a) => a.status === 200 && a.body.startsWith(`Hello v${i - 1}!`),
    );
    timings.push(timing);
    const secondMs = second ? await second : null;
    if (secondMs !== null) onSecond.push(secondMs);
    console.log(
      `  redeploy ${String(i).padStart(2)}: new body after ${ms(timing.answeredMs)}, svc deploy exited after ` +
        `${ms(timing.deployExitMs)} (${ms(timing.deployExitMs - timing.answeredMs)} after the new body), ` +
        `other answers while switching: ${others(timing)}` +
        (secondMs === null ? '' : `, on the second node's runtime after ${ms(secondMs)}`),
    );
  }
  report('redeploy', timings);
  const requests = (await load.requests()) - requestsBefore;
  console.log(
    `  per redeploy: ${(requests / count).toFixed(1)} signed requests to the node (the token uses svc deploy ` +
      `recorded in the bucket, one bucket write each), ${ms((load.cpuMs() - cpuBefore) / count)} of the node daemon's CPU`,
  );
  if (onSecond.length > 0) {
    const s = stats(onSecond);
    console.log(
      `  deploy start -> second node's runtime answers  median ${ms(s.median)}  min ${ms(s.min)}  max ${ms(s.max)}`,
    );
  }
  const median = stats(timings.map((t) => t.answeredMs)).median;
  console.log(
    `redeploy target: median ${ms(median)} < ${ms(REDEPLOY_TARGET_MS)}: ${median < REDEPLOY_TARGET_MS ? 'met' : 'NOT met'}`,
  );
}

/** Deploys `count` fresh applications (hello under new names), timed to their first 200. */
async function benchFirstDeploy(
  deploy: Deploy,
  ask: Ask,
  routed: (host: string) => Promise<boolean>,
  count: number,
): Promise<void> {
  const interval = parseDuration(pollInterval);
  const project = copyProject(join(EXAMPLES, 'hello'));
  setGreeting(project, 'Hello fresh');
  const stamp = Date.now().toString(36);
  const timings: Timing[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `fresh-${stamp}-${i}`;
    // Back to back, every run would start just after a Caddy poll (the previous run ended on one)
    // and always measure the worst phase; a random wait spreads the runs over the poll interval.
    await new Promise((r) => setTimeout(r, Math.random() * interval));
    const timing = await timed(
      deploy(project, ['--name', name]),
      ask,
      `${name}.${PLATFORM}`,
      (a) => a.status === 200 && a.body.startsWith('Hello fresh!'),
      // Before Caddy has the route, a host it does not know is redirected to HTTPS (308) by the
      // demo site; that is the expected "old" answer.
      (a) => a.status === 308,
      () => routed(`${name}.${PLATFORM}`),
    );
    timings.push(timing);
    console.log(
      `  first deploy ${i}: first 200 after ${ms(timing.answeredMs)}, svc deploy exited after ` +
        `${ms(timing.deployExitMs)}, in the node's routing document after ${ms(timing.routedMs!)}, ` +
        `answers other than 308 before it: ${others(timing)}`,
    );
  }
  report('first deploy', timings);
  const routedAt = stats(timings.map((t) => t.routedMs!));
  console.log(
    `  deploy start -> node routes it   median ${ms(routedAt.median)}  min ${ms(routedAt.min)}  max ${ms(routedAt.max)}`,
  );
  const budget = interval + 2_000;
  const worst = Math.max(...timings.map((t) => t.answeredMs));
  const median = stats(timings.map((t) => t.answeredMs)).median;
  console.log(
    `first deploy target: within poll interval + 2 s = ${ms(budget)}: median ${ms(median)} ` +
      `${median <= budget ? 'met' : 'NOT met'}, worst ${ms(worst)} ${worst <= budget ? 'met' : 'NOT met'}`,
  );
}

/**
 * Starts the clock, lets `deploying` run, and asks Caddy every POLL_MS until `isNew` holds.
 * Answers that are neither new nor `isOld` are counted (a failed request while switching).
 */
async function timed(
  deploying: Promise<void>,
  ask: Ask,
  host: string,
  isNew: (a: { status: number; body: string }) => boolean,
  isOld: (a: { status: number; body: string }) => boolean,
  isRouted?: () => Promise<boolean>,
): Promise<Timing> {
  const started = performance.now();
  let deployExitMs = Number.NaN;
  let failed: unknown;
  const exited = deploying.then(
    () => {
      deployExitMs = performance.now() - started;
    },
    (err) => {
      failed = err;
    },
  );
  const otherAnswers = new Map<number, number>();
  let answeredMs = Number.NaN;
  const deadline = started + RUN_DEADLINE_MS;
  let routedMs: number | undefined;
  const watching = isRouted
    ? watchRouted(isRouted, deadline).then((at) => {
        routedMs = at - started;
      })
    : Promise.resolve();
  while (performance.now() < deadline && failed === undefined) {
    const answer = await ask(host).catch(() => ({ status: 0, body: '' }));
    if (isNew(answer)) {
      answeredMs = performance.now() - started;
      break;
    }
    if (!isOld(answer)) otherAnswers.set(answer.status, (otherAnswers.get(answer.status) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  await exited;
  await watching;
  if (failed !== undefined) throw failed;
  if (Number.isNaN(answeredMs))
    throw new Error(`${host} did not answer the new version within ${RUN_DEADLINE_MS} ms`);
  return { answeredMs, deployExitMs, otherAnswers, ...(routedMs === undefined ? {} : { routedMs }) };
}

/** Asks the node's routing route every POLL_MS; answers the moment `isRouted` first held. */
async function watchRouted(isRouted: () => Promise<boolean>, deadline: number): Promise<number> {
  while (performance.now() < deadline) {
    if (await isRouted().catch(() => false)) return performance.now();
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  throw new Error('the node never routed the host');
}

function report(what: string, timings: Timing[]): void {
  const answered = stats(timings.map((t) => t.answeredMs));
  const exited = stats(timings.map((t) => t.deployExitMs));
  // The part after `svc deploy` exits: zero when the new body was already served by then.
  const after = stats(timings.map((t) => Math.max(0, t.answeredMs - t.deployExitMs)));
  // How long `svc deploy` runs on once the new body answers (negative: it exited first).
  const lag = stats(timings.map((t) => t.deployExitMs - t.answeredMs));
  const line = (label: string, s: Stats) =>
    `  ${label.padEnd(30)} median ${ms(s.median)}  min ${ms(s.min)}  max ${ms(s.max)}`;
  console.log(`${what}, ${timings.length} runs:`);
  console.log(line('deploy start -> new answer', answered));
  console.log(line('deploy start -> svc deploy exit', exited));
  console.log(line('svc deploy exit -> new answer', after));
  console.log(line('new answer -> svc deploy exit', lag));
  const early = timings.filter((t) => t.answeredMs < t.deployExitMs).length;
  console.log(`  new answer before svc deploy exited: ${early} of ${timings.length}`);
}

function others(timing: Timing): string {
  if (timing.otherAnswers.size === 0) return 'none';
  return [...timing.otherAnswers].map(([status, n]) => `${n} x ${status || 'no connection'}`).join(', ');
}

interface Stats {
  median: number;
  min: number;
  max: number;
}

function stats(values: number[]): Stats {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** Rewrites the GREETING var in the project's cell.jsonc (comments kept), as an operator's edit. */
function setGreeting(project: string, greeting: string): void {
  const file = join(project, 'cell.jsonc');
  const text = readFileSync(file, 'utf8');
  const next = text.replace(/"GREETING":\s*"[^"]*"/, `"GREETING": ${JSON.stringify(greeting)}`);
  if (next === text && !text.includes(JSON.stringify(greeting))) throw new Error(`no GREETING in ${file}`);
  writeFileSync(file, next);
}

/** A plain-HTTP GET to Caddy with the application's Host header (fetch cannot set Host). */
function viaCaddy(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolveAnswer, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(text);
  if (!match) throw new Error(`poll interval ${text}: expected e.g. 500ms, 1s, 5s`);
  return Number(match[1]) * { ms: 1, s: 1_000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'];
}

function ms(value: number): string {
  return `${Math.round(value)} ms`;
}

await main();

/** The port of the second node's runtime process for hello, once it reports one ready. */
async function runtimePort(url: string, signer: { bearer(): Promise<string> }): Promise<number | null> {
  const response = await fetch(`${url}/v1/state`, { headers: { authorization: await signer.bearer() } });
  if (!response.ok) return null;
  const state = (await response.json()) as {
    processes?: { application: string; port: number; ready?: boolean; state?: string }[];
  };
  const hello = state.processes?.find((p) => p.application === 'hello');
  return hello?.port ?? null;
}

/** GET / on a runtime's own port. */
function viaPort(port: number): Promise<{ status: number; body: string }> {
  return viaCaddy(port, 'localhost');
}

/** When `ask` first gives an answer `isNew` accepts (performance.now()), within the run deadline. */
async function firstAnswer(
  ask: () => Promise<{ status: number; body: string }>,
  isNew: (a: { status: number; body: string }) => boolean,
): Promise<number> {
  const deadline = performance.now() + RUN_DEADLINE_MS;
  while (performance.now() < deadline) {
    const answer = await ask().catch(() => ({ status: 0, body: '' }));
    if (isNew(answer)) return performance.now();
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  throw new Error('the second node never answered the new version');
}
