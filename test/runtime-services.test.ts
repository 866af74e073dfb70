// Service bindings in real workerd (docs/bindings.md "Service bindings"), as Cloudflare's
// (developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/): examples/services,
// published with the real `cell publish` and served by `cell serve`, reaches its own named
// `WorkerEntrypoint` over JS RPC and fetch with `ctx.props`, and its default export through a
// binding without `entrypoint`. Through a real `svc sail`, one application's `env.B.fetch()`
// reaches another application (headers a worker forges cannot redirect it), an unknown target
// answers 503 saying so, and JS RPC reaches another application's default export and named
// entrypoint with ctx.props, on the same node and on another node, carrying each value kind of
// the codec, rethrowing what the target threw and refusing what it cannot carry; the RPC path is
// closed to anyone without the target's key.

import assert from 'node:assert/strict';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { DirStore } from '../src/store/dir.ts';
import { type Bucket, call, keyArg, openBucket, readyAppUrl } from './helpers/applications.ts';
import { type CellProcess, dirBucketEnv, EXAMPLES, fetchText, publish, startCell } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { runSvc, tempDir, waitFor } from './helpers/svc.ts';

const FOLLOW_DEADLINE_MS = 60_000;

describe("service bindings to the application's own entrypoints, through cell publish and cell serve", () => {
  const running: CellProcess[] = [];
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
  });

  it('calls a named WorkerEntrypoint over JS RPC and fetch, with ctx.props, and the default export', async () => {
    const bucket = dirBucketEnv(tempDir('services-bucket-'));
    // Published under another application name: the script name "services" still names itself.
    const published = await publish(join(EXAMPLES, 'services'), 'svc-self', bucket);
    assert.equal(published.code, 0, published.stderr);
    const cell = await startCell('svc-self', 'node-services', bucket);
    running.push(cell);
    await waitFor(
      async () => {
        const answer = await fetchText(`${cell.url}/.well-known/cell/health`);
        return (
          answer?.status === 200 && JSON.parse(answer.body).deployment === published.published!.deployment
        );
      },
      () => `cell to serve svc-self\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );

    const rpc = await fetchText(`${cell.url}/rpc`);
    assert.equal(rpc?.status, 200, `${rpc?.body}\n${cell.stderr()}`);
    assert.deepEqual(JSON.parse(rpc!.body), { sum: 5, props: { role: 'reader' } });

    const admin = await fetchText(`${cell.url}/admin`);
    assert.deepEqual(admin, { status: 200, body: 'Admin answered POST /report' });

    const self = await fetchText(`${cell.url}/self`);
    assert.deepEqual(self, { status: 200, body: 'via SELF: default export answered ?from=self' });
  });

  it('answers a call to another application 503 when cell serve runs without a node daemon', async () => {
    const bucketDir = tempDir('services-bucket-');
    const bucket = dirBucketEnv(bucketDir);
    const published = await publish(
      project({ name: 'svc-alone', services: CALLER_SERVICES }, CALLER_SOURCE),
      'svc-alone',
      bucket,
    );
    assert.equal(published.code, 0, published.stderr);
    // An entrypoint or props on a binding to another application is a feature older runtimes refuse.
    const store = new DirStore(bucketDir);
    const manifest = JSON.parse(
      Buffer.from(
        (await store.get(keys.runtimeManifest('svc-alone', 'svc-alone', published.published!.deployment)))!
          .body,
      ).toString(),
    );
    assert.deepEqual(manifest.required_features, ['modules', 'services', 'service-entrypoints']);
    assert.match(
      published.stderr,
      /cell: warning: service binding GHOST names "ghost", which is no application of this fleet/,
    );
    const cell = await startCell('svc-alone', 'node-services', bucket);
    running.push(cell);
    const ghost = await waitFor(
      async () => {
        const answer = await fetchText(`${cell.url}/ghost`);
        return answer?.status === 200 ? answer : undefined;
      },
      () => `cell to serve svc-alone\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );
    assert.equal(
      ghost?.body,
      '503: svc: service binding to "ghost": this runtime runs without a node daemon, which alone knows where other applications are served (svc sail)',
    );
    // A JS RPC call fails in the caller with the same sentence.
    assert.deepEqual(await fetchText(`${cell.url}/rpc-ghost`), {
      status: 200,
      body: 'Error | Error: svc: service binding to "ghost": this runtime runs without a node daemon, which alone knows where other applications are served (svc sail) | Error: svc: service binding to "ghost": this runtime runs without a node daemon, which alone knows where other applications are served (svc sail)',
    });
  });
});

