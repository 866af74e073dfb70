// docs/api.md "Operator keys": every rule and refusal of GET/POST /v1/operators and
// DELETE /v1/operators/:id, through the real server and guard; plus the bucket ceremony.

import assert from 'node:assert/strict';
import { after, beforeEach, describe, test } from 'node:test';
import {
  type Signer,
  signerFor,
  startTestNode,
  type TestNode,
  type TestResponse,
} from '../../test/helpers/in-process-node.ts';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { operatorRoutes } from '../node/routes/operators.ts';
import { keys } from '../registry/keys.ts';
import { generateSigningKey } from './ed25519.ts';
import { registerThroughBucket, revokeOperator } from './operators.ts';

let node: TestNode;
let admin: Signer;
let shop: Signer;
let wide: Signer;

beforeEach(async () => {
  await node?.close();
  node = await startTestNode([operatorRoutes]);
  admin = await node.operator('op-admin', 'admin', ['*']);
  shop = await node.operator('op-shop', 'operator', ['shop-*']);
  wide = await node.operator('op-wide', 'operator', ['*']);
});
after(() => node.close());

function assertProblem(result: TestResponse, status: number, code: string, title: string) {
  assert.equal(result.status, status, JSON.stringify(result.body));
  assert.equal(result.body.type, `urn:svc:${code}`);
  assert.equal(result.body.title, title);
}

const freshKey = () => generateSigningKey().publicJwk;
const register = (signer: Signer, body: unknown) => node.call('POST', '/v1/operators', { signer, body });

describe('POST /v1/operators: body', () => {
  const cases: [string, unknown, number, string, string][] = [
    ['not an object', [1], 400, 'invalid-input', 'Malformed request'],
    ['missing id', { publicKey: freshKey(), applications: ['a'] }, 400, 'invalid-input', 'Malformed request'],
    [
      'empty id',
      { id: '', publicKey: freshKey(), applications: ['a'] },
      400,
      'invalid-input',
      'Malformed request',
    ],
    [
      'id not an operator id',
      { id: 'op/../x', publicKey: freshKey(), applications: ['a'] },
      400,
      'invalid-slug',
      'Invalid operator id',
    ],
    ['missing publicKey', { id: 'op-x', applications: ['a'] }, 400, 'invalid-input', 'Invalid public key'],
    [
      'RSA publicKey',
      { id: 'op-x', publicKey: { kty: 'RSA', n: 'x', e: 'AQAB' }, applications: ['a'] },
      400,
      'invalid-input',
      'Invalid public key',
    ],
    [
      'X25519 publicKey',
      { id: 'op-x', publicKey: { ...freshKey(), crv: 'X25519' }, applications: ['a'] },
      400,
      'invalid-input',
      'Invalid public key',
    ],
    [
      'empty x',
      { id: 'op-x', publicKey: { kty: 'OKP', crv: 'Ed25519', x: '' }, applications: ['a'] },
      400,
      'invalid-input',
      'Invalid public key',
    ],
    [
      'unknown role',
      { id: 'op-x', publicKey: freshKey(), role: 'root', applications: ['a'] },
      400,
      'invalid-input',
      'Malformed request',
    ],
    [
      'applications empty',
      { id: 'op-x', publicKey: freshKey(), applications: [] },
      400,
      'invalid-input',
      'Malformed request',
    ],
    [
      'applications not an array',
      { id: 'op-x', publicKey: freshKey(), applications: 'a' },
      400,
      'invalid-input',
      'Malformed request',
    ],
    [
      '* beside names',
      { id: 'op-x', publicKey: freshKey(), applications: ['*', 'shop-a'] },
      400,
      'invalid-input',
      'Invalid application scope',
    ],
    [
      '* in the middle',
      { id: 'op-x', publicKey: freshKey(), applications: ['sh*op'] },
      400,
      'invalid-input',
      'Invalid application scope',
    ],
    [
      'two stars',
      { id: 'op-x', publicKey: freshKey(), applications: ['shop-**'] },
      400,
      'invalid-input',
      'Invalid application scope',
    ],
    [
      'not a name',
      { id: 'op-x', publicKey: freshKey(), applications: ['Shop'] },
      400,
      'invalid-input',
      'Invalid application scope',
    ],
    [
      'fresh grant without scope',
      { id: 'op-x', publicKey: freshKey() },
      400,
      'invalid-input',
      'Scope required',
    ],
  ];
  for (const [name, body, status, code, title] of cases) {
    test(name, async () => {
      assertProblem(await register(admin, body), status, code, title);
      assert.equal(await node.store.get(keys.operator('op-x')), null, 'nothing written');
    });
  }
});

