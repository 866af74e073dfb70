// Node and operator tokens (docs/identity.md "Tokens"): a compact
// JWS, `alg` EdDSA only, `kid` = `sub` = signer id, `aud` svc-node, `exp - iat` in (0, 60],
// `jti` of 16 random bytes, single use. This module signs tokens and holds the checks that
// need no key: parsing, header and claims. The verifier (verifier.ts) adds the key lookup,
// the signature and replay.
//
// Tokens are signed with node:crypto directly rather than jose's SignJWT: the profile is fixed
// (EdDSA, these five claims), and loading jose cost every signing CLI command (`svc deploy`,
// `svc app ...`) about 50 ms of its start. token.test.ts checks jose verifies what this signs.

import { type KeyObject, randomBytes, sign } from 'node:crypto';
import { Problem } from '../problem.ts';
import { isOperatorId } from '../registry/names.ts';
import { isBase64url } from './ed25519.ts';

export const TOKEN_AUDIENCE = 'svc-node';
/** Longest `exp - iat` a token may carry, in seconds. */
export const MAX_TOKEN_LIFETIME_S = 60;
/** Clock skew tolerated at both ends, in seconds. */
export const CLOCK_SKEW_S = 30;
/** Tokens beyond this are refused before anything is decoded: ours are about 400 characters. */
export const MAX_TOKEN_CHARS = 4096;
/** A header segment beyond this is refused before it is decoded. */
export const MAX_HEADER_CHARS = 512;

/** Whoever signs: a node or an operator, by id. */
export interface TokenSigner {
  id: string;
  privateKey: KeyObject;
}

/** Signs a fresh single-use token; call once per request (tokens are single use). */
export async function signToken(signer: TokenSigner, nowMs: number = Date.now()): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  const header = { alg: 'EdDSA', kid: signer.id };
  const claims = {
    jti: randomBytes(16).toString('base64url'),
    sub: signer.id,
    aud: TOKEN_AUDIENCE,
    iat,
    exp: iat + MAX_TOKEN_LIFETIME_S,
  };
  const signingInput = `${encodeSegment(header)}.${encodeSegment(claims)}`;
  const signature = sign(null, Buffer.from(signingInput, 'ascii'), signer.privateKey);
  return `${signingInput}.${signature.toString('base64url')}`;
}

function encodeSegment(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * A token that did not hold up. The reason is for the node's own log only; callers always
 * get the one `auth-invalid` problem (docs/api.md: causes are indistinguishable).
 */
export class TokenRejected extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'TokenRejected';
  }
}

/** The one answer to every rejected token. */
export function authInvalid(): Problem {
  return new Problem(
    'auth-invalid',
    'Token rejected',
    'the bearer token did not hold up; sign a fresh token for each request',
  );
}

/** A token split and checked as far as possible without its key. */
export interface ParsedToken {
  kid: string;
  jti: string;
  /** `exp`, seconds: the replay record may be forgotten after `exp + skew`. */
  exp: number;
  /** The bytes the signature covers: `<header>.<payload>` as sent. */
  signingInput: Buffer;
  signature: Buffer;
}

const SEGMENT = /^[A-Za-z0-9_-]+$/;

function decodeSegment(segment: string, what: string): Buffer {
  // Strict unpadded base64url: Buffer.from would skip junk characters silently.
  if (!SEGMENT.test(segment) || segment.length % 4 === 1) throw new TokenRejected(`${what} is not base64url`);
  return Buffer.from(segment, 'base64url');
}

function decodeJsonObject(segment: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(decodeSegment(segment, what).toString('utf8'));
  } catch (err) {
    if (err instanceof TokenRejected) throw err;
    throw new TokenRejected(`${what} is not JSON`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new TokenRejected(`${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

const isSeconds = (value: unknown): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

/**
 * Parses a compact JWS and checks its header and claims against the clock. Throws
 * TokenRejected for anything outside the token table of docs/api.md.
 */
export function parseToken(token: string, nowMs: number): ParsedToken {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS) throw new TokenRejected('token too long');
  const parts = token.split('.');
  if (parts.length !== 3) throw new TokenRejected('not a compact JWS');
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  if (headerPart.length > MAX_HEADER_CHARS) throw new TokenRejected('header too long');

  const header = decodeJsonObject(headerPart, 'header');
  if (header.alg !== 'EdDSA') throw new TokenRejected('alg is not EdDSA');
  // `crit` names extensions the verifier must understand; this profile understands none.
  if ('crit' in header || 'b64' in header) throw new TokenRejected('unsupported header parameter');
  const kid = header.kid;
  if (!isOperatorId(kid)) throw new TokenRejected('kid missing or malformed');

  const claims = decodeJsonObject(payloadPart, 'payload');
  if (claims.sub !== kid) throw new TokenRejected('sub is not kid');
  if (claims.aud !== TOKEN_AUDIENCE) throw new TokenRejected('wrong aud');
  const { iat, exp, jti } = claims;
  if (!isSeconds(iat) || !isSeconds(exp)) throw new TokenRejected('iat or exp missing');
  const lifetime = exp - iat;
  if (lifetime <= 0 || lifetime > MAX_TOKEN_LIFETIME_S) throw new TokenRejected('lifetime out of bounds');
  const now = nowMs / 1000;
  if (now > exp + CLOCK_SKEW_S) throw new TokenRejected('expired');
  if (iat > now + CLOCK_SKEW_S) throw new TokenRejected('issued in the future');
  if ('nbf' in claims && (!isSeconds(claims.nbf) || claims.nbf > now + CLOCK_SKEW_S)) {
    throw new TokenRejected('not yet valid');
  }
  if (!isBase64url(jti, 16)) throw new TokenRejected('jti is not 16 bytes of base64url');

  const signature = decodeSegment(signaturePart, 'signature');
  if (signature.length !== 64) throw new TokenRejected('signature is not 64 bytes');
  return {
    kid,
    jti,
    exp,
    signingInput: Buffer.from(`${headerPart}.${payloadPart}`, 'ascii'),
    signature,
  };
}

/** The token of an `Authorization: Bearer <token>` header; null when there is none. */
export function bearerToken(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1]! : null;
}
