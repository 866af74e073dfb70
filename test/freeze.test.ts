// docs/api.md "Fleet freeze" and docs/applications.md "The fleet freeze" against a real `svc sail`:
// created and lifted, the first record standing, the reason rules, and every refusal. A second
// node on the same bucket sees the freeze at once (it is one bucket object).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertDeploysOpen } from '../src/registry/freeze.ts';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import type { SailProcess } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let other: SailProcess;
let admin: Signer;
let operator: Signer;
let peer: Signer;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  operator = await bucket.operator('op-shop', 'operator', ['shop']);
  peer = await bucket.node('node-peer');
  [node, other] = await Promise.all([bucket.sail(), bucket.sail()]);
});
after(async () => {
  await bucket?.close();
});

test('freeze, freeze again, read from another node, unfreeze, unfreeze again', async () => {
  assertProblem(
    await call(node.url, 'GET', '/v1/fleet/freeze', { signer: operator }),
    404,
    'not-found',
    'Deploys are not frozen',
  );

  const first = await call(node.url, 'POST', '/v1/fleet/freeze', {
    signer: admin,
    body: { reason: '  incident 7  ' },
  });
  assert.equal(first.status, 200);
  assert.equal(first.body.created, true);
  assert.equal(first.body.freeze.v, 1);
  assert.equal(first.body.freeze.by, 'op-admin');
  assert.equal(first.body.freeze.reason, 'incident 7');
  assert.ok(!Number.isNaN(Date.parse(first.body.freeze.frozenAt)));

  const second = await call(other.url, 'POST', '/v1/fleet/freeze', {
    signer: admin,
    body: { reason: 'another' },
  });
  assert.equal(second.status, 200);
  assert.deepEqual(second.body, { freeze: first.body.freeze, created: false });

  const read = await call(other.url, 'GET', '/v1/fleet/freeze', { signer: operator });
  assert.equal(read.status, 200);
  assert.deepEqual(read.body, { freeze: first.body.freeze });
  // The deploy intake's check refuses while frozen.
  await assert.rejects(assertDeploysOpen(bucket.store), /Deploys are frozen/);

  assert.deepEqual((await call(other.url, 'DELETE', '/v1/fleet/freeze', { signer: admin })).body, {
    lifted: true,
  });
  assert.deepEqual((await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: admin })).body, {
    lifted: false,
  });
  await assertDeploysOpen(bucket.store);
});

test('no body, an empty body, or an empty reason freezes without a reason', async () => {
  for (const options of [
    {},
    { rawBody: '' },
    { body: {} },
    { body: { reason: '   ' } },
    { body: { reason: null } },
  ]) {
    const answer = await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, ...options });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.created, true);
    assert.ok(!('reason' in answer.body.freeze));
    await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: admin });
  }
});

test('reason rules: at most 200 characters, one line, no control character, a string', async () => {
  const ok = await call(node.url, 'POST', '/v1/fleet/freeze', {
    signer: admin,
    body: { reason: 'é'.repeat(200) },
  });
  assert.equal(ok.status, 200);
  await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: admin });
  for (const reason of [
    'x'.repeat(201),
    'one\ntwo',
    'cr\rhere',
    'tab\there',
    'nul\u0000',
    'esc\u001b[31m',
    'nel\u0085',
    42,
    true,
    ['a'],
    { a: 1 },
  ]) {
    assertProblem(
      await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, body: { reason } }),
      400,
      'invalid-input',
      'Invalid freeze reason',
    );
  }
  for (const body of [[], 'incident', 7, null, { reason: 'x', until: 'later' }]) {
    assertProblem(
      await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, body }),
      400,
      'invalid-input',
      'Invalid freeze request',
    );
  }
  assertProblem(
    await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, rawBody: '{"reason":' }),
    400,
    'invalid-input',
    'Malformed JSON body',
  );
  assertProblem(
    await call(node.url, 'POST', '/v1/fleet/freeze', {
      signer: admin,
      rawBody: JSON.stringify({ reason: 'x'.repeat(70_000) }),
    }),
    413,
    'resource-limit',
    'Request body too large',
  );
  assertProblem(
    await call(node.url, 'GET', '/v1/fleet/freeze', { signer: admin }),
    404,
    'not-found',
    'Deploys are not frozen',
  );
});

test('refusals: non-admin writes, node tokens, no token', async () => {
  assertProblem(
    await call(node.url, 'POST', '/v1/fleet/freeze', { signer: operator }),
    403,
    'auth-scope',
    'Admin key required',
  );
  assertProblem(
    await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: operator }),
    403,
    'auth-scope',
    'Admin key required',
  );
  assertProblem(
    await call(node.url, 'POST', '/v1/fleet/freeze', { signer: peer }),
    403,
    'auth-scope',
    'Operator key required',
  );
  assertProblem(
    await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: peer }),
    403,
    'auth-scope',
    'Operator key required',
  );
  assertProblem(
    await call(node.url, 'GET', '/v1/fleet/freeze', { signer: peer }),
    403,
    'auth-scope',
    'Operator key required',
  );
  assertProblem(await call(node.url, 'POST', '/v1/fleet/freeze'), 401, 'auth-invalid', 'Token rejected');
});
