// Signed tokens (docs/identity.md "Tokens") are standard compact JWS: jose, the library of the
// field, verifies what signToken signs with node:crypto, header and claims as the profile has
// them, and refuses it under another key; parseToken reads it back.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { generateSigningKey, publicKeyObject } from './ed25519.ts';
import { MAX_TOKEN_LIFETIME_S, parseToken, signToken, TOKEN_AUDIENCE } from './token.ts';

test('jose verifies a signed token: EdDSA, kid = sub = the signer, aud svc-node, a 60 s lifetime, 16 random bytes of jti', async () => {
  const key = generateSigningKey();
  const now = Date.UTC(2026, 10, 26, 12, 0, 0);
  const token = await signToken({ id: 'op-ci', privateKey: key.privateKey }, now);

  assert.deepEqual(decodeProtectedHeader(token), { alg: 'EdDSA', kid: 'op-ci' });
  const { payload } = await jwtVerify(token, publicKeyObject(key.publicJwk)!, {
    algorithms: ['EdDSA'],
    audience: TOKEN_AUDIENCE,
    subject: 'op-ci',
    currentDate: new Date(now),
  });
  assert.equal(payload.iat, now / 1000);
  assert.equal(payload.exp, now / 1000 + MAX_TOKEN_LIFETIME_S);
  assert.equal(Buffer.from(payload.jti as string, 'base64url').length, 16);
  assert.deepEqual(Object.keys(payload).sort(), ['aud', 'exp', 'iat', 'jti', 'sub']);

  const other = generateSigningKey();
  await assert.rejects(
    jwtVerify(token, publicKeyObject(other.publicJwk)!, { currentDate: new Date(now) }),
    /signature verification failed/,
  );

  const parsed = parseToken(token, now);
  assert.equal(parsed.kid, 'op-ci');
  assert.equal(parsed.jti, payload.jti);
  assert.equal(parsed.signature.length, 64);
  const second = await signToken({ id: 'op-ci', privateKey: key.privateKey }, now);
  assert.notEqual(parseToken(second, now).jti, parsed.jti, 'each token its own jti');
});
