// the targets in bench/RESULTS.md, Deploy convergence: stale-version seconds, the time a node
// still serves the previous deployment after it could have learnt of the new one (target: no more
// than one reconcile pass, 5 s, plus the runtime's switch). Real parts: two `svc sail` nodes with
// the real runtime (runtime/bin/cell, real workerd, its 5-minute safety look left as shipped),
// `svc deploy` of examples/hello, and a real MinIO behind the S3 proxy test helper.
// Run: scripts/with-node node bench/deploy-convergence.bench.ts [rounds]
//
// Daemon down: each round stops one node's daemon (SIGKILL and SIGUSR2 in turn), deploys through
// the other, restarts the daemon on its state directory, and times from its listening line until
// its adopted runtime process answers with the new deployment.
// Bucket frozen: each round freezes MinIO (SIGSTOP) the moment the selector's write was answered,
// thaws it once the accepting node has failed to write the deploy's records, and times from the
// thaw until each node answers with the new deployment; `svc deploy`'s exit status and the deploy
// record's final state are reported beside it.

import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { readDeployRecord } from '../src/node/deploys/records.ts';
import { keys } from '../src/registry/keys.ts';
import { openStore } from '../src/store/open.ts';
import { call, keyArg, openBucket, type Signer } from '../test/helpers/applications.ts';
import { CELL_BIN, copyProject, EXAMPLES, fetchText, isRunning } from '../test/helpers/cell.ts';
import { signerFor, trustOperator } from '../test/helpers/in-process-node.ts';
import { startMinio } from '../test/helpers/minio.ts';
import { startS3Proxy } from '../test/helpers/s3-proxy.ts';
import {
  freePort,
  runSvc,
  type SailProcess,
  SVC_BIN,
  startSail,
  tempDir,
  waitFor,
} from '../test/helpers/svc.ts';

const [rounds = 3] = process.argv.slice(2, 3).map(Number);
const WATCH_EVERY_MS = 50;
const SERVE_DEADLINE_MS = 120_000;
const leftPids: number[] = [];

async function body(port: number): Promise<string> {
  return (await fetchText(`http://127.0.0.1:${port}/`))?.body ?? '';
}

/** Milliseconds until the port answers with `greeting` (watched every 50 ms). */
async function until(port: number, greeting: string): Promise<number> {
  const start = performance.now();
  for (;;) {
    if ((await body(port)).includes(greeting)) return performance.now() - start;
    if (performance.now() - start > SERVE_DEADLINE_MS) throw new Error(`${greeting} never served on ${port}`);
    await new Promise((r) => setTimeout(r, WATCH_EVERY_MS));
  }
}

async function servingPort(node: SailProcess, signer: Signer): Promise<number> {
  const p = await waitFor(
    async () => {
      const answer = await call(node.url, 'GET', '/v1/state', { signer });
      const found = (
        answer.body as { processes: { application: string; ready: boolean; port: number; pid?: number }[] }
      ).processes.find((x) => x.application === 'hello');
      return found?.ready ? found : undefined;
    },
    'hello ready',
    SERVE_DEADLINE_MS,
  );
  if (p!.pid) leftPids.push(p!.pid);
  return p!.port;
}

async function deploy(node: SailProcess, signer: Signer, project: string, greeting: string): Promise<void> {
  const run = await runSvc(
    ['deploy', project, '--node', node.url, '--key', keyArg(signer), '--var', `GREETING:${greeting}`],
    {
      timeoutMs: 120_000,
    },
  );
  if (run.code !== 0) throw new Error(`svc deploy failed: ${run.stderr}`);
}

