// Deletion on a two-node fleet (docs/api.md "Deleting an application"):
// sent to the node that does not coordinate, the deletion is forwarded once to the coordinator,
// which does the work, and its answer comes back verbatim. Two real `svc sail` processes share
// one local-directory bucket; every wait is a poll with a deadline.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { getApplication } from '../src/registry/applications.ts';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import type { SailProcess } from './helpers/svc.ts';
import { waitFor } from './helpers/svc.ts';

const PASS_WAIT_MS = 4 * PASS_INTERVAL_MS + 4_000;

let bucket: Bucket;
let admin: Signer;
let nodes: SailProcess[];
let coordinator: SailProcess;
let follower: SailProcess;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  const flags = (id: string) => ['--node-id', id, '--coordinator-lease-ttl-ms', '3000'];
  // Info logs, so the test can see which node did the deletion.
  const env = { SVC_LOG_LEVEL: 'info' };
  nodes = [await bucket.sail(flags('node-a'), env), await bucket.sail(flags('node-b'), env)];
  const holder = await waitFor(
    async () => {
      const states = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/v1/state', { signer: admin })));
      const selves = states.filter((s) => s.body?.coordinator?.self === true);
      const agreed = states.every((s) => s.body?.coordinator?.node === selves[0]?.body.coordinator.node);
      return selves.length === 1 && agreed ? (selves[0]!.body.coordinator.node as string) : null;
    },
    'one coordinator both nodes agree on',
    PASS_WAIT_MS,
  );
  coordinator = nodes.find((n) => n.nodeId === holder)!;
  follower = nodes.find((n) => n.nodeId !== holder)!;
});

after(async () => {
  await bucket?.close();
});

test('a deletion sent to the follower is forwarded to the coordinator, which deletes', async () => {
  await bucket.application('doomed');
  const answer = await call(follower.url, 'DELETE', '/v1/applications/doomed?force=1', { signer: admin });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.ok(Array.isArray(answer.body.deleted), JSON.stringify(answer.body));
  assert.ok(answer.body.deleted.length >= 1);
  await assert.rejects(getApplication(bucket.store, 'doomed'), { code: 'not-found' });
  assert.match(coordinator.log(), /"event":"application.deleted".*"application":"doomed"/);
  assert.doesNotMatch(follower.log(), /"event":"application.deleted"/);
});

test("the coordinator's refusal comes back verbatim through the follower", async () => {
  await bucket.application('kept');
  const answer = await call(follower.url, 'DELETE', '/v1/applications/kept', { signer: admin });
  assertProblem(answer, 400, 'invalid-input', 'Application is not retired');
  assert.deepEqual(answer.body, (await direct('kept')).body);
  assert.ok(await getApplication(bucket.store, 'kept'));
  const missing = await call(follower.url, 'DELETE', '/v1/applications/nothing-here', { signer: admin });
  assertProblem(missing, 404, 'not-found', 'No such application');
  assert.deepEqual(missing.body, (await direct('nothing-here')).body);
});

/** The same refusal asked of the coordinator directly, for its title. */
function direct(name: string) {
  return call(coordinator.url, 'DELETE', `/v1/applications/${name}`, { signer: admin });
}
