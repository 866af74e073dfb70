// `svc tail` end to end (docs/observability.md "svc tail"): two real nodes (`svc sail` with the
// real runtime) serve one application; `svc tail --format json`, asked of one of them, shows the
// requests and console lines of both, in order per node; the filters; the route's refusals; a
// node killed and restarted during a tail; Ctrl-C ends the tail with status 0.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import type { TailMessage } from '../src/observability/tail.ts';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { getJson } from '../src/store/store.ts';
import {
  assertProblem,
  type Bucket,
  call,
  deployToEveryNode,
  keyArg,
  openBucket,
  type Signer,
} from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import {
  ownRuntimePorts,
  runSvc,
  type SailProcess,
  SVC_BIN,
  startSail,
  tempDir,
  waitFor,
} from './helpers/svc.ts';

const APP = 'tailed';
const SERVE_DEADLINE_MS = 90_000;

const WORKER = `export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/.well-known/cell/health') return new Response('ok');
    console.log('seen ' + request.method + ' ' + url.pathname + (url.searchParams.get('pad') ?? ''));
    if (url.pathname === '/boom') throw new TypeError('boom at ' + url.pathname);
    return new Response('ok ' + url.pathname);
  },
};
`;

/** A running `svc tail` and the records it printed so far. */
interface Tail {
  child: ChildProcess;
  records: TailMessage[];
  stderr(): string;
  exited: Promise<number | null>;
}

function startTail(node: SailProcess, signer: Signer, extra: string[] = []): Tail {
  const child = spawn(
    process.execPath,
    [
      SVC_BIN,
      'tail',
      '--name',
      APP,
      '--format',
      'json',
      '--node',
      node.url,
      '--key',
      keyArg(signer),
      ...extra,
    ],
    {
      env: { ...process.env, SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: '', SVC_REMOTE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const records: TailMessage[] = [];
  let pending = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) records.push(JSON.parse(line) as TailMessage);
  });
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, records, stderr: () => stderr, exited };
}

const requests = (tail: Tail, node: string) =>
  tail.records.filter((r) => r.kind === 'request' && r.node === node).map((r) => r.event!.request);
const logs = (tail: Tail, node: string) =>
  tail.records.filter((r) => r.kind === 'log' && r.node === node).map((r) => String(r.logs[0]!.message[0]));
const runtimeLines = (tail: Tail, node: string) =>
  tail.records.filter((r) => r.kind === 'runtime' && r.node === node).map((r) => r.message!);

async function attached(tail: Tail, nodes: string[]): Promise<void> {
  await waitFor(
    () => nodes.every((node) => runtimeLines(tail, node).some((line) => line.startsWith('tail: attached'))),
    () => `the tail to attach to ${nodes.join(', ')}\n${tail.stderr()}\n${JSON.stringify(tail.records)}`,
  );
}

async function stopTail(tail: Tail): Promise<void> {
  if (tail.child.exitCode === null && tail.child.signalCode === null) tail.child.kill('SIGINT');
  await tail.exited;
}

// Each node its own runtime ports, kept when b restarts: two daemons on one machine would both
// hand out the first port of the default range.
const A_PORTS = ownRuntimePorts();
const B_PORTS = ownRuntimePorts();

