// `svc app secret set|bulk` through a node when the fleet moves under it: a node that takes a new
// sealing key between the command's read of the recipients and its post is sealed to on a second
// read; a fleet that keeps moving is refused with the node's own problem. The node API is the real
// one over the in-memory store; the test changes the node record as the re-keyed node would.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestNode } from '../../test/helpers/in-process-node.ts';
import { refuses } from '../../test/helpers/temp-store.ts';
import { secretRoutes } from '../node/routes/secrets.ts';
import type { RoutePlugin } from '../node/server.ts';
import { ensureApplicationForDeploy } from '../registry/applications.ts';
import { keys } from '../registry/keys.ts';
import type { NodeRecord } from '../registry/records.ts';
import { generateSealKey, type SealKeyPair } from '../secrets/seal.ts';
import { NOT_SEALED_TITLE } from '../secrets/sealed-request.ts';
import { openSecrets, readSecrets } from '../secrets/secrets.ts';
import { putJson } from '../store/store.ts';
import type { Target } from './client.ts';
import { type SecretFlags, setThroughNode } from './secret-actions.ts';

const flags: SecretFlags = { name: 'shop-web' };

function peerRecord(sealKey: string): NodeRecord {
  return {
    v: 1,
    id: 'peer',
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

/** A node whose `peer` takes a new sealing key after each of the first `times` recipient reads. */
async function fleetRekeying(times: number) {
  let key: SealKeyPair = generateSealKey();
  let reads = 0;
  // Before the answer is sent, so the change is in the bucket before the command can post.
  const rekeyAfterReads: RoutePlugin = (app, ctx) => {
    app.addHook('onSend', async (request) => {
      if (request.method !== 'GET' || !request.url.endsWith('/secrets')) return;
      reads++;
      if (reads > times) return;
      key = generateSealKey();
      await putJson(ctx.store, keys.nodeRecord('peer'), peerRecord(key.publicKey));
    });
  };
  const node = await startTestNode([rekeyAfterReads, secretRoutes]);
  await node.store.putJson(keys.nodeRecord('peer'), peerRecord(key.publicKey));
  await ensureApplicationForDeploy(node.store, 'shop-web', {}, 'test');
  const signer = await node.operator('op-shop', 'operator', ['shop-*']);
  const target: Target = {
    endpoints: [node.url],
    key: { id: signer.id, pair: signer.pair, source: 'test' },
    home: mkdtempSync(join(tmpdir(), 'svc-home-')),
  };
  return { node, target, key: () => key, reads: () => reads };
}

test('a node re-keyed between the read and the post is sealed to on a second read', async () => {
  const fleet = await fleetRekeying(1);
  try {
    const nodes = await setThroughNode(fleet.target, flags, 'shop-web', { TOKEN: 'hunter2' });
    assert.deepEqual(nodes, ['peer']);
    assert.equal(fleet.reads(), 2);
    const stored = (await readSecrets(fleet.node.store, 'shop-web'))!.doc;
    assert.deepEqual(openSecrets(stored, { node: 'peer', pair: fleet.key() }).values, { TOKEN: 'hunter2' });
  } finally {
    await fleet.node.close();
  }
});

test('a fleet still moving after the second read is refused with the node problem', async () => {
  const fleet = await fleetRekeying(2);
  try {
    await refuses(
      () => setThroughNode(fleet.target, flags, 'shop-web', { TOKEN: 'hunter2' }),
      'invalid-input',
      NOT_SEALED_TITLE,
    );
    assert.equal(fleet.reads(), 2, 'one more read, not a loop');
    assert.equal(await readSecrets(fleet.node.store, 'shop-web'), null);
  } finally {
    await fleet.node.close();
  }
});
