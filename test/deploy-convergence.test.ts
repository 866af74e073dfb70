// Every node serves what the selector names within a pass, whatever path the news of a deploy
// took (docs/deploys.md "A publish the bucket cut short", docs/supervisor.md "A restarted
// daemon"), with real parts: `svc sail` nodes, the real runtime (cell serve, workerd) left at its
// default 5-minute safety look, the real `svc deploy`, and, for the bucket fault, a real MinIO
// frozen with SIGSTOP the moment the selector's write was answered (seen through the S3 proxy
// test helper in front of it).
//
// The deadlines after the event are the tests' statement of "within a pass": a node that only
// learnt of the deploy at its runtime's safety look would take minutes.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readDeployRecord } from '../src/node/deploys/records.ts';
import { getApplication } from '../src/registry/applications.ts';
import { keys } from '../src/registry/keys.ts';
import { parsePointer } from '../src/runtime-tools/layout.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { CELL_BIN, copyProject, EXAMPLES, fetchText, isRunning } from './helpers/cell.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import { type Minio, startMinio } from './helpers/minio.ts';
import { type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import {
  freePort,
  type RunResult,
  runSvc,
  type SailProcess,
  SVC_BIN,
  startSail,
  tempDir,
  waitFor,
} from './helpers/svc.ts';

/** A reconcile pass (5 s) plus the runtime's switch (a look, a workerd start) on a busy machine. */
const CONVERGE_MS = 15_000;
/** Patience for a first deploy to be served (publish, workerd start, readiness). */
const SERVE_MS = 60_000;

interface Process {
  application: string;
  port: number;
  ready: boolean;
  pid?: number;
}

/** Runtime process groups to kill if a test fails before its daemons stopped them. */
const runtimePids: number[] = [];
after(() => {
  for (const pid of runtimePids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
});

async function processOn(
  node: SailProcess,
  signer: Signer,
  application: string,
): Promise<Process | undefined> {
  const answer = await call(node.url, 'GET', '/v1/state', { signer });
  return (answer.body as { processes: Process[] }).processes.find((p) => p.application === application);
}

/** The port of the node's ready process for the application, once it answers with `greeting`. */
async function servingPort(node: SailProcess, signer: Signer, application: string, greeting: string) {
  const ready = await waitFor(
    async () => {
      const p = await processOn(node, signer, application);
      return p?.ready ? p : undefined;
    },
    `${application} ready on ${node.nodeId}`,
    SERVE_MS,
  );
  runtimePids.push(ready!.pid!);
  await waitFor(
    async () => (await body(ready!.port)).includes(greeting),
    `${greeting} on ${node.nodeId}`,
    SERVE_MS,
  );
  return ready!.port;
}

async function body(port: number): Promise<string> {
  return (await fetchText(`http://127.0.0.1:${port}/`))?.body ?? '';
}

function deployArgs(node: SailProcess, signer: Signer, project: string, greeting: string): string[] {
  return ['deploy', project, '--node', node.url, '--key', keyArg(signer), '--var', `GREETING:${greeting}`];
}

describe('a deploy while a node’s daemon is down', () => {
  test('the restarted daemon tells the runtime it adopts: the node serves the new deployment within a pass', {
    timeout: 300_000,
  }, async () => {
    const bucket = await openBucket();
    const admin = await bucket.operator('op-admin', 'admin', ['*']);
    const flags = ['--endpoint', bucket.endpoint, '--cell-bin', CELL_BIN];
    const stateDir = tempDir('svc-node-down-');
    const port = await freePort();
    const startDown = () => startSail(flags, { stateDir, port });
    const up = await bucket.sail(['--cell-bin', CELL_BIN]);
    let down = await startDown();
    try {
      const project = copyProject(join(EXAMPLES, 'hello'));
      const first = await runSvc(deployArgs(up, admin, project, 'greeting zero'), { timeoutMs: 90_000 });
      assert.equal(first.code, 0, first.stderr);
      const upPort = await servingPort(up, admin, 'hello', 'greeting zero');
      const downPort = await servingPort(down, admin, 'hello', 'greeting zero');
      let previous = 'greeting zero';
      for (const how of ['SIGKILL', 'SIGUSR2'] as const) {
        const greeting = `greeting after ${how}`;
        if (how === 'SIGKILL') {
          down.child.kill('SIGKILL');
          await waitFor(() => down.child.signalCode !== null, 'the daemon killed');
        } else {
          assert.equal(await down.stop('SIGUSR2'), 0, 'SIGUSR2 restarts keeping the applications');
        }
        const run = await runSvc(deployArgs(up, admin, project, greeting), { timeoutMs: 90_000 });
        assert.equal(run.code, 0, run.stderr);
        await waitFor(
          async () => (await body(upPort)).includes(greeting),
          `${greeting} on the live node`,
          SERVE_MS,
        );
        // Nobody could tell the runtime on the node whose daemon is down: it still serves the
        // previous deployment (and would until its safety look, minutes away).
        assert.match(await body(downPort), new RegExp(previous));
        down = await startDown();
        await waitFor(
          async () => (await body(downPort)).includes(greeting),
          () =>
            `${greeting} served by the adopted runtime within a pass of the restart (${how})\n${down.log()}`,
          CONVERGE_MS,
        );
        const adopted = await processOn(down, admin, 'hello');
        assert.equal(adopted?.port, downPort, 'the same runtime process, adopted');
        previous = greeting;
      }
    } finally {
      await down.stop();
      await bucket.close();
    }
  });
});

describe('the bucket frozen the moment the selector moves', () => {
  let minio: Minio;
  let proxy: S3Proxy;
  let store: Store;
  let bucketName: string;
  /** Set while the next answered write of the selector should freeze MinIO. */
  let freezeOnSelector: string | null = null;
  let frozenAt = 0;

  before(async () => {
    minio = await startMinio();
    bucketName = await minio.createBucket();
    proxy = await startS3Proxy(minio.endpoint, {
      answered: (request, status) => {
        const selector = freezeOnSelector && `/${keys.runtimeSelector(freezeOnSelector)}`;
        if (!selector || request.method !== 'PUT' || status !== 200) return;
        if (!request.path.split('?')[0]!.endsWith(selector)) return;
        freezeOnSelector = null;
        minio.freeze();
        frozenAt = Date.now();
      },
    });
    store = await openStore({ ...minio.bucketOptions(bucketName), stateDir: tempDir() });
  });
  after(async () => {
    minio?.thaw();
    await store?.close();
    await proxy?.close();
    await minio?.stop();
  });

  test('every record ends deployed, svc deploy exits 0, and every node serves the selected deployment within a pass of the thaw', {
    timeout: 300_000,
  }, async () => {
    const admin = await trustOperator(store, signerFor('op-admin'));
    const options = minio.bucketOptions(bucketName);
    const flags = [
      ...['--endpoint', proxy.endpoint, '--region', options.region, '--bucket', options.bucket],
      ...['--access-key', options.accessKey, '--secret-key', options.secretKey, '--cell-bin', CELL_BIN],
    ];
    const nodes = [await startSail(flags), await startSail(flags)];
    const accepting = nodes[0]!;
    try {
      const project = copyProject(join(EXAMPLES, 'hello'));
      const first = await runSvc(deployArgs(accepting, admin, project, 'before the freeze'), {
        timeoutMs: 90_000,
      });
      assert.equal(first.code, 0, first.stderr);
      const ports = await Promise.all(nodes.map((n) => servingPort(n, admin, 'hello', 'before the freeze')));

      freezeOnSelector = 'hello';
      const deploy = startCli(deployArgs(accepting, admin, project, 'after the thaw'));
      // Frozen until the accepting node has failed to write the records and the poll of
      // `svc deploy` has failed: both are what the bucket's return must mend.
      await waitFor(
        () =>
          frozenAt > 0 &&
          accepting.log().includes('its records could not be written') &&
          deploy.stderr().includes('the poll failed'),
        () => `the node and the CLI to meet the frozen bucket\n${deploy.stderr()}`,
        90_000,
      );
      minio.thaw();
      await Promise.all(
        ports.map((port, i) =>
          waitFor(
            async () => (await body(port)).includes('after the thaw'),
            () =>
              `node ${nodes[i]!.nodeId} serving the new deployment within a pass of the thaw\n${nodes[i]!.log()}`,
            CONVERGE_MS,
          ),
        ),
      );

      const result = await deploy.done;
      assert.equal(result.code, 0, result.stderr);
      const [, deployment, id] = /^deployed hello ([0-9a-f]+) \(deploy (hello\.[0-9a-f]{16})\)/m.exec(
        result.stdout,
      )!;
      assert.match(result.stderr, /polling on/);
      assert.doesNotMatch(result.stderr, /failed deploy|Deploy failed|restarted/);
      // One truthful state everywhere: the selector (what serves), the application record, the
      // deploy record, and what any node answers to a poll.
      const selector = await store.get(keys.runtimeSelector('hello'));
      const pointer = parsePointer(selector!.body);
      assert.ok(pointer.ok);
      assert.equal(pointer.value.deployment, deployment);
      await waitFor(
        async () => (await getApplication(store, 'hello')).deployment === deployment,
        'the application record naming the selected deployment',
      );
      const record = (await readDeployRecord(store, 'hello', id!))!.record;
      assert.equal(record.state, 'deployed');
      assert.equal(record.deployment, deployment);
      // The deployment's own record names the deploy that published it (what the reaper reads
      // when a node dies before it could write the records).
      const made = await store.get(keys.runtimeRecord('hello', pointer.value.script, deployment!));
      assert.equal(JSON.parse(Buffer.from(made!.body).toString()).deploy, id);
      for (const node of nodes) {
        const polled = await call(node.url, 'GET', `/v1/deploys/${id}`, { signer: admin });
        assert.equal(polled.body.state, 'deployed');
        assert.equal(polled.body.deployment, deployment);
      }
    } finally {
      minio.thaw();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });
});

/** `svc <args>` in the background: its stderr as it comes, and its outcome. */
function startCli(args: string[]): { stderr(): string; done: Promise<RunResult> } {
  const child = spawn(process.execPath, [SVC_BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
  const done = new Promise<RunResult>((resolveRun) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    }),
  );
  return { stderr: () => stderr, done };
}
