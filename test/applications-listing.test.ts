// docs/api.md "Applications" (how fresh a listing is): `GET /v1/applications` answers from the
// node's registry cache. A change made through a node shows in that node's listing at once, a
// forwarded deletion included; one made through another node, or the bucket path, shows within
// one reconcile pass. Two real `svc sail` processes on one local-directory bucket, with the default
// registry schedule (full re-read every 5 min), so only the change marker can carry a change in time.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ApplicationRecord } from '../src/registry/records.ts';
import { type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import { type SailProcess, waitFor } from './helpers/svc.ts';

/** The bound docs/api.md states: one pass (5 s) plus the pass itself, with room for the test's polling. */
const OTHER_NODE_DEADLINE_MS = 10_000;

let bucket: Bucket;
let a: SailProcess;
let b: SailProcess;
let admin: Signer;

async function listing(node: SailProcess): Promise<Map<string, ApplicationRecord>> {
  const answer = await call(node.url, 'GET', '/v1/applications', { signer: admin });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return new Map(answer.body.applications.map((record: ApplicationRecord) => [record.name, record]));
}

async function ok(node: SailProcess, method: string, path: string, body?: unknown): Promise<void> {
  const answer = await call(node.url, method, path, { signer: admin, body });
  assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  for (const name of ['shop', 'blog', 'cart', 'docs']) await bucket.application(name);
  [a, b] = await Promise.all([bucket.sail(['--node-id', 'node-a']), bucket.sail(['--node-id', 'node-b'])]);
  // Both have filled their caches.
  for (const node of [a, b]) assert.ok((await listing(node)).has('docs'));
});
after(async () => {
  await bucket?.close();
});

test("a change made through a node shows in that node's next listing at once", async () => {
  await ok(a, 'POST', '/v1/applications/shop/block');
  assert.equal((await listing(a)).get('shop')?.blocked, true);
  await ok(a, 'POST', '/v1/applications/shop/labels', { labels: { team: 'web' } });
  assert.deepEqual((await listing(a)).get('shop')?.labels, { team: 'web' });
  await ok(a, 'POST', '/v1/applications/shop/replicas', { replicas: 2 });
  assert.equal((await listing(a)).get('shop')?.replicas, 2);
  await ok(a, 'POST', '/v1/applications/shop/selector', { selector: { zone: 'a' } });
  assert.deepEqual((await listing(a)).get('shop')?.selector, { zone: 'a' });
  await ok(a, 'POST', '/v1/applications/shop/unblock');
  assert.equal((await listing(a)).get('shop')?.blocked, false);
  await ok(a, 'POST', '/v1/applications/shop/retire');
  assert.ok((await listing(a)).get('shop')?.retired);
});

test('a deletion a node forwarded to the coordinator shows in its next listing at once', async () => {
  const coordinator = await waitFor(async () => {
    const state = await call(a.url, 'GET', '/v1/state', { signer: admin });
    return state.body?.coordinator?.node as string | undefined;
  }, 'a coordinator');
  // Through the node that does not coordinate: it forwards the deletion.
  const forwarder = coordinator === 'node-a' ? b : a;
  assert.ok((await listing(forwarder)).has('cart'));
  await ok(forwarder, 'DELETE', '/v1/applications/cart?force=1');
  assert.equal((await listing(forwarder)).has('cart'), false);
});

test('a change made through another node, or the bucket path, shows within one pass', async () => {
  assert.equal((await listing(a)).get('blog')?.blocked, false);
  await ok(b, 'POST', '/v1/applications/blog/block');
  await waitFor(
    async () => (await listing(a)).get('blog')?.blocked === true,
    "node-b's block in node-a's listing",
    OTHER_NODE_DEADLINE_MS,
  );
  // Created as a deploy's intake does, by a writer outside both nodes.
  await bucket.application('fresh');
  await waitFor(
    async () => (await listing(a)).has('fresh') && (await listing(b)).has('fresh'),
    'an application created through the bucket in both listings',
    OTHER_NODE_DEADLINE_MS,
  );
});
