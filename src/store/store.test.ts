// The store interface's pure rules (docs/architecture.md "How a request flows"): keys
// both backends can hold, and S3's listing order, checked against their definitions.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../problem.ts';
import { checkCondition, checkKey, compareKeys, isValidKey, MAX_KEY_BYTES } from './store.ts';

test('compareKeys orders keys by their UTF-8 bytes, as S3 lists them', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
      const bytes = Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));
      assert.equal(Math.sign(compareKeys(a, b)), bytes);
    }),
  );
  // JavaScript's own order puts the emoji (a surrogate pair) first; UTF-8 puts it last.
  assert.ok(compareKeys('\u{1f600}', '\ufffd') > 0);
});

test('checkKey accepts keys of non-empty segments up to 1,024 bytes and refuses the rest', () => {
  for (const key of ['a', 'a/b.json', '_svc/apps/x/app.json', '.hidden/..x', 'é'.repeat(MAX_KEY_BYTES / 2)]) {
    assert.equal(checkKey(key), key);
  }
  for (const key of [
    '',
    '/a',
    'a/',
    'a//b',
    '.',
    '..',
    'a/./b',
    'a/../b',
    'a\tb',
    'a\u007fb',
    'é'.repeat(513),
  ]) {
    assert.throws(
      () => checkKey(key),
      (err: unknown) =>
        err instanceof Problem && err.code === 'invalid-input' && err.title === 'Invalid bucket key',
      JSON.stringify(key),
    );
  }
});

test('checkKey never throws anything but invalid-input', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 1_100 }), (key) => {
      try {
        assert.equal(checkKey(key), key);
      } catch (err) {
        assert.ok(err instanceof Problem && err.code === 'invalid-input', String(err));
      }
    }),
  );
});

test('checkCondition refuses both conditions at once and any ifNoneMatch but *', () => {
  checkCondition('k', undefined);
  checkCondition('k', { ifMatch: '"e"' });
  checkCondition('k', { ifNoneMatch: '*' });
  for (const condition of [{ ifMatch: '"e"', ifNoneMatch: '*' as const }, { ifNoneMatch: 'e' as '*' }]) {
    assert.throws(
      () => checkCondition('k', condition),
      (err: unknown) =>
        err instanceof Problem && err.code === 'invalid-input' && err.title === 'Invalid write condition',
    );
  }
});

test('isValidKey answers what checkKey accepts', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (key) => {
      let accepted = true;
      try {
        checkKey(key);
      } catch {
        accepted = false;
      }
      assert.equal(isValidKey(key), accepted);
    }),
  );
});
