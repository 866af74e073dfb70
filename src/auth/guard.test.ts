// The guard (docs/api.md "Routes" tier column, "Callers and tiers"): tiers, fail-closed routes,
// `:name` checked and scoped before any handler, authentication before the body is read,
// the ingress token and its version header.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import {
  type Signer,
  startTestNode,
  type TestNode,
  type TestResponse,
} from '../../test/helpers/in-process-node.ts';
import { keys } from '../registry/keys.ts';

let node: TestNode;
let admin: Signer;
let shopOperator: Signer;
let shopAdmin: Signer;
let peer: Signer;
const handled: string[] = [];

function routes(app: FastifyInstance): void {
  const echo = async (request: { caller: unknown; url: string }) => {
    handled.push(request.url);
    return { caller: request.caller ?? null };
  };
  app.get('/t/public', { config: { auth: 'public' } }, echo);
  app.get('/t/unguarded', echo);
  app.post('/t/node-or-operator', { config: { auth: 'node-or-operator' } }, echo);
  app.get('/t/operator', { config: { auth: 'operator' } }, echo);
  app.get('/t/admin', { config: { auth: 'admin' } }, echo);
  app.post('/t/apps/:name/admin', { config: { auth: 'admin' } }, echo);
  app.post('/t/apps/:name/setter', { config: { auth: 'node-or-operator' } }, echo);
  app.post('/t/apps/:name/deploys', { config: { auth: 'deploy' } }, echo);
  app.get('/t/ingress', { config: { auth: 'ingress' } }, echo);
}

before(async () => {
  node = await startTestNode([routes], (ctx) => {
    ctx.settings.ingress.token = ['ingress-new', 'ingress-old'];
    ctx.settings.api.jsonBytes = 128;
  });
  admin = await node.operator('op-admin', 'admin', ['*']);
  shopOperator = await node.operator('op-shop', 'operator', ['shop-*']);
  shopAdmin = await node.operator('op-shop-admin', 'admin', ['shop-*']);
  peer = await node.node('node-peer');
});
after(() => node.close());

function assertProblem(result: TestResponse, status: number, code: string, title: string) {
  assert.equal(result.status, status, JSON.stringify(result.body));
  assert.equal(result.contentType, 'application/problem+json');
  assert.equal(result.body.type, `urn:svc:${code}`);
  assert.equal(result.body.title, title);
}

describe('fail closed', () => {
  test('public routes need no token', async () => {
    assert.equal((await node.call('GET', '/t/public')).status, 200);
  });

  test('a route that declares no tier refuses every call, token or not', async () => {
    assertProblem(await node.call('GET', '/t/unguarded'), 500, 'internal', 'Route not guarded');
    assertProblem(
      await node.call('GET', '/t/unguarded', { signer: admin }),
      500,
      'internal',
      'Route not guarded',
    );
    assert.ok(!handled.includes('/t/unguarded'));
  });

  test('unknown routes answer not-found without a token', async () => {
    assertProblem(await node.call('GET', '/v1/nothing'), 404, 'not-found', 'No such route');
  });
});

