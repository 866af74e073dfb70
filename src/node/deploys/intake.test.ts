// Deploy intake, queue, runner and records in process: the real server (guard, error handler,
// deploy routes) and the real deploy service over the in-memory store test double, publishing
// through the runtime stand-in (test/helpers/cell-standin.ts). Deadlines and limits are set small
// here; test/deploy.test.ts covers the same answers against real `svc sail` processes.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { metadataHeader, standinArtifact, tgz } from '../../../test/helpers/artifacts.ts';
import { type Signer, startTestNode, type TestNode } from '../../../test/helpers/in-process-node.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { keys } from '../../registry/keys.ts';
import { NODE_DEAD_AFTER_MS } from '../../registry/liveness.ts';
import type { ApplicationRecord, NodeRecord } from '../../registry/records.ts';
import { deployRoutes } from '../routes/deploys.ts';
import { DeployReaper } from './reaper.ts';
import {
  DEPLOY_LIVENESS_MS,
  DEPLOY_RETENTION_MS,
  type DeployRecord,
  DeployRecordWriter,
  readDeployRecord,
} from './records.ts';
import { DeployService } from './service.ts';

const STANDIN = resolve(import.meta.dirname, '..', '..', '..', 'test', 'helpers', 'cell-standin.ts');

interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read answers loosely, member by member.
  body: any;
  headers: Headers;
}

