// docs/api.md "Callers and tiers" (application scopes) and "Operator keys" (scope never past the
// caller's): pattern reach, coverage, narrowed reads, and a refusal that never discloses
// the key's scope.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isApplicationName, isOperatorId } from '../registry/names.ts';
import {
  type Caller,
  narrowList,
  patternCovered,
  readView,
  requireScope,
  scopeReaches,
  scopeWithin,
} from './caller.ts';

const op = (applications: string[], role: 'admin' | 'operator' = 'operator'): Caller => ({
  kind: 'operator',
  id: 'op-1',
  role,
  applications,
});

test('application names: 1-63 lowercase alphanumerics with single hyphens', () => {
  for (const good of ['a', 'shop', 'shop-eu', 'a1-b2-c3', 'x'.repeat(63)])
    assert.ok(isApplicationName(good), good);
  for (const bad of ['', '-a', 'a-', 'a--b', 'A', 'a_b', 'a.b', 'x'.repeat(64), 'é']) {
    assert.equal(isApplicationName(bad), false, bad);
  }
});

test('operator ids share the node id rule and never escape their key', () => {
  assert.ok(isOperatorId('op-1a2b'));
  for (const bad of ['', '.', '..', 'a/b', '../x', 'a b', 'x'.repeat(129)])
    assert.equal(isOperatorId(bad), false, bad);
});

test('scope patterns: *, exact names, prefix globs', () => {
  assert.ok(scopeReaches(op(['*']), 'anything'));
  assert.ok(scopeReaches(op(['shop-*']), 'shop-eu'));
  assert.equal(scopeReaches(op(['shop-*']), 'shop'), false);
  assert.equal(scopeReaches(op(['shop-*']), 'shopping'), false);
  assert.ok(scopeReaches(op(['shop']), 'shop'));
  assert.equal(scopeReaches(op(['shop']), 'shop-eu'), false);
  assert.ok(scopeReaches({ kind: 'node', id: 'n' }, 'any'));
  assert.equal(scopeReaches({ kind: 'ingress' }, 'any'), false);
  const workload: Caller = { kind: 'workload', issuer: 'https://i', subject: 's', application: 'shop' };
  assert.ok(scopeReaches(workload, 'shop'));
  assert.equal(scopeReaches(workload, 'shop-eu'), false);
});

test('an out-of-scope refusal names the application asked for, never the key scope', () => {
  assert.throws(
    () => requireScope(op(['secret-scope-*']), 'shop'),
    (err: Error & { code?: string; status?: number; title?: string; detail?: string }) => {
      assert.equal(err.code, 'auth-scope');
      assert.equal(err.status, 403);
      assert.equal(err.title, 'Out of scope');
      assert.ok(err.detail?.includes('shop'));
      assert.ok(!err.detail?.includes('secret-scope'));
      return true;
    },
  );
});

test('coverage: a requested scope never reaches past the granting scope', () => {
  assert.ok(scopeWithin(['*'], ['*']));
  assert.ok(scopeWithin(['*'], ['a', 'b-*']));
  assert.ok(scopeWithin(['shop-*'], ['shop-eu', 'shop-eu-*', 'shop-*']));
  assert.equal(patternCovered(['shop-*'], 'shop*'), false);
  assert.equal(patternCovered(['shop-*'], '*'), false);
  assert.equal(patternCovered(['a', 'b'], 'a*'), false);
  assert.ok(patternCovered(['a', 'b'], 'b'));
});

test('property: whatever a covered pattern reaches, the granting scope reaches', () => {
  const name = fc.stringMatching(/^[a-c]{1,3}(-[a-c]{1,2})?$/);
  const pattern = fc.oneof(
    name,
    name.map((n) => `${n}*`),
    fc.constant('*'),
  );
  fc.assert(
    fc.property(fc.array(pattern, { minLength: 1, maxLength: 3 }), pattern, name, (scope, requested, app) => {
      if (patternCovered(scope, requested) && scopeReaches(op([requested]), app)) {
        assert.ok(scopeReaches(op(scope), app));
      }
    }),
    { numRuns: 2000 },
  );
});

test('reads narrow: nodes and * admins see all; others what they reach, scoped', () => {
  const apps = ['a', 'shop-eu', 'shop-us'];
  assert.deepEqual(
    narrowList({ kind: 'node', id: 'n' }, apps, (x) => x),
    { items: apps, redact: false },
  );
  assert.deepEqual(
    narrowList(op(['*'], 'admin'), apps, (x) => x),
    { items: apps, redact: false },
  );
  assert.deepEqual(
    narrowList(op(['shop-*'], 'admin'), apps, (x) => x),
    {
      items: ['shop-eu', 'shop-us'],
      scoped: true,
      redact: false,
    },
  );
  assert.deepEqual(
    narrowList(op(['shop-*']), apps, (x) => x),
    {
      items: ['shop-eu', 'shop-us'],
      scoped: true,
      redact: true,
    },
  );
  // docs/api.md "Callers and tiers": `scoped` is present when operator scope filtered, even when it grants everything.
  assert.equal(readView(op(['*'])).scoped, true);
});
