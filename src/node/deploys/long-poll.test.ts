// Long polls (docs/api.md "Waiting for a change") in process: the real server (guard, error
// handler, deploy and application routes) and the real deploy service over the in-memory store
// test double, publishing through the runtime stand-in held at a gate. A malformed `wait`,
// `state` or `serving` is refused before anything is read; a held poll answers the moment its
// deploy leaves the named state (in memory on the node that runs it, from the bucket elsewhere),
// or when the wait ends; a terminal deploy is answered at once. The processes wait is checked
// on views given as plain functions.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { standinArtifact } from '../../../test/helpers/artifacts.ts';
import { type Signer, startTestNode, type TestNode } from '../../../test/helpers/in-process-node.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import type { NodeProcess } from '../context.ts';
import { applicationRoutes } from '../routes/applications.ts';
import { deployRoutes } from '../routes/deploys.ts';
import {
  awaitDeployChange,
  awaitProcessChange,
  MAX_WAIT_S,
  type ProcessView,
  WAIT_HEADER,
} from './long-poll.ts';
import { type DeployRecord, DeployRecordWriter, readDeployRecord, statusOf } from './records.ts';
import { DeployService } from './service.ts';

const STANDIN = resolve(import.meta.dirname, '..', '..', '..', 'test', 'helpers', 'cell-standin.ts');
/** A bound on answers that must come at once: far below any wait a test asks for. */
const PROMPT_MS = 10_000;
/** Timers run on the event loop's clock, which may read a millisecond behind Date.now(). */
const TIMER_SLACK_MS = 5;

