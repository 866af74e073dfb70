// A worker written as a Node.js HTTP server (`node:http` `createServer`, handed to workerd by
// `httpServerHandler` from `cloudflare:node`, with `nodejs_compat`), the shape of Cloudflare's
// nodejs-http-server template (docs/deploys.md "Cloudflare's binding-free templates"), deployed
// with `svc deploy` on a real node running the real runtime: routes, status codes, headers, a
// request body read from the stream, and the request's method and query reach the server.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { projectDir } from './helpers/artifacts.ts';
import { type DeployNode, SERVE_DEADLINE_MS, startDeployNode } from './helpers/deploy-node.ts';
import { waitFor } from './helpers/svc.ts';

const WRANGLER = JSON.stringify({
  name: 'node-http',
  main: 'src/server.ts',
  compatibility_date: '2025-10-08',
  compatibility_flags: ['nodejs_compat'],
});

// Our own server: one route per thing checked.
const SERVER = `
import { httpServerHandler } from 'cloudflare:node';
import { createServer, type IncomingMessage } from 'node:http';

async function bodyOf(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://local');
  if (url.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<h1>node server</h1>');
  } else if (url.pathname === '/echo') {
    const body = await bodyOf(req);
    res.setHeader('x-method', req.method ?? '');
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ body, q: url.searchParams.get('q'), agent: req.headers['x-test'] ?? null }));
  } else {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('no route');
  }
});
server.listen(8080);
export default httpServerHandler({ port: 8080 });
`;

describe('a node:http server as a worker (cloudflare:node httpServerHandler)', () => {
  let target: DeployNode;
  let port: number;

  before(async () => {
    target = await startDeployNode();
    const dir = projectDir({ 'wrangler.jsonc': WRANGLER, 'src/server.ts': SERVER });
    const { code, stderr } = await target.deploy(dir);
    assert.equal(code, 0, stderr);
    port = await target.portOf('node-http');
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => null))?.status === 200 || null,
      () => `node-http to serve\n${target.node.log().slice(-3000)}`,
      SERVE_DEADLINE_MS,
    );
  });
  after(async () => {
    await target?.stop();
  });

  test('a GET answers the server page with its content type', async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('content-type'), 'text/html');
    assert.equal(await answer.text(), '<h1>node server</h1>');
  });

  test('a POST body, the query and a request header reach the server; its status and headers come back', async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/echo?q=find`, {
      method: 'POST',
      headers: { 'x-test': 'yes' },
      body: 'a'.repeat(70_000),
    });
    assert.equal(answer.status, 201);
    assert.equal(answer.headers.get('x-method'), 'POST');
    assert.deepEqual(await answer.json(), { body: 'a'.repeat(70_000), q: 'find', agent: 'yes' });
  });

  test("an unknown path answers the server's own 404", async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/nope`);
    assert.equal(answer.status, 404);
    assert.equal(await answer.text(), 'no route');
  });
});
