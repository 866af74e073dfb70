// The daemon and its runtime processes with real parts: one `svc sail` on a local-directory
// bucket running the real runtime (runtime/bin/cell, workerd) with its default idle schedule, and
// the real `svc deploy` CLI. A redeploy reaches the running process through the daemon's signal
// (the runtime's own look at the selector is minutes apart, far beyond these deadlines). A daemon
// killed outright, or restarted with SIGUSR2, is started again on its state directory and takes
// its runtime processes over while they serve under load; one that stays dead leaves them running
// only until CELL_UNSUPERVISED_EXIT_MS.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cronId } from '../runtime/src/cron.ts';
import { keys } from '../src/registry/keys.ts';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { copyProject, EXAMPLES, fetchText, isRunning } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import { freePort, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

/** Deadline for a deploy to be served (publish, workerd start, readiness). */
const SERVE_DEADLINE_MS = 30_000;

interface Process {
  application: string;
  port: number;
  ready: boolean;
  restarts: number;
  pid?: number;
}

let bucket: Bucket;
let admin: Signer;
let node: SailProcess;
/** The operator of the restart tests' buckets (one key registered in each). */
const ownAdmin = signerFor('op-own');

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  node = await bucket.sail(['--cell-bin', CELL_REAL]);
});
after(async () => {
  await bucket.close();
});

async function deploy(project: string, greeting: string): Promise<string> {
  const run = await runSvc(
    ['deploy', project, '--node', node.url, '--key', keyArg(admin), '--var', `GREETING:${greeting}`],
    { timeoutMs: 60_000 },
  );
  assert.equal(run.code, 0, run.stderr);
  return /^deployed \S+ ([0-9a-f]+)/.exec(run.stdout)![1]!;
}

/** `svc deploy` of `project` as `name` on the shared node. */
async function runSvcDeploy(project: string, name: string): Promise<void> {
  const run = await runSvc(['deploy', project, '--name', name, '--node', node.url, '--key', keyArg(admin)], {
    timeoutMs: 60_000,
  });
  assert.equal(run.code, 0, run.stderr);
}

async function processOf(application: string): Promise<Process | undefined> {
  const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
    processes: Process[];
  };
  return state.processes.find((p) => p.application === application);
}

describe('a redeploy through the node', () => {
  test('reaches the running process at once, with no per-second selector poll', async () => {
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deploy(project, 'first greeting');
    const first = await waitFor(async () => {
      const p = await processOf('hello');
      return p?.ready ? p : undefined;
    }, 'hello ready');
    const body = async () => (await fetchText(`http://127.0.0.1:${first!.port}/`))?.body ?? '';
    await waitFor(
      async () => (await body()).includes('first greeting'),
      'the first greeting',
      SERVE_DEADLINE_MS,
    );

    await deploy(project, 'second greeting');
    await waitFor(
      async () => (await body()).includes('second greeting'),
      () => `the second greeting\n${node.log()}`,
      SERVE_DEADLINE_MS,
    );
    // The same process switched: nothing was restarted to get there.
    assert.equal((await processOf('hello'))!.pid, first!.pid);
  });
});

describe("a ready process's health", () => {
  test('a workerd that dies is seen at once: the front tells the daemon, which probes it (no 2-minute wait)', async () => {
    const project = copyProject(join(EXAMPLES, 'hello'));
    await runSvcDeploy(project, 'told');
    const ready = await waitFor(async () => {
      const p = await processOf('told');
      return p?.ready ? p : undefined;
    }, 'told ready');
    const unready = () =>
      node
        .log()
        .split('\n')
        .filter(
          (line) => line.includes('"application":"told"') && line.includes('runtime process not ready'),
        );
    assert.deepEqual(unready(), []);
    // A process just told of a deploy is probed closely for 5 s (SWITCH_WATCH_MS in
    // src/node/fleet/supervisor.ts); past that, only the 2-minute ready probe is left.
    const readyAt = Date.now();
    await waitFor(() => Date.now() >= readyAt + 6_000, 'the switch watch over');
    const workerd = childPids(ready!.pid!);
    assert.ok(workerd.length > 0, 'the front runs workerd');
    for (const pid of workerd) process.kill(pid, 'SIGKILL');
    // The ready probe is 2 minutes apart and the front starts a new workerd within seconds: only
    // the front's health message makes the daemon see it not ready.
    await waitFor(
      () => unready().length > 0,
      () => `told seen not ready\n${node.log()}`,
      20_000,
    );
    const again = await waitFor(
      async () => {
        const p = await processOf('told');
        return p?.ready ? p : undefined;
      },
      'told ready again',
      SERVE_DEADLINE_MS,
    );
    assert.equal(again!.pid, ready!.pid, 'the same front, with a new workerd');
  });
});

