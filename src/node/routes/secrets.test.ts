// The secret routes on a node API server over the in-memory store (the guard, the error handler and
// the body bound are the real ones): set, list and remove through them; the operator record re-read
// on every request; the refusals that need a fleet no real node can be made to show (no serving
// node with a sealing key; a body over the bound for sealed secrets). Every other refusal is
// exercised against a real `svc sail` in test/secrets-node-route.test.ts.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  type Signer,
  startTestNode,
  type TestNode,
  trustOperator,
} from '../../../test/helpers/in-process-node.ts';
import { ensureApplicationForDeploy } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { ensureSealKey } from '../../secrets/node-key.ts';
import { generateSealKey, type SealKeyPair } from '../../secrets/seal.ts';
import { MAX_SEALED_BODY_BYTES } from '../../secrets/sealed-request.ts';
import { openSecrets, readSecrets, type SealedSecrets, sealSecrets } from '../../secrets/secrets.ts';
import { secretRoutes } from './secrets.ts';

let node: TestNode;
let shop: Signer;
let own: SealKeyPair;
const peer = generateSealKey();
const stateDir = mkdtempSync(join(tmpdir(), 'svc-secret-routes-'));

function record(id: string, sealKey: string): NodeRecord {
  return {
    v: 1,
    id,
    advertise: '',
    listen: '',
    labels: {},
    versions: { svc: '0' },
    state: 'ready',
    beatMs: Date.now() + 3_600_000,
    startedAt: '',
    processes: [],
    sealKey,
  };
}

const asBody = (sealed: SealedSecrets) => ({
  secrets: Object.fromEntries(Object.entries(sealed).map(([name, copies]) => [name, { sealed: copies }])),
});

before(async () => {
  node = await startTestNode([secretRoutes], (ctx) => {
    ctx.settings.node.stateDir = stateDir;
  });
  shop = await node.operator('op-shop', 'operator', ['shop-*']);
  own = await ensureSealKey(stateDir);
  await ensureApplicationForDeploy(node.store, 'shop-web', {}, 'test');
});
after(() => node?.close());

test('409 capability-missing while no serving node publishes a sealing key', async () => {
  const listed = await node.call('GET', '/v1/applications/shop-web/secrets', { signer: shop });
  assert.equal(listed.status, 200);
  assert.deepEqual(listed.body, { application: 'shop-web', secrets: [], recipients: [] });
  const answer = await node.call('POST', '/v1/applications/shop-web/secrets', {
    signer: shop,
    body: asBody(sealSecrets('shop-web', { TOKEN: 'v' }, [{ node: 'x', key: peer.publicKey }])),
  });
  assert.equal(answer.status, 409);
  assert.equal(answer.body.type, 'urn:svc:capability-missing');
  assert.equal(answer.body.title, 'No node to seal the secret to');
});

test('set, list and remove through the routes; only copies are stored, each opening on its node', async () => {
  await node.store.putJson(keys.nodeRecord('node-self'), record('node-self', own.publicKey));
  await node.store.putJson(keys.nodeRecord('peer'), record('peer', peer.publicKey));
  const listed = await node.call('GET', '/v1/applications/shop-web/secrets', { signer: shop });
  assert.deepEqual(listed.body.recipients, [
    { node: 'node-self', key: own.publicKey },
    { node: 'peer', key: peer.publicKey },
  ]);
  const sealed = sealSecrets('shop-web', { TOKEN: 'hunter2', OTHER: 'x' }, listed.body.recipients);
  const set = await node.call('POST', '/v1/applications/shop-web/secrets', {
    signer: shop,
    body: asBody(sealed),
  });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  assert.deepEqual(set.body, {
    application: 'shop-web',
    set: ['OTHER', 'TOKEN'],
    nodes: ['node-self', 'peer'],
  });
  const stored = (await readSecrets(node.store, 'shop-web'))!.doc;
  assert.ok(!JSON.stringify(stored).includes('hunter2'));
  assert.deepEqual(openSecrets(stored, { node: 'peer', pair: peer }).values, {
    OTHER: 'x',
    TOKEN: 'hunter2',
  });
  assert.equal(stored.secrets.TOKEN!.by, 'op-shop');

  const after = await node.call('GET', '/v1/applications/shop-web/secrets', { signer: shop });
  assert.deepEqual(
    after.body.secrets.map((s: { name: string; by: string; nodes: string[] }) => [s.name, s.by, s.nodes]),
    [
      ['OTHER', 'op-shop', ['node-self', 'peer']],
      ['TOKEN', 'op-shop', ['node-self', 'peer']],
    ],
  );
  const removed = await node.call('DELETE', '/v1/applications/shop-web/secrets/OTHER', { signer: shop });
  assert.deepEqual(removed.body, { application: 'shop-web', removed: 'OTHER' });
  assert.deepEqual(Object.keys((await readSecrets(node.store, 'shop-web'))!.doc.secrets), ['TOKEN']);
});

test('413 resource-limit past the bound for sealed secrets, which is above api.jsonBytes', async () => {
  assert.ok(MAX_SEALED_BODY_BYTES > node.ctx.settings.api.jsonBytes);
  const filler = 'A'.repeat(MAX_SEALED_BODY_BYTES);
  const answer = await node.call('POST', '/v1/applications/shop-web/secrets', {
    signer: shop,
    body: `{"secrets":{},"x":"${filler}"}`,
  });
  assert.equal(answer.status, 413);
  assert.equal(answer.body.type, 'urn:svc:resource-limit');
  assert.equal(answer.body.title, 'Request body too large');
  assert.match(answer.body.detail, /sealed secrets are at most 8388608 bytes in one request/);
  // Between api.jsonBytes and the bound, the body is read and judged on its merits.
  const midsize = await node.call('POST', '/v1/applications/shop-web/secrets', {
    signer: shop,
    body: `{"secrets":{},"x":"${'A'.repeat(node.ctx.settings.api.jsonBytes)}"}`,
  });
  assert.equal(midsize.status, 400);
  assert.equal(midsize.body.title, 'Malformed request');
});

test('the operator record is re-read on every request, as on every operator route: a narrowed grant applies at once', async () => {
  const key = await node.operator('op-narrowing', 'operator', ['shop-*']);
  const first = await node.call('GET', '/v1/applications/shop-web/secrets', { signer: key });
  assert.equal(first.status, 200);
  // The verifier now holds the key in its cache; the record changes under it.
  await trustOperator(node.store, key, 'operator', ['other-*']);
  const second = await node.call('GET', '/v1/applications/shop-web/secrets', { signer: key });
  assert.equal(second.status, 403);
  assert.equal(second.body.type, 'urn:svc:auth-scope');
  assert.equal(second.body.title, 'Out of scope');
});
