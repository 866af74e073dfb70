// The routing routes in-process (docs/ingress.md "The routing document", "The Traefik format"), over a
// routing source the test controls; test/ingress-routes.test.ts runs them on a real `svc sail`.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { defaultSettings } from '../../config/settings.ts';
import { renderProxybBytes } from '../../routing/proxyb.ts';
import { renderRouting, serializeRouting } from '../../routing/render.ts';
import type { RoutingInput } from '../../routing/types.ts';
import { openDirStore } from '../../store/dir.ts';
import type { NodeContext } from '../context.ts';
import { buildServer } from '../server.ts';
import { ingressRoutes } from './ingress.ts';

const TOKEN = 'ingress-secret';
const settings = defaultSettings();
settings.ingress.token = [TOKEN];
settings.ingress.entryPoints = ['web', 'websecure'];

const fleet: RoutingInput = {
  nodes: [
    {
      id: 'n1',
      address: '10.0.0.1:7070',
      state: 'ready',
      live: true,
      processes: [{ application: 'shop', port: 8001, ready: true }],
    },
    {
      id: 'n2',
      address: '10.0.0.2:7070',
      state: 'ready',
      live: true,
      processes: [{ application: 'shop', port: 8002, ready: true }],
    },
  ],
  applications: [{ name: 'shop', blocked: false, retired: false }],
  claims: [{ host: 'shop.example', application: 'shop', wildcard: true }],
  platformDomains: ['svc.test'],
  apiPublic: true,
  selfNodeId: 'n2',
};

let current: RoutingInput | null = null;
let app: FastifyInstance;

before(async () => {
  const ctx = {
    settings,
    store: await openDirStore(mkdtempSync(join(tmpdir(), 'svc-routes-'))),
    nodeId: 'n2',
    version: '0.0.0',
    log: pino({ level: 'silent' }),
    routing: { current: () => current },
  } as NodeContext;
  app = await buildServer(ctx, [ingressRoutes]);
});
after(() => app.close());

async function get(url: string, token: string | null = TOKEN) {
  const response = await app.inject({
    method: 'GET',
    url,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
  const problem =
    response.headers['content-type'] === 'application/problem+json' ? response.json() : undefined;
  return {
    status: response.statusCode,
    type: response.headers['content-type'],
    body: response.body,
    problem,
  };
}

test('before the first pass both routes answer 503 draining naming the node', async () => {
  current = null;
  for (const url of ['/v1/ingress/routes', '/v1/ingress/routes/proxyb', '/v1/ingress/routes?prefer=self']) {
    const { status, problem } = await get(url);
    assert.equal(status, 503, url);
    assert.equal(problem.type, 'urn:svc:draining');
    assert.equal(problem.title, 'Routing is not known yet');
    assert.equal(problem.status, 503);
    assert.match(problem.detail, /node n2/);
  }
});

test("the generic document and proxyb are the renderers' bytes, per prefer", async () => {
  current = fleet;
  for (const prefer of [undefined, '', 'self', 'n1', 'n2', 'nobody']) {
    const query = prefer === undefined ? '' : `?prefer=${prefer}`;
    const generic = await get(`/v1/ingress/routes${query}`);
    assert.equal(generic.status, 200);
    assert.match(generic.type ?? '', /^application\/json/);
    const doc = renderRouting(fleet, prefer);
    assert.equal(generic.body, serializeRouting(doc), `prefer=${prefer}`);
    const proxyb = await get(`/v1/ingress/routes/proxyb${query}`);
    assert.equal(proxyb.status, 200);
    const preferNode = prefer === 'self' ? 'n2' : prefer || undefined;
    const want = renderProxybBytes(doc, { entryPoints: ['web', 'websecure'], preferNode });
    assert.equal(proxyb.body, want, `proxyb prefer=${prefer}`);
  }
  const self = JSON.parse((await get('/v1/ingress/routes?prefer=self')).body);
  assert.equal(self.routes[0].upstreams[0].node, 'n2', 'self is the answering node');
  const proxyb = JSON.parse((await get('/v1/ingress/routes/proxyb?prefer=self')).body);
  assert.deepEqual(proxyb.http.services['svc_shop.example'], {
    failover: { fallback: 'svc_shop.example_peers', service: 'svc_shop.example_local' },
  });
  assert.deepEqual(proxyb.http.routers['svc_shop.example'].entryPoints, ['web', 'websecure']);
});

test('an unchanged fleet gives identical bytes, even as a new pass object', async () => {
  current = fleet;
  const first = (await get('/v1/ingress/routes/proxyb?prefer=self')).body;
  current = structuredClone({ ...fleet, nodes: [...fleet.nodes].reverse() });
  assert.equal((await get('/v1/ingress/routes/proxyb?prefer=self')).body, first);
  current = { ...fleet, nodes: fleet.nodes.slice(0, 1) };
  assert.notEqual((await get('/v1/ingress/routes/proxyb?prefer=self')).body, first, 'a new pass is served');
});

test('an empty fleet is an empty document and {} in proxyb', async () => {
  current = { ...fleet, nodes: [], apiPublic: false };
  assert.equal((await get('/v1/ingress/routes')).body, '{"v":1,"routes":[]}');
  assert.equal((await get('/v1/ingress/routes/proxyb')).body, '{}');
});

test('an unknown format is 404 not-found naming the formats, whatever the routing state', async () => {
  for (const state of [null, fleet]) {
    current = state;
    for (const format of ['nginx', 'PROXYB', '__proto__', 'constructor', 'hasOwnProperty', '%20']) {
      const { status, problem } = await get(`/v1/ingress/routes/${format}`);
      assert.equal(status, 404, format);
      assert.equal(problem.type, 'urn:svc:not-found');
      assert.equal(problem.title, 'Unknown routing format');
      assert.equal(problem.detail, 'this node renders: proxyb');
    }
  }
});

test('prefer given twice is invalid-input', async () => {
  current = fleet;
  for (const url of [
    '/v1/ingress/routes?prefer=n1&prefer=n2',
    '/v1/ingress/routes/proxyb?prefer=a&prefer=',
  ]) {
    const { status, problem } = await get(url);
    assert.equal(status, 400, url);
    assert.equal(problem.type, 'urn:svc:invalid-input');
    assert.equal(problem.title, 'Malformed request');
  }
});

test('only an admitted ingress token reaches the routes', async () => {
  current = fleet;
  for (const token of [null, 'wrong', `${TOKEN}x`, '']) {
    const { status, problem } = await get('/v1/ingress/routes', token);
    assert.equal(status, 401, String(token));
    assert.equal(problem.type, 'urn:svc:auth-invalid');
  }
});

test('property: no prefer or format value answers 500', async () => {
  current = fleet;
  await fc.assert(
    fc.asyncProperty(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({ maxLength: 20 }),
      async (prefer, format) => {
        const q = `?prefer=${encodeURIComponent(prefer)}`;
        const generic = await get(`/v1/ingress/routes${q}`);
        assert.equal(generic.status, 200, `prefer ${JSON.stringify(prefer)}`);
        const doc = JSON.parse(generic.body);
        assert.equal(doc.v, 1);
        const native = await get(`/v1/ingress/routes/${encodeURIComponent(format)}${q}`);
        assert.ok([200, 404].includes(native.status), `format ${JSON.stringify(format)}: ${native.status}`);
        assert.equal(native.status === 200, format === 'proxyb');
      },
    ),
    { numRuns: 300 },
  );
});
