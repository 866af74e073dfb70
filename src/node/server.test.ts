import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { defaultSettings } from '../config/settings.ts';
import type { Store } from '../store/store.ts';
import type { NodeContext } from './context.ts';
import { buildServer } from './server.ts';

// The server frame is tested in-process with one echo route standing in for the control
// routes; the real routes are tested against real processes under test/.
let app: FastifyInstance;
const settings = defaultSettings();
settings.api.jsonBytes = 64;
const ctx = {
  settings,
  store: {} as Store,
  nodeId: 'node-test',
  version: '0.0.0',
  log: pino({ level: 'silent' }),
} as NodeContext;

before(async () => {
  app = await buildServer(ctx, [
    (server) => {
      server.post('/echo', { config: { auth: 'public' } } as object, async (request) => ({
        got: request.body ?? null,
      }));
      server.get('/boom', { config: { auth: 'public' } } as object, async () => {
        throw new Error('secret internals');
      });
    },
  ]);
  await app.listen({ host: '127.0.0.1', port: 0 });
});
after(() => app.close());

const url = () => {
  const address = app.server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
};

async function problemOf(response: Response) {
  assert.equal(response.headers.get('content-type'), 'application/problem+json');
  return response.json() as Promise<{ type: string; title: string; status: number; detail?: string }>;
}

test('a JSON body within api.jsonBytes is parsed', async () => {
  const response = await fetch(`${url()}/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"a":1}',
  });
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { got: { a: 1 } });
});

test('a content-length above api.jsonBytes is 413 resource-limit', async () => {
  const response = await fetch(`${url()}/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ a: 'x'.repeat(100) }),
  });
  assert.equal(response.status, 413);
  const body = await problemOf(response);
  assert.equal(body.type, 'urn:svc:resource-limit');
  assert.equal(body.status, 413);
});

test('a chunked stream growing past api.jsonBytes is 413 resource-limit', async () => {
  const chunks = ['{"a":"', 'x'.repeat(50), 'y'.repeat(50), '"}'];
  const response = await fetch(`${url()}/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: Readable.toWeb(Readable.from(chunks)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  assert.equal(response.status, 413);
  assert.equal((await problemOf(response)).type, 'urn:svc:resource-limit');
});

test('malformed JSON is invalid-input', async () => {
  const response = await fetch(`${url()}/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"a":',
  });
  assert.equal(response.status, 400);
  const body = await problemOf(response);
  assert.equal(body.type, 'urn:svc:invalid-input');
  assert.equal(body.title, 'Malformed JSON body');
});

test('an unexpected failure is a 500 problem without internals', async () => {
  const response = await fetch(`${url()}/boom`);
  assert.equal(response.status, 500);
  const text = await response.text();
  assert.doesNotMatch(text, /secret internals|at .*\.ts/);
  assert.equal(JSON.parse(text).type, 'urn:svc:internal');
});

test('property: no body or content type makes the parser answer 500', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.string({ maxLength: 120 }),
      fc.constantFrom(
        'application/json',
        'application/problem+json',
        'text/plain',
        'application/json; charset=utf-8',
        '',
      ),
      async (body, contentType) => {
        const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {};
        const response = await fetch(`${url()}/echo`, { method: 'POST', headers, body });
        assert.ok(
          response.status < 500,
          `status ${response.status} for ${JSON.stringify(body)} as ${contentType}`,
        );
        if (response.status >= 400) assert.match((await problemOf(response)).type, /^urn:svc:/);
        else await response.arrayBuffer();
      },
    ),
    { numRuns: 150 },
  );
});

// Keeps the import of node:net meaningful for readers: the frame must bind like sail does.
test('the frame binds on loopback', () => {
  assert.ok(typeof createServer === 'function' && url().startsWith('http://127.0.0.1:'));
});

test('an Authorization header over the header limit is a 401 auth-invalid problem document', async () => {
  const response = await fetch(`${url()}/echo`, {
    method: 'POST',
    headers: { authorization: `Bearer ${'a'.repeat(20_000)}` },
  });
  assert.equal(response.status, 401);
  const problem = await problemOf(response);
  assert.equal(problem.type, 'urn:svc:auth-invalid');
  assert.equal(problem.title, 'Token rejected');
  assert.equal(problem.status, 401);
});

test('a request Node cannot parse is a 400 invalid-input problem document', async () => {
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const raw = await new Promise<string>((resolve, reject) => {
    let text = '';
    const socket = connect(port, '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
    socket.on('data', (chunk) => {
      text += chunk;
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
  assert.match(raw, /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.match(raw, /content-type: application\/problem\+json/i);
  const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
  assert.equal(body.type, 'urn:svc:invalid-input');
  assert.equal(body.title, 'Malformed request');
});
