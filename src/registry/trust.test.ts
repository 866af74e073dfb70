// Trust policies: subject patterns, the verdicts, and set/add/remove as conditional writes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { Problem } from '../problem.ts';
import { keys } from './keys.ts';
import {
  addTrustedSubjects,
  checkIssuer,
  judgeToken,
  readTrustPolicy,
  removeTrustedIssuer,
  setTrustedSubjects,
  subjectMatches,
} from './trust.ts';

const GH = 'https://token.actions.githubusercontent.com';

test('subject patterns: * matches any run, everything else exactly', () => {
  assert.ok(subjectMatches('repo:acme/shop:*', 'repo:acme/shop:ref:refs/heads/main'));
  assert.ok(subjectMatches('repo:acme/shop:*', 'repo:acme/shop:'));
  assert.ok(subjectMatches('*', ''));
  assert.ok(subjectMatches('a*b*c', 'abc'));
  assert.ok(subjectMatches('a*b*c', 'aXXbYYc'));
  assert.ok(!subjectMatches('a*b*c', 'aXXcYYb'));
  assert.ok(!subjectMatches('repo:acme/shop', 'repo:acme/shop:ref'));
  assert.ok(!subjectMatches('repo:acme/*', 'repo:acme'));
  assert.ok(!subjectMatches('a.c', 'abc'), 'no other wildcard');
  assert.ok(!subjectMatches('ab*ba', 'aba'));
});

test('property: subjectMatches agrees with an anchored regular expression', () => {
  fc.assert(
    fc.property(fc.stringMatching(/^[ab*]{0,8}$/), fc.stringMatching(/^[ab]{0,10}$/), (pattern, subject) => {
      const regex = new RegExp(`^${pattern.split('*').join('.*')}$`, 's');
      assert.equal(subjectMatches(pattern, subject), regex.test(subject), `${pattern} vs ${subject}`);
    }),
    { numRuns: 3000 },
  );
});

test('issuers: https, or http on loopback; kept exactly as given', () => {
  assert.equal(checkIssuer(GH), GH);
  assert.equal(checkIssuer('https://example.com/tenant/'), 'https://example.com/tenant/');
  assert.equal(checkIssuer('http://127.0.0.1:8080'), 'http://127.0.0.1:8080');
  for (const bad of [
    '',
    'token.actions',
    'http://example.com',
    'ftp://x',
    'https://x/?a=1',
    'https://x/#f',
    'https://u:p@x',
  ]) {
    assert.throws(
      () => checkIssuer(bad),
      (err: unknown) => err instanceof Problem && err.code === 'invalid-input',
    );
  }
});

test('set replaces the subjects of one issuer and audience, leaving the rest', async () => {
  const store = new MemoryStore();
  await setTrustedSubjects(store, 'shop', {
    issuer: GH,
    audience: 'svc',
    subjects: ['repo:a/*', 'repo:b/*'],
  });
  await setTrustedSubjects(store, 'shop', { issuer: GH, audience: 'other', subjects: ['x'] });
  await setTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects: ['repo:c/*'] });
  const policy = await readTrustPolicy(store, 'shop');
  assert.deepEqual(policy?.entries, [
    { issuer: GH, audience: 'other', subjects: ['x'] },
    { issuer: GH, audience: 'svc', subjects: ['repo:c/*'] },
  ]);
});

test('add keeps existing subjects, deduplicates, and creates the policy', async () => {
  const store = new MemoryStore();
  await addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects: ['b', 'a'] });
  await addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects: ['a', 'c'] });
  assert.deepEqual((await readTrustPolicy(store, 'shop'))?.entries, [
    { issuer: GH, audience: 'svc', subjects: ['a', 'b', 'c'] },
  ]);
});

test('remove drops every audience of an issuer, and the record with the last entry', async () => {
  const store = new MemoryStore();
  await addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects: ['a'] });
  await addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'x', subjects: ['a'] });
  await addTrustedSubjects(store, 'shop', { issuer: 'https://gitlab.com', audience: 'svc', subjects: ['a'] });
  const first = await removeTrustedIssuer(store, 'shop', GH);
  assert.equal(first.removed, true);
  assert.deepEqual(
    first.policy?.entries.map((e) => e.issuer),
    ['https://gitlab.com'],
  );
  assert.equal((await removeTrustedIssuer(store, 'shop', GH)).removed, false);
  const last = await removeTrustedIssuer(store, 'shop', 'https://gitlab.com');
  assert.equal(last.policy, null);
  assert.equal(await store.get(keys.trustPolicy('shop')), null);
});

test('concurrent adds both land (conditional writes retried)', async () => {
  const store = new MemoryStore();
  await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects: [`s${i}`] }),
    ),
  );
  assert.equal((await readTrustPolicy(store, 'shop'))?.entries[0]?.subjects.length, 8);
});

test('bad subjects and audiences are invalid-input', async () => {
  const store = new MemoryStore();
  for (const subjects of [[], [''], ['a\nb'], ['x'.repeat(600)]]) {
    await assert.rejects(
      addTrustedSubjects(store, 'shop', { issuer: GH, audience: 'svc', subjects }),
      (err: unknown) => err instanceof Problem && err.code === 'invalid-input',
    );
  }
  await assert.rejects(
    addTrustedSubjects(store, 'shop', { issuer: GH, audience: '', subjects: ['a'] }),
    (err: unknown) => err instanceof Problem && err.code === 'invalid-input',
  );
});

test('verdicts: issuer unknown, admitted, not admitted', () => {
  const policy = {
    v: 1 as const,
    application: 'shop',
    entries: [{ issuer: GH, audience: 'svc', subjects: ['repo:acme/*'] }],
    updatedAt: '',
  };
  assert.equal(
    judgeToken(null, { issuer: GH, audiences: ['svc'], subject: 'repo:acme/x' }),
    'issuer-unknown',
  );
  assert.equal(
    judgeToken(policy, { issuer: 'https://x', audiences: ['svc'], subject: 'repo:acme/x' }),
    'issuer-unknown',
  );
  assert.equal(judgeToken(policy, { issuer: GH, audiences: ['svc'], subject: 'repo:acme/x' }), 'admitted');
  assert.equal(
    judgeToken(policy, { issuer: GH, audiences: ['aws'], subject: 'repo:acme/x' }),
    'not-admitted',
  );
  assert.equal(
    judgeToken(policy, { issuer: GH, audiences: ['svc'], subject: 'repo:evil/x' }),
    'not-admitted',
  );
});

test('a tampered record never trusts more than it says', async () => {
  const store = new MemoryStore();
  await store.putJson(keys.trustPolicy('shop'), {
    v: 1,
    entries: [{ issuer: GH, audience: 'svc', subjects: 'everything' }, { issuer: 7 }, null],
  });
  assert.deepEqual((await readTrustPolicy(store, 'shop'))?.entries, []);
});
