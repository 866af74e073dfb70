// The node's WireGuard keypair: X25519 in WireGuard's key format (32 bytes, standard base64, the
// form `wg genkey` and `wg pubkey` print). The private half lives only in the state directory,
// owner-readable; only the public half ever reaches the bucket (src/wireguard/publication.ts).

import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createStateFile } from '../config/state-file.ts';
import { Problem } from '../problem.ts';

/** The private key file inside the state directory. */
export const PRIVATE_KEY_FILE = 'wireguard-private.key';

export interface WireguardKeypair {
  /** Base64 of the 32-byte private scalar; never leaves the node's disk. */
  privateKey: string;
  /** Base64 of the 32-byte public key peers name this node by. */
  publicKey: string;
}

/** A 32-byte key in standard base64 with its one `=` of padding: 44 characters. */
const KEY_PATTERN = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

export function isWireguardKey(text: string): boolean {
  return KEY_PATTERN.test(text);
}

// PKCS#8 wrapping of a raw X25519 private key (RFC 8410): a fixed 16-byte header, then the key.
const PKCS8_X25519_HEADER = Buffer.from('302e020100300506032b656e04220420', 'hex');

function privateKeyObject(privateKey: string): KeyObject {
  return createPrivateKey({
    key: Buffer.concat([PKCS8_X25519_HEADER, Buffer.from(privateKey, 'base64')]),
    format: 'der',
    type: 'pkcs8',
  });
}

function base64OfJwkPart(part: string | undefined): string {
  if (!part) throw new Error('X25519 key without its JWK part');
  return Buffer.from(part, 'base64url').toString('base64');
}

/** The public half of a private key, as `wg pubkey` would print it. */
export function publicKeyOf(privateKey: string): string {
  return base64OfJwkPart(createPublicKey(privateKeyObject(privateKey)).export({ format: 'jwk' }).x);
}

export function generateKeypair(): WireguardKeypair {
  const { privateKey } = generateKeyPairSync('x25519');
  const jwk = privateKey.export({ format: 'jwk' });
  return { privateKey: base64OfJwkPart(jwk.d), publicKey: base64OfJwkPart(jwk.x) };
}

/** The keypair kept in the state directory; null when there is none. A damaged file is refused. */
export async function readKeypair(stateDir: string): Promise<WireguardKeypair | null> {
  const file = join(stateDir, PRIVATE_KEY_FILE);
  let text: string;
  try {
    text = (await readFile(file, 'utf8')).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  if (!isWireguardKey(text)) {
    throw new Problem(
      'invalid-input',
      'Unreadable WireGuard key',
      `${file} does not hold one base64 WireGuard private key; remove it and run \`svc wg init\` for a new one`,
    );
  }
  return { privateKey: text, publicKey: publicKeyOf(text) };
}

/** The kept keypair, or a new one written owner-readable (0600) inside the state directory. */
export async function ensureKeypair(stateDir: string): Promise<WireguardKeypair> {
  const kept = await readKeypair(stateDir);
  if (kept) return kept;
  const pair = generateKeypair();
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  // Two commands racing on a fresh state directory keep whichever key landed first; a full disk
  // leaves no cut key (docs/supervisor.md "A full disk").
  if (await createStateFile(join(stateDir, PRIVATE_KEY_FILE), `${pair.privateKey}\n`)) return pair;
  return (await readKeypair(stateDir)) as WireguardKeypair;
}

/** The kept keypair; none is `invalid-input` (`svc wg peers` never makes one). */
export async function requireKeypair(stateDir: string): Promise<WireguardKeypair> {
  const kept = await readKeypair(stateDir);
  if (kept) return kept;
  throw new Problem(
    'invalid-input',
    'No WireGuard key in the state directory',
    `${join(stateDir, PRIVATE_KEY_FILE)} does not exist; run \`svc wg init\` to make one`,
  );
}
