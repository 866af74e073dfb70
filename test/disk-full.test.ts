// docs/deploys.md "A full disk" and docs/supervisor.md "A full disk", on a real `svc sail` whose
// `--state-dir` is a 4 MB tmpfs filled to its last byte (mounting needs root, as the test
// machines run). The runtime is the stand-in at the spec's seam (test/helpers/cell-standin.ts).
// While the disk is full a deploy is refused 503 store-unavailable naming the state directory,
// logged, with nothing staged or recorded, and a process the node starts is missing from
// processes.json; once space is freed the file is rewritten within a pass, a deploy goes
// through, and a daemon killed after that adopts the process rather than starting a second.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { processAlive } from '../src/node/fleet/process-leftovers.ts';
import { keys } from '../src/registry/keys.ts';
import {
  assertProblem,
  type Bucket,
  call,
  ensureDeployedApplication,
  openBucket,
  type Signer,
} from './helpers/applications.ts';
import { standinArtifact } from './helpers/artifacts.ts';
import { CELL_STANDIN, postDeploy, settledDeploy, stagingEmpty } from './helpers/deploys.ts';
import { mountSmallDisk, type SmallDisk } from './helpers/small-disk.ts';
import { ownRuntimePorts, type SailProcess, startSail, waitFor } from './helpers/svc.ts';

const PASS_DEADLINE_MS = 30_000;

let disk: SmallDisk | undefined;
let sailFlags: string[];
let bucket: Bucket;
let node: SailProcess | undefined;
let admin: Signer;

before(async () => {
  disk = mountSmallDisk(4);
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  sailFlags = [
    ...['--endpoint', bucket.endpoint, '--cell-bin', CELL_STANDIN],
    // Its processes outlive a daemon crash, to be adopted, as the real runtime's do.
    ...['--cell-env', 'STANDIN_SERVE_STAY_ORPHANED=1'],
    ...ownRuntimePorts(),
  ];
  node = await startSail(sailFlags, { stateDir: disk.dir });
});

after(async () => {
  await node?.stop();
  await bucket?.close();
  disk?.unmount();
});

interface NotedProcess {
  application: string;
  pid: number;
  port: number;
}

function notedProcesses(): NotedProcess[] {
  try {
    return JSON.parse(readFileSync(join(disk!.dir, 'processes.json'), 'utf8')).processes;
  } catch {
    return [];
  }
}

function notedPorts(): { application: string; port: number }[] {
  try {
    return JSON.parse(readFileSync(join(disk!.dir, 'ports.json'), 'utf8')).ports;
  } catch {
    return [];
  }
}

async function runningPid(application: string): Promise<number | undefined> {
  const state = await call(node!.url, 'GET', '/v1/state', { signer: admin });
  const process = (state.body?.processes ?? []).find(
    (p: { application: string; pid?: number }) => p.application === application,
  );
  return process?.pid;
}

test('a full state disk: the deploy is refused naming it, nothing is half-recorded, the process file catches up once space returns, a crash then doubles nothing', {}, async () => {
  const stateDir = disk!.dir;
  const filled = disk!.fill();
  assert.ok(filled > 0 && disk!.freeBytes() === 0, `the disk is full (${filled} bytes written)`);

  // The refusal: the node's disk, not the artifact.
  const refused = await postDeploy(node!.url, 'shop', standinArtifact(), { signer: admin });
  assertProblem(
    refused,
    503,
    'store-unavailable',
    'Node disk is full',
    new RegExp(`state directory ${stateDir} is full \\(ENOSPC\\): the artifact could not be staged`),
  );
  await waitFor(
    () =>
      /deploy shop\.[0-9a-f]{16} refused: the disk holding the state directory takes no more writes/.test(
        node!.log(),
      ),
    'the refusal in the node log',
  );
  assert.ok(stagingEmpty(stateDir), `nothing left staged: ${readdirSync(join(stateDir, 'deploys'))}`);
  const records = await bucket.store.list(keys.deploysPrefix('shop'), { recursive: true });
  assert.deepEqual(records.objects, [], 'no deploy record claims progress');

  // A process started while the disk is full cannot be noted.
  await ensureDeployedApplication(bucket.store, 'late', {});
  const pid = await waitFor(() => runningPid('late'), 'the node to run late', PASS_DEADLINE_MS);
  await waitFor(() => /cannot note runtime processes/.test(node!.log()), 'the failed note in the log');
  assert.ok(
    !notedProcesses().some((p) => p.application === 'late'),
    `processes.json cannot name late yet: ${JSON.stringify(notedProcesses())}`,
  );
  assert.ok(
    !notedPorts().some((p) => p.application === 'late'),
    `ports.json cannot name late yet: ${JSON.stringify(notedPorts())}`,
  );
  assert.deepEqual(
    readdirSync(stateDir).filter((name) => name.endsWith('.tmp')),
    [],
    'no temporary file left beside it',
  );

  // Space returns: the process file names it within a pass, and a deploy goes through.
  disk!.free();
  await waitFor(
    () => notedProcesses().some((p) => p.application === 'late' && p.pid === pid),
    'processes.json to name late once space returns',
    PASS_DEADLINE_MS,
  );
  const latePort = notedProcesses().find((p) => p.application === 'late')!.port;
  await waitFor(
    () => notedPorts().some((p) => p.application === 'late' && p.port === latePort),
    'ports.json to name late once space returns',
    PASS_DEADLINE_MS,
  );
  const accepted = await postDeploy(node!.url, 'shop', standinArtifact(), { signer: admin });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const done = await settledDeploy(node!.url, accepted.body.id, admin);
  assert.equal(done.state, 'deployed', JSON.stringify(done));

  // The daemon crashes now: the next run adopts the process started while the disk was full
  // rather than starting a second one beside it.
  await node!.stop('SIGKILL');
  node = await startSail(sailFlags, { stateDir });
  await waitFor(() => runningPid('late'), 'the restarted node to take late back', PASS_DEADLINE_MS);
  assert.equal(
    await runningPid('late'),
    pid,
    `the process started while full is adopted, not doubled: ${node!.log()}`,
  );
  assert.ok(processAlive(pid!), 'and still runs');
});