describe('tokens', () => {
  test('missing, malformed and non-bearer authorization are auth-invalid', async () => {
    assertProblem(await node.call('POST', '/t/node-or-operator'), 401, 'auth-invalid', 'Token rejected');
    assertProblem(
      await node.call('POST', '/t/node-or-operator', { authorization: 'Bearer nonsense' }),
      401,
      'auth-invalid',
      'Token rejected',
    );
    const token = (await admin.bearer()).slice('Bearer '.length);
    assertProblem(
      await node.call('POST', '/t/node-or-operator', { authorization: `Basic ${token}` }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('a token is single use across requests', async () => {
    const authorization = await admin.bearer();
    assert.equal((await node.call('POST', '/t/node-or-operator', { authorization })).status, 200);
    assertProblem(
      await node.call('POST', '/t/node-or-operator', { authorization }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('the caller is authenticated before the body is read: no token and an oversized body is 401', async () => {
    const result = await node.call('POST', '/t/node-or-operator', { body: { pad: 'x'.repeat(10_000) } });
    assertProblem(result, 401, 'auth-invalid', 'Token rejected');
    const badJson = await node.call('POST', '/t/node-or-operator', { body: '{not json' });
    assertProblem(badJson, 401, 'auth-invalid', 'Token rejected');
  });

  test('the ingress token is refused on signed routes', async () => {
    assertProblem(
      await node.call('POST', '/t/node-or-operator', { authorization: 'Bearer ingress-new' }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });
});

describe('tiers', () => {
  test('node-or-operator answers both, naming the caller', async () => {
    const byNode = await node.call('POST', '/t/node-or-operator', { signer: peer });
    assert.deepEqual(byNode.body.caller, { kind: 'node', id: 'node-peer' });
    const byOperator = await node.call('POST', '/t/node-or-operator', { signer: shopOperator });
    assert.deepEqual(byOperator.body.caller, {
      kind: 'operator',
      id: 'op-shop',
      role: 'operator',
      applications: ['shop-*'],
    });
  });

  test('a node token on an operator route is auth-scope', async () => {
    assertProblem(
      await node.call('GET', '/t/operator', { signer: peer }),
      403,
      'auth-scope',
      'Operator key required',
    );
  });

  test('an operator-tier key on an admin route is auth-scope', async () => {
    assertProblem(
      await node.call('GET', '/t/admin', { signer: shopOperator }),
      403,
      'auth-scope',
      'Admin key required',
    );
    assertProblem(
      await node.call('GET', '/t/admin', { signer: peer }),
      403,
      'auth-scope',
      'Operator key required',
    );
    assert.equal((await node.call('GET', '/t/admin', { signer: admin })).status, 200);
  });

  test('operator routes re-read the record: a removed key is refused at once despite the key cache', async () => {
    const gone = await node.operator('op-gone', 'admin', ['*']);
    assert.equal((await node.call('GET', '/t/operator', { signer: gone })).status, 200);
    await node.store.delete(keys.operator('op-gone'));
    assertProblem(
      await node.call('GET', '/t/operator', { signer: gone }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('operator routes re-read the record: a changed grant applies to the next request', async () => {
    const changing = await node.operator('op-changing', 'admin', ['*']);
    assert.equal((await node.call('GET', '/t/admin', { signer: changing })).status, 200);
    await node.operator('op-changing', 'operator', ['*']).then(() => {});
    // Same id re-registered with another key: the cached key no longer matches the record.
    assertProblem(
      await node.call('GET', '/t/admin', { signer: changing }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });
});

describe(':name routes', () => {
  test('a name that is no application name is invalid-slug', async () => {
    assertProblem(
      await node.call('POST', '/t/apps/Not_A_Name/setter', { signer: admin }),
      400,
      'invalid-slug',
      'Invalid application name',
    );
  });

  test('an operator out of scope is auth-scope; the detail never discloses the scope', async () => {
    const result = await node.call('POST', '/t/apps/blog/setter', { signer: shopOperator });
    assertProblem(result, 403, 'auth-scope', 'Out of scope');
    assert.ok(!result.body.detail.includes('shop'));
    assert.ok(!handled.includes('/t/apps/blog/setter'));
    assert.equal((await node.call('POST', '/t/apps/shop-eu/setter', { signer: shopOperator })).status, 200);
  });

  test('a node token reaches every application on node-or-operator routes', async () => {
    assert.equal((await node.call('POST', '/t/apps/blog/setter', { signer: peer })).status, 200);
  });

  test('admin routes check scope first, then the tier', async () => {
    assertProblem(
      await node.call('POST', '/t/apps/blog/admin', { signer: shopOperator }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await node.call('POST', '/t/apps/shop-eu/admin', { signer: shopOperator }),
      403,
      'auth-scope',
      'Admin key required',
    );
    assertProblem(
      await node.call('POST', '/t/apps/blog/admin', { signer: shopAdmin }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assert.equal((await node.call('POST', '/t/apps/shop-eu/admin', { signer: shopAdmin })).status, 200);
  });

  test('deploy routes take node and operator tokens; workload tokens go to the OIDC seam', async () => {
    assert.equal((await node.call('POST', '/t/apps/shop-eu/deploys', { signer: peer })).status, 200);
    assert.equal((await node.call('POST', '/t/apps/shop-eu/deploys', { signer: shopOperator })).status, 200);
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const workload = `${b64({ alg: 'RS256', kid: 'k' })}.${b64({ iss: 'https://ci.example', sub: 'repo' })}.c2ln`;
    assertProblem(
      await node.call('POST', '/t/apps/shop-eu/deploys', { authorization: `Bearer ${workload}` }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });
});

describe('ingress token', () => {
  test('every admitted token is accepted; anything else is auth-invalid', async () => {
    assert.deepEqual((await node.call('GET', '/t/ingress', { authorization: 'Bearer ingress-new' })).body, {
      caller: { kind: 'ingress' },
    });
    assert.equal((await node.call('GET', '/t/ingress', { authorization: 'Bearer ingress-old' })).status, 200);
    for (const authorization of [undefined, 'Bearer ingress-ne', 'Bearer ingress-new2', 'ingress-new', '']) {
      assertProblem(
        await node.call('GET', '/t/ingress', { authorization }),
        401,
        'auth-invalid',
        'Token rejected',
      );
    }
  });

  test('node and operator tokens do not reach ingress routes', async () => {
    assertProblem(
      await node.call('GET', '/t/ingress', { signer: admin }),
      401,
      'auth-invalid',
      'Token rejected',
    );
    assertProblem(
      await node.call('GET', '/t/ingress', { signer: peer }),
      401,
      'auth-invalid',
      'Token rejected',
    );
  });

  test('X-Svc-Storage-Version: absent, empty or 1 pass; anything else is invalid-input', async () => {
    const call = (version?: string) =>
      node.call('GET', '/t/ingress', {
        authorization: 'Bearer ingress-new',
        headers: version === undefined ? {} : { 'x-svc-storage-version': version },
      });
    assert.equal((await call()).status, 200);
    assert.equal((await call('')).status, 200);
    assert.equal((await call('1')).status, 200);
    assertProblem(await call('2'), 400, 'invalid-input', 'Unsupported storage protocol version');
    assertProblem(await call('1.0'), 400, 'invalid-input', 'Unsupported storage protocol version');
  });

  test('a node with no admitted token answers nobody on ingress routes', async () => {
    const bare = await startTestNode([routes]);
    try {
      assertProblem(
        await bare.call('GET', '/t/ingress', { authorization: 'Bearer x' }),
        401,
        'auth-invalid',
        'Token rejected',
      );
    } finally {
      await bare.close();
    }
  });
});

describe('property: no Authorization header makes the guard answer anything but 401', () => {
  test('random header values on signed and ingress routes', async () => {
    // Printable ASCII only: anything else is refused by the HTTP client before it is sent.
    const printable = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    });
    const value = fc.oneof(
      printable,
      printable.map((text) => `Bearer ${text}`),
      fc.array(fc.base64String(), { maxLength: 4 }).map((parts) => `Bearer ${parts.join('.')}`),
    );
    await fc.assert(
      fc.asyncProperty(
        value,
        fc.constantFrom('/t/node-or-operator', '/t/ingress', '/t/apps/x/deploys'),
        async (authorization, path) => {
          const method = path === '/t/ingress' ? 'GET' : 'POST';
          const result = await node.call(method, path, { authorization: authorization.trim() });
          assert.equal(result.status, 401, `${authorization} -> ${JSON.stringify(result.body)}`);
          assert.equal(result.body.type, 'urn:svc:auth-invalid');
        },
      ),
      { numRuns: 300 },
    );
  });
});
