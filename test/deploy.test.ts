// docs/api.md "Deploys" and docs/deploys.md "GET /v1/deploys/:id" against real `svc sail`
// processes on one local-directory bucket: a test per answer of the deploy table (status, `type`
// and title), the record of every state, and nothing left staged. The runtime is the stand-in
// (test/helpers/cell-standin.ts), steered per deploy, except where the real runtime is named.
// `trust-mismatch` is in test/trust.test.ts; `store-unavailable` is not covered (docs/deploys.md).

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { getJson, putJson } from '../src/store/store.ts';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import { metadataHeader, standinArtifact, tgz } from './helpers/artifacts.ts';
import {
  CELL_STANDIN,
  getDeploy,
  postDeploy,
  settledDeploy,
  stagingEmpty,
  standinRecord,
} from './helpers/deploys.ts';
import { type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const LIMITS = [
  '--artifact-bytes',
  '65536',
  '--archive-entries',
  '20',
  '--active-tasks',
  '1',
  '--application-active-tasks',
  '1',
  '--queued-tasks',
  '3',
  '--application-queued-tasks',
  '2',
  '--receive-timeout-ms',
  '1500',
];

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let scoped: Signer;
let gates: string;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  scoped = await bucket.operator('op-shop', 'operator', ['shop-*']);
  node = await bucket.sail(['--cell-bin', CELL_STANDIN, ...LIMITS]);
  gates = tempDir('svc-gates-');
});
after(async () => {
  await bucket?.close();
});

const deploy = (
  name: string,
  body: Uint8Array | undefined,
  headers: Record<string, string> = {},
  signer = admin,
) => postDeploy(node.url, name, body, { signer, headers });

describe('202: accepted', () => {
  test('answers DeployStatus and Location, publishes, records every state and the deployment', async () => {
    const config = '{"name":"worker","standin":{},"vars":{"A":"1"}}\n';
    const answer = await deploy(
      'shop',
      tgz([
        { path: 'cell.json', body: config },
        { path: 'src/index.js', body: 'x' },
      ]),
      {
        'x-svc-deploy': metadataHeader({
          replicas: 2,
          nodeSelector: { zone: 'eu' },
          source: { provider: 'github', repo: 'acme/shop', ref: 'refs/heads/main', commit: 'abc' },
        }),
      },
    );
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    assert.equal(answer.contentType, 'application/json; charset=utf-8');
    assert.match(answer.body.id, /^shop\.[0-9a-f]{16}$/);
    assert.deepEqual(answer.body, { id: answer.body.id, application: 'shop', state: 'accepted' });
    assert.equal(answer.headers.get('location'), `/v1/deploys/${answer.body.id}`);

    const done = await settledDeploy(node.url, answer.body.id, admin);
    assert.equal(done.state, 'deployed', JSON.stringify(done));
    const app = await getJson<{ deployment: string; replicas: number; selector: unknown; createdBy: string }>(
      bucket.store,
      keys.application('shop'),
    );
    assert.equal(app?.value.deployment, done.deployment);
    assert.equal(app?.value.replicas, 2);
    assert.deepEqual(app?.value.selector, { zone: 'eu' });
    assert.equal(app?.value.createdBy, 'op-admin');

    const record = await getJson<Record<string, unknown>>(bucket.store, keys.deploy('shop', answer.body.id));
    assert.equal(record?.value.state, 'deployed');
    assert.equal(record?.value.node, node.nodeId);
    assert.deepEqual(record?.value.source, {
      provider: 'github',
      repo: 'acme/shop',
      ref: 'refs/heads/main',
      commit: 'abc',
    });

    // The runtime was handed the config untouched, the application and the bucket.
    const seen = standinRecord(bucket.endpoint, 'shop', done.deployment);
    assert.equal(seen.config, config);
    assert.equal(seen.configFile, 'cell.json');
    assert.deepEqual(seen.files, ['cell.json', 'src/index.js']);
    assert.equal(seen.env.CELL_APP, 'shop');
    assert.equal(seen.env.SVC_S3_ENDPOINT, bucket.endpoint.replace('file://', 'file://'));
    assert.deepEqual(seen.env.leaked, [], 'no svc setting but the bucket reaches the runtime');
    await waitFor(() => stagingEmpty(node.stateDir), 'staging to be emptied');
  });

  test('the accepted, uploading and deployed states are each recorded', async () => {
    const gate = join(gates, 'states');
    const answer = await deploy('shop-states', standinArtifact({ waitFor: gate }));
    assert.equal(answer.status, 202);
    const state = async () =>
      (await getJson<{ state: string }>(bucket.store, keys.deploy('shop-states', answer.body.id)))?.value
        .state;
    assert.ok(['accepted', 'uploading'].includes((await state())!));
    await waitFor(async () => (await state()) === 'uploading', 'uploading to be recorded');
    assert.equal((await getDeploy(node.url, answer.body.id, { signer: admin })).body.state, 'uploading');
    writeFileSync(gate, '');
    assert.equal((await settledDeploy(node.url, answer.body.id, admin)).state, 'deployed');
    assert.equal(await state(), 'deployed');
  });

  test('a failed publish is recorded failed, publish-failed, with the output tail', async () => {
    const answer = await deploy('shop', standinArtifact({ fail: 'Could not resolve "./missing.js"' }));
    const done = await settledDeploy(node.url, answer.body.id, admin);
    assert.equal(done.state, 'failed');
    assert.equal(done.code, 'publish-failed');
    assert.match(done.detail, /Could not resolve "\.\/missing\.js"/);
  });
});

