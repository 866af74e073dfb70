// docs/supervisor.md "The supervisor" (Ports survive a restart of the node) and docs/ingress.md
// "Misdirected requests", with real parts: one `svc sail` on a local-directory bucket running three
// applications in the real runtime (runtime/bin/cell, cell-front, workerd), the real `svc deploy`,
// and the real svc-caddy with adapter/demo.Caddyfile as shipped.
//
// The applications are deployed so that their ports are not in name order, which is the order a
// node starting afresh hands ports out in: a node that forgot its ports would move them.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type Bucket, call, keyArg, openBucket } from './helpers/applications.ts';
import { type CaddyProcess, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { copyProject, EXAMPLES, fetchText, isRunning } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { DEMO_CADDYFILE } from './helpers/front-restart.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import {
  freePort,
  ownRuntimePorts,
  runSvc,
  type SailProcess,
  startSail,
  tempDir,
  waitFor,
} from './helpers/svc.ts';

const SERVE_DEADLINE_MS = 60_000;
const TOKEN = 'stable-ports-ingress-token-0123456789';
/** Deployed in this order, so they hold ports in this order: not name order. */
const APPLICATIONS = ['gamma', 'beta', 'alpha'] as const;
const greeting = (application: string) => `greetings from ${application}`;

interface Process {
  application: string;
  port: number;
  ready: boolean;
  pid?: number;
}

const admin = signerFor('op-stable-ports');
const stateDir = tempDir('svc-node-ports-');
let bucket: Bucket;
let listenPort: number;
let runtimePorts: string[];
let node: SailProcess | undefined;
let caddy: CaddyProcess | undefined;
const runtimePids = new Set<number>();

function startNode(): Promise<SailProcess> {
  return startSail(
    [
      ...['--endpoint', bucket.endpoint, '--cell-bin', CELL_REAL],
      ...['--platform-domains', 'svc.localhost', '--ingress-token', TOKEN],
      ...runtimePorts,
    ],
    { stateDir, port: listenPort },
  );
}

before(async () => {
  bucket = await openBucket();
  await trustOperator(bucket.store, admin);
  listenPort = await freePort();
  runtimePorts = ownRuntimePorts();
  node = await startNode();
});

after(async () => {
  await caddy?.stop();
  await node?.stop();
  for (const pid of runtimePids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
  await bucket.close();
});

async function processes(): Promise<Process[]> {
  const answer = await call(node!.url, 'GET', '/v1/state', { signer: admin });
  return (answer.body as { processes: Process[] }).processes;
}

/** Every application's process once all are ready and answer with their own greeting. */
async function allServing(): Promise<Map<string, Process>> {
  const ready = (await waitFor(
    async () => {
      const now = await processes();
      const byName = new Map(now.filter((p) => p.ready).map((p) => [p.application, p]));
      return APPLICATIONS.every((a) => byName.has(a)) ? byName : undefined;
    },
    'every application ready',
    SERVE_DEADLINE_MS,
  ))!;
  for (const [application, p] of ready) {
    if (p.pid) runtimePids.add(p.pid);
    await waitFor(
      async () => (await fetchText(`http://127.0.0.1:${p.port}/`))?.body.includes(greeting(application)),
      `${application} answering on its port ${p.port}`,
      SERVE_DEADLINE_MS,
    );
  }
  return ready;
}

const portsOf = (serving: Map<string, Process>) =>
  Object.fromEntries(APPLICATIONS.map((a) => [a, serving.get(a)!.port]));

let before1: Record<string, number>;

test('deployed one after another, the applications hold ports out of name order', async () => {
  for (const application of APPLICATIONS) {
    const run = await runSvc(
      [
        ...['deploy', copyProject(join(EXAMPLES, 'hello')), '--name', application],
        ...['--node', node!.url, '--key', keyArg(admin), '--var', `GREETING:${greeting(application)}`],
      ],
      { timeoutMs: 120_000 },
    );
    assert.equal(run.code, 0, run.stderr);
    await waitFor(
      async () => (await processes()).find((p) => p.application === application)?.ready,
      `${application} ready`,
      SERVE_DEADLINE_MS,
    );
  }
  before1 = portsOf(await allServing());
  // The precondition that lets the next tests fail: a fresh start (name order) would move them.
  assert.ok(before1.gamma! < before1.beta! && before1.beta! < before1.alpha!, JSON.stringify(before1));
});

test('after SIGTERM and a start on the same state directory, each application has its port', async () => {
  assert.equal(await node!.stop('SIGTERM'), 0);
  const gone = [...runtimePids];
  await waitFor(() => !gone.some(isRunning), 'the runtime processes stopped with the node');
  node = await startNode();
  assert.deepEqual(portsOf(await allServing()), before1);
});

test('after SIGKILL of the node and of its runtime processes, each application has its port', async () => {
  const serving = await allServing();
  node!.child.kill('SIGKILL');
  await waitFor(() => node!.child.signalCode !== null, 'the daemon gone');
  // As when the machine itself went down: nothing is left to adopt.
  for (const p of serving.values()) if (p.pid) process.kill(-p.pid, 'SIGKILL');
  await waitFor(() => ![...serving.values()].some((p) => p.pid && isRunning(p.pid)), 'the runtime gone');
  node = await startNode();
  const after = await allServing();
  for (const application of APPLICATIONS) {
    assert.notEqual(after.get(application)!.pid, serving.get(application)!.pid, 'a new process');
  }
  assert.deepEqual(portsOf(after), before1);
});

interface Answer {
  status: number;
  body: string;
}

function getThrough(port: number, host: string, agent: Agent): Promise<Answer> {
  return new Promise((resolveAnswer, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error('timed out after 15 s')));
    req.on('error', reject);
    req.end();
  });
}