describe('svc tail on two nodes', () => {
  let bucket: Bucket;
  let admin: Signer;
  let viewer: Signer;
  let a: SailProcess;
  let b: SailProcess;
  const ports = new Map<string, number>();
  const tails: Tail[] = [];

  const portOn = (node: SailProcess) =>
    waitFor(
      async () => {
        const record = await getJson<NodeRecord>(bucket.store, keys.nodeRecord(node.nodeId));
        return record?.value.processes?.find((p) => p.application === APP && p.ready)?.port ?? null;
      },
      () => `${APP} to be ready on ${node.nodeId}\n${node.log().slice(-3000)}`,
      SERVE_DEADLINE_MS,
    ) as Promise<number>;
  const get = async (node: SailProcess, path: string, method = 'GET') => {
    const response = await fetch(`http://127.0.0.1:${ports.get(node.nodeId)}${path}`, { method });
    await response.arrayBuffer();
    return response.status;
  };

  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-admin', 'admin', ['*']);
    viewer = await bucket.operator('op-viewer', 'operator', [APP]);
    [a, b] = await Promise.all([
      bucket.sail(['--cell-bin', CELL_REAL, ...A_PORTS]),
      bucket.sail(['--cell-bin', CELL_REAL, ...B_PORTS]),
    ]);
    await deployToEveryNode(a!, admin, {
      'cell.json': JSON.stringify({ name: APP, main: 'w.js', compatibility_date: '2025-06-01' }),
      'w.js': WORKER,
    });
    for (const node of [a!, b!]) ports.set(node.nodeId, await portOn(node));
  });
  after(async () => {
    await Promise.all(tails.map(stopTail));
    await bucket?.close();
  });

  test('shows the requests and console lines of both nodes, in order per node', async () => {
    const tail = startTail(a, viewer);
    tails.push(tail);
    await attached(tail, [a.nodeId, b.nodeId]);
    for (let i = 1; i <= 5; i++) {
      assert.equal(await get(a, `/a-${i}`), 200);
      assert.equal(await get(b, `/b-${i}`), 200);
    }
    const sent = (prefix: string) => [1, 2, 3, 4, 5].map((i) => `/${prefix}-${i}`);
    for (const [node, prefix] of [
      [a, 'a'],
      [b, 'b'],
    ] as const) {
      await waitFor(
        () => requests(tail, node.nodeId).length >= 5 && logs(tail, node.nodeId).length >= 5,
        () => `five requests and lines from ${node.nodeId}\n${JSON.stringify(tail.records)}`,
      );
      const seen = requests(tail, node.nodeId);
      assert.deepEqual(
        seen.map((r) => new URL(r.url).pathname),
        sent(prefix),
      );
      assert.ok(seen.every((r) => r.method === 'GET'));
      assert.deepEqual(
        logs(tail, node.nodeId),
        sent(prefix).map((path) => `seen GET ${path}`),
      );
    }
    const one = tail.records.find((r) => r.kind === 'request' && r.node === b.nodeId)!;
    assert.equal(one.scriptName, APP);
    assert.equal(one.outcome, 'ok');
    assert.equal(one.event!.response.status, 200);
    assert.equal(typeof one.durationMs, 'number');
    assert.deepEqual([one.logs, one.exceptions, one.diagnosticsChannelEvents], [[], [], []]);
    const line = tail.records.find((r) => r.kind === 'log')!;
    assert.equal(line.logs[0]!.level, 'log');
    assert.equal(line.event, null);
  });

  test('filters: --status error keeps the failed request and its exception, --method and --search and --node-id narrow', async () => {
    const errors = startTail(a, viewer, ['--status', 'error']);
    const narrow = startTail(a, viewer, ['--method', 'POST', '--search', 'needle', '--node-id', b.nodeId]);
    tails.push(errors, narrow);
    await attached(errors, [a.nodeId, b.nodeId]);
    await attached(narrow, [b.nodeId]);
    assert.equal(await get(a, '/fine'), 200);
    assert.equal(await get(a, '/boom'), 500);
    assert.equal(await get(b, '/needle-get'), 200);
    assert.equal(await get(a, '/needle-post', 'POST'), 200);
    assert.equal(await get(b, '/haystack', 'POST'), 200);
    assert.equal(await get(b, '/needle-post', 'POST'), 200);
    await waitFor(
      () => errors.records.some((r) => r.kind === 'exception') && requests(errors, a.nodeId).length > 0,
      () => `the failed request and its exception\n${JSON.stringify(errors.records)}`,
    );
    await waitFor(
      () => requests(narrow, b.nodeId).length > 0,
      () => `b's POST\n${JSON.stringify(narrow.records)}`,
    );
    // A later request on each node, which both tails would show if nothing held it back, bounds the wait.
    assert.equal(await get(a, '/boom'), 500);
    await waitFor(() => requests(errors, a.nodeId).length === 2, 'the second failure');

    assert.deepEqual(
      errors.records
        .filter((r) => r.kind === 'request')
        .map((r) => [r.node, new URL(r.event!.request.url).pathname, r.outcome, r.event!.response.status]),
      [
        [a.nodeId, '/boom', 'exception', 500],
        [a.nodeId, '/boom', 'exception', 500],
      ],
    );
    const thrown = errors.records.find((r) => r.kind === 'exception')!;
    assert.deepEqual(
      { node: thrown.node, name: thrown.exceptions[0]!.name, message: thrown.exceptions[0]!.message },
      { node: a.nodeId, name: 'TypeError', message: 'boom at /boom' },
    );
    assert.match(
      thrown.exceptions[0]!.stack ?? '',
      /^TypeError: boom at \/boom\n {4}at .*w\.js:\d+:\d+/,
      'with its stack',
    );
    assert.equal(
      errors.records.filter((r) => r.kind === 'log').length,
      0,
      'console lines belong to no outcome',
    );

    assert.deepEqual(
      narrow.records
        .filter((r) => r.kind !== 'runtime')
        .map((r) => [
          r.kind,
          r.node,
          r.event?.request.method,
          r.event && new URL(r.event.request.url).pathname,
        ]),
      [['request', b.nodeId, 'POST', '/needle-post']],
    );
    assert.ok(
      narrow.records.every((r) => r.node === b.nodeId),
      'only node b',
    );
  });

  test('refusals: bad filters, an unknown application, an application out of the key scope', async () => {
    const base = `/v1/applications/${APP}/tail`;
    assertProblem(
      await call(a.url, 'GET', `${base}?status=bogus`, { signer: viewer }),
      400,
      'invalid-input',
      'Invalid --status',
      /"bogus"/,
    );
    assertProblem(
      await call(a.url, 'GET', `${base}?method=GE%20T`, { signer: viewer }),
      400,
      'invalid-input',
      'Invalid --method',
    );
    assertProblem(
      await call(a.url, 'GET', `${base}?search=${'x'.repeat(1025)}`, { signer: viewer }),
      400,
      'invalid-input',
      'Invalid --search',
    );
    for (const rate of ['0', '1.5', 'half', ''])
      assertProblem(
        await call(a.url, 'GET', `${base}?sampling_rate=${rate}`, { signer: viewer }),
        400,
        'invalid-input',
        'Invalid --sampling-rate',
      );
    assertProblem(
      await call(a.url, 'GET', `${base}?node=Not%20A%20Node`, { signer: viewer }),
      400,
      'invalid-input',
      'Invalid --node-id',
    );
    assertProblem(
      await call(a.url, 'GET', '/v1/applications/nothing-here/tail', { signer: admin }),
      404,
      'not-found',
      'No such application',
    );
    assertProblem(
      await call(a.url, 'GET', '/v1/applications/other-app/tail', { signer: viewer }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(await call(a.url, 'GET', base), 401, 'auth-invalid', 'Token rejected');

    const refused = await runSvc(
      ['tail', '--name', APP, '--status', 'bogus', '--node', a.url, '--key', keyArg(viewer)],
      {
        env: { SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      },
    );
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /^svc: Invalid --status: "bogus" is none of ok, error, canceled \[urn:svc:invalid-input\]\n$/,
    );
  });

  test("the runtime's own lines: a deploy while tailing says on each node which deployment now serves", async () => {
    const tail = startTail(a, viewer);
    tails.push(tail);
    await attached(tail, [a.nodeId, b.nodeId]);
    const project = projectDir({
      'cell.json': JSON.stringify({
        name: APP,
        main: 'w.js',
        compatibility_date: '2025-06-01',
        vars: { RELEASE: 'second' },
      }),
      'w.js': WORKER,
    });
    const deployed = await runSvc(['deploy', project, '--node', a.url, '--key', keyArg(admin)], {
      env: { SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      timeoutMs: 180_000,
    });
    assert.equal(deployed.code, 0, deployed.stderr);
    const deployment = /^deployed \S+ ([0-9a-f]+) \(deploy /m.exec(deployed.stdout)?.[1];
    assert.ok(deployment, deployed.stdout);
    for (const node of [a, b])
      await waitFor(
        () =>
          runtimeLines(tail, node.nodeId).some(
            (line) => line.startsWith('cell: serving ') && line.includes(deployment),
          ),
        () => `${node.nodeId} to say it serves ${deployment}\n${JSON.stringify(tail.records)}`,
        SERVE_DEADLINE_MS,
      );
    assert.equal(await get(b, '/after-the-deploy'), 200);
    await waitFor(
      () => requests(tail, b.nodeId).some((r) => r.url.endsWith('/after-the-deploy')),
      'the request after the deploy',
    );
    const served = tail.records.find(
      (r) => r.kind === 'request' && r.event!.request.url.endsWith('/after-the-deploy'),
    );
    assert.equal(served?.deployment, deployment, 'the request record names the deployment that answered');
  });

  test('a reader that does not keep up loses records, counted and told, and the application serves on', async () => {
    const tail = startTail(a, viewer, ['--node-id', a.nodeId]);
    tails.push(tail);
    await attached(tail, [a.nodeId]);
    // The reader stops reading: its pipe fills, then svc tail stops reading the node, then the node's buffer fills.
    tail.child.stdout!.pause();
    const pad = 'p'.repeat(4096);
    const statuses: number[] = [];
    const senders = Array.from({ length: 8 }, async (_, lane) => {
      for (let i = lane; i < 2000; i += 8) statuses.push(await get(a, `/slow-${i}?pad=${pad}`));
    });
    await Promise.all(senders);
    assert.equal(statuses.length, 2000);
    assert.ok(
      statuses.every((status) => status === 200),
      'every request was answered while the tail was not read',
    );
    tail.child.stdout!.resume();
    // Until the backlog is read the node may still drop: ask until a request after the stall is shown.
    await waitFor(
      async () => {
        assert.equal(await get(a, '/after-the-stall'), 200);
        return requests(tail, a.nodeId).some((r) => r.url.endsWith('/after-the-stall'));
      },
      () => `a request after the stall\n${tail.stderr()}`,
    );
    const dropped = tail.records.filter((r) => r.kind === 'dropped');
    assert.ok(dropped.length > 0, 'the tail was told records were dropped');
    assert.ok(dropped.every((r) => r.node === a.nodeId && r.dropped! > 0 && /dropped/.test(r.message!)));
    const shown = tail.records.filter(
      (r) => r.kind === 'request' && r.event?.request.url.includes('/slow-'),
    ).length;
    assert.ok(shown < 2000, `${shown} of 2000 requests shown`);
  });

  test('a node killed and restarted during the tail: the tail says so and carries on; Ctrl-C ends it with 0', async () => {
    const tail = startTail(a, viewer);
    tails.push(tail);
    await attached(tail, [a.nodeId, b.nodeId]);
    const listen = new URL(b.url).port;
    await b.stop('SIGKILL');
    await waitFor(
      () => runtimeLines(tail, b.nodeId).some((line) => line.startsWith(`tail: lost node ${b.nodeId}`)),
      () => `the tail to say it lost ${b.nodeId}\n${JSON.stringify(tail.records)}`,
    );
    // The runtime process outlives its daemon and keeps serving; what it serves meanwhile is not seen.
    const restarted = await startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_REAL, ...B_PORTS], {
      stateDir: b.stateDir,
      port: Number(listen),
    });
    b = restarted;
    try {
      await waitFor(
        () => runtimeLines(tail, b.nodeId).some((line) => line === `tail: node ${b.nodeId} answers again`),
        () => `the tail to say ${b.nodeId} answers again\n${JSON.stringify(tail.records)}`,
        SERVE_DEADLINE_MS,
      );
      ports.set(b.nodeId, await portOn(b));
      assert.equal(await get(b, '/after-restart'), 200);
      await waitFor(
        () => requests(tail, b.nodeId).some((r) => r.url.endsWith('/after-restart')),
        () => `the request after the restart\n${JSON.stringify(tail.records)}`,
      );
    } finally {
      await restarted.stop();
    }
    tail.child.kill('SIGINT');
    assert.equal(await tail.exited, 0, tail.stderr());
  });

  test('the runtime process killed, and the node svc tail talks to stopped and started again: both said, the tail carries on', async () => {
    const tail = startTail(a, viewer, ['--node-id', a.nodeId]);
    tails.push(tail);
    await attached(tail, [a.nodeId]);
    const record = await getJson<NodeRecord>(bucket.store, keys.nodeRecord(a.nodeId));
    const pid = record?.value.processes?.find((p) => p.application === APP)?.pid;
    assert.ok(pid !== undefined, 'the node record names the runtime process');
    process.kill(pid, 'SIGKILL');
    await waitFor(
      () =>
        runtimeLines(tail, a.nodeId).filter((line) => line.startsWith('tail: attached')).length === 2 &&
        runtimeLines(tail, a.nodeId).includes(
          `tail: the runtime process on node ${a.nodeId} went away; waiting for the next one`,
        ),
      () => `the tail to follow the next runtime process\n${JSON.stringify(tail.records)}`,
      SERVE_DEADLINE_MS,
    );
    ports.set(a.nodeId, await portOn(a));
    assert.equal(await get(a, '/after-the-process'), 200);
    await waitFor(
      () => requests(tail, a.nodeId).some((r) => r.url.endsWith('/after-the-process')),
      () => `the request to the next process\n${JSON.stringify(tail.records)}`,
    );

    const listen = new URL(a.url).port;
    await a.stop(); // SIGTERM: the node drains and stops, as a service manager restarts it
    await waitFor(
      () => /svc tail: lost the node \(/.test(tail.stderr()),
      () => `svc tail to say it lost its node\n${tail.stderr()}`,
    );
    const restarted = await startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_REAL, ...B_PORTS], {
      stateDir: a.stateDir,
      port: Number(listen),
    });
    a = restarted;
    try {
      await waitFor(
        () => tail.stderr().includes(`svc tail: connected again to ${restarted.url}`),
        () => `svc tail to connect again\n${tail.stderr()}`,
        SERVE_DEADLINE_MS,
      );
      ports.set(a.nodeId, await portOn(a));
      await waitFor(
        async () => {
          assert.equal(await get(a, '/after-the-node'), 200);
          return requests(tail, a.nodeId).some((r) => r.url.endsWith('/after-the-node'));
        },
        () => `a request after the node restarted\n${JSON.stringify(tail.records)}`,
      );
    } finally {
      tail.child.kill('SIGINT');
      assert.equal(await tail.exited, 0, tail.stderr());
      await restarted.stop();
    }
  });
});
