// The services socket (docs/bindings.md "Service bindings"): a request with workerd's injected
// headers is forwarded to the target's upstream without them and the answer streamed back; a
// refused or unreachable target, or a request without the headers, is answered 503 with a sentence.
// A call marked as JS RPC goes to the RPC path with the target's key; a fetch never carries a key,
// even one the worker wrote itself.

import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tempDir } from '../../../test/helpers/svc.ts';
import { listenServiceSocket, type ServiceSocket, type ServiceTarget } from './service.ts';
import {
  SERVICE_CALL_HEADER,
  SERVICE_CALLER_HEADER,
  SERVICE_RPC_KEY_HEADER,
  SERVICE_TARGET_HEADER,
} from './service-headers.ts';

/** One request over the Unix socket; answers status, headers and body. */
function ask(
  socketPath: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: 'POST', path: '/p?q=1', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('the services socket', () => {
  let upstream: Server;
  let upstreamAddress: string;
  let closedPort: number;
  let socket: ServiceSocket;
  let keyless: ServiceSocket;
  const targets: Record<string, ServiceTarget> = {};
  before(async () => {
    upstream = createServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      res.writeHead(201, { 'x-from': 'b' });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamAddress = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    socket = await listenServiceSocket(
      join(tempDir('services-socket-'), 'services.sock'),
      (application) =>
        targets[application] ?? { refused: `no application "${application}" exists in this fleet` },
      () => {},
      undefined,
      async (application) => `key-of-${application}`,
    );
    keyless = await listenServiceSocket(
      join(tempDir('services-socket-'), 'services.sock'),
      (application) => targets[application] ?? { refused: 'none' },
      () => {},
    );
  });
  after(async () => {
    await socket.close();
    await keyless.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  const from = (target: string) => ({
    [SERVICE_CALLER_HEADER]: 'a',
    [SERVICE_TARGET_HEADER]: target,
    host: 'b.internal',
  });

  it('forwards to the first upstream that takes the connection, without the injected headers', async () => {
    targets.b = { upstreams: [`127.0.0.1:${closedPort}`, upstreamAddress] };
    const answer = await ask(socket.path, from('b'), 'ping');
    assert.equal(answer.status, 201);
    assert.equal(answer.headers['x-from'], 'b');
    const seen = JSON.parse(answer.body);
    assert.deepEqual(
      [seen.method, seen.url, seen.body, seen.headers.host],
      ['POST', '/p?q=1', 'ping', 'b.internal'],
    );
    assert.equal(seen.headers[SERVICE_CALLER_HEADER], undefined);
    assert.equal(seen.headers[SERVICE_TARGET_HEADER], undefined);
  });

  it('answers 503 with a sentence for a refused target, an unreachable one, and a request without the headers', async () => {
    assert.deepEqual(await ask(socket.path, from('ghost')).then((a) => [a.status, a.body]), [
      503,
      'svc: service binding to "ghost": no application "ghost" exists in this fleet',
    ]);
    targets.down = { upstreams: [`127.0.0.1:${closedPort}`] };
    assert.deepEqual(await ask(socket.path, from('down')).then((a) => [a.status, a.body]), [
      503,
      'svc: service binding to "down": no node serving it answered',
    ]);
    assert.deepEqual(await ask(socket.path, {}).then((a) => [a.status, a.body]), [
      503,
      'svc: this socket answers only service bindings of workerd configs cell wrote',
    ]);
  });

  it("sends a JS RPC call to the RPC path with the target's key, and strips a key a fetch carries", async () => {
    targets.b = { upstreams: [upstreamAddress] };
    const rpc = JSON.parse(
      (
        await ask(socket.path, {
          ...from('b'),
          [SERVICE_CALL_HEADER]: 'rpc',
          [SERVICE_RPC_KEY_HEADER]: 'forged',
        })
      ).body,
    );
    assert.deepEqual(
      [rpc.url, rpc.headers[SERVICE_RPC_KEY_HEADER], rpc.headers[SERVICE_CALL_HEADER]],
      ['/.well-known/cell/service-rpc', 'key-of-b', undefined],
    );
    const fetched = JSON.parse(
      (
        await ask(socket.path, {
          ...from('b'),
          [SERVICE_CALL_HEADER]: 'fetch',
          [SERVICE_RPC_KEY_HEADER]: 'forged',
        })
      ).body,
    );
    assert.deepEqual([fetched.url, fetched.headers[SERVICE_RPC_KEY_HEADER]], ['/p?q=1', undefined]);
    assert.deepEqual(
      await ask(keyless.path, { ...from('b'), [SERVICE_CALL_HEADER]: 'rpc' }).then((a) => [a.status, a.body]),
      [503, 'svc: service binding to "b": this runtime makes no JS RPC calls'],
    );
  });
});
