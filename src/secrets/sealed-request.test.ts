// What a node checks of sealed secrets handed to it: the body's form, that the copies are sealed to
// exactly the serving nodes' current keys, and that its own copy opens in its place.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { refuses } from '../../test/helpers/temp-store.ts';
import { generateSealKey } from './seal.ts';
import { checkOwnCopies, checkSealedTo, NOT_SEALED_TITLE, parseSealedSecretsBody } from './sealed-request.ts';
import { MAX_SECRET_BYTES, MAX_SECRETS, sealSecrets } from './secrets.ts';

const n1 = generateSealKey();
const n2 = generateSealKey();
const recipients = [
  { node: 'n1', key: n1.publicKey },
  { node: 'n2', key: n2.publicKey },
];

function body(sealed: Record<string, Record<string, unknown>>) {
  return {
    secrets: Object.fromEntries(Object.entries(sealed).map(([name, copies]) => [name, { sealed: copies }])),
  };
}

test('a body sealed by sealSecrets parses back to the same copies', () => {
  const sealed = sealSecrets('shop', { TOKEN: 'hunter2', OTHER: 'x' }, recipients);
  assert.deepEqual(parseSealedSecretsBody(body(sealed)), sealed);
  checkSealedTo(sealed, recipients);
  checkOwnCopies(sealed, 'shop', { node: 'n1', pair: n1 });
  checkOwnCopies(sealed, 'shop', { node: 'n2', pair: n2 });
  // A node holding no copy (not a recipient) has nothing to open.
  checkOwnCopies(sealed, 'shop', { node: 'n3', pair: generateSealKey() });
});

test('malformed bodies are invalid-input, Malformed request', async () => {
  const copy = sealSecrets('shop', { T: 'v' }, recipients).T!.n1!;
  const bad: unknown[] = [
    undefined,
    null,
    [],
    'text',
    {},
    { secrets: [] },
    { secrets: {} },
    { secrets: { T: 'v' } },
    { secrets: { T: {} } },
    { secrets: { T: { sealed: [] } } },
    body({ T: { n1: { ...copy, extra: 1 } } }),
    body({ T: { n1: { key: copy.key, epk: copy.epk, iv: copy.iv } } }),
    body({ T: { n1: { ...copy, key: 'short' } } }),
    body({ T: { n1: { ...copy, epk: 7 } } }),
    body({ T: { n1: { ...copy, iv: 'AAAA' } } }),
    body({ T: { n1: { ...copy, ct: 'not base64url!' } } }),
    body({ T: { '../n1': copy } }),
    body({ T: { n1: 'copy' } }),
  ];
  for (const value of bad) {
    await refuses(() => parseSealedSecretsBody(value), 'invalid-input', 'Malformed request');
  }
});

test('names, sizes and counts are refused as for the bucket path', async () => {
  const copy = sealSecrets('shop', { T: 'v' }, recipients).T!.n1!;
  for (const name of ['9x', 'a-b', '__proto__', 'constructor']) {
    await refuses(
      () => parseSealedSecretsBody({ secrets: { [name]: { sealed: { n1: copy } } } }),
      'invalid-input',
      'Invalid secret name',
    );
  }
  const tagOnly = Buffer.alloc(16).toString('base64url');
  await refuses(
    () => parseSealedSecretsBody(body({ T: { n1: { ...copy, ct: tagOnly } } })),
    'invalid-input',
    'Empty secret',
  );
  const big = Buffer.alloc(MAX_SECRET_BYTES + 17).toString('base64url');
  await refuses(
    () => parseSealedSecretsBody(body({ T: { n1: { ...copy, ct: big } } })),
    'resource-limit',
    'Secret too large',
  );
  // Exactly the largest value is accepted.
  const largest = Buffer.alloc(MAX_SECRET_BYTES + 16).toString('base64url');
  parseSealedSecretsBody(body({ T: { n1: { ...copy, ct: largest } } }));
  const many = Object.fromEntries(Array.from({ length: MAX_SECRETS + 1 }, (_, i) => [`S${i}`, { n1: copy }]));
  await refuses(() => parseSealedSecretsBody(body(many)), 'resource-limit', 'Too many secrets');
});

test('a node id that is __proto__ stays a plain member', () => {
  const copy = sealSecrets('shop', { T: 'v' }, recipients).T!.n1!;
  const parsed = parseSealedSecretsBody(
    JSON.parse(`{"secrets":{"T":{"sealed":{"__proto__":${JSON.stringify(copy)}}}}}`),
  );
  assert.deepEqual(Object.keys(parsed.T!), ['__proto__']);
  assert.equal(Object.getPrototypeOf(parsed.T), Object.prototype);
});

test('copies not sealed to exactly the serving nodes are refused, naming each difference', async () => {
  const sealed = sealSecrets('shop', { T: 'v' }, recipients);
  const missing = await refuses(
    () => checkSealedTo({ T: { n1: sealed.T!.n1! } }, recipients),
    'invalid-input',
    NOT_SEALED_TITLE,
  );
  assert.match(missing.detail!, /T has no copy for n2/);
  const stranger = await refuses(
    () => checkSealedTo({ T: { ...sealed.T!, ghost: sealed.T!.n1! } }, recipients),
    'invalid-input',
    NOT_SEALED_TITLE,
  );
  assert.match(stranger.detail!, /T has a copy for ghost, not serving/);
  const rekeyed = [recipients[0]!, { node: 'n2', key: generateSealKey().publicKey }];
  const stale = await refuses(() => checkSealedTo(sealed, rekeyed), 'invalid-input', NOT_SEALED_TITLE);
  assert.match(stale.detail!, /T's copy for n2 is sealed to another key/);
});

test('an own copy sealed for another place, or altered, does not open and is refused', async () => {
  for (const [what, sealed] of [
    ['another application', sealSecrets('other', { T: 'v' }, recipients)],
    ['another name', { T: sealSecrets('shop', { U: 'v' }, recipients).U! }],
  ] as const) {
    await refuses(
      () => checkOwnCopies(sealed, 'shop', { node: 'n1', pair: n1 }),
      'invalid-input',
      'Sealed copy does not open',
    ).then((problem) => assert.match(problem.detail!, /copy of T sealed to n1/, what));
  }
  const sealed = sealSecrets('shop', { T: 'v' }, recipients);
  const ct = Buffer.from(sealed.T!.n1!.ct, 'base64url');
  ct[0] = ct[0]! ^ 1;
  await refuses(
    () =>
      checkOwnCopies({ T: { n1: { ...sealed.T!.n1!, ct: ct.toString('base64url') } } }, 'shop', {
        node: 'n1',
        pair: n1,
      }),
    'invalid-input',
    'Sealed copy does not open',
  );
});