describe('deploy intake in process', () => {
  let node: TestNode;
  let service: DeployService;
  let admin: Signer;
  let scoped: Signer;
  let gates: string;

  before(async () => {
    node = await startTestNode([deployRoutes], (ctx) => {
      ctx.settings.node.stateDir = mkdtempSync(join(tmpdir(), 'svc-intake-'));
      ctx.settings.runtime.cellBin = STANDIN;
      Object.assign(ctx.settings.deploy, {
        artifactBytes: 64 * 1024,
        archiveEntries: 20,
        activeTasks: 1,
        applicationActiveTasks: 1,
        queuedTasks: 3,
        applicationQueuedTasks: 2,
        stagedBytes: 1024 * 1024,
        applicationStagedBytes: 512 * 1024,
        receiveTimeoutMs: 2_000,
        queueTimeoutMs: 30_000,
        taskTimeoutMs: 30_000,
        outputBytes: 200,
      });
    });
    service = new DeployService();
    await service.start(node.ctx);
    admin = await node.operator('op-admin', 'admin', ['*']);
    scoped = await node.operator('op-shop', 'operator', ['shop-*']);
    gates = mkdtempSync(join(tmpdir(), 'svc-gates-'));
  });
  after(async () => {
    await service.stop();
    await node.close();
  });
  afterEach(() =>
    // Every test leaves the node idle: nothing pending, active or staged.
    waitFor(() => {
      const { node: counts } = service.limits.counts();
      return counts.pending === 0 && counts.active === 0 && counts.staged === 0;
    }, 'the deploy service to be idle'),
  );

  async function deploy(
    name: string,
    body: Buffer | undefined,
    options: { signer?: Signer; headers?: Record<string, string>; authorization?: string } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = {
      'content-type': 'application/octet-stream',
      ...options.headers,
    };
    headers.authorization = options.authorization ?? (await (options.signer ?? admin).bearer());
    const response = await fetch(`${node.url}/v1/applications/${name}/deploys`, {
      method: 'POST',
      headers,
      body: body ? new Uint8Array(body) : undefined,
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
  }

  async function poll(id: string, signer: Signer = admin): Promise<Answer> {
    const response = await fetch(`${node.url}/v1/deploys/${id}`, {
      headers: { authorization: await signer.bearer() },
    });
    return { status: response.status, body: await response.json(), headers: response.headers };
  }

  // biome-ignore lint/suspicious/noExplicitAny: tests read answers loosely, member by member.
  async function settled(id: string): Promise<any> {
    return waitFor(async () => {
      const { body } = await poll(id);
      return body.state === 'deployed' || body.state === 'failed' ? body : null;
    }, `deploy ${id} to end`);
  }

  function refused(answer: Answer, status: number, code: string, title: string | RegExp): void {
    assert.equal(answer.status, status, JSON.stringify(answer.body));
    assert.equal(answer.body.type, `urn:svc:${code}`);
    if (typeof title === 'string') assert.equal(answer.body.title, title);
    else assert.match(answer.body.title, title);
  }

  function stagingEmpty(): boolean {
    const staging = join(node.ctx.settings.node.stateDir, 'deploys');
    return readdirSync(staging).length === 0;
  }

  test('an accepted deploy answers 202 with Location, then publishes and records the deployment', async () => {
    const answer = await deploy('shop', standinArtifact(), {
      headers: { 'x-svc-deploy': metadataHeader({ replicas: 2, nodeSelector: { zone: 'eu' } }) },
    });
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    assert.match(answer.body.id, /^shop\.[0-9a-f]{16}$/);
    assert.equal(answer.headers.get('location'), `/v1/deploys/${answer.body.id}`);
    assert.deepEqual(answer.body, { id: answer.body.id, application: 'shop', state: 'accepted' });
    const done = await settled(answer.body.id);
    assert.equal(done.state, 'deployed', JSON.stringify(done));
    assert.match(done.deployment, /^[0-9a-f]{16}$/);
    assert.deepEqual(Object.keys(done).sort(), ['application', 'deployment', 'id', 'state']);
    const app = JSON.parse(
      Buffer.from((await node.store.get(keys.application('shop')))!.body).toString(),
    ) as ApplicationRecord;
    assert.equal(app.deployment, done.deployment);
    assert.equal(app.replicas, 2);
    assert.deepEqual(app.selector, { zone: 'eu' });
    await waitFor(stagingEmpty, 'staging to be emptied');
  });

  test('every state is recorded under the application', async () => {
    const gate = join(gates, 'states');
    const answer = await deploy('shop-states', standinArtifact({ waitFor: gate }));
    const key = keys.deploy('shop-states', answer.body.id);
    const read = async () =>
      JSON.parse(Buffer.from((await node.store.get(key))!.body).toString()) as DeployRecord;
    await waitFor(async () => (await read()).state === 'uploading', 'the record to say uploading');
    assert.equal((await read()).node, 'node-self');
    assert.equal((await read()).by, 'op-admin');
    writeFileSync(gate, '');
    assert.equal((await settled(answer.body.id)).state, 'deployed');
    assert.equal((await read()).state, 'deployed');
  });

  test('a failed publish is publish-failed with the tail of its output', async () => {
    const answer = await deploy('shop', standinArtifact({ fail: 'syntax error in src/index.js' }));
    const done = await settled(answer.body.id);
    assert.equal(done.state, 'failed');
    assert.equal(done.code, 'publish-failed');
    assert.match(done.detail, /exited with 1/);
    assert.match(done.detail, /syntax error in src\/index\.js/);
    assert.ok(done.detail.length < 400, 'the tail is bounded by deploy.outputBytes');
  });

  test('malformed metadata, wrong content type and a missing body are invalid-input', async () => {
    refused(
      await deploy('shop', standinArtifact(), { headers: { 'x-svc-deploy': 'e30=' } }),
      400,
      'invalid-input',
      'Malformed request',
    );
    refused(
      await deploy('shop', standinArtifact(), {
        headers: { 'x-svc-deploy': metadataHeader({ application: 'x' }) },
      }),
      400,
      'invalid-input',
      'Malformed request',
    );
    refused(
      await deploy('shop', standinArtifact(), { headers: { 'content-type': 'application/json' } }),
      400,
      'invalid-input',
      'Malformed request',
    );
    refused(await deploy('shop', undefined), 400, 'invalid-input', 'Malformed request');
    refused(await deploy('shop', Buffer.alloc(0)), 400, 'invalid-input', 'Malformed request');
    assert.ok(stagingEmpty());
  });

  test('no worker config, links and traversal are invalid-input; nothing stays staged', async () => {
    refused(
      await deploy('shop', tgz([{ path: 'index.js', body: 'x' }])),
      400,
      'invalid-input',
      'No worker config',
    );
    refused(
      await deploy(
        'shop',
        tgz([
          { path: 'cell.json', body: '{}' },
          { path: 'l', type: 'SymbolicLink', linkpath: '/' },
        ]),
      ),
      400,
      'invalid-input',
      'Malformed artifact',
    );
    refused(
      await deploy('shop', tgz([{ path: '../x', body: 'x' }])),
      400,
      'invalid-input',
      'Malformed artifact',
    );
    refused(await deploy('shop', Buffer.from('not gzip')), 400, 'invalid-input', 'Malformed artifact');
    assert.ok(stagingEmpty());
  });

  test('over artifactBytes or archiveEntries is resource-limit', async () => {
    const big = standinArtifact({}, [{ path: 'big.bin', body: randomBytes(70_000) }]);
    assert.ok(big.length > 64 * 1024);
    refused(await deploy('shop', big), 413, 'resource-limit', 'Artifact too large');
    refused(
      await deploy('shop', standinArtifact({}, [{ path: 'zeros', body: Buffer.alloc(100_000) }])),
      413,
      'resource-limit',
      'Artifact too large',
    );
    const flood = Array.from({ length: 25 }, (_, i) => ({ path: `f${i}`, body: '' }));
    refused(
      await deploy('shop', standinArtifact({}, flood)),
      413,
      'resource-limit',
      'Archive has too many entries',
    );
    assert.ok(stagingEmpty());
  });

  test('frozen fleet: deploys-frozen before anything is created', async () => {
    await node.store.putJson(keys.freeze, { v: 1, frozenAt: new Date().toISOString(), by: 'op-admin' });
    try {
      refused(await deploy('frozen-app', standinArtifact()), 409, 'deploys-frozen', 'Deploys are frozen');
      assert.equal(await node.store.get(keys.application('frozen-app')), null);
    } finally {
      await node.store.delete(keys.freeze);
    }
  });

  test('blocked application: application-blocked', async () => {
    await deploy('shop-blocked', standinArtifact()).then((a) => settled(a.body.id));
    const key = keys.application('shop-blocked');
    const record = JSON.parse(Buffer.from((await node.store.get(key))!.body).toString());
    await node.store.putJson(key, { ...record, blocked: true });
    refused(
      await deploy('shop-blocked', standinArtifact()),
      409,
      'application-blocked',
      'Application is blocked',
    );
  });

  test('another live node serving the application on another runtime: version-skew, unless a pair is declared', async () => {
    const other: NodeRecord = {
      v: 1,
      id: 'node-other',
      advertise: '127.0.0.2:7311',
      listen: '127.0.0.2:7311',
      labels: {},
      versions: { svc: '0.1.0', cell: '0.0.1' },
      state: 'ready',
      beatMs: Date.now(),
      startedAt: new Date().toISOString(),
      processes: [
        {
          application: 'skewed',
          port: 24000,
          runtimeVersion: '0.0.1',
          ready: true,
          state: 'ready',
          restarts: 0,
        },
      ],
    };
    await node.store.putJson(keys.nodeRecord('node-other'), other);
    try {
      const answer = await deploy('skewed', standinArtifact());
      refused(answer, 409, 'version-skew', 'Runtime version skew');
      assert.match(answer.body.detail, /node-other serves it on cell 0\.0\.1/);
      assert.match(answer.body.detail, /allowed rolling pairs: none/);
      await node.store.putJson(keys.runtimePairs, { v: 1, pairs: [['0.0.1', '0.0.0-standin']] });
      const allowed = await deploy('skewed', standinArtifact());
      assert.equal(allowed.status, 202);
      await settled(allowed.body.id);
      await node.store.delete(keys.runtimePairs);
      // A node whose heartbeat stopped is not answering: it does not count.
      await node.store.putJson(keys.nodeRecord('node-other'), {
        ...other,
        beatMs: Date.now() - NODE_DEAD_AFTER_MS - 1_000,
      });
      const stale = await deploy('skewed', standinArtifact());
      assert.equal(stale.status, 202);
      await settled(stale.body.id);
    } finally {
      await node.store.delete(keys.nodeRecord('node-other'));
    }
  });

  test('out of scope is auth-scope; a bad token auth-invalid; a bad name invalid-slug', async () => {
    refused(await deploy('blog', standinArtifact(), { signer: scoped }), 403, 'auth-scope', /.+/);
    refused(
      await deploy('shop', standinArtifact(), { authorization: 'Bearer nope' }),
      401,
      'auth-invalid',
      /.+/,
    );
    refused(await deploy('Bad_Name', standinArtifact()), 400, 'invalid-slug', /.+/);
  });

  test('no runner: capability-missing, before the application is created', async () => {
    const saved = node.ctx.settings.runtime.cellBin;
    node.ctx.settings.runtime.cellBin = join(gates, 'no-such-cell');
    try {
      refused(await deploy('no-runner', standinArtifact()), 409, 'capability-missing', 'No deploy runner');
      assert.equal(await node.store.get(keys.application('no-runner')), null);
    } finally {
      node.ctx.settings.runtime.cellBin = saved;
    }
  });

  test('no stager: capability-missing when the staging directory cannot be made', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'svc-nostage-'));
    writeFileSync(join(stateDir, 'deploys'), 'a file where the staging directory should be');
    const broken = new DeployService();
    const ctx = {
      ...node.ctx,
      settings: { ...node.ctx.settings, node: { ...node.ctx.settings.node, stateDir } },
    };
    await broken.start(ctx);
    node.ctx.deploys = broken;
    try {
      refused(await deploy('no-stager', standinArtifact()), 409, 'capability-missing', 'No artifact stager');
      assert.equal(await node.store.get(keys.application('no-stager')), null);
    } finally {
      await broken.stop();
      node.ctx.deploys = service;
    }
  });

  test('full queues answer 429 with retry-after 1; queued deploys run in turn', async () => {
    const gate = join(gates, 'queue');
    // One runs (activeTasks 1) and one waits: the application's two pending places are taken.
    const first = await deploy('shop-q', standinArtifact({ waitFor: gate }));
    const second = await deploy('shop-q', standinArtifact({ waitFor: gate }));
    const third = await deploy('shop-q', standinArtifact({ waitFor: gate }));
    assert.equal(first.status, 202);
    assert.equal(second.status, 202);
    assert.equal(third.status, 202);
    const over = await deploy('shop-q', standinArtifact());
    refused(over, 429, 'deploy-overloaded', 'Deploy capacity full');
    assert.equal(over.headers.get('retry-after'), '1');
    // The node-wide limit (3 pending) is reached too: another application is refused as well.
    const other = await deploy('shop-r', standinArtifact({ waitFor: gate }));
    assert.equal(other.status, 202);
    refused(await deploy('shop-s', standinArtifact()), 429, 'deploy-overloaded', 'Deploy capacity full');
    writeFileSync(gate, '');
    for (const answer of [first, second, third, other])
      assert.equal((await settled(answer.body.id)).state, 'deployed');
  });

  test('staged bytes over the limit: 429; a deploy that could never fit: 413', async () => {
    const saved = { ...node.ctx.settings.deploy };
    service.limits.settings.applicationStagedBytes = 6_000;
    try {
      const gate = join(gates, 'staged');
      const first = await deploy(
        'shop-b',
        standinArtifact({ waitFor: gate }, [{ path: 'a', body: 'a'.repeat(1_000) }]),
      );
      assert.equal(first.status, 202);
      refused(
        await deploy('shop-b', standinArtifact({}, [{ path: 'a', body: 'b'.repeat(1_000) }])),
        429,
        'deploy-overloaded',
        'Deploy capacity full',
      );
      refused(
        await deploy('shop-c', standinArtifact({}, [{ path: 'a', body: Buffer.alloc(20_000) }])),
        413,
        'resource-limit',
        /too large/,
      );
      writeFileSync(gate, '');
      assert.equal((await settled(first.body.id)).state, 'deployed');
    } finally {
      service.limits.settings.applicationStagedBytes = saved.applicationStagedBytes;
    }
  });

  test('the task deadline stops a publish: deploy-timeout', async () => {
    node.ctx.settings.deploy.taskTimeoutMs = 300;
    try {
      const answer = await deploy('shop-slow', standinArtifact({ hang: true }));
      const done = await settled(answer.body.id);
      assert.equal(done.state, 'failed');
      assert.equal(done.code, 'deploy-timeout');
      assert.match(done.detail, /deploy\.taskTimeoutMs/);
    } finally {
      node.ctx.settings.deploy.taskTimeoutMs = 30_000;
    }
  });

  test('the queue deadline fails a deploy that waited too long: deploy-timeout', async () => {
    node.ctx.settings.deploy.queueTimeoutMs = 300;
    const gate = join(gates, 'queue-deadline');
    try {
      const running = await deploy('shop-w', standinArtifact({ waitFor: gate }));
      const waiting = await deploy('shop-w', standinArtifact());
      const done = await settled(waiting.body.id);
      assert.equal(done.code, 'deploy-timeout');
      assert.match(done.detail, /deploy\.queueTimeoutMs/);
      writeFileSync(gate, '');
      assert.equal((await settled(running.body.id)).state, 'deployed');
    } finally {
      node.ctx.settings.deploy.queueTimeoutMs = 30_000;
    }
  });

  test('the receive deadline: a body that stalls is deploy-timeout', async () => {
    node.ctx.settings.deploy.receiveTimeoutMs = 300;
    try {
      const body = standinArtifact();
      let sent = false;
      const stream = new ReadableStream({
        pull(controller) {
          if (!sent) {
            sent = true;
            controller.enqueue(body.subarray(0, 10));
          }
          // Never more, never closed: the client stalls.
        },
      });
      const controller = new AbortController();
      const response = await fetch(`${node.url}/v1/applications/shop/deploys`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', authorization: await admin.bearer() },
        body: stream,
        duplex: 'half',
        signal: controller.signal,
      } as RequestInit);
      const answer = await response.json();
      controller.abort();
      assert.equal(response.status, 408);
      assert.equal(answer.type, 'urn:svc:deploy-timeout');
      assert.equal(answer.title, 'Deploy timed out');
    } finally {
      node.ctx.settings.deploy.receiveTimeoutMs = 2_000;
    }
    await waitFor(stagingEmpty, 'staging to be emptied');
  });

  test('GET /v1/deploys/:id: a non-id, a missing record and a mismatched record are not-found', async () => {
    refused(await poll('nonsense'), 404, 'not-found', 'No such deploy');
    refused(await poll('shop.0123456789abcdef'), 404, 'not-found', 'No such deploy');
    await node.store.putJson(keys.deploy('shop', 'shop.1111111111111111'), {
      v: 1,
      id: 'other.1111111111111111',
      application: 'other',
      state: 'deployed',
      node: 'node-self',
      by: 'x',
      createdAt: '',
      updatedAt: '',
    });
    refused(await poll('shop.1111111111111111'), 404, 'not-found', 'No such deploy');
    refused(await poll('blog.1111111111111111', scoped), 403, 'auth-scope', /.+/);
  });

  test('read-time judgement: unmoved 90 s and the node not answering is reported failed, nothing written', async () => {
    const old = new Date(Date.now() - DEPLOY_LIVENESS_MS - 5_000).toISOString();
    const record: DeployRecord = {
      v: 1,
      id: 'shop.2222222222222222',
      application: 'shop',
      state: 'uploading',
      node: 'node-gone',
      by: 'op-admin',
      createdAt: old,
      updatedAt: old,
    };
    const key = keys.deploy('shop', record.id);
    await node.store.putJson(key, record);
    const before = (await node.store.get(key))!.etag;
    const answer = await poll(record.id);
    assert.equal(answer.body.state, 'failed');
    assert.equal(answer.body.code, 'deploy-timeout');
    assert.match(answer.body.detail, /node node-gone/);
    assert.equal((await node.store.get(key))!.etag, before, 'the poll wrote nothing');
    // The same node with a live heartbeat: the record stands.
    await node.store.putJson(keys.nodeRecord('node-gone'), {
      v: 1,
      id: 'node-gone',
      beatMs: Date.now(),
      startedAt: old,
      processes: [],
    });
    assert.equal((await poll(record.id)).body.state, 'uploading');
    // Restarted since it accepted the deploy: it no longer works on it.
    await node.store.putJson(keys.nodeRecord('node-gone'), {
      v: 1,
      id: 'node-gone',
      beatMs: Date.now(),
      startedAt: new Date().toISOString(),
      processes: [],
    });
    assert.match((await poll(record.id)).body.detail, /restarted/);
    // This node's own deploy that it no longer runs.
    await node.store.putJson(keys.deploy('shop', 'shop.3333333333333333'), {
      ...record,
      id: 'shop.3333333333333333',
      node: 'node-self',
    });
    assert.equal((await poll('shop.3333333333333333')).body.code, 'deploy-timeout');
    await node.store.delete(keys.nodeRecord('node-gone'));
  });

  test('the reaper records the judgement and deletes terminal records after 7 days', async () => {
    const store = node.store;
    const old = new Date(Date.now() - DEPLOY_LIVENESS_MS - 5_000).toISOString();
    const dead: DeployRecord = {
      v: 1,
      id: 'reap.4444444444444444',
      application: 'reap',
      state: 'accepted',
      node: 'node-dead',
      by: 'op-admin',
      createdAt: old,
      updatedAt: old,
    };
    const ancient: DeployRecord = {
      ...dead,
      id: 'reap.5555555555555555',
      state: 'deployed',
      deployment: 'ab',
    };
    await store.putJson(keys.deploy('reap', dead.id), dead);
    await store.putJson(keys.deploy('reap', ancient.id), ancient);
    await store.putJson(keys.application('reap'), { v: 1, name: 'reap' });
    // The listing's modified time is what the reaper sees first: move the clock instead.
    let clock = Date.now() + DEPLOY_LIVENESS_MS + 1_000;
    const reaper = new DeployReaper({ store, now: () => clock });
    const first = await reaper.reap();
    assert.ok(first.failed.includes(dead.id));
    assert.ok(!first.failed.includes(ancient.id));
    assert.deepEqual(first.deleted, []);
    const failed = JSON.parse(Buffer.from((await store.get(keys.deploy('reap', dead.id)))!.body).toString());
    assert.equal(failed.state, 'failed');
    assert.equal(failed.code, 'deploy-timeout');
    assert.match(failed.detail, /node node-dead/);
    clock = Date.now() + DEPLOY_RETENTION_MS + 60_000;
    const second = await reaper.reap();
    assert.ok(second.deleted.includes(dead.id) && second.deleted.includes(ancient.id));
    assert.equal(await store.get(keys.deploy('reap', ancient.id)), null);
  });

  test('the reaper judges by updatedAt, as the poll does, not by the later modified time', async () => {
    // The record was stamped before its write finished: its listing's modified time is later.
    const writtenAt = Date.now();
    const stamped = new Date(writtenAt - 2_000).toISOString();
    const record: DeployRecord = {
      v: 1,
      id: 'late.7777777777777777',
      application: 'late',
      state: 'uploading',
      node: 'node-dead',
      by: 'op-admin',
      createdAt: stamped,
      updatedAt: stamped,
    };
    await node.store.putJson(keys.deploy('late', record.id), record);
    await node.store.putJson(keys.application('late'), { v: 1, name: 'late' });
    // Dead by updatedAt, still inside the window by the listing's modified time.
    const clock = writtenAt + DEPLOY_LIVENESS_MS - 1_000;
    const result = await new DeployReaper({ store: node.store, now: () => clock }).reap();
    assert.ok(result.failed.includes(record.id), JSON.stringify(result));
  });

  test('the staging directory is emptied at start, and a leftover in-flight record is failed', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'svc-restart-'));
    const leftover = join(stateDir, 'deploys', 'shop.6666666666666666', 'root');
    await import('node:fs/promises').then((fs) => fs.mkdir(leftover, { recursive: true }));
    writeFileSync(join(leftover, 'cell.json'), '{}');
    const now = new Date().toISOString();
    await node.store.putJson(keys.deploy('shop', 'shop.6666666666666666'), {
      v: 1,
      id: 'shop.6666666666666666',
      application: 'shop',
      state: 'uploading',
      node: 'node-self',
      by: 'x',
      createdAt: now,
      updatedAt: now,
    });
    const restarted = new DeployService();
    const ctx = {
      ...node.ctx,
      settings: { ...node.ctx.settings, node: { ...node.ctx.settings.node, stateDir } },
    };
    await restarted.start(ctx);
    try {
      assert.equal(existsSync(join(stateDir, 'deploys', 'shop.6666666666666666')), false);
      await waitFor(async () => {
        const { body } = await poll('shop.6666666666666666');
        return body.state === 'failed' && body.code === 'internal' && /restarted/.test(body.detail);
      }, 'the leftover record to be failed');
    } finally {
      await restarted.stop();
    }
  });

  test('a leftover whose publish moved the selector is settled deployed at start, never failed', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'svc-restart-'));
    const id = 'kept.8888888888888888';
    const entry = join(stateDir, 'deploys', id);
    await import('node:fs/promises').then((fs) => fs.mkdir(entry, { recursive: true }));
    const published = { application: 'kept', script: 'kept', deployment: '0abc', warnings: ['w'] };
    writeFileSync(join(entry, 'published.json'), JSON.stringify(published));
    const now = new Date().toISOString();
    await node.store.putJson(keys.application('kept'), { v: 1, name: 'kept', deployment: '0old' });
    // A later publish has moved the selector on since: the application record follows the
    // selector (what serves), the deploy record names what this deploy made.
    await node.store.putJson(keys.runtimeSelector('kept'), {
      schema_version: 1,
      script: 'kept',
      deployment: '0bcd',
      moved_ms: Date.now(),
    });
    await node.store.putJson(keys.deploy('kept', id), {
      v: 1,
      id,
      application: 'kept',
      state: 'uploading',
      node: 'node-self',
      by: 'op-admin',
      createdAt: now,
      updatedAt: now,
    });
    const restarted = new DeployService();
    const ctx = {
      ...node.ctx,
      settings: { ...node.ctx.settings, node: { ...node.ctx.settings.node, stateDir } },
    };
    await restarted.start(ctx);
    try {
      await waitFor(async () => (await poll(id)).body.state === 'deployed', 'the leftover settled');
      const { body } = await poll(id);
      assert.equal(body.deployment, '0abc');
      assert.deepEqual(body.warnings, ['w']);
      const app = JSON.parse(Buffer.from((await node.store.get(keys.application('kept')))!.body).toString());
      assert.equal(app.deployment, '0bcd');
      const note = await node.store.get(keys.deployment('kept', '0abc'));
      assert.equal(JSON.parse(Buffer.from(note!.body).toString()).deploy, id);
      await waitFor(() => !existsSync(entry), 'the staging entry removed once settled');
    } finally {
      await restarted.stop();
    }
  });

  test('the record writer goes on after a write of its own whose answer was lost, and settles over a deploy-timeout', async () => {
    const now = new Date().toISOString();
    const record: DeployRecord = {
      v: 1,
      id: 'lost.9999999999999999',
      application: 'lost',
      state: 'accepted',
      node: 'node-self',
      by: 'op-admin',
      createdAt: now,
      updatedAt: now,
    };
    const key = keys.deploy('lost', record.id);
    const writer = new DeployRecordWriter(node.store, record);
    await writer.create();
    // Our `uploading` write landed, but we never learnt its ETag: the writer still holds the old one.
    await node.store.putJson(key, { ...record, state: 'uploading' });
    assert.equal(await writer.update({ state: 'uploading' }), true);
    assert.equal((await readDeployRecord(node.store, 'lost', record.id))!.record.state, 'uploading');
    // A judgement made while this node could not write ends the record; a beat stops there...
    const judged = { ...writer.record, state: 'failed', code: 'deploy-timeout', detail: 'not answering' };
    await node.store.putJson(key, judged);
    assert.equal(await writer.update(), false);
    assert.equal(writer.record.state, 'failed');
    // ...but the publish moved the selector: the deploy did deploy, and the record says so.
    assert.equal(await writer.settle({ state: 'deployed', deployment: '0abc' }), true);
    const settled = (await readDeployRecord(node.store, 'lost', record.id))!.record;
    assert.equal(settled.state, 'deployed');
    assert.equal(settled.deployment, '0abc');
    assert.equal(settled.code, undefined);
    assert.equal(settled.detail, undefined);
    // Any other end someone else wrote stands.
    const other = new DeployRecordWriter(node.store, { ...record, id: 'lost.aaaaaaaaaaaaaaaa' });
    await other.create();
    await node.store.putJson(keys.deploy('lost', 'lost.aaaaaaaaaaaaaaaa'), {
      ...record,
      id: 'lost.aaaaaaaaaaaaaaaa',
      state: 'failed',
      code: 'internal',
      detail: 'node stopped',
    });
    assert.equal(await other.settle({ state: 'deployed', deployment: '0abc' }), false);
    assert.equal(other.record.code, 'internal');
  });

  test('a deploy whose node died after its publish moved the selector is deployed, to a poll and to the reaper', async () => {
    const old = new Date(Date.now() - DEPLOY_LIVENESS_MS - 5_000).toISOString();
    const id = 'died.bbbbbbbbbbbbbbbb';
    const record: DeployRecord = {
      v: 1,
      id,
      application: 'died',
      state: 'uploading',
      node: 'node-died',
      by: 'op-admin',
      createdAt: old,
      updatedAt: old,
    };
    await node.store.putJson(keys.deploy('died', id), record);
    await node.store.putJson(keys.application('died'), { v: 1, name: 'died', deployment: '0aaa' });
    const selectTo = async (deployment: string, deploy: string) => {
      await node.store.putJson(keys.runtimeRecord('died', 'died', deployment), { deployment, deploy });
      await node.store.putJson(keys.runtimeSelector('died'), {
        schema_version: 1,
        script: 'died',
        deployment,
        moved_ms: Date.now(),
      });
    };
    // The selector names another deploy's deployment: this one timed out, as before.
    await selectTo('0bbb', 'died.cccccccccccccccc');
    assert.equal((await poll(id)).body.code, 'deploy-timeout');
    // The selector names the deployment this deploy's publish wrote (its record says so).
    await selectTo('0ccc', id);
    const polled = (await poll(id)).body;
    assert.equal(polled.state, 'deployed');
    assert.equal(polled.deployment, '0ccc');
    const clock = Date.now() + DEPLOY_LIVENESS_MS + 1_000;
    const result = await new DeployReaper({ store: node.store, now: () => clock }).reap();
    assert.ok(result.deployed.includes(id), JSON.stringify(result));
    assert.ok(!result.failed.includes(id));
    const written = (await readDeployRecord(node.store, 'died', id))!.record;
    assert.equal(written.state, 'deployed');
    assert.equal(written.deployment, '0ccc');
    const app = JSON.parse(Buffer.from((await node.store.get(keys.application('died')))!.body).toString());
    assert.equal(app.deployment, '0ccc');
  });
});