describe('POST /v1/operators: tiers and scopes', () => {
  test('an admin enrolls an operator-tier key scoped to shop-*; role defaults to least privilege', async () => {
    const result = await register(admin, { id: 'op-new', publicKey: freshKey(), applications: ['shop-*'] });
    assert.equal(result.status, 200);
    assert.equal(result.body.operator.role, 'operator');
    assert.deepEqual(result.body.operator.applications, ['shop-*']);
    assert.equal(result.body.operator.registeredBy, 'op-admin');
    const stored = JSON.parse(Buffer.from((await node.store.get(keys.operator('op-new')))!.body).toString());
    assert.equal(stored.publicKey.d, undefined, 'only public material is stored');
  });

  test('only public material is persisted even when a private half is sent', async () => {
    const pair = generateSigningKey();
    const result = await register(admin, { id: 'op-new', publicKey: pair.privateJwk, applications: ['a'] });
    assert.equal(result.status, 200);
    const text = Buffer.from((await node.store.get(keys.operator('op-new')))!.body).toString();
    assert.ok(!text.includes(pair.privateJwk.d));
  });

  test('supersedes naming anyone but the caller is auth-scope', async () => {
    assertProblem(
      await register(shop, { id: 'op-x', publicKey: freshKey(), supersedes: 'op-admin' }),
      403,
      'auth-scope',
      'Not your key to replace',
    );
  });

  test('an operator-tier key cannot register an admin key', async () => {
    assertProblem(
      await register(shop, { id: 'op-x', publicKey: freshKey(), role: 'admin', applications: ['shop-a'] }),
      403,
      'auth-scope',
      'Tier not grantable',
    );
    assertProblem(
      await register(shop, { id: 'op-x', publicKey: freshKey(), role: 'admin', supersedes: 'op-shop' }),
      403,
      'auth-scope',
      'Tier not grantable',
    );
  });

  test('a scope past the caller’s own is auth-scope, without disclosing the caller’s scope', async () => {
    for (const applications of [['blog'], ['shop*'], ['shop-a', 'blog-*']]) {
      const result = await register(shop, { id: 'op-x', publicKey: freshKey(), applications });
      assertProblem(result, 403, 'auth-scope', 'Scope past your own');
      assert.ok(!result.body.detail.includes('shop'));
    }
    const narrowAdmin = await node.operator('op-narrow-admin', 'admin', ['shop-*']);
    assertProblem(
      await register(narrowAdmin, { id: 'op-x', publicKey: freshKey(), applications: ['*'] }),
      403,
      'auth-scope',
      'Scope past your own',
    );
  });

  test('an operator-tier key hands out narrower keys beside itself, never a wildcard one', async () => {
    assert.equal(
      (await register(shop, { id: 'op-x', publicKey: freshKey(), applications: ['shop-eu'] })).status,
      200,
    );
    assertProblem(
      await register(wide, { id: 'op-y', publicKey: freshKey(), applications: ['*'] }),
      403,
      'auth-scope',
      'Wildcard not grantable',
    );
  });

  test('an operator-tier key may replace itself with a wildcard key', async () => {
    const result = await register(wide, {
      id: 'op-wide-2',
      publicKey: freshKey(),
      supersedes: 'op-wide',
      applications: ['*'],
    });
    assert.equal(result.status, 200);
    assert.equal(result.body.operator.role, 'operator');
  });

  test('a replacement inherits the caller’s tier and scope', async () => {
    const result = await register(shop, { id: 'op-shop-2', publicKey: freshKey(), supersedes: 'op-shop' });
    assert.equal(result.status, 200);
    assert.equal(result.body.operator.role, 'operator');
    assert.deepEqual(result.body.operator.applications, ['shop-*']);
    assert.equal(result.body.operator.supersedes, 'op-shop');
    const adminNext = await register(admin, {
      id: 'op-admin-2',
      publicKey: freshKey(),
      supersedes: 'op-admin',
    });
    assert.equal(adminNext.body.operator.role, 'admin');
    assert.deepEqual(adminNext.body.operator.applications, ['*']);
  });

  test('replacements are idempotent; an id held by another key or grant is reference-held', async () => {
    const body = { id: 'op-shop-2', publicKey: freshKey(), supersedes: 'op-shop' };
    const first = await register(shop, body);
    const second = await register(shop, body);
    assert.equal(second.status, 200);
    assert.deepEqual(second.body, first.body);
    assertProblem(
      await register(shop, { ...body, publicKey: freshKey() }),
      409,
      'reference-held',
      'Operator id taken',
    );
    assertProblem(
      await register(admin, { id: 'op-shop', publicKey: freshKey(), applications: ['a'] }),
      409,
      'reference-held',
      'Operator id taken',
    );
  });

  test('an id held by a node is reference-held (one keyspace)', async () => {
    await node.node('node-7');
    assertProblem(
      await register(admin, { id: 'node-7', publicKey: freshKey(), applications: ['a'] }),
      409,
      'reference-held',
      'Operator id taken',
    );
  });

  test('a key registered through one node is usable there at once', async () => {
    const next = signerFor('op-next');
    // The node saw the kid as unknown first: forget() on registration must clear that.
    assert.equal((await node.call('GET', '/v1/operators', { signer: next })).status, 401);
    await register(admin, { id: 'op-next', publicKey: next.pair.publicJwk, applications: ['a'] });
    assert.equal((await node.call('GET', '/v1/operators', { signer: next })).status, 200);
  });

  test('node tokens are auth-scope on every operators route', async () => {
    const peer = await node.node('node-peer');
    for (const [method, path] of [
      ['GET', '/v1/operators'],
      ['POST', '/v1/operators'],
      ['DELETE', '/v1/operators/op-shop'],
    ] as const) {
      assertProblem(
        await node.call(method, path, { signer: peer, body: method === 'POST' ? {} : undefined }),
        403,
        'auth-scope',
        'Operator key required',
      );
    }
  });
});

