// Tokens are single use across the fleet (docs/identity.md "Single use across the fleet"): two
// real `svc sail` processes on one bucket; a token accepted by one node is refused by the other
// afterwards, for writes always and for reads while the bucket answers.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import type { SailProcess } from './helpers/svc.ts';

let bucket: Bucket;
let admin: Signer;
let a: SailProcess;
let b: SailProcess;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  [a, b] = [await bucket.sail(['--node-id', 'node-a']), await bucket.sail(['--node-id', 'node-b'])];
});

after(async () => {
  await bucket?.close();
});

/** One call with a given Authorization value (the same token more than once). */
function send(node: SailProcess, method: string, path: string, authorization: string) {
  return call(node.url, method, path, { headers: { authorization } });
}

test('a token used for a read on node A is refused as a write on node B', async () => {
  const token = await admin.bearer();
  const read = await send(a, 'GET', '/v1/state', token);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  const write = await send(b, 'POST', '/v1/fleet/freeze', token);
  assertProblem(write, 401, 'auth-invalid', 'Token rejected');
  const frozen = await call(b.url, 'GET', '/v1/fleet/freeze', { signer: admin });
  assertProblem(frozen, 404, 'not-found', 'Deploys are not frozen');
});

test('a token used for a write on node A is refused on node B, as a write and as a read', async () => {
  const token = await admin.bearer();
  const frozen = await send(a, 'POST', '/v1/fleet/freeze', token);
  assert.equal(frozen.status, 200, JSON.stringify(frozen.body));
  assertProblem(await send(b, 'DELETE', '/v1/fleet/freeze', token), 401, 'auth-invalid', 'Token rejected');
  assertProblem(await send(b, 'GET', '/v1/state', token), 401, 'auth-invalid', 'Token rejected');
  assertProblem(await send(a, 'DELETE', '/v1/fleet/freeze', token), 401, 'auth-invalid', 'Token rejected');
  const lifted = await call(b.url, 'DELETE', '/v1/fleet/freeze', { signer: admin });
  assert.equal(lifted.status, 200, JSON.stringify(lifted.body));
});