/** A project folder holding `cell.jsonc` and `src/index.js`. */
function project(config: Record<string, unknown>, source: string): string {
  const dir = tempDir('services-project-');
  mkdirSync(join(dir, 'src'));
  writeFileSync(
    join(dir, 'cell.jsonc'),
    JSON.stringify({ main: 'src/index.js', compatibility_date: '2025-06-01', ...config }),
  );
  writeFileSync(join(dir, 'src', 'index.js'), source);
  return dir;
}

// B answers what it was asked and whether the binding's private headers reached it; over JS RPC
// its default export and its named entrypoint Admin echo, throw, show ctx.props, or answer a
// value the codec cannot carry.
const TARGET_SOURCE = `import { WorkerEntrypoint } from 'cloudflare:workers';
export class Admin extends WorkerEntrypoint {
  whoami() { return { props: this.ctx.props, entrypoint: 'Admin' }; }
  fail(message) { throw new RangeError(message); }
  stream() { return new ReadableStream(); }
}
export default class extends WorkerEntrypoint {
  async fetch(request) {
    const url = new URL(request.url);
    return new Response(
      'B answered ' + request.method + ' ' + url.pathname + url.search + ' with ' + (await request.text()) +
        ' caller header: ' + request.headers.has('cell-service-caller'),
      { status: 201, headers: { 'x-from': 'b' } },
    );
  }
  ping() { return 'pong'; }
  echo(...args) { return args; }
}
`;

// A calls B, an application that does not exist, and B over JS RPC; /rpc-types sends one value of
// each kind the codec carries and compares what comes back, kind by kind.
const CALLER_SOURCE = `const samples = () => ({
  undefined: undefined, null: null, true: true, number: 1.5, nan: NaN, negativeZero: -0,
  infinity: -Infinity, bigint: 12345678901234567890n, string: 'é\\u0000"', date: new Date(86400000),
  regexp: /a+b/gi, map: new Map([[1, 'one'], ['k', { deep: [1] }]]), set: new Set([1, 'x']),
  array: [1, [2, { three: 3 }]], object: { a: { b: null } }, arrayBuffer: new Uint8Array([1, 2, 255]).buffer,
  uint8: new Uint8Array([9, 8]), float64: new Float64Array([0.5, -0]), bigInt64: new BigInt64Array([-1n]),
  dataView: new DataView(new Uint8Array([7]).buffer), error: new TypeError('typed', { cause: 'why' }),
});

function same(a, b) {
  if (typeof a !== typeof b || Object.prototype.toString.call(a) !== Object.prototype.toString.call(b)) return false;
  if (typeof a !== 'object' || a === null) return Object.is(a, b);
  if (a instanceof Date) return Object.is(a.getTime(), b.getTime());
  if (a instanceof RegExp) return a.source === b.source && a.flags === b.flags;
  if (a instanceof Error) return a.constructor === b.constructor && a.message === b.message && same(a.cause, b.cause);
  if (a instanceof ArrayBuffer) return same([...new Uint8Array(a)], [...new Uint8Array(b)]);
  if (a instanceof DataView) return same(a.buffer, b.buffer);
  if (ArrayBuffer.isView(a)) return same([...a], [...b]);
  if (a instanceof Map || a instanceof Set) return same([...a], [...b]);
  if (Array.isArray(a)) return a.length === b.length && a.every((item, i) => same(item, b[i]));
  const keys = Object.keys(a);
  return same(keys, Object.keys(b)) && keys.every((k) => same(a[k], b[k]));
}

async function failure(call) {
  try {
    return 'answered ' + JSON.stringify(await call());
  } catch (err) {
    return err.constructor.name + ' | ' + err.name + ': ' + err.message + ' | ' + String(err.stack).split('\\n')[0];
  }
}

export default {
  async fetch(request, env) {
    try {
      return await route(request, env);
    } catch (err) {
      return new Response(String(err.stack), { status: 500 });
    }
  },
};

async function route(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/b') {
      const answer = await env.B.fetch('https://b.internal/hello?x=1', {
        method: 'POST',
        body: 'ping',
        // Forged: workerd's config replaces them, so the call still reaches B, as a fetch.
        headers: { 'cell-service-target': 'ghost', 'cell-service-caller': 'someone-else', 'cell-service-call': 'rpc' },
      });
      return new Response(answer.status + ' ' + answer.headers.get('x-from') + ': ' + (await answer.text()));
    }
    if (url.pathname === '/ghost') {
      const answer = await env.GHOST.fetch('https://ghost.internal/');
      return new Response(answer.status + ': ' + (await answer.text()));
    }
    if (url.pathname === '/rpc') return new Response('rpc answered ' + (await env.B.ping()));
    if (url.pathname === '/rpc-types') {
      const sent = samples();
      const [back] = await env.B.echo(sent);
      const differ = Object.keys(sent).filter((k) => !same(sent[k], back[k]));
      return Response.json({ kinds: Object.keys(back).length, differ });
    }
    if (url.pathname === '/rpc-props') return Response.json(await env.ADMIN.whoami());
    if (url.pathname === '/rpc-error') return new Response(await failure(() => env.ADMIN.fail('the ledger is closed')));
    if (url.pathname === '/rpc-refused') return new Response(await failure(() => env.B.echo(1, { f: () => 2 })));
    if (url.pathname === '/rpc-unsent') return new Response(await failure(() => env.ADMIN.stream()));
    if (url.pathname === '/rpc-no-entrypoint') return new Response(await failure(() => env.BILLING.total()));
    if (url.pathname === '/rpc-ghost') return new Response(await failure(() => env.GHOST.ping()));
    return new Response('not found', { status: 404 });
}
`;