describe('refusals of POST /v1/applications/:name/deploys', () => {
  test('400 invalid-slug: :name is not an application name', async () => {
    assertProblem(
      await deploy('Not_A_Name', standinArtifact()),
      400,
      'invalid-slug',
      'Invalid application name',
    );
  });

  test('400 invalid-input: malformed or non-canonical metadata, refused names', async () => {
    for (const header of [
      'e30=',
      'not base64!',
      metadataHeader({ replicas: 2 }).slice(0, -1),
      Buffer.from('{ "replicas": 2 }').toString('base64url'),
      Buffer.from('{"replicas":2,"replicas":2}').toString('base64url'),
      metadataHeader({ application: 'other' }),
      metadataHeader({ oidc: {} }),
      metadataHeader({ source: { provider: 'github', repo: 'a/b', ref: 'r', commit: 'c', oidcSub: 'x' } }),
      metadataHeader({ source: { provider: 'github', repo: '', ref: 'r', commit: 'c' } }),
      metadataHeader([]),
      'A'.repeat(8193),
    ]) {
      assertProblem(
        await deploy('shop', standinArtifact(), { 'x-svc-deploy': header }),
        400,
        'invalid-input',
        'Malformed request',
      );
    }
  });

  test('400 invalid-input: missing body, wrong content type, no worker config', async () => {
    assertProblem(await deploy('shop', undefined), 400, 'invalid-input', 'Malformed request');
    assertProblem(
      await postDeploy(node.url, 'shop', standinArtifact(), {
        signer: admin,
        headers: { 'content-type': 'text/plain' },
      }),
      400,
      'invalid-input',
      'Malformed request',
    );
    assertProblem(
      await deploy('shop', tgz([{ path: 'src/cell.json', body: '{}' }])),
      400,
      'invalid-input',
      'No worker config',
    );
    assertProblem(
      await deploy(
        'shop',
        tgz([
          { path: 'cell.json', body: '{}' },
          { path: '../../etc/x', body: 'x' },
        ]),
      ),
      400,
      'invalid-input',
      'Malformed artifact',
    );
    assertProblem(
      await deploy(
        'shop',
        tgz([
          { path: 'cell.json', body: '{}' },
          { path: 'l', type: 'SymbolicLink', linkpath: '/etc' },
        ]),
      ),
      400,
      'invalid-input',
      'Malformed artifact',
    );
    assert.ok(stagingEmpty(node.stateDir));
  });

  test('401 auth-invalid: no token, a bad token, a replayed token', async () => {
    assertProblem(
      await postDeploy(node.url, 'shop', standinArtifact()),
      401,
      'auth-invalid',
      'Token rejected',
    );
    assertProblem(
      await postDeploy(node.url, 'shop', standinArtifact(), { authorization: 'Bearer x.y.z' }),
      401,
      'auth-invalid',
      'Token rejected',
    );
    const token = await admin.bearer();
    await getDeploy(node.url, 'shop.0000000000000000', { authorization: token });
    assertProblem(
      await postDeploy(node.url, 'shop', standinArtifact(), { authorization: token }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('403 auth-scope: the operator key does not reach the application', async () => {
    assertProblem(await deploy('blog', standinArtifact(), {}, scoped), 403, 'auth-scope', 'Out of scope');
    assert.equal(await bucket.store.get(keys.application('blog')), null);
  });

  test('408 deploy-timeout: the artifact does not arrive within the receive deadline', async () => {
    const body = standinArtifact();
    let sent = false;
    const stalled = new ReadableStream({
      pull(controller) {
        if (!sent) {
          sent = true;
          controller.enqueue(new Uint8Array(body.subarray(0, 20)));
        }
      },
    });
    const aborter = new AbortController();
    const response = await fetch(`${node.url}/v1/applications/shop/deploys`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', authorization: await admin.bearer() },
      body: stalled,
      duplex: 'half',
      signal: aborter.signal,
    } as RequestInit);
    const answer = {
      status: response.status,
      body: await response.json(),
      contentType: response.headers.get('content-type'),
    };
    aborter.abort();
    assertProblem(answer, 408, 'deploy-timeout', 'Deploy timed out', /receiveTimeoutMs/);
    await waitFor(() => stagingEmpty(node.stateDir), 'staging to be emptied');
  });

  test('409 deploys-frozen: refused before anything is created', async () => {
    assert.equal(
      (await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, body: { reason: 'release' } }))
        .status,
      200,
    );
    try {
      assertProblem(
        await deploy('shop-frozen', standinArtifact()),
        409,
        'deploys-frozen',
        'Deploys are frozen',
        /release/,
      );
      assert.equal(await bucket.store.get(keys.application('shop-frozen')), null);
    } finally {
      await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: admin });
    }
    assert.equal((await deploy('shop-frozen', standinArtifact())).status, 202);
  });

  test('409 application-blocked', async () => {
    const first = await deploy('shop-blocked', standinArtifact());
    await settledDeploy(node.url, first.body.id, admin);
    assert.equal(
      (await call(node.url, 'POST', '/v1/applications/shop-blocked/block', { signer: admin })).status,
      200,
    );
    assertProblem(
      await deploy('shop-blocked', standinArtifact()),
      409,
      'application-blocked',
      'Application is blocked',
    );
  });

  test('409 version-skew: another answering node serves it on another runtime, outside a declared pair', async () => {
    const first = await deploy('shop-skew', standinArtifact());
    await settledDeploy(node.url, first.body.id, admin);
    const other: NodeRecord = {
      v: 1,
      id: 'node-old',
      advertise: '127.0.0.9:7311',
      listen: '127.0.0.9:7311',
      labels: {},
      versions: { svc: '0.1.0', cell: '0.5.1' },
      state: 'ready',
      beatMs: Date.now(),
      startedAt: new Date().toISOString(),
      processes: [
        {
          application: 'shop-skew',
          port: 24001,
          runtimeVersion: '0.5.1',
          ready: false,
          state: 'crashloop',
          restarts: 7,
        },
      ],
    };
    // A node record as the other node's heartbeat writes it (only its freshness makes it answering).
    await putJson(bucket.store, keys.nodeRecord('node-old'), other);
    try {
      assertProblem(
        await deploy('shop-skew', standinArtifact()),
        409,
        'version-skew',
        'Runtime version skew',
        /node-old crash-loops on cell 0\.5\.1.*allowed rolling pairs: none/,
      );
      await putJson(bucket.store, keys.runtimePairs, { v: 1, pairs: [['0.0.0-standin', '0.5.1']] });
      const allowed = await deploy('shop-skew', standinArtifact());
      assert.equal(allowed.status, 202, JSON.stringify(allowed.body));
      await settledDeploy(node.url, allowed.body.id, admin);
    } finally {
      await bucket.store.delete(keys.runtimePairs);
      await bucket.store.delete(keys.nodeRecord('node-old'));
    }
  });

  test('409 capability-missing: a node with no runtime to publish with', async () => {
    const bare = await bucket.sail(['--cell-bin', join(gates, 'no-cell-here')]);
    assertProblem(
      await postDeploy(bare.url, 'shop-bare', standinArtifact(), { signer: admin }),
      409,
      'capability-missing',
      'No deploy runner',
    );
    assert.equal(await bucket.store.get(keys.application('shop-bare')), null);
    await bare.stop();
  });

  test('413 resource-limit: over artifactBytes compressed or expanded, over archiveEntries', async () => {
    assertProblem(
      await deploy('shop', standinArtifact({}, [{ path: 'noise', body: randomBytes(70_000) }])),
      413,
      'resource-limit',
      'Artifact too large',
    );
    assertProblem(
      await deploy('shop', standinArtifact({}, [{ path: 'zeros', body: Buffer.alloc(200_000) }])),
      413,
      'resource-limit',
      'Artifact too large',
      /expanded/,
    );
    const flood = Array.from({ length: 30 }, (_, i) => ({ path: `f/${i}`, body: '' }));
    assertProblem(
      await deploy('shop', standinArtifact({}, flood)),
      413,
      'resource-limit',
      'Archive has too many entries',
    );
    assert.ok(stagingEmpty(node.stateDir));
  });

  test('429 deploy-overloaded with retry-after: 1 when the queue is full', async () => {
    const gate = join(gates, 'full');
    const held = [];
    try {
      // One publishes (one runner slot) and two wait: the application's two queued places.
      for (let i = 0; i < 3; i++) held.push(await deploy('shop-busy', standinArtifact({ waitFor: gate })));
      for (const answer of held) assert.equal(answer.status, 202, JSON.stringify(answer.body));
      const over = await deploy('shop-busy', standinArtifact());
      assertProblem(over, 429, 'deploy-overloaded', 'Deploy capacity full');
      assert.equal(over.headers.get('retry-after'), '1');
    } finally {
      writeFileSync(gate, '');
    }
    for (const answer of held)
      assert.equal((await settledDeploy(node.url, answer.body.id, admin)).state, 'deployed');
  });
});