describe('long polls in process', () => {
  let node: TestNode;
  let service: DeployService;
  let admin: Signer;
  let gates: string;

  before(async () => {
    node = await startTestNode([deployRoutes, applicationRoutes], (ctx) => {
      ctx.settings.node.stateDir = mkdtempSync(join(tmpdir(), 'svc-long-poll-'));
      ctx.settings.runtime.cellBin = STANDIN;
    });
    service = new DeployService();
    await service.start(node.ctx);
    admin = await node.operator('op-admin', 'admin', ['*']);
    gates = mkdtempSync(join(tmpdir(), 'svc-gates-'));
  });
  after(async () => {
    await service.stop();
    await node.close();
  });

  async function get(
    path: string,
    within = MAX_WAIT_S * 1_000 + PROMPT_MS,
    // biome-ignore lint/suspicious/noExplicitAny: tests read answers loosely, member by member.
  ): Promise<{ status: number; body: any; headers: Headers }> {
    const response = await fetch(`${node.url}${path}`, {
      headers: { authorization: await admin.bearer() },
      signal: AbortSignal.timeout(within),
    });
    return { status: response.status, body: await response.json(), headers: response.headers };
  }

  /** A deploy of `name` held in `uploading` until `open` is called. */
  async function heldDeploy(name: string): Promise<{ id: string; open: () => void }> {
    const gate = join(gates, name);
    const response = await fetch(`${node.url}/v1/applications/${name}/deploys`, {
      method: 'POST',
      headers: { authorization: await admin.bearer(), 'content-type': 'application/octet-stream' },
      body: new Uint8Array(standinArtifact({ waitFor: gate })),
    });
    const { id } = (await response.json()) as { id: string };
    assert.equal(response.status, 202);
    await waitFor(async () => (await get(`/v1/deploys/${id}`)).body.state === 'uploading', `${id} uploading`);
    return { id, open: () => writeFileSync(gate, '') };
  }

  function reread(application: string, id: string) {
    return async () => statusOf((await readDeployRecord(node.store, application, id))!.record);
  }

  test('a malformed wait, state or serving is invalid-input (Malformed request), refused before any read', async () => {
    // The deploy and the application do not exist: a refusal after a read would be not-found.
    const deploy = '/v1/deploys/nothing.0123456789abcdef';
    for (const query of [
      'wait=abc',
      'wait=',
      'wait=-1',
      'wait=1.5',
      'wait=1e1',
      `wait=${MAX_WAIT_S + 1}`,
      'wait=100',
      'wait=1&wait=2',
      'state=done',
      'state=',
      'state=accepted&state=uploading',
    ]) {
      const answer = await get(`${deploy}?${query}`);
      assert.equal(answer.status, 400, `${query}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.type, 'urn:svc:invalid-input', query);
      assert.equal(answer.body.title, 'Malformed request', query);
    }
    for (const query of ['wait=x', 'serving=NOT-HEX', 'serving=', 'serving=ab&serving=cd']) {
      const answer = await get(`/v1/applications/nothing?${query}`);
      assert.equal(answer.status, 400, `${query}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.type, 'urn:svc:invalid-input', query);
      assert.equal(answer.body.title, 'Malformed request', query);
    }
    // Well-formed, the same requests read and find nothing.
    assert.equal((await get(`${deploy}?wait=${MAX_WAIT_S}&state=accepted`)).status, 404);
    assert.equal((await get('/v1/applications/nothing?wait=0&serving=01ab')).status, 404);
  });

  test('a held poll answers the moment the deploy this node runs leaves the named state', {
    timeout: PROMPT_MS,
  }, async () => {
    const { id, open } = await heldDeploy('shop-held');
    const held = awaitDeployChange(node.ctx, {
      id,
      status: { id, application: 'shop-held', state: 'uploading' },
      from: 'uploading',
      waitMs: MAX_WAIT_S * 1_000,
      gone: new AbortController().signal,
      reread: reread('shop-held', id),
    });
    open();
    const status = await held;
    assert.equal(status.state, 'deployed', JSON.stringify(status));
    assert.match(status.deployment ?? '', /^[0-9a-f]{16}$/);
  });

  test('over HTTP: held until the wait ends when nothing moves, marked as held; a terminal deploy at once', async () => {
    const { id, open } = await heldDeploy('shop-wait');
    const started = Date.now();
    const unmoved = await get(`/v1/deploys/${id}?wait=1&state=uploading`);
    assert.equal(unmoved.status, 200);
    assert.equal(unmoved.body.state, 'uploading');
    assert.equal(unmoved.headers.get(WAIT_HEADER), 'unchanged');
    assert.ok(Date.now() - started >= 1_000 - TIMER_SLACK_MS, 'the answer was held for the wait');
    // Named another state than the deploy's, the poll answers at once.
    const moved = await get(`/v1/deploys/${id}?wait=${MAX_WAIT_S}&state=accepted`, PROMPT_MS);
    assert.equal(moved.body.state, 'uploading');
    assert.equal(moved.headers.get(WAIT_HEADER), 'changed');
    // With no state named, the state found is the one waited on; wait=0 answers at once.
    const now = await get(`/v1/deploys/${id}?wait=0`, PROMPT_MS);
    assert.equal(now.body.state, 'uploading');
    assert.equal(now.headers.get(WAIT_HEADER), 'unchanged');
    // Without wait, nothing says the answer was held.
    assert.equal((await get(`/v1/deploys/${id}`)).headers.get(WAIT_HEADER), null);
    open();
    await waitFor(async () => (await get(`/v1/deploys/${id}`)).body.state === 'deployed', `${id} deployed`);
    // Terminal: nothing will change, so even a poll naming that state is answered at once.
    const done = await get(`/v1/deploys/${id}?wait=${MAX_WAIT_S}&state=deployed`, PROMPT_MS);
    assert.equal(done.body.state, 'deployed');
    assert.equal(done.headers.get(WAIT_HEADER), 'unchanged');
  });

  test('a deploy another node runs is re-read from the bucket while a caller waits', {
    timeout: PROMPT_MS,
  }, async () => {
    const id = 'shop-elsewhere.00112233445566aa';
    const now = new Date().toISOString();
    const record: DeployRecord = {
      v: 1,
      id,
      application: 'shop-elsewhere',
      state: 'uploading',
      node: 'node-other',
      by: 'op-admin',
      createdAt: now,
      updatedAt: now,
    };
    const writer = new DeployRecordWriter(node.store, record);
    await writer.create();
    const held = awaitDeployChange(node.ctx, {
      id,
      status: statusOf(record),
      from: 'uploading',
      waitMs: MAX_WAIT_S * 1_000,
      gone: new AbortController().signal,
      reread: reread('shop-elsewhere', id),
    });
    await writer.update({ state: 'deployed', deployment: '0123456789abcdef' });
    assert.deepEqual(await held, {
      id,
      application: 'shop-elsewhere',
      state: 'deployed',
      deployment: '0123456789abcdef',
    });
    // Over HTTP, another such record that does not move is held for the wait, then answered.
    const still = 'shop-elsewhere.00112233445566bb';
    await new DeployRecordWriter(node.store, { ...record, id: still }).create();
    const started = Date.now();
    const unmoved = await get(`/v1/deploys/${still}?wait=1&state=uploading`);
    assert.equal(unmoved.body.state, 'uploading');
    assert.equal(unmoved.headers.get(WAIT_HEADER), 'unchanged');
    assert.ok(Date.now() - started >= 1_000 - TIMER_SLACK_MS, 'the answer was held for the wait');
  });

  test('a caller that leaves ends its wait', { timeout: PROMPT_MS }, async () => {
    const { id, open } = await heldDeploy('shop-gone');
    const gone = new AbortController();
    const held = awaitDeployChange(node.ctx, {
      id,
      status: { id, application: 'shop-gone', state: 'uploading' },
      from: 'uploading',
      waitMs: MAX_WAIT_S * 1_000,
      gone: gone.signal,
      reread: reread('shop-gone', id),
    });
    gone.abort();
    assert.equal((await held).state, 'uploading');
    open();
    await waitFor(async () => (await get(`/v1/deploys/${id}`)).body.state === 'deployed', `${id} deployed`);
  });
});

