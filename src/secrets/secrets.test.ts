// Sealing and the secrets document: a copy opens only with its node's key and only in its place;
// altered copies never open; re-sealing gives a node that joined later its copy; values never
// land in the stored document.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { refuses, tempStore } from '../../test/helpers/temp-store.ts';
import type { NodeRecord } from '../registry/records.ts';
import { generateSealKey, open, seal } from './seal.ts';
import {
  checkSecretName,
  checkSecretValue,
  MAX_SECRET_BYTES,
  MAX_SECRETS,
  openSecrets,
  readSecrets,
  recipientsOf,
  resealed,
  sealSecrets,
  updateSecrets,
  withoutSecret,
  withSealedSecrets,
  withSecret,
} from './secrets.ts';

const place = { application: 'shop', name: 'TOKEN', node: 'n1' };

test('a sealed copy opens with its node key, in its place, for any value', () => {
  const pair = generateSealKey();
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (value) => {
      const copy = seal(value, pair.publicKey, place);
      assert.equal(open(copy, pair, place), value);
      if (value.length > 3) assert.ok(!JSON.stringify(copy).includes(value));
    }),
    { numRuns: 50 },
  );
});

test('a copy does not open with another key, in another place, or altered', () => {
  const pair = generateSealKey();
  const other = generateSealKey();
  const copy = seal('hunter2', pair.publicKey, place);
  assert.equal(open(copy, other, place), null, 'another node');
  assert.equal(open({ ...copy, key: other.publicKey }, other, place), null, 'relabelled for another node');
  assert.equal(open(copy, pair, { ...place, application: 'other' }), null, 'moved to another application');
  assert.equal(open(copy, pair, { ...place, name: 'OTHER' }), null, 'moved to another name');
  assert.equal(open(copy, pair, { ...place, node: 'n2' }), null, 'moved to another node id');
  const ct = Buffer.from(copy.ct, 'base64url');
  for (let i = 0; i < ct.length; i++) {
    const flipped = Buffer.from(ct);
    flipped[i] = flipped[i]! ^ 1;
    assert.equal(open({ ...copy, ct: flipped.toString('base64url') }, pair, place), null, `byte ${i}`);
  }
  assert.equal(open({ ...copy, ct: '' }, pair, place), null, 'empty');
  assert.equal(open({ ...copy, epk: 'x' }, pair, place), null, 'bad ephemeral key');
});

test('names follow the --var rule; values are bounded and never empty', async () => {
  assert.equal(checkSecretName('API_TOKEN'), 'API_TOKEN');
  for (const bad of ['', '9x', 'a-b', '__proto__', 'constructor', 'a b']) {
    await refuses(() => checkSecretName(bad), 'invalid-input', 'Invalid secret name');
  }
  await refuses(() => checkSecretValue(''), 'invalid-input', 'Empty secret');
  await refuses(
    () => checkSecretValue('x'.repeat(MAX_SECRET_BYTES + 1)),
    'resource-limit',
    'Secret too large',
  );
});

function node(id: string, sealKey: string | undefined, state: NodeRecord['state'] = 'ready'): NodeRecord {
  return {
    v: 1,
    id,
    advertise: '',
    listen: '',
    labels: {},
    versions: { svc: '0' },
    state,
    beatMs: 1000,
    startedAt: '',
    processes: [],
    ...(sealKey ? { sealKey } : {}),
  };
}

test('recipients are serving nodes with a sealing key', () => {
  const a = generateSealKey();
  const b = generateSealKey();
  const recipients = recipientsOf(
    [
      node('b', b.publicKey),
      node('a', a.publicKey),
      node('old', undefined),
      node('gone', a.publicKey, 'draining'),
    ],
    2000,
  );
  assert.deepEqual(recipients, [
    { node: 'a', key: a.publicKey },
    { node: 'b', key: b.publicKey },
  ]);
});