describe('GET /v1/deploys/:id', () => {
  test('any node answers; the application in the id is what scope is checked against', async () => {
    const answer = await deploy('shop-poll', standinArtifact());
    const other = await bucket.sail(['--cell-bin', CELL_STANDIN]);
    try {
      const done = await settledDeploy(other.url, answer.body.id, admin);
      assert.equal(done.state, 'deployed');
      assert.equal((await getDeploy(other.url, answer.body.id, { signer: scoped })).status, 200);
      const blog = await deploy('blog', standinArtifact());
      assertProblem(
        await getDeploy(other.url, blog.body.id, { signer: scoped }),
        403,
        'auth-scope',
        'Out of scope',
      );
    } finally {
      await other.stop();
    }
  });

  test('404 not-found: no deploy id, no record, a record filed under a mismatched id', async () => {
    assertProblem(
      await getDeploy(node.url, 'not-an-id', { signer: admin }),
      404,
      'not-found',
      'No such deploy',
    );
    assertProblem(
      await getDeploy(node.url, 'shop.ffffffffffffffff', { signer: admin }),
      404,
      'not-found',
      'No such deploy',
    );
    await putJson(bucket.store, keys.deploy('shop', 'shop.eeeeeeeeeeeeeeee'), {
      v: 1,
      id: 'blog.eeeeeeeeeeeeeeee',
      application: 'blog',
      state: 'deployed',
      node: node.nodeId,
      by: 'op-admin',
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
    });
    assertProblem(
      await getDeploy(node.url, 'shop.eeeeeeeeeeeeeeee', { signer: admin }),
      404,
      'not-found',
      'No such deploy',
    );
  });
});