const CALLER_SERVICES = [
  { binding: 'B', service: 'svc-b' },
  { binding: 'ADMIN', service: 'svc-b', entrypoint: 'Admin', props: { role: 'reader', level: 2 } },
  { binding: 'BILLING', service: 'svc-b', entrypoint: 'Billing' },
  { binding: 'GHOST', service: 'ghost' },
];

/** What A's routes answer when B is reachable over the fleet, wherever it runs. */
async function assertCallsReachB(a: string, b: string, log: () => string): Promise<void> {
  assert.deepEqual(await fetchText(`${a}/b`), {
    status: 200,
    body: '201 b: B answered POST /hello?x=1 with ping caller header: false',
  });
  assert.deepEqual(await fetchText(`${a}/ghost`), {
    status: 200,
    body: '503: svc: service binding to "ghost": no application "ghost" exists in this fleet',
  });
  assert.deepEqual(await fetchText(`${a}/rpc`), { status: 200, body: 'rpc answered pong' });
  const types = await fetchText(`${a}/rpc-types`);
  assert.equal(types?.status, 200, `${types?.body}\n${log()}`);
  assert.deepEqual(JSON.parse(types!.body), { kinds: 21, differ: [] });
  assert.deepEqual(JSON.parse((await fetchText(`${a}/rpc-props`))!.body), {
    props: { role: 'reader', level: 2 },
    entrypoint: 'Admin',
  });
  assert.deepEqual(await fetchText(`${a}/rpc-error`), {
    status: 200,
    body: 'RangeError | RangeError: the ledger is closed | RangeError: the ledger is closed',
  });
  assert.deepEqual(await fetchText(`${a}/rpc-refused`), {
    status: 200,
    body: 'TypeError | TypeError: service binding B to "svc-b": echo(): cannot send a function (at argument 2.f): JS RPC to another application carries structured-clonable values only, no functions, streams or RPC stubs | TypeError: service binding B to "svc-b": echo(): cannot send a function (at argument 2.f): JS RPC to another application carries structured-clonable values only, no functions, streams or RPC stubs',
  });
  assert.match(
    (await fetchText(`${a}/rpc-unsent`))!.body,
    /^TypeError \| TypeError: cannot send a ReadableStream \(at the result of stream\(\)\)/,
  );
  assert.deepEqual(await fetchText(`${a}/rpc-no-entrypoint`), {
    status: 200,
    body: 'TypeError | TypeError: this application exports no entrypoint "Billing" | TypeError: this application exports no entrypoint "Billing"',
  });
  assert.deepEqual(await fetchText(`${a}/rpc-ghost`), {
    status: 200,
    body: 'Error | Error: svc: service binding to "ghost": no application "ghost" exists in this fleet | Error: svc: service binding to "ghost": no application "ghost" exists in this fleet',
  });
  // The public, or anyone on the node network, posting a call on the RPC path with a key it
  // guessed reaches B's own fetch handler, not its entrypoints.
  const forged = await fetch(`${b}/.well-known/cell/service-rpc`, {
    method: 'POST',
    headers: { 'cell-service-rpc-key': 'a'.repeat(64), 'content-type': 'application/json' },
    body: JSON.stringify({ entrypoint: 'Admin', props: { role: 'admin' }, method: 'whoami', args: [] }),
  });
  assert.equal(forged.status, 201);
  assert.equal(forged.headers.get('cell-service-rpc-answer'), null);
  assert.match(await forged.text(), /^B answered POST \/\.well-known\/cell\/service-rpc with /);
}

