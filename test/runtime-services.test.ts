// Service bindings in real workerd (docs/bindings.md "Service bindings"): examples/services,
// published with the real `cell publish` and served by `cell serve`, reaches its own named
// `WorkerEntrypoint` over JS RPC and fetch with `ctx.props`, and its default export through a
// binding without `entrypoint`, as Cloudflare's service bindings do
// (developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/).

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  type CellProcess,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  publish,
  startCell,
} from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

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

  it('refuses at publish a binding to another application, naming it', async () => {
    const project = copyProject(join(EXAMPLES, 'services'));
    writeFileSync(
      join(project, 'cell.jsonc'),
      JSON.stringify({
        name: 'services',
        main: 'src/index.js',
        compatibility_date: '2025-06-01',
        services: [
          { binding: 'SELF', service: 'services' },
          { binding: 'BILLING', service: 'billing' },
        ],
      }),
    );
    const bucket = dirBucketEnv(tempDir('services-bucket-'));
    const published = await publish(project, 'svc-other', bucket);
    assert.equal(published.code, 1, published.stderr);
    assert.match(
      published.stderr,
      /BILLING \(service "billing"\): a service binding can reach only this worker itself \(service "services"\) on this runtime; bindings to other applications do not work yet/,
    );
  });
});