describe('GET /v1/operators', () => {
  test('an admin sees every key in id order, unscoped', async () => {
    const result = await node.call('GET', '/v1/operators', { signer: admin });
    assert.equal(result.status, 200);
    assert.deepEqual(
      result.body.operators.map((o: { id: string }) => o.id),
      ['op-admin', 'op-shop', 'op-wide'],
    );
    assert.equal(result.body.scoped, undefined);
  });

  test('a non-admin sees its one-step rotation lineage, scoped', async () => {
    const shop2 = signerFor('op-shop-2');
    await register(shop, { id: 'op-shop-2', publicKey: shop2.pair.publicJwk, supersedes: 'op-shop' });
    const shop3 = signerFor('op-shop-3');
    await register(shop2, { id: 'op-shop-3', publicKey: shop3.pair.publicJwk, supersedes: 'op-shop-2' });
    await register(shop2, { id: 'op-beside', publicKey: freshKey(), applications: ['shop-x'] });
    const result = await node.call('GET', '/v1/operators', { signer: shop2 });
    assert.deepEqual(
      result.body.operators.map((o: { id: string }) => o.id),
      ['op-shop', 'op-shop-2', 'op-shop-3'],
    );
    assert.equal(result.body.scoped, true);
  });
});

describe('DELETE /v1/operators/:id', () => {
  test('an admin revokes another key', async () => {
    const result = await node.call('DELETE', '/v1/operators/op-shop', { signer: admin });
    assert.equal(result.status, 200);
    assert.deepEqual(result.body, { removed: 'op-shop' });
    assert.equal(await node.store.get(keys.operator('op-shop')), null);
  });

  test('own key is invalid-input: rotate instead', async () => {
    assertProblem(
      await node.call('DELETE', '/v1/operators/op-admin', { signer: admin }),
      400,
      'invalid-input',
      'Cannot revoke your own key',
    );
  });

  test('an operator-tier key revokes only the key it was registered to replace', async () => {
    assertProblem(
      await node.call('DELETE', '/v1/operators/op-wide', { signer: shop }),
      403,
      'auth-scope',
      'Not your key to revoke',
    );
    const shop2 = signerFor('op-shop-2');
    await register(shop, { id: 'op-shop-2', publicKey: shop2.pair.publicJwk, supersedes: 'op-shop' });
    assert.deepEqual((await node.call('DELETE', '/v1/operators/op-shop', { signer: shop2 })).body, {
      removed: 'op-shop',
    });
  });

  test('a missing key is not-found; a bad id is invalid-slug', async () => {
    assertProblem(
      await node.call('DELETE', '/v1/operators/op-none', { signer: admin }),
      404,
      'not-found',
      'No such operator key',
    );
    assertProblem(
      await node.call('DELETE', '/v1/operators/a%20b', { signer: admin }),
      400,
      'invalid-slug',
      'Invalid operator id',
    );
  });

  test('the last admin key is reference-held', async () => {
    // The admin replaces itself with an operator-tier key, which then tries to drop the admin.
    const next = signerFor('op-next');
    await register(admin, {
      id: 'op-next',
      publicKey: next.pair.publicJwk,
      supersedes: 'op-admin',
      role: 'operator',
    });
    assertProblem(
      await node.call('DELETE', '/v1/operators/op-admin', { signer: next }),
      409,
      'reference-held',
      'Last admin key',
    );
  });

  test('the last trusted key is reference-held', async () => {
    const store = new MemoryStore();
    await registerThroughBucket(store, 'op-only', freshKey());
    const ghost = { kind: 'operator' as const, id: 'op-ghost', role: 'admin' as const, applications: ['*'] };
    const ghostRecord = {
      v: 1 as const,
      id: 'op-ghost',
      publicKey: freshKey(),
      role: 'admin' as const,
      applications: ['*'],
      registeredAt: '',
      registeredBy: '',
    };
    await assert.rejects(revokeOperator(store, ghost, ghostRecord, 'op-only'), {
      code: 'reference-held',
      title: 'Last operator key',
    });
  });
});

