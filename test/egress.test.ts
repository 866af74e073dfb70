// Outbound requests (docs/runtime.md "Outbound requests"), with the real `cell` and real workerd:
// a worker's fetch to a loopback address is refused with an error that says so, the operator's
// egress-allow setting lets it through, and a name that resolves to loopback is refused too.
// workerd resolves names with the system resolver and cannot be pointed at a test's DNS server,
// so the name here is `localhost` (answered from /etc/hosts): no query leaves the machine.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EGRESS_ALLOW_VARIABLE } from '../src/runtime-contract/egress.ts';
import { type CellProcess, dirBucketEnv, fetchText, publish, startCell } from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const SERVE_DEADLINE_MS = 30_000;

/** A worker that fetches `?url=` and answers what came back, or the name and message of what it caught. */
function fetchingProject(): string {
  const dir = tempDir('cell-egress-');
  writeFileSync(
    join(dir, 'cell.json'),
    JSON.stringify({ name: 'egress', main: 'worker.js', compatibility_date: '2025-06-01' }),
  );
  writeFileSync(
    join(dir, 'worker.js'),
    `export default {
      async fetch(request) {
        const target = new URL(request.url).searchParams.get('url');
        if (!target) return new Response('no fetch');
        try {
          const answer = await fetch(target);
          return Response.json({ status: answer.status, body: await answer.text() });
        } catch (err) {
          return Response.json({ caught: err.name, message: err.message });
        }
      },
    };\n`,
  );
  return dir;
}

async function serving(cell: CellProcess): Promise<void> {
  await waitFor(
    async () => (await fetchText(`${cell.url}/`))?.body === 'no fetch',
    () => `cell to serve\n${cell.stderr()}`,
    SERVE_DEADLINE_MS,
  );
}

async function fetchThrough(cell: CellProcess, url: string): Promise<Record<string, unknown>> {
  const answer = await fetchText(`${cell.url}/?url=${encodeURIComponent(url)}`);
  assert.ok(answer, 'the worker answers');
  assert.equal(answer.status, 200, answer.body);
  return JSON.parse(answer.body);
}

describe('outbound requests from a worker', () => {
  const bucketDir = tempDir('cell-egress-bucket-');
  const bucket = dirBucketEnv(bucketDir);
  let server: Server;
  let port = 0;
  const cells: CellProcess[] = [];

  before(async () => {
    server = createServer((_request, response) => response.end('reached the private server'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    const published = await publish(fetchingProject(), 'egress', bucket);
    assert.equal(published.code, 0, published.stderr);
  });

  after(async () => {
    for (const cell of cells) await cell.stop();
    await new Promise((resolve) => server.close(resolve));
  });

  async function start(env: NodeJS.ProcessEnv = {}): Promise<CellProcess> {
    const cell = await startCell('egress', 'n1', bucket, env);
    cells.push(cell);
    await serving(cell);
    return cell;
  }

  it('refuses a loopback address by default, with an error that says why and what allows it', async () => {
    const cell = await start();
    const result = await fetchThrough(cell, `http://127.0.0.1:${port}/`);
    assert.equal(result.caught, 'TypeError');
    assert.match(
      String(result.message),
      new RegExp(`^fetch to http://127\\.0\\.0\\.1:${port} was refused: `),
    );
    assert.match(String(result.message), /127\.0\.0\.1 is a loopback address/);
    assert.match(String(result.message), /svc sail --egress-allow/);

    const named = await fetchThrough(cell, `http://localhost:${port}/`);
    assert.equal(named.caught, 'TypeError');
    assert.match(String(named.message), /localhost is a loopback address/);

    const metadata = await fetchThrough(cell, 'http://169.254.169.254/latest/meta-data/');
    assert.equal(metadata.caught, 'TypeError');
    assert.match(String(metadata.message), /169\.254\.169\.254 is a link-local address/);
  });

  it('reaches the address once the operator allows its range for the application', async () => {
    const cell = await start({ [EGRESS_ALLOW_VARIABLE]: 'other=10.0.0.0/8\negress=127.0.0.1/32' });
    const result = await fetchThrough(cell, `http://127.0.0.1:${port}/`);
    assert.deepEqual(result, { status: 200, body: 'reached the private server' });
    // The name resolves to an allowed address: workerd judges the address, not the name.
    const named = await fetchThrough(cell, `http://localhost:${port}/`);
    assert.deepEqual(named, { status: 200, body: 'reached the private server' });
    // Only the allowed range: another private address is still refused.
    const other = await fetchThrough(cell, 'http://10.0.0.1/');
    assert.equal(other.caught, 'TypeError');
    assert.match(String(other.message), /10\.0\.0\.1 is a private \(RFC 1918\) address/);
  });

  it("does not apply another application's allowance", async () => {
    const cell = await start({ [EGRESS_ALLOW_VARIABLE]: 'other=127.0.0.1/32' });
    const result = await fetchThrough(cell, `http://127.0.0.1:${port}/`);
    assert.equal(result.caught, 'TypeError');
    assert.match(String(result.message), /was refused: 127\.0\.0\.1 is a loopback address/);
  });
});
