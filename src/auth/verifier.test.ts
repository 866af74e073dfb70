// docs/identity.md "Tokens": every refusal of the token table answers 401
// `auth-invalid` with one fixed title and detail, never a 500; the property tests throw
// random strings and mutated tokens at the verifier.

import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { isProblem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { generateSigningKey, type SigningKeyPair } from './ed25519.ts';
import { signToken } from './token.ts';
import { ReplaySet, TokenVerifier } from './verifier.ts';

const NOW = Date.UTC(2030, 0, 1);
const nowS = NOW / 1000;

function b64(value: unknown): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

/** A compact JWS with any header and claims, signed with Ed25519 by `pair`. */
function forge(pair: SigningKeyPair, header: object, claims: object): string {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${sign(null, Buffer.from(input), pair.privateKey).toString('base64url')}`;
}

const jti = () => randomBytes(16).toString('base64url');
const goodClaims = (id: string, overrides: object = {}) => ({
  sub: id,
  aud: 'svc-node',
  iat: nowS,
  exp: nowS + 60,
  jti: jti(),
  ...overrides,
});

async function setup() {
  const store = new MemoryStore();
  const operator = generateSigningKey();
  const node = generateSigningKey();
  await store.putJson(keys.operator('op-aa'), {
    v: 1,
    id: 'op-aa',
    publicKey: operator.publicJwk,
    role: 'admin',
    applications: ['*'],
    registeredAt: '',
    registeredBy: 'bucket',
  });
  await store.putJson(keys.nodeKey('node-1'), {
    v: 1,
    id: 'node-1',
    publicKey: node.publicJwk,
    publishedAt: '',
  });
  let clock = NOW;
  const reasons: string[] = [];
  const verifier = new TokenVerifier({ store, now: () => clock, onReject: (reason) => reasons.push(reason) });
  return {
    store,
    operator,
    node,
    verifier,
    reasons,
    setClock: (ms: number) => {
      clock = ms;
    },
  };
}

async function assertRejected(verifier: TokenVerifier, token: string, reasons?: string[], why?: string) {
  await assert.rejects(verifier.verify(token), (err: unknown) => {
    assert.ok(isProblem(err), `expected a Problem, got ${String(err)}`);
    assert.equal(err.status, 401);
    assert.deepEqual(err.toJSON(), {
      type: 'urn:svc:auth-invalid',
      title: 'Token rejected',
      status: 401,
      detail: 'the bearer token did not hold up; sign a fresh token for each request',
    });
    return true;
  });
  if (reasons && why) assert.equal(reasons.at(-1), why);
}

describe('tokens that hold up', () => {
  test('an operator token and a node token verify, naming their signer', async () => {
    const { operator, node, verifier } = await setup();
    const op = await verifier.verify(await signToken({ id: 'op-aa', privateKey: operator.privateKey }, NOW));
    assert.equal(op.kind, 'operator');
    assert.equal(op.id, 'op-aa');
    const n = await verifier.verify(await signToken({ id: 'node-1', privateKey: node.privateKey }, NOW));
    assert.equal(n.kind, 'node');
  });

  test('the signed token matches the table: EdDSA, kid = sub, aud, 60 s, 16-byte jti', async () => {
    const { operator } = await setup();
    const token = await signToken({ id: 'op-aa', privateKey: operator.privateKey }, NOW);
    const [header, payload] = token
      .split('.')
      .slice(0, 2)
      .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
    assert.deepEqual(header, { alg: 'EdDSA', kid: 'op-aa' });
    assert.equal(payload.sub, 'op-aa');
    assert.equal(payload.aud, 'svc-node');
    assert.equal(payload.exp - payload.iat, 60);
    assert.equal(Buffer.from(payload.jti, 'base64url').length, 16);
  });

  test('clock skew of 30 s is tolerated at both ends', async () => {
    const { operator, verifier, setClock } = await setup();
    const t1 = forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa'));
    setClock(NOW + 90_000); // exp + 30 s
    await verifier.verify(t1);
    const t2 = forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa'));
    setClock(NOW - 30_000); // iat - 30 s
    await verifier.verify(t2);
  });
});

describe('every rejection is auth-invalid with nothing telling causes apart', () => {
  const cases: [string, (ctx: Awaited<ReturnType<typeof setup>>) => string | Promise<string>, string][] = [
    [
      'alg none',
      () => `${b64({ alg: 'none', kid: 'op-aa' })}.${b64(goodClaims('op-aa'))}.`,
      'alg is not EdDSA',
    ],
    [
      'alg none with a signature part',
      () => `${b64({ alg: 'none', kid: 'op-aa' })}.${b64(goodClaims('op-aa'))}.${b64('x')}`,
      'alg is not EdDSA',
    ],
    [
      'HS256 keyed with the public key',
      ({ operator }) => {
        const input = `${b64({ alg: 'HS256', kid: 'op-aa' })}.${b64(goodClaims('op-aa'))}`;
        const mac = createHmac('sha256', Buffer.from(operator.publicJwk.x, 'base64url'))
          .update(input)
          .digest();
        return `${input}.${mac.toString('base64url')}`;
      },
      'alg is not EdDSA',
    ],
    [
      'RS256 header over an Ed25519 signature',
      ({ operator }) => forge(operator, { alg: 'RS256', kid: 'op-aa' }, goodClaims('op-aa')),
      'alg is not EdDSA',
    ],
    [
      'RS256 signed with an RSA key',
      () => {
        const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
        const input = `${b64({ alg: 'RS256', kid: 'op-aa' })}.${b64(goodClaims('op-aa'))}`;
        return `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
      },
      'alg is not EdDSA',
    ],
    [
      'missing kid',
      ({ operator }) => forge(operator, { alg: 'EdDSA' }, goodClaims('op-aa')),
      'kid missing or malformed',
    ],
    [
      'kid escaping its key',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: '../nodes/node-1' }, goodClaims('../nodes/node-1')),
      'kid missing or malformed',
    ],
    [
      'sub not kid',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { sub: 'node-1' })),
      'sub is not kid',
    ],
    [
      'wrong aud',
      ({ operator }) => forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { aud: 'svc' })),
      'wrong aud',
    ],
    [
      'aud as an array',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { aud: ['svc-node'] })),
      'wrong aud',
    ],
    [
      'lifetime over 60 s',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { exp: nowS + 61 })),
      'lifetime out of bounds',
    ],
    [
      'lifetime of zero',
      ({ operator }) => forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { exp: nowS })),
      'lifetime out of bounds',
    ],
    [
      'missing exp',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa', { exp: undefined })),
      'iat or exp missing',
    ],
    [
      'expired beyond skew',
      ({ operator }) =>
        forge(
          operator,
          { alg: 'EdDSA', kid: 'op-aa' },
          goodClaims('op-aa', { iat: nowS - 91, exp: nowS - 31 }),
        ),
      'expired',
    ],
    [
      'iat in the future beyond skew',
      ({ operator }) =>
        forge(
          operator,
          { alg: 'EdDSA', kid: 'op-aa' },
          goodClaims('op-aa', { iat: nowS + 31, exp: nowS + 60 }),
        ),
      'issued in the future',
    ],
    [
      'jti not 16 bytes',
      ({ operator }) =>
        forge(
          operator,
          { alg: 'EdDSA', kid: 'op-aa' },
          goodClaims('op-aa', { jti: randomBytes(8).toString('base64url') }),
        ),
      'jti is not 16 bytes of base64url',
    ],
    [
      'unknown kid',
      ({ operator }) => forge(operator, { alg: 'EdDSA', kid: 'op-nobody' }, goodClaims('op-nobody')),
      'unknown kid',
    ],
    [
      'bad signature (signed by another key)',
      () => forge(generateSigningKey(), { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')),
      'bad signature',
    ],
    [
      'a node key claiming an operator kid',
      ({ node }) => forge(node, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')),
      'bad signature',
    ],
    [
      'truncated',
      async ({ operator }) =>
        (await signToken({ id: 'op-aa', privateKey: operator.privateKey }, NOW)).slice(0, -4),
      'signature is not 64 bytes',
    ],
    [
      'two parts only',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')).split('.').slice(0, 2).join('.'),
      'not a compact JWS',
    ],
    [
      'non-base64 header',
      ({ operator }) =>
        `eyJ!!!.${forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')).split('.').slice(1).join('.')}`,
      'header is not base64url',
    ],
    [
      'padded signature',
      ({ operator }) => `${forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa'))}==`,
      'signature is not base64url',
    ],
    [
      'header not JSON',
      ({ operator }) =>
        `${b64('not json')}.${forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')).split('.').slice(1).join('.')}`,
      'header is not JSON',
    ],
    [
      'oversized header',
      ({ operator }) =>
        forge(operator, { alg: 'EdDSA', kid: 'op-aa', pad: 'x'.repeat(600) }, goodClaims('op-aa')),
      'header too long',
    ],
    ['oversized token', () => 'a'.repeat(5000), 'token too long'],
    [
      'crit header',
      ({ operator }) => forge(operator, { alg: 'EdDSA', kid: 'op-aa', crit: ['exp'] }, goodClaims('op-aa')),
      'unsupported header parameter',
    ],
    ['empty string', () => '', 'not a compact JWS'],
  ];
  for (const [name, make, why] of cases) {
    test(name, async () => {
      const ctx = await setup();
      await assertRejected(ctx.verifier, await make(ctx), ctx.reasons, why);
    });
  }

  test('replayed jti', async () => {
    const { operator, verifier, reasons } = await setup();
    const token = await signToken({ id: 'op-aa', privateKey: operator.privateKey }, NOW);
    await verifier.verify(token);
    await assertRejected(verifier, token, reasons, 'jti replayed');
  });

  test('two copies of one token racing: exactly one is accepted', async () => {
    const { operator, verifier } = await setup();
    const token = await signToken({ id: 'op-aa', privateKey: operator.privateKey }, NOW);
    const results = await Promise.allSettled([verifier.verify(token), verifier.verify(token)]);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  });

  test('a rejected token does not spend its jti', async () => {
    const { operator, verifier } = await setup();
    const claims = goodClaims('op-aa');
    await assertRejected(verifier, forge(generateSigningKey(), { alg: 'EdDSA', kid: 'op-aa' }, claims));
    await verifier.verify(forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, claims));
  });
});