test('set, open, re-seal for a later node, remove', async () => {
  const store = await tempStore();
  const n1 = generateSealKey();
  const n2 = generateSealKey();
  const now = new Date('2026-01-01T00:00:00Z');
  await updateSecrets(store, 'shop', (doc) =>
    withSecret(doc, {
      application: 'shop',
      name: 'TOKEN',
      value: 'hunter2',
      by: 'op-a',
      recipients: [{ node: 'n1', key: n1.publicKey }],
      now,
    }),
  );
  const raw = await store.get('_svc/apps/shop/secrets.json');
  assert.ok(raw && !Buffer.from(raw.body).toString().includes('hunter2'));
  const stored = (await readSecrets(store, 'shop'))!.doc;
  assert.deepEqual(openSecrets(stored, { node: 'n1', pair: n1 }), {
    values: { TOKEN: 'hunter2' },
    missing: [],
  });
  assert.deepEqual(openSecrets(stored, { node: 'n2', pair: n2 }), { values: {}, missing: ['TOKEN'] });

  const recipients = [
    { node: 'n1', key: n1.publicKey },
    { node: 'n2', key: n2.publicKey },
  ];
  // Only a node holding a copy can re-seal; n2 cannot make itself one.
  assert.equal(resealed(stored, { node: 'n2', pair: n2 }, recipients), null);
  const next = resealed(stored, { node: 'n1', pair: n1 }, recipients)!;
  assert.deepEqual(openSecrets(next, { node: 'n2', pair: n2 }).values, { TOKEN: 'hunter2' });
  assert.equal(next.secrets.TOKEN!.changedAt, stored.secrets.TOKEN!.changedAt, 're-sealing is no change');
  assert.equal(resealed(next, { node: 'n1', pair: n1 }, recipients), null, 'nothing missing any more');
  // A node with a new key needs a new copy.
  const n2b = generateSealKey();
  const rekeyed = resealed(next, { node: 'n1', pair: n1 }, [
    recipients[0]!,
    { node: 'n2', key: n2b.publicKey },
  ])!;
  assert.deepEqual(openSecrets(rekeyed, { node: 'n2', pair: n2b }).values, { TOKEN: 'hunter2' });

  await refuses(() => withoutSecret(stored, 'NOPE', 'shop', now), 'not-found', 'No such secret');
  await updateSecrets(store, 'shop', (doc) => withoutSecret(doc, 'TOKEN', 'shop', now));
  assert.equal(
    await store.get('_svc/apps/shop/secrets.json'),
    null,
    'the last secret takes the document along',
  );
  await store.close();
});

test('an application holds at most MAX_SECRETS: counted over what it holds and what is added', async () => {
  const n1 = generateSealKey();
  const recipients = [{ node: 'n1', key: n1.publicKey }];
  const now = new Date('2026-01-01T00:00:00Z');
  const values = (from: number, count: number) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`S${from + i}`, 'v']));
  const full = withSealedSecrets(null, {
    application: 'shop',
    sealed: sealSecrets('shop', values(0, MAX_SECRETS - 1), recipients),
    by: 'op-a',
    now,
  });
  // Replacing held names adds nothing; one new name still fits, two do not.
  const replaced = withSealedSecrets(full, {
    application: 'shop',
    sealed: sealSecrets('shop', values(0, 3), recipients),
    by: 'op-b',
    now,
  });
  assert.equal(Object.keys(replaced.secrets).length, MAX_SECRETS - 1);
  assert.equal(replaced.secrets.S0!.by, 'op-b');
  const one = sealSecrets('shop', values(MAX_SECRETS, 1), recipients);
  assert.equal(
    Object.keys(withSealedSecrets(full, { application: 'shop', sealed: one, by: 'op-a', now }).secrets)
      .length,
    MAX_SECRETS,
  );
  await refuses(
    () =>
      withSealedSecrets(full, {
        application: 'shop',
        sealed: sealSecrets('shop', values(MAX_SECRETS, 2), recipients),
        by: 'op-a',
        now,
      }),
    'resource-limit',
    'Too many secrets',
  );
});