describe('service bindings to other applications, through the node daemon', () => {
  let bucket: Bucket;
  before(async () => {
    bucket = await openBucket();
  });
  after(async () => {
    await bucket.close();
  });

  it("forwards A's fetch and JS RPC to B through <state dir>/services.sock, and an unknown target fails as documented", async () => {
    const admin = await bucket.operator('op-services', 'admin', ['*']);
    const node = await bucket.sail(['--cell-bin', CELL_REAL]);
    const socket = join(node.stateDir, 'services.sock');
    assert.equal(statSync(socket).mode & 0o777, 0o600);
    const deploy = async (dir: string) => {
      const run = await runSvc(['deploy', dir, '--node', node.url, '--key', keyArg(admin)], {
        timeoutMs: 120_000,
      });
      assert.equal(run.code, 0, run.stderr);
      return run;
    };
    await deploy(project({ name: 'svc-b' }, TARGET_SOURCE));
    const b = await readyAppUrl(node, admin, 'svc-b', FOLLOW_DEADLINE_MS);
    const run = await deploy(project({ name: 'svc-a', services: CALLER_SERVICES }, CALLER_SOURCE));
    assert.match(
      run.stderr + run.stdout,
      /warning: service binding GHOST names "ghost", which is no application of this fleet: its calls are answered 503 until "ghost" is deployed/,
    );
    await assertCallsReachB(await readyAppUrl(node, admin, 'svc-a', FOLLOW_DEADLINE_MS), b, node.log);
  });
});

describe('service bindings to an application on another node', () => {
  let bucket: Bucket;
  before(async () => {
    bucket = await openBucket();
  });
  after(async () => {
    await bucket.close();
  });

  it("carries A's fetch and JS RPC to B, which only the other node serves", async () => {
    const admin = await bucket.operator('op-services-nodes', 'admin', ['*']);
    const nodeA = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=a']);
    const nodeB = await bucket.sail(['--cell-bin', CELL_REAL, '--node-labels', 'zone=b']);
    const deploy = async (dir: string, zone: string) => {
      const run = await runSvc(
        ['deploy', dir, '--node-selector', `zone=${zone}`, '--node', nodeA.url, '--key', keyArg(admin)],
        { timeoutMs: 120_000 },
      );
      assert.equal(run.code, 0, run.stderr);
    };
    await deploy(project({ name: 'svc-b' }, TARGET_SOURCE), 'b');
    const b = await readyAppUrl(nodeB, admin, 'svc-b', FOLLOW_DEADLINE_MS);
    await deploy(project({ name: 'svc-a', services: CALLER_SERVICES }, CALLER_SOURCE), 'a');
    const a = await readyAppUrl(nodeA, admin, 'svc-a', FOLLOW_DEADLINE_MS);
    const state = (await call(nodeA.url, 'GET', '/v1/state', { signer: admin })).body as {
      processes: { application: string }[];
    };
    assert.deepEqual(
      state.processes.map((p) => p.application),
      ['svc-a'],
      'node A runs no copy of B: every call crosses nodes',
    );
    await assertCallsReachB(a, b, () => nodeA.log() + nodeB.log());
  });
});
