// Sealing a secret to one node (docs/decisions.md "Secrets"): an ephemeral X25519 key agreed
// with the node's public key, HKDF-SHA-256 over the shared secret to a one-time AES-256-GCM key,
// the place the copy belongs to (application, secret name, node) bound in as associated data so a
// copy moved to another place does not open. Only the holder of the node's private key opens it.

import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';

/** One copy of a secret, sealed to one node's key. All binary fields are base64url. */
export interface SealedCopy {
  /** The recipient's public key the copy was sealed to; a node with a new key needs a new copy. */
  key: string;
  /** The ephemeral public key. */
  epk: string;
  iv: string;
  /** Ciphertext followed by the 16-byte GCM tag. */
  ct: string;
}

/** Where a copy belongs: it opens only there. */
export interface SealPlace {
  application: string;
  name: string;
  node: string;
}

const INFO = Buffer.from('svc secret v1');
const TAG_BYTES = 16;

/** A node's sealing key pair: the private half stays in its state directory. */
export interface SealKeyPair {
  /** Raw X25519 public key, base64url (what the node record publishes). */
  publicKey: string;
  privateKey: KeyObject;
}

export function generateSealKey(): SealKeyPair {
  const { privateKey } = generateKeyPairSync('x25519');
  return sealKeyFromPrivate(privateKey);
}

export function sealKeyFromPrivate(privateKey: KeyObject): SealKeyPair {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  return { publicKey: jwk.x!, privateKey };
}

/** The private half as a JWK (for the key file), and back. */
export function exportSealKey(pair: SealKeyPair): JsonWebKey {
  return pair.privateKey.export({ format: 'jwk' });
}

export function importSealKey(jwk: unknown): SealKeyPair | null {
  const j = jwk as JsonWebKey | null;
  if (!j || typeof j !== 'object' || j.kty !== 'OKP' || j.crv !== 'X25519' || typeof j.d !== 'string')
    return null;
  try {
    return sealKeyFromPrivate(
      createPrivateKey({ key: j as import('node:crypto').JsonWebKey, format: 'jwk' }),
    );
  } catch {
    return null;
  }
}

/** Whether a value is a raw X25519 public key in base64url. */
export function isSealPublicKey(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9_-]{43}$/.test(value);
}

function publicKeyObject(raw: string): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: raw }, format: 'jwk' });
}

function placeBytes(place: SealPlace): Buffer {
  return Buffer.from(JSON.stringify([place.application, place.name, place.node]));
}

function derive(shared: Buffer, epk: string, recipient: string): Buffer {
  const salt = Buffer.concat([Buffer.from(epk, 'base64url'), Buffer.from(recipient, 'base64url')]);
  return Buffer.from(hkdfSync('sha256', shared, salt, INFO, 32));
}

/** Seals `value` to the node whose public key is `recipient`, for one place. */
export function seal(value: string, recipient: string, place: SealPlace): SealedCopy {
  const ephemeral = generateSealKey();
  const shared = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: publicKeyObject(recipient) });
  const key = derive(shared, ephemeral.publicKey, recipient);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(placeBytes(place));
  const ct = Buffer.concat([cipher.update(value, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return {
    key: recipient,
    epk: ephemeral.publicKey,
    iv: iv.toString('base64url'),
    ct: ct.toString('base64url'),
  };
}

/** Opens a copy with this node's key; null when it was not sealed to it, for this place, or was altered. */
export function open(copy: SealedCopy, own: SealKeyPair, place: SealPlace): string | null {
  if (copy.key !== own.publicKey || !isSealPublicKey(copy.epk)) return null;
  try {
    const shared = diffieHellman({ privateKey: own.privateKey, publicKey: publicKeyObject(copy.epk) });
    const key = derive(shared, copy.epk, own.publicKey);
    const bytes = Buffer.from(copy.ct, 'base64url');
    if (bytes.length < TAG_BYTES) return null;
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(copy.iv, 'base64url'));
    decipher.setAAD(placeBytes(place));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    return null;
  }
}