describe('bucket ceremony', () => {
  test('seeds an admin reaching every application; idempotent; another key under the id is refused', async () => {
    const store = new MemoryStore();
    const key = freshKey();
    const record = await registerThroughBucket(store, 'op-root', key);
    assert.equal(record.role, 'admin');
    assert.deepEqual(record.applications, ['*']);
    assert.equal(record.registeredBy, 'bucket');
    assert.deepEqual(await registerThroughBucket(store, 'op-root', key), record);
    await assert.rejects(registerThroughBucket(store, 'op-root', freshKey()), { code: 'reference-held' });
  });

  test('recovers: a registered key is promoted to admin in place', async () => {
    const store = new MemoryStore();
    const key = freshKey();
    await store.putJson(keys.operator('op-demoted'), {
      v: 1,
      id: 'op-demoted',
      publicKey: key,
      role: 'operator',
      applications: ['a'],
    });
    const record = await registerThroughBucket(store, 'op-demoted', key);
    assert.equal(record.role, 'admin');
    assert.deepEqual(record.applications, ['*']);
  });

  test('recovers: an unreadable record under the id is replaced, on its ETag', async () => {
    const store = new MemoryStore();
    await store.put(keys.operator('op-torn'), '{"v": 1, "id": "op-to');
    const record = await registerThroughBucket(store, 'op-torn', freshKey());
    assert.equal(record.role, 'admin');
    const stored = await store.get(keys.operator('op-torn'));
    assert.deepEqual(JSON.parse(Buffer.from(stored!.body).toString('utf8')), record);
  });
});