async function daemonDown(): Promise<number[]> {
  const bucket = await openBucket();
  const admin = await bucket.operator('op-admin', 'admin', ['*']);
  const stateDir = tempDir('svc-bench-down-');
  const port = await freePort();
  const start = () => startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_BIN], { stateDir, port });
  const up = await bucket.sail(['--cell-bin', CELL_BIN]);
  let down = await start();
  const stale: number[] = [];
  try {
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deploy(up, admin, project, 'round 0');
    const upPort = await servingPort(up, admin);
    const downPort = await servingPort(down, admin);
    await until(downPort, 'round 0');
    for (let round = 1; round <= rounds; round++) {
      const how = round % 2 === 1 ? 'SIGKILL' : 'SIGUSR2';
      if (how === 'SIGKILL') {
        down.child.kill('SIGKILL');
        await waitFor(() => down.child.signalCode !== null, 'the daemon killed');
      } else await down.stop('SIGUSR2');
      await deploy(up, admin, project, `round ${round}`);
      await until(upPort, `round ${round}`);
      down = await start();
      const ms = await until(downPort, `round ${round}`);
      stale.push(ms);
      console.log(
        `daemon down (${how}), round ${round}: served ${(ms / 1000).toFixed(2)} s after the restart`,
      );
    }
  } finally {
    await down.stop();
    await bucket.close();
  }
  return stale;
}

async function bucketFrozen(): Promise<number[]> {
  const minio = await startMinio();
  const bucketName = await minio.createBucket();
  let arm: string | null = null;
  let frozenMs = 0;
  const proxy = await startS3Proxy(minio.endpoint, {
    answered: (request, status) => {
      if (!arm || request.method !== 'PUT' || status !== 200) return;
      if (!request.path.split('?')[0]!.endsWith(`/${keys.runtimeSelector(arm)}`)) return;
      arm = null;
      minio.freeze();
      frozenMs = Date.now();
    },
  });
  const options = minio.bucketOptions(bucketName);
  const store = await openStore({ ...options, stateDir: tempDir() });
  const admin = await trustOperator(store, signerFor('op-admin'));
  const flags = [
    ...['--endpoint', proxy.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey, '--cell-bin', CELL_BIN],
  ];
  const nodes = [await startSail(flags), await startSail(flags)];
  const stale: number[] = [];
  try {
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deploy(nodes[0]!, admin, project, 'round 0');
    const ports = await Promise.all(nodes.map((n) => servingPort(n, admin)));
    for (let round = 1; round <= rounds; round++) {
      const logAt = nodes[0]!.log().length;
      arm = 'hello';
      frozenMs = 0;
      const cli = spawn(
        process.execPath,
        [
          SVC_BIN,
          'deploy',
          project,
          '--node',
          nodes[0]!.url,
          '--key',
          keyArg(admin),
          '--var',
          `GREETING:round ${round}`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      cli.stdout.on('data', (chunk) => {
        stdout += chunk;
      });
      cli.stderr.resume();
      const exited = new Promise<number | null>((resolveExit) => cli.on('close', resolveExit));
      await waitFor(
        () => frozenMs > 0 && nodes[0]!.log().slice(logAt).includes('its records could not be written'),
        'the node to meet the frozen bucket',
        120_000,
      );
      minio.thaw();
      const heldMs = Date.now() - frozenMs;
      const served = await Promise.all(ports.map((port) => until(port, `round ${round}`)));
      const code = await exited;
      const id = /\(deploy (hello\.[0-9a-f]{16})\)/.exec(stdout)?.[1];
      const record = id ? (await readDeployRecord(store, 'hello', id))?.record.state : 'unknown';
      stale.push(...served);
      console.log(
        `bucket frozen, round ${round}: frozen ${(heldMs / 1000).toFixed(1)} s; served ${served
          .map((ms) => `${(ms / 1000).toFixed(2)} s`)
          .join(' and ')} after the thaw; svc deploy exit ${code}; deploy record ${record}`,
      );
    }
  } finally {
    minio.thaw();
    await Promise.all(nodes.map((n) => n.stop()));
    await store.close();
    await proxy.close();
    await minio.stop();
  }
  return stale;
}

function summary(what: string, values: number[]): void {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  console.log(
    `${what}: median ${(median / 1000).toFixed(2)} s, max ${(sorted.at(-1)! / 1000).toFixed(2)} s over ${values.length}`,
  );
}

try {
  console.log(
    `load average before: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const down = await daemonDown();
  const frozen = await bucketFrozen();
  summary('stale seconds after a daemon restart', down);
  summary('stale seconds after the bucket thawed (per node)', frozen);
  console.log(
    `load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
} finally {
  for (const pid of leftPids) if (isRunning(pid)) process.kill(-pid, 'SIGKILL');
}
