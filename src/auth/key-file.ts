// Operator key documents (docs/cli.md "svc operator", "svc remote";
// docs/identity.md "Tokens"). Three shapes, all JSON:
//   key file       { v, kind: 'svc-operator-key', id, publicKey, privateKey }    (keygen; 0600)
//   portable file  the key file plus { remote, endpoints } (kind 'svc-portable-key'; 0600)
//   public doc     { v, kind: 'svc-operator-public-key', id, publicKey }         (show; enroll input)
// Each may be given as a path or inline as `base64:<base64 of the document>` (the CI form).

import { randomBytes } from 'node:crypto';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { Problem } from '../problem.ts';
import { checkOperatorId, isOperatorId } from '../registry/names.ts';
import {
  asPublicJwk,
  generateSigningKey,
  type PublicJwk,
  type SigningKeyPair,
  signingKeyFromJwk,
} from './ed25519.ts';

export const DEFAULT_KEY_FILE = 'svc-operator.json';
const INLINE_PREFIX = 'base64:';

/** An operator's signing key, and where it came from. */
export interface OperatorKey {
  id: string;
  pair: SigningKeyPair;
  /** Node base URLs a portable file carried. */
  endpoints?: string[];
  /** The remote a portable file was exported from. */
  remote?: string;
  /** Where it was read from, for messages (`--key`, a path, `SVC_OPERATOR_KEY`...). */
  source: string;
}

/** The public half, as `svc operator show` prints it and `enroll` reads it. */
export interface PublicKeyDocument {
  id: string;
  publicKey: PublicJwk;
}

/** A fresh operator id: `op-` and 16 hex digits. */
export function newOperatorId(): string {
  return `op-${randomBytes(8).toString('hex')}`;
}

export function generateOperatorKey(id: string = newOperatorId()): OperatorKey {
  return { id: checkOperatorId(id, '--id'), pair: generateSigningKey(), source: 'generated' };
}

export function keyFileDocument(key: OperatorKey): object {
  return {
    v: 1,
    kind: 'svc-operator-key',
    id: key.id,
    publicKey: key.pair.publicJwk,
    privateKey: key.pair.privateJwk,
  };
}

export function portableDocument(key: OperatorKey, remote: string, endpoints: readonly string[]): object {
  return { ...keyFileDocument(key), kind: 'svc-portable-key', remote, endpoints: [...endpoints] };
}

export function publicDocument(key: {
  id: string;
  pair: SigningKeyPair;
}): PublicKeyDocument & { v: 1; kind: string } {
  return { v: 1, kind: 'svc-operator-public-key', id: key.id, publicKey: key.pair.publicJwk };
}

function unreadable(source: string, why: string): Problem {
  return new Problem('invalid-input', 'Unreadable operator key', `${source}: ${why}`);
}

function parseJsonObject(text: string, source: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw unreadable(source, 'not JSON');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw unreadable(source, 'not a JSON object');
  return value as Record<string, unknown>;
}

/** Reads a key file or a portable file (private half required). */
export function parseOperatorKey(text: string, source: string): OperatorKey {
  const doc = parseJsonObject(text, source);
  if (!isOperatorId(doc.id)) throw unreadable(source, 'id is missing or not an operator id');
  const pair = signingKeyFromJwk(doc.privateKey);
  if (!pair) throw unreadable(source, 'privateKey is not an Ed25519 private key (a public key cannot sign)');
  if (doc.publicKey !== undefined && asPublicJwk(doc.publicKey)?.x !== pair.publicJwk.x) {
    throw unreadable(source, 'publicKey is not the public half of privateKey');
  }
  const key: OperatorKey = { id: doc.id, pair, source };
  if (doc.endpoints !== undefined) key.endpoints = checkEndpoints(doc.endpoints, source);
  if (typeof doc.remote === 'string') key.remote = doc.remote;
  return key;
}

/** Reads any of the three documents for its public half. */
export function parsePublicDocument(text: string, source: string): PublicKeyDocument {
  const doc = parseJsonObject(text, source);
  if (!isOperatorId(doc.id)) throw unreadable(source, 'id is missing or not an operator id');
  const publicKey = asPublicJwk(doc.publicKey) ?? signingKeyFromJwk(doc.privateKey)?.publicJwk;
  if (!publicKey) throw unreadable(source, "publicKey must be { kty: 'OKP', crv: 'Ed25519', x }");
  return { id: doc.id, publicKey };
}

/** Node base URLs: http(s), no query or fragment; trailing slashes dropped. */
export function checkEndpoints(value: unknown, source: string): string[] {
  if (!Array.isArray(value))
    throw new Problem('invalid-input', 'Invalid endpoint', `${source}: endpoints must be a list of URLs`);
  return value.map((item) => checkEndpoint(item, source));
}

export function checkEndpoint(value: unknown, source: string): string {
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (
    !url ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.search ||
    url.hash ||
    url.username
  ) {
    throw new Problem(
      'invalid-input',
      'Invalid endpoint',
      `${source}: ${JSON.stringify(value)} is no node base URL such as https://node.example:7311`,
    );
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * The text a key reference names: `base64:<...>` inline, else a path. Group- or
 * world-readable private key files draw a warning through `warn`.
 */
export async function readKeyReference(
  reference: string,
  source: string,
  warn: (message: string) => void = () => {},
): Promise<{ text: string; source: string }> {
  if (reference.startsWith(INLINE_PREFIX)) {
    const encoded = reference.slice(INLINE_PREFIX.length).trim();
    if (!/^[A-Za-z0-9+/_-]+=*$/.test(encoded)) throw unreadable(source, 'the base64: value is not base64');
    return {
      text: Buffer.from(
        encoded,
        encoded.includes('-') || encoded.includes('_') ? 'base64url' : 'base64',
      ).toString('utf8'),
      source,
    };
  }
  let text: string;
  try {
    text = await readFile(reference, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Problem(
      'invalid-input',
      code === 'ENOENT' ? 'Key file not found' : 'Key file unreadable',
      `${source}: ${reference}${code === 'ENOENT' ? ' does not exist' : `: ${(err as Error).message}`}`,
    );
  }
  const mode = (await stat(reference)).mode;
  if (mode & 0o077 && text.includes('"d"')) {
    warn(`${reference} is readable by others than its owner; chmod 600 it`);
  }
  return { text, source: `${source} ${reference}` };
}

/** Loads a signing key from a path or an inline `base64:` value. */
export async function loadOperatorKey(
  reference: string,
  source: string,
  warn?: (message: string) => void,
): Promise<OperatorKey> {
  const read = await readKeyReference(reference, source, warn);
  return parseOperatorKey(read.text, read.source);
}

/** Loads a public key document from a path, an inline `base64:` value, or the document itself. */
export async function loadPublicDocument(reference: string, source: string): Promise<PublicKeyDocument> {
  if (reference.trimStart().startsWith('{')) return parsePublicDocument(reference, source);
  const read = await readKeyReference(reference, source);
  return parsePublicDocument(read.text, read.source);
}

/** Writes a file only its owner can read; never overwrites (a lost private key is unrecoverable). */
export async function writeSecretFile(path: string, text: string): Promise<void> {
  try {
    await writeFile(path, text, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new Problem(
        'invalid-input',
        'File exists',
        `refusing to overwrite ${path}; move it away or choose --out`,
      );
    }
    throw err;
  }
  // The umask may only have narrowed the mode; make it exactly 0600 regardless.
  await chmod(path, 0o600);
}