describe('a daemon restarted under load', () => {
  const stateDir = tempDir('svc-node-restart-');
  let port: number;
  // A bucket of its own: the one node on it runs every application.
  let own: Bucket;
  let current: SailProcess | undefined;
  const leftPids: number[] = [];
  const extraNodes: SailProcess[] = [];
  const start = () => startSail(['--endpoint', own.endpoint, '--cell-bin', CELL_REAL], { stateDir, port });
  before(async () => {
    port = await freePort();
    own = await openBucket();
    await register(own);
  });
  after(async () => {
    await current?.stop();
    await Promise.all(extraNodes.map((n) => n.stop('SIGKILL')));
    for (const pid of leftPids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
    await own.close();
  });

  test('SIGKILL, then SIGUSR2: the same runtime process serves throughout, no request fails', async () => {
    current = await start();
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deployTo(current, ownAdmin, project, 'steady', 'steady one');
    const serving = await waitFor(async () => {
      const p = await processOn(current!, 'steady');
      return p?.ready ? p : undefined;
    }, 'steady ready');
    leftPids.push(serving!.pid!);
    const url = `http://127.0.0.1:${serving!.port}/`;
    await waitFor(async () => (await fetchText(url))?.body.includes('steady one'), 'steady answers');

    const failures: string[] = [];
    let requests = 0;
    let stop = false;
    const loop = async () => {
      while (!stop) {
        const answer = await fetchText(url);
        requests++;
        if (answer?.status !== 200) failures.push(answer ? `${answer.status} ${answer.body}` : 'no answer');
      }
    };
    const loops = Array.from({ length: 4 }, loop);
    const moreRequests = async (what: string) => {
      const at = requests;
      await waitFor(() => requests > at + 50, what);
    };
    try {
      await moreRequests('load running');

      // Killed outright: a new run on the same state directory takes the process over.
      current.child.kill('SIGKILL');
      await waitFor(() => current!.child.signalCode !== null, 'the daemon gone');
      await moreRequests('serving with no daemon');
      current = await start();
      const adopted = await waitFor(async () => {
        const p = await processOn(current!, 'steady');
        return p?.ready ? p : undefined;
      }, 'steady adopted and ready');
      assert.equal(adopted!.pid, serving!.pid, 'the same runtime process');
      assert.equal(adopted!.port, serving!.port);
      assert.equal(adopted!.restarts, 0);
      await moreRequests('serving after adoption');

      // A redeploy still reaches the adopted process (SIGHUP from the new daemon).
      await deployTo(current, ownAdmin, project, 'steady', 'steady two');
      await waitFor(
        async () => (await fetchText(url))?.body.includes('steady two'),
        'the redeploy served by the adopted process',
        SERVE_DEADLINE_MS,
      );

      // The documented restart: SIGUSR2 exits 0 leaving the applications serving.
      const exit = await current.stop('SIGUSR2');
      assert.equal(exit, 0);
      assert.ok(isRunning(serving!.pid!), 'the runtime process outlives the restart');
      await moreRequests('serving between the two runs');
      current = await start();
      const again = await waitFor(async () => {
        const p = await processOn(current!, 'steady');
        return p?.ready ? p : undefined;
      }, 'steady adopted after SIGUSR2');
      assert.equal(again!.pid, serving!.pid);
      await moreRequests('serving after the restart');
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    assert.deepEqual(failures, []);
  });

  test('a cron time due while the daemon is down fires once, late, when the runtime reaches the next daemon', async () => {
    current ??= await start();
    const project = copyProject(join(EXAMPLES, 'cron'));
    await deployTo(current, ownAdmin, project, 'ticker', 'unused');
    const serving = await waitFor(async () => {
      const p = await processOn(current!, 'ticker');
      return p?.ready ? p : undefined;
    }, 'ticker ready');
    leftPids.push(serving!.pid!);
    // The next minute far enough ahead to kill the daemon before it.
    let due = Math.ceil(Date.now() / 60_000) * 60_000;
    if (due - Date.now() < 4_000) due += 60_000;
    await waitFor(() => Date.now() >= due - 2_000, 'two seconds before the scheduled time', 70_000);
    current.child.kill('SIGKILL');
    await waitFor(() => current!.child.signalCode !== null, 'the daemon gone');
    await waitFor(() => Date.now() >= due + 1_500, 'the scheduled time passed with no daemon', 10_000);
    const claimKey = keys.runtimeCronClaim('ticker', cronId('* * * * *'), due);
    assert.equal(await own.store.stat(claimKey), null, 'nothing was claimed while no host answered');
    const restartedMs = Date.now();
    current = await start();
    const claim = await waitFor(
      async () => {
        const object = await own.store.get(claimKey);
        const parsed = object ? JSON.parse(new TextDecoder().decode(object.body)) : null;
        return parsed?.outcome ? parsed : undefined;
      },
      'the time due during the outage to run once the daemon is back',
      SERVE_DEADLINE_MS,
    );
    assert.equal(claim.outcome, 'ok');
    assert.equal(claim.scheduled_ms, due);
    assert.ok(claim.claimed_ms >= restartedMs, 'claimed through the new daemon, late');
    // Once: a time has one claim, written If-None-Match, so no replica or retry can run it again.
    // The claim may come through the new daemon's socket before its first pass adopted the process.
    const adopted = await waitFor(() => processOn(current!, 'ticker'), 'ticker adopted by the new daemon');
    assert.equal(adopted!.pid, serving!.pid, 'the same runtime process');
  });

  test('a daemon that stays dead leaves its runtime processes running no longer than the bound', async () => {
    const alone = await openBucket();
    await register(alone);
    const node = await startSail([
      '--endpoint',
      alone.endpoint,
      '--cell-bin',
      CELL_REAL,
      '--cell-env',
      'CELL_UNSUPERVISED_EXIT_MS=2000',
    ]);
    extraNodes.push(node);
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deployTo(node, ownAdmin, project, 'orphaned', 'alone');
    const serving = await waitFor(async () => {
      const p = await processOn(node, 'orphaned');
      return p?.ready ? p : undefined;
    }, 'orphaned ready');
    leftPids.push(serving!.pid!);
    const workerd = childPids(serving!.pid!);
    assert.ok(workerd.length > 0);
    node.child.kill('SIGKILL');
    await waitFor(() => node.child.signalCode !== null, 'the daemon gone');
    await waitFor(
      () => ![serving!.pid!, ...workerd].some(isRunning),
      'the runtime process and its workerd gone',
      SERVE_DEADLINE_MS,
    );
    await alone.close();
  });
});

async function deployTo(
  on: SailProcess,
  signer: Signer,
  project: string,
  name: string,
  greeting: string,
): Promise<void> {
  const run = await runSvc(
    [
      'deploy',
      project,
      '--name',
      name,
      '--node',
      on.url,
      '--key',
      keyArg(signer),
      '--var',
      `GREETING:${greeting}`,
    ],
    { timeoutMs: 60_000 },
  );
  assert.equal(run.code, 0, run.stderr);
}

async function processOn(on: SailProcess, application: string): Promise<Process | undefined> {
  const answer = await call(on.url, 'GET', '/v1/state', { signer: ownAdmin });
  return (answer.body as { processes: Process[] }).processes.find((p) => p.application === application);
}

/** Registers ownAdmin as an admin operator straight in the bucket. */
async function register(b: Bucket): Promise<void> {
  await trustOperator(b.store, ownAdmin);
}

function childPids(pid: number): number[] {
  return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
    .split('\n')
    .map((line) => Number(line.trim()))
    .filter((n) => n > 0);
}
