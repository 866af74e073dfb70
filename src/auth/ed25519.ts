// Ed25519 key pairs for nodes and operators (docs/identity.md "Tokens": EdDSA
// only). Keys travel as JWK (`{ kty: 'OKP', crv: 'Ed25519', x[, d] }`); node:crypto does
// the arithmetic.

import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';

/** The public half as registered in the bucket: only public material. */
export interface PublicJwk {
  kty: 'OKP';
  crv: 'Ed25519';
  x: string;
}

/** The private half as kept in key files and the node's state directory. */
export interface PrivateJwk extends PublicJwk {
  d: string;
}

/** A usable signing key: both halves, as JWK and as a KeyObject. */
export interface SigningKeyPair {
  privateKey: KeyObject;
  publicJwk: PublicJwk;
  privateJwk: PrivateJwk;
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Whether a string is unpadded base64url of exactly `bytes` bytes. */
export function isBase64url(value: unknown, bytes: number): value is string {
  if (typeof value !== 'string' || value.length !== Math.ceil((bytes * 4) / 3) || !BASE64URL.test(value)) {
    return false;
  }
  // Round-trips only when the unused low bits of the last character are zero (canonical form).
  return Buffer.from(value, 'base64url').toString('base64url') === value;
}

export function generateSigningKey(): SigningKeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  return fromPrivateKeyObject(privateKey);
}

function fromPrivateKeyObject(privateKey: KeyObject): SigningKeyPair {
  const jwk = privateKey.export({ format: 'jwk' }) as { x: string; d: string };
  return {
    privateKey,
    publicJwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x },
    privateJwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d },
  };
}

/** Checks the public-key shape of docs/api.md's registration body; answers a clean copy or null. */
export function asPublicJwk(value: unknown): PublicJwk | null {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
  const { kty, crv, x } = value as Record<string, unknown>;
  if (kty !== 'OKP' || crv !== 'Ed25519' || !isBase64url(x, 32)) return null;
  return { kty, crv, x };
}

/**
 * Loads a private JWK; null when it is malformed or its `x` is not the public half of its
 * `d` (a key file edited by hand must not sign under someone else's public key).
 */
export function signingKeyFromJwk(value: unknown): SigningKeyPair | null {
  const pub = asPublicJwk(value);
  const d = (value as Record<string, unknown> | null)?.d;
  if (!pub || !isBase64url(d, 32)) return null;
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: pub.x, d }, format: 'jwk' });
  } catch {
    return null;
  }
  const pair = fromPrivateKeyObject(privateKey);
  return pair.publicJwk.x === pub.x ? pair : null;
}

/** The KeyObject a verifier uses for a registered public key; null when unusable. */
export function publicKeyObject(jwk: PublicJwk): KeyObject | null {
  try {
    return createPublicKey({ key: { ...jwk }, format: 'jwk' });
  } catch {
    return null;
  }
}
