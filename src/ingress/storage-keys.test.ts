import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../problem.ts';
import { checkStorageKey, isRecursive, storageKeyFromPath, storageKeyToPath } from './storage-keys.ts';

const refused = (fn: () => unknown) =>
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof Problem && err.code === 'invalid-input' && err.title === 'Invalid storage key',
  );

test('valid keys pass unchanged', () => {
  for (const key of [
    'a',
    'certificates/acme/example.com/example.com.crt',
    'issue_cert_*.example.com',
    'a b/c',
  ]) {
    assert.equal(checkStorageKey(key), key);
  }
});

test('the key rules refuse every broken shape', () => {
  for (const key of [
    '',
    '/a',
    'a/',
    'a//b',
    '.',
    '..',
    'a/./b',
    'a/../b',
    '../etc/passwd',
    'a\u0000b',
    'a\nb',
    'é',
    'a\u007f',
  ]) {
    refused(() => checkStorageKey(key));
  }
});

test('percent-encoding cannot smuggle separators or traversal', () => {
  refused(() => storageKeyFromPath('a%2Fb'));
  refused(() => storageKeyFromPath('%2E%2E/x'));
  refused(() => storageKeyFromPath('a/%2e'));
  refused(() => storageKeyFromPath('%E0%A4%A'));
  refused(() => storageKeyFromPath('a%00b'));
  assert.equal(storageKeyFromPath('a%20b/c'), 'a b/c');
});

test('recursive is truthy only for true and 1', () => {
  assert.equal(isRecursive('true'), true);
  assert.equal(isRecursive('1'), true);
  for (const value of ['TRUE', 'yes', '0', 'false', '', undefined]) assert.equal(isRecursive(value), false);
});

test('property: a path either decodes to a valid key inside the keyspace or is invalid-input', () => {
  const segment = fc.oneof(
    fc.string({ maxLength: 8 }),
    fc.constantFrom('.', '..', '%2e%2e', '%2F', '%00', '%', '%zz', '', 'a', 'b.c'),
  );
  fc.assert(
    fc.property(fc.array(segment, { maxLength: 6 }), (segments) => {
      const path = segments.join('/');
      let key: string;
      try {
        key = storageKeyFromPath(path);
      } catch (err) {
        assert.ok(err instanceof Problem && err.code === 'invalid-input', `unexpected ${String(err)}`);
        return;
      }
      assert.ok(!key.startsWith('/') && !key.endsWith('/'));
      for (const part of key.split('/')) assert.ok(part !== '' && part !== '.' && part !== '..');
      assert.match(key, /^[\x20-\x7e]+$/);
    }),
    { numRuns: 2000 },
  );
});

test('property: encoding then decoding a valid key is the identity', () => {
  const printable = fc.string({
    unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    minLength: 1,
    maxLength: 10,
  });
  fc.assert(
    fc.property(
      fc.array(
        printable.filter((s) => !s.includes('/') && s !== '.' && s !== '..'),
        { minLength: 1, maxLength: 5 },
      ),
      (parts) => {
        const key = parts.join('/');
        assert.equal(storageKeyFromPath(storageKeyToPath(key)), key);
      },
    ),
  );
});
