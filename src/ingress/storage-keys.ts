// Storage protocol v1 keys (docs/ingress.md "The storage protocol (version 1)"): `/`-separated, relative,
// printable ASCII, no empty, `.` or `..` segment, no leading or trailing slash. The
// node maps a valid key into its own keyspace only (keys.ingressObject), so no key
// can name anything else in the bucket.

import { Problem } from '../problem.ts';

/** Longest key the node accepts; S3 keys stop at 1,024 bytes and the keyspace prefix takes some. */
export const MAX_STORAGE_KEY_LENGTH = 900;

function invalidKey(detail: string): Problem {
  return new Problem('invalid-input', 'Invalid storage key', detail);
}

/** Answers the key when it follows the rules, else throws `invalid-input` (Invalid storage key). */
export function checkStorageKey(key: string): string {
  if (key === '') throw invalidKey('the key is empty');
  if (key.length > MAX_STORAGE_KEY_LENGTH)
    throw invalidKey(`the key is longer than ${MAX_STORAGE_KEY_LENGTH} characters`);
  if (!/^[\x20-\x7e]+$/.test(key)) {
    throw invalidKey('keys are printable ASCII');
  }
  if (key.startsWith('/') || key.endsWith('/')) throw invalidKey('a key has no leading or trailing slash');
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw invalidKey(`the key has an empty, "." or ".." segment: ${JSON.stringify(key)}`);
    }
  }
  return key;
}

/**
 * Decodes the key from a request path tail (each component percent-encoded, separators
 * preserved). A component that decodes to a `/` or a non-printable character is refused,
 * so `%2F` and `%2E%2E` tricks cannot change the key's shape after validation.
 */
export function storageKeyFromPath(tail: string): string {
  const parts = tail.split('/').map((part) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(part);
    } catch {
      throw invalidKey('the key is not valid percent-encoding');
    }
    if (decoded.includes('/')) throw invalidKey('a key component may not encode a slash');
    return decoded;
  });
  return checkStorageKey(parts.join('/'));
}

/** Encodes a key for a request path: each component percent-encoded, separators kept. */
export function storageKeyToPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

/** `recursive` is truthy only for `true` and `1`. */
export function isRecursive(value: unknown): boolean {
  return value === 'true' || value === '1';
}

/** Lock names follow the key rules (they are named after keys, e.g. `issue_cert_<domain>`). */
export function checkLockName(name: string): string {
  return checkStorageKey(name);
}