test('ports that changed hands while Caddy routes by the old document: no request gets another application’s body', async () => {
  ensureCaddyBuilt();
  const httpPort = await freePort();
  // Caddy keeps its first document for the whole test: the stale routing is the point.
  caddy = await startCaddy(readFileSync(DEMO_CADDYFILE, 'utf8'), httpPort, {
    DEMO_HTTP_PORT: String(httpPort),
    DEMO_ADMIN_PORT: String(await freePort()),
    SVC_FLEET_ENDPOINT: node!.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_FLEET_POLL_INTERVAL: '1h',
    SVC_ACCESS_LOG: join(tempDir('svc-ports-log-'), 'access.log'),
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 6 });
  const host = (application: string) => `${application}.svc.localhost`;
  for (const application of APPLICATIONS) {
    await waitFor(
      async () => (await getThrough(httpPort, host(application), agent)).body.includes(greeting(application)),
      `${application} through Caddy`,
      SERVE_DEADLINE_MS,
    );
  }

  const foreign: string[] = [];
  const statuses = new Map<string, number>();
  /** Statuses of the answers to requests started once the ports had moved, by application. */
  const moved = new Map<string, number[]>(APPLICATIONS.map((a) => [a, []]));
  let portsMoved = false;
  let served = 0;
  let stop = false;
  const loops = APPLICATIONS.flatMap((application) =>
    [0, 1].map(async () => {
      while (!stop) {
        const afterMove = portsMoved;
        let answer: Answer;
        try {
          answer = await getThrough(httpPort, host(application), agent);
        } catch (err) {
          answer = { status: 0, body: (err as Error).message };
        }
        const key = `${application} ${answer.status}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        if (afterMove) moved.get(application)!.push(answer.status);
        if (answer.body.includes(greeting(application))) served++;
        for (const other of APPLICATIONS) {
          if (other !== application && answer.body.includes(greeting(other))) {
            foreign.push(`${application} got ${other}'s body (${answer.status})`);
          }
        }
      }
    }),
  );
  try {
    await waitFor(() => served > 30, 'load through Caddy');
    // The node restarts with alpha and gamma on each other's ports (as if their quarantines had
    // run out and each had taken the other's; the port file says so), while Caddy still routes by
    // the old ones.
    assert.equal(await node!.stop('SIGTERM'), 0);
    const swapped = { alpha: before1.gamma, beta: before1.beta, gamma: before1.alpha };
    writeFileSync(
      join(stateDir, 'ports.json'),
      JSON.stringify({
        v: 1,
        ports: Object.entries(swapped).map(([application, port]) => ({ port, application })),
      }),
    );
    node = await startNode();
    const now = portsOf(await allServing());
    assert.equal(now.alpha, before1.gamma, JSON.stringify(now));
    assert.equal(now.gamma, before1.alpha, JSON.stringify(now));
    portsMoved = true;
    // alpha's old port is gamma's front now, and the front itself refuses alpha's requests.
    const refusal = await fetchText(`http://127.0.0.1:${before1.alpha}/`, {
      headers: { 'svc-application': 'alpha' },
    });
    assert.equal(refusal?.status, 421, JSON.stringify(refusal));
    await waitFor(
      () => APPLICATIONS.every((a) => moved.get(a)!.length >= 10),
      `answers after the move: ${JSON.stringify([...moved])}`,
      SERVE_DEADLINE_MS,
    );
  } finally {
    stop = true;
    await Promise.all(loops);
    agent.destroy();
  }
  assert.deepEqual(foreign, [], JSON.stringify([...statuses]));
  // Routed to the other's port, each is refused there, Caddy finds no other upstream of its own,
  // and passes the 421 on; beta kept its port and is served.
  for (const application of ['alpha', 'gamma']) {
    assert.ok(
      moved.get(application)!.every((status) => status === 421),
      `${application}: ${moved.get(application)}`,
    );
  }
  assert.ok(
    moved.get('beta')!.every((status) => status === 200),
    `beta: ${moved.get('beta')}`,
  );
});
