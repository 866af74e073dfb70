// Deploys across real processes: more concurrent `svc deploy` runs than a node's limits allow get
// 429 and all land with --wait; `kill -9` of the accepting node mid-deploy makes a poll on another
// node report `deploy-timeout` naming it once the 90 s liveness window has passed (a real wait:
// nothing is backdated), the poll writes nothing, the reaper pass records the failure, and the
// killed node, restarted on its state directory, leaves nothing staged.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DeployReaper } from '../src/node/deploys/reaper.ts';
import { DEPLOY_LIVENESS_MS } from '../src/node/deploys/records.ts';
import { keys } from '../src/registry/keys.ts';
import { getJson } from '../src/store/store.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { projectDir, standinArtifact } from './helpers/artifacts.ts';
import { CELL_STANDIN, getDeploy, postDeploy, stagingEmpty } from './helpers/deploys.ts';
import { runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

let bucket: Bucket;
let admin: Signer;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
});
after(async () => {
  await bucket?.close();
});

describe('more deploys than the limits allow', () => {
  test('some are told to wait (429), and with --wait every one of them lands', async () => {
    const node = await bucket.sail([
      '--cell-bin',
      CELL_STANDIN,
      '--queued-tasks',
      '2',
      '--application-queued-tasks',
      '2',
      '--active-tasks',
      '1',
      '--application-active-tasks',
      '1',
    ]);
    const home = tempDir('svc-home-');
    const runs = Array.from({ length: 6 }, (_, i) =>
      runSvc(
        [
          'deploy',
          projectDir({ 'cell.json': JSON.stringify({ name: 'crowd', standin: {}, n: i }) }),
          '--node',
          node.url,
          '--key',
          keyArg(admin),
        ],
        { env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined }, timeoutMs: 120_000 },
      ),
    );
    const results = await Promise.all(runs);
    for (const result of results) assert.equal(result.code, 0, result.stderr);
    const deployments = new Set(results.map((r) => /^deployed crowd ([0-9a-f]{16})/.exec(r.stdout)?.[1]));
    assert.equal(deployments.size, 6, 'six distinct deployments');
    const waited = results.filter((r) => /waiting for a queue place/.test(r.stderr));
    assert.ok(waited.length > 0, 'at least one run met a full node');
    for (const result of waited) assert.match(result.stderr, /svc: admitted after \d+ s/);
    assert.ok(stagingEmpty(node.stateDir));
    await node.stop();
  });
});

describe('kill -9 of the accepting node mid-deploy', () => {
  let accepting: SailProcess;
  let other: SailProcess;

  before(async () => {
    [accepting, other] = await Promise.all([
      bucket.sail(['--cell-bin', CELL_STANDIN]),
      bucket.sail(['--cell-bin', CELL_STANDIN]),
    ]);
  });
  after(async () => {
    await other?.stop();
  });

  test('a poll on another node reports deploy-timeout naming it; the reaper records it', {
    timeout: 240_000,
  }, async () => {
    const answer = await postDeploy(accepting.url, 'doomed', standinArtifact({ hang: true }), {
      signer: admin,
    });
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    const id: string = answer.body.id;
    const key = keys.deploy('doomed', id);
    await waitFor(
      async () => (await getJson<{ state: string }>(bucket.store, key))?.value.state === 'uploading',
      'uploading',
    );
    // `uploading` is recorded when the body starts to arrive; the kill must land once the
    // publish runs, or there is no orphaned publish for the restart to stop.
    await waitFor(
      () => existsSync(join(accepting.stateDir, 'deploys', id, 'publish.pid')),
      'the publish to start',
    );

    accepting.child.kill('SIGKILL');
    await new Promise((resolve) => accepting.child.once('exit', resolve));
    const killedAt = Date.now();

    // Until the window has passed the record stands, wherever it is read.
    assert.equal((await getDeploy(other.url, id, { signer: admin })).body.state, 'uploading');
    const judged = await waitFor(
      async () => {
        const { body } = await getDeploy(other.url, id, { signer: admin });
        return body.state === 'failed' ? body : null;
      },
      'the poll to judge the deploy dead',
      DEPLOY_LIVENESS_MS + 60_000,
    );
    assert.ok(
      Date.now() - killedAt >= DEPLOY_LIVENESS_MS - 30_000,
      'not judged before the record stopped moving',
    );
    assert.equal(judged.code, 'deploy-timeout');
    assert.match(judged.detail, new RegExp(`node ${accepting.nodeId}\\b`));

    // The poll wrote nothing: the bucket still says uploading.
    assert.equal((await getJson<{ state: string }>(bucket.store, key))?.value.state, 'uploading');

    // The coordinator's reaper pass (the function it runs) records the same judgement.
    const result = await new DeployReaper({ store: bucket.store }).reap();
    assert.ok(result.failed.includes(id), JSON.stringify(result));
    const recorded = await getJson<{ state: string; code: string; detail: string }>(bucket.store, key);
    assert.equal(recorded?.value.state, 'failed');
    assert.equal(recorded?.value.code, 'deploy-timeout');
    assert.match(recorded!.value.detail, new RegExp(`node ${accepting.nodeId}\\b`));

    // Restarted on its state directory, the killed node stops the publish it left running and
    // leaves nothing staged.
    assert.ok(!stagingEmpty(accepting.stateDir), 'the crash left the artifact staged');
    const publishPid = Number(readFileSync(join(accepting.stateDir, 'deploys', id, 'publish.pid'), 'utf8'));
    assert.ok(isRunning(publishPid), 'the orphaned publish still runs');
    const restarted = await startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_STANDIN], {
      stateDir: accepting.stateDir,
    });
    try {
      assert.ok(stagingEmpty(restarted.stateDir));
      await waitFor(() => !isRunning(publishPid), 'the orphaned publish to be stopped');
      assert.equal((await getDeploy(restarted.url, id, { signer: admin })).body.code, 'deploy-timeout');
    } finally {
      await restarted.stop();
    }
  });
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