describe('waiting on processes', () => {
  const running = (
    deployment: string,
    ready: boolean,
    state: NodeProcess['state'] = ready ? 'ready' : 'starting',
  ): NodeProcess => ({
    node: 'node-a',
    application: 'shop',
    port: 30000,
    runtimeVersion: '1',
    ready,
    state,
    restarts: 0,
    deployment,
  });
  const never = new AbortController().signal;

  test('a process ready on the deployment waited for is answered at once, as a change; a wait of 0 answers at once', async () => {
    const view: ProcessView = { processes: [running('0a', true)] };
    assert.deepEqual(await awaitProcessChange(() => view, '0a', MAX_WAIT_S * 1_000, never), {
      view,
      changed: true,
    });
    const other: ProcessView = { processes: [running('0b', true)] };
    assert.deepEqual(await awaitProcessChange(() => other, '0a', 0, never), { view: other, changed: false });
  });

  test('answers once a process turns ready on the deployment, or once the view changes', {
    timeout: PROMPT_MS,
  }, async () => {
    let view: ProcessView = { processes: [running('0b', true)] };
    const serving = awaitProcessChange(() => view, '0a', MAX_WAIT_S * 1_000, never);
    view = { processes: [running('0a', true)] };
    assert.deepEqual(await serving, { view, changed: true });

    view = { processes: [running('0b', true)] };
    const changed = awaitProcessChange(() => view, '0a', MAX_WAIT_S * 1_000, never);
    view = { processes: [running('0b', false, 'crashloop')] };
    assert.deepEqual(await changed, { view, changed: true });

    view = { processes: [], placement: { state: 'placed', nodes: [] } };
    const placed = awaitProcessChange(() => view, undefined, MAX_WAIT_S * 1_000, never);
    view = { processes: [], placement: { state: 'placed', nodes: ['node-a'] } };
    assert.deepEqual(await placed, { view, changed: true });
  });

  test('answers the view as it stands when the wait ends or the caller leaves', {
    timeout: PROMPT_MS,
  }, async () => {
    const view: ProcessView = { processes: [running('0b', true)] };
    const started = Date.now();
    assert.deepEqual(await awaitProcessChange(() => view, '0a', 300, never), { view, changed: false });
    assert.ok(Date.now() - started >= 300 - TIMER_SLACK_MS, 'held for the wait');
    const gone = new AbortController();
    const held = awaitProcessChange(() => view, '0a', MAX_WAIT_S * 1_000, gone.signal);
    gone.abort();
    assert.deepEqual(await held, { view, changed: false });
  });
});