describe('key cache: the 60 s revocation bound', () => {
  test('a removed key keeps verifying until the cache expires, then is refused', async () => {
    const { store, operator, verifier, setClock } = await setup();
    await verifier.verify(forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')));
    await store.delete(keys.operator('op-aa'));
    setClock(NOW + 59_000);
    await verifier.verify(
      forge(
        operator,
        { alg: 'EdDSA', kid: 'op-aa' },
        goodClaims('op-aa', { iat: nowS + 59, exp: nowS + 119 }),
      ),
    );
    setClock(NOW + 61_000);
    await assertRejected(
      verifier,
      forge(
        operator,
        { alg: 'EdDSA', kid: 'op-aa' },
        goodClaims('op-aa', { iat: nowS + 61, exp: nowS + 121 }),
      ),
    );
  });

  test('operators are looked up first, then nodes; one read per kid per cache interval', async () => {
    const { store, operator, node, verifier } = await setup();
    const before = store.gets;
    await verifier.verify(forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')));
    await verifier.verify(forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa')));
    assert.equal(store.gets - before, 1);
    await verifier.verify(forge(node, { alg: 'EdDSA', kid: 'node-1' }, goodClaims('node-1')));
    assert.equal(store.gets - before, 3, 'operators/<kid> then nodes/<kid>');
  });

  test('an unknown kid is remembered briefly, and forget() makes a new key usable at once', async () => {
    const { store, verifier } = await setup();
    const fresh = generateSigningKey();
    await assertRejected(verifier, forge(fresh, { alg: 'EdDSA', kid: 'op-new' }, goodClaims('op-new')));
    await store.putJson(keys.operator('op-new'), {
      v: 1,
      id: 'op-new',
      publicKey: fresh.publicJwk,
      role: 'operator',
      applications: ['a'],
    });
    await assertRejected(verifier, forge(fresh, { alg: 'EdDSA', kid: 'op-new' }, goodClaims('op-new')));
    verifier.forget('op-new');
    await verifier.verify(forge(fresh, { alg: 'EdDSA', kid: 'op-new' }, goodClaims('op-new')));
  });

  test('a bucket that cannot answer is store-unavailable, not auth-invalid', async () => {
    const { store, operator, verifier } = await setup();
    store.get = async () => {
      throw new Error('connection reset');
    };
    await assert.rejects(
      verifier.verify(forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa'))),
      {
        code: 'store-unavailable',
      },
    );
  });
});

describe('replay set', () => {
  test('entries are forgotten after exp + skew, and a full set refuses rather than forgets', () => {
    const set = new ReplaySet(2);
    assert.ok(set.add('a', 100, 50));
    assert.ok(set.add('b', 200, 50));
    assert.equal(set.add('c', 200, 60), false);
    assert.ok(set.add('c', 200, 101), 'a is forgotten once its second has passed');
    assert.equal(set.has('a'), false);
    assert.ok(set.has('b'));
    assert.equal(set.size, 2);
  });
});

describe('property: nothing makes the verifier answer anything but auth-invalid', () => {
  test('random strings', async () => {
    const { verifier } = await setup();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          fc.array(fc.base64String(), { maxLength: 5 }).map((parts) => parts.join('.')),
        ),
        async (input) => {
          await assertRejected(verifier, input);
        },
      ),
      { numRuns: 500 },
    );
  });

  test('mutations of a valid token', async () => {
    const { operator, verifier } = await setup();
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ';
    await fc.assert(
      fc.asyncProperty(
        fc.nat(),
        fc.integer({ min: 0, max: alphabet.length - 1 }),
        fc.constantFrom('replace', 'insert', 'delete'),
        async (at, char, how) => {
          const token = forge(operator, { alg: 'EdDSA', kid: 'op-aa' }, goodClaims('op-aa'));
          const i = at % token.length;
          const c = alphabet[char]!;
          const mutated =
            how === 'replace'
              ? token.slice(0, i) + c + token.slice(i + 1)
              : how === 'insert'
                ? token.slice(0, i) + c + token.slice(i)
                : token.slice(0, i) + token.slice(i + 1);
          if (mutated === token) return;
          try {
            await verifier.verify(mutated);
          } catch (err) {
            assert.ok(isProblem(err) && err.code === 'auth-invalid', String(err));
            return;
          }
          // A few edits leave the decoded bytes unchanged (base64url's unused low bits):
          // the token then still verifies, which is no forgery.
          const decoded = (t: string) => t.split('.').map((p) => Buffer.from(p, 'base64url').toString('hex'));
          assert.deepEqual(decoded(mutated), decoded(token));
        },
      ),
      { numRuns: 500 },
    );
  });

  test('random headers and claims signed with a trusted key', async () => {
    const { operator, verifier } = await setup();
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.jsonValue(), async (header, claims) => {
        const input = `${b64(JSON.stringify(header))}.${b64(JSON.stringify(claims))}`;
        const token = `${input}.${sign(null, Buffer.from(input), operator.privateKey).toString('base64url')}`;
        await assertRejected(verifier, token);
      }),
      { numRuns: 300 },
    );
  });
});
