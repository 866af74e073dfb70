// Service bindings in real workerd (docs/bindings.md "Service bindings"), as Cloudflare's
// (developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/): examples/services,
// published with the real `cell publish` and served by `cell serve`, reaches its own named
// `WorkerEntrypoint` over JS RPC and fetch with `ctx.props`, and its default export through a
// binding without `entrypoint`. Through a real `svc sail`, one application's `env.B.fetch()`
// reaches another application (headers a worker forges cannot redirect it), an unknown target
// answers 503 saying so, and JS RPC to another application fails in the caller.

import assert from 'node:assert/strict';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Bucket, call, keyArg, openBucket } from './helpers/applications.ts';
import {
  type CellProcess,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  startCell,
} from './helpers/cell.ts';
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
      `cell to serve svc-self\n${cell.stderr()}`,
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
    const bucket = dirBucketEnv(tempDir('services-bucket-'));
    const published = await publish(
      project(
        {
          name: 'svc-alone',
          services: [
            { binding: 'GHOST', service: 'ghost' },
            { binding: 'B', service: 'svc-b' },
          ],
        },
        CALLER_SOURCE,
      ),
      'svc-alone',
      bucket,
    );
    assert.equal(published.code, 0, published.stderr);
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
      `cell to serve svc-alone\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );
    assert.equal(
      ghost?.body,
      '503: svc: service binding to "ghost": this runtime runs without a node daemon, which alone knows where other applications are served (svc sail)',
    );
  });

  it('refuses at publish an entrypoint or props on a binding to another application, naming it', async () => {
    const project = copyProject(join(EXAMPLES, 'services'));
    const config = (extra: Record<string, unknown>) =>
      JSON.stringify({
        name: 'services',
        main: 'src/index.js',
        compatibility_date: '2025-06-01',
        services: [
          { binding: 'SELF', service: 'services' },
          { binding: 'BILLING', service: 'billing', ...extra },
        ],
      });
    const bucket = dirBucketEnv(tempDir('services-bucket-'));
    for (const extra of [{ entrypoint: 'Invoices' }, { props: { role: 'reader' } }]) {
      writeFileSync(join(project, 'cell.jsonc'), config(extra));
      const published = await publish(project, 'svc-other', bucket);
      assert.equal(published.code, 1, published.stderr);
      assert.match(
        published.stderr,
        /BILLING \(service "billing"\): a service binding to another application reaches its default fetch handler only; "entrypoint" and "props" work only for this worker's own entrypoints \(service "services"\)/,
      );
    }
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

// B answers what it was asked and whether the binding's private headers reached it.
const TARGET_SOURCE = `export default {
  async fetch(request) {
    const url = new URL(request.url);
    return new Response(
      'B answered ' + request.method + ' ' + url.pathname + url.search + ' with ' + (await request.text()) +
        ' caller header: ' + request.headers.has('cell-service-caller'),
      { status: 201, headers: { 'x-from': 'b' } },
    );
  },
  ping() { return 'pong'; },
};
`;

// A calls B, an application that does not exist, and B over JS RPC.
const CALLER_SOURCE = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/b') {
      const answer = await env.B.fetch('https://b.internal/hello?x=1', {
        method: 'POST',
        body: 'ping',
        // Forged: workerd's config replaces them, so the call still reaches B.
        headers: { 'cell-service-target': 'ghost', 'cell-service-caller': 'someone-else' },
      });
      return new Response(answer.status + ' ' + answer.headers.get('x-from') + ': ' + (await answer.text()));
    }
    if (url.pathname === '/ghost') {
      const answer = await env.GHOST.fetch('https://ghost.internal/');
      return new Response(answer.status + ': ' + (await answer.text()));
    }
    if (url.pathname === '/rpc') {
      try {
        return new Response('rpc answered ' + (await env.B.ping()));
      } catch (err) {
        return new Response('rpc failed: ' + err, { status: 500 });
      }
    }
    return new Response('not found', { status: 404 });
  },
};
`;

describe('service bindings to other applications, through the node daemon', () => {
  let bucket: Bucket;
  before(async () => {
    bucket = await openBucket();
  });
  after(async () => {
    await bucket.close();
  });

  it("forwards A's env.B.fetch() to B through <state dir>/services.sock, and an unknown target fails with 503", async () => {
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
    const portOf = (application: string) =>
      waitFor(
        async () => {
          const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
            processes: { application: string; port: number; ready: boolean }[];
          };
          const p = state.processes.find((process) => process.application === application);
          return p?.ready ? p.port : undefined;
        },
        `${application} ready\n${node.log()}`,
        FOLLOW_DEADLINE_MS,
      );
    await deploy(project({ name: 'svc-b' }, TARGET_SOURCE));
    await portOf('svc-b');
    const run = await deploy(
      project(
        {
          name: 'svc-a',
          services: [
            { binding: 'B', service: 'svc-b' },
            { binding: 'GHOST', service: 'ghost' },
          ],
        },
        CALLER_SOURCE,
      ),
    );
    assert.match(
      run.stderr + run.stdout,
      /warning: service binding GHOST names "ghost", which is no application of this fleet: its calls are answered 503 until "ghost" is deployed/,
    );
    const a = `http://127.0.0.1:${await portOf('svc-a')}`;

    const b = await fetchText(`${a}/b`);
    assert.deepEqual(b, {
      status: 200,
      body: '201 b: B answered POST /hello?x=1 with ping caller header: false',
    });
    const ghost = await fetchText(`${a}/ghost`);
    assert.deepEqual(ghost, {
      status: 200,
      body: '503: svc: service binding to "ghost": no application "ghost" exists in this fleet',
    });
    // workerd's JS RPC does not cross processes: the call fails in the caller, as workerd words it.
    const rpc = await fetchText(`${a}/rpc`);
    assert.deepEqual(rpc, { status: 500, body: 'rpc failed: Error: Network connection lost.' });
  });
});
