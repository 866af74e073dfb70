// What a node checks of sealed secrets handed to its secret routes (docs/api.md "Secrets"): the
// body's form, that every secret carries exactly one copy for each serving node, sealed to the
// key that node publishes now, and that the copy sealed to the answering node opens with its own
// key in its place (so a copy sealed for another application, name or node is refused at once,
// not found unopenable by every node later). The node never sees more than ciphertexts, except
// its own copy, which it opens anyway to serve the secret; the value is dropped at once.

import { Problem } from '../problem.ts';
import { isNodeId } from '../registry/names.ts';
import { isSealPublicKey, open, type SealedCopy, type SealKeyPair } from './seal.ts';
import {
  checkSecretName,
  MAX_SECRET_BYTES,
  MAX_SECRETS,
  type Recipient,
  type SealedSecrets,
} from './secrets.ts';

/**
 * The most bytes a body of sealed secrets may hold: every secret is one copy per node, so this
 * is well over the node API's general JSON bound (64 KiB by default).
 */
export const MAX_SEALED_BODY_BYTES = 8 * 1024 * 1024;

/** AES-GCM's tag, after the ciphertext. */
const TAG_BYTES = 16;
const IV_CHARS = 16;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** The title of the refusal a caller answers by reading the recipients again. */
export const NOT_SEALED_TITLE = 'Not sealed to the serving nodes';

const malformed = (detail: string) => new Problem('invalid-input', 'Malformed request', detail);

/** `{ secrets: { NAME: { sealed: { <node>: { key, epk, iv, ct } } } } }`, checked member by member. */
export function parseSealedSecretsBody(body: unknown): SealedSecrets {
  const secrets = isObject(body) ? body.secrets : undefined;
  if (!isObject(secrets)) {
    throw malformed('the body must be { "secrets": { "<NAME>": { "sealed": { "<node>": copy } } } }');
  }
  const names = Object.keys(secrets);
  if (names.length === 0) throw malformed('`secrets` names no secret');
  if (names.length > MAX_SECRETS) {
    throw new Problem(
      'resource-limit',
      'Too many secrets',
      `the body sets ${names.length} secrets; an application may hold ${MAX_SECRETS}`,
    );
  }
  const sealed: SealedSecrets = {};
  for (const name of names) {
    checkSecretName(name);
    const entry = secrets[name];
    const copies = isObject(entry) ? entry.sealed : undefined;
    if (!isObject(copies)) throw malformed(`secrets.${name} must be { "sealed": { "<node>": copy } }`);
    // Built from entries: a node id may be any id, `__proto__` included, and stays a plain member.
    sealed[name] = Object.fromEntries(
      Object.entries(copies).map(([node, copy]) => {
        if (!isNodeId(node))
          throw malformed(`secrets.${name}.sealed names ${JSON.stringify(node)}, which is no node id`);
        return [node, checkCopy(copy, `${name} for ${node}`)];
      }),
    );
  }
  return sealed;
}

function checkCopy(value: unknown, where: string): SealedCopy {
  const copy = isObject(value) ? value : {};
  const members = Object.keys(copy).sort().join(',');
  const { key, epk, iv, ct } = copy;
  if (
    members !== 'ct,epk,iv,key' ||
    !isSealPublicKey(key) ||
    !isSealPublicKey(epk) ||
    typeof iv !== 'string' ||
    iv.length !== IV_CHARS ||
    !BASE64URL.test(iv) ||
    typeof ct !== 'string' ||
    !BASE64URL.test(ct)
  ) {
    throw malformed(
      `the copy of ${where} must be { key, epk, iv, ct }: X25519 keys, a 12-byte IV and the ciphertext, in base64url`,
    );
  }
  const bytes = Math.floor((ct.length * 3) / 4) - TAG_BYTES;
  if (bytes <= 0) throw new Problem('invalid-input', 'Empty secret', `the copy of ${where} seals no value`);
  if (bytes > MAX_SECRET_BYTES) {
    throw new Problem(
      'resource-limit',
      'Secret too large',
      `a secret holds at most ${MAX_SECRET_BYTES} bytes`,
    );
  }
  return { key, epk, iv, ct };
}

/**
 * Every secret is sealed to exactly the serving nodes, each copy to the key its node publishes
 * now. Refused otherwise, naming what differs: a node joined, left or changed its key since the
 * caller read the recipients, or the copies were made for another fleet.
 */
export function checkSealedTo(sealed: SealedSecrets, recipients: readonly Recipient[]): void {
  const keyOf = new Map(recipients.map((r) => [r.node, r.key]));
  const problems: string[] = [];
  for (const [name, copies] of Object.entries(sealed)) {
    const missing = recipients.filter((r) => !Object.hasOwn(copies, r.node)).map((r) => r.node);
    const strangers = Object.keys(copies).filter((node) => !keyOf.has(node));
    const stale = Object.entries(copies)
      .filter(([node, copy]) => keyOf.has(node) && keyOf.get(node) !== copy.key)
      .map(([node]) => node);
    if (missing.length > 0) problems.push(`${name} has no copy for ${missing.join(', ')}`);
    if (strangers.length > 0) problems.push(`${name} has a copy for ${strangers.join(', ')}, not serving`);
    if (stale.length > 0) problems.push(`${name}'s copy for ${stale.join(', ')} is sealed to another key`);
  }
  if (problems.length > 0) {
    throw new Problem(
      'invalid-input',
      NOT_SEALED_TITLE,
      `${problems.join('; ')}; read the recipients again (GET .../secrets) and seal to them`,
    );
  }
}

/** The copies sealed to `own.node` open with its key in their place; refused otherwise. */
export function checkOwnCopies(
  sealed: SealedSecrets,
  application: string,
  own: { node: string; pair: SealKeyPair },
): void {
  for (const [name, copies] of Object.entries(sealed)) {
    const copy = copies[own.node];
    if (!copy) continue;
    if (open(copy, own.pair, { application, name, node: own.node }) === null) {
      throw new Problem(
        'invalid-input',
        'Sealed copy does not open',
        `the copy of ${name} sealed to ${own.node} does not open with its key: it was sealed for another application, name or node, or altered`,
      );
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
