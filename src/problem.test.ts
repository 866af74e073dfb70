import assert from 'node:assert/strict';
import { test } from 'node:test';
import { causeChain, Problem, problemStatus, renderFailureLine } from './problem.ts';

test('every code maps to the status of docs/api.md "Error codes"', () => {
  const expected: Record<string, number> = {
    'auth-invalid': 401,
    'auth-scope': 403,
    'trust-mismatch': 403,
    'invalid-input': 400,
    'invalid-slug': 400,
    'not-found': 404,
    'reference-held': 409,
    'application-blocked': 409,
    'deploys-frozen': 409,
    'version-skew': 409,
    'capability-missing': 409,
    'cas-conflict': 409,
    'deploy-timeout': 408,
    'deploy-overloaded': 429,
    'resource-limit': 413,
    'store-unavailable': 503,
    draining: 503,
  };
  for (const [code, status] of Object.entries(expected)) {
    assert.equal(problemStatus[code as keyof typeof problemStatus], status, code);
  }
});

test('a problem renders as an RFC 9457 document', () => {
  const problem = new Problem('not-found', 'No such application', 'shop is not registered');
  assert.deepEqual(problem.toJSON(), {
    type: 'urn:svc:not-found',
    title: 'No such application',
    status: 404,
    detail: 'shop is not registered',
  });
});

test('the CLI failure line follows docs/cli.md "Output and exit status"', () => {
  assert.equal(
    renderFailureLine(new Problem('not-found', 'Node is not answering', 'http://x')),
    'svc: Node is not answering: http://x [urn:svc:not-found]',
  );
  assert.equal(
    renderFailureLine(new Problem('draining', 'No node is coordinating')),
    'svc: No node is coordinating [urn:svc:draining]',
  );
  const chain = new Error('a', {
    cause: new Error('b', {
      cause: new Error('c', { cause: new Error('d', { cause: new Error('e', { cause: new Error('f') }) }) }),
    }),
  });
  assert.equal(renderFailureLine(chain), 'svc: unexpected failure: a: b: c: d: e');
});

test('causeChain walks Error.cause outermost first, stops at a non-Error cause and at its limit', () => {
  const name = new TypeError('');
  assert.deepEqual(causeChain(new Error('outer', { cause: new Error('inner', { cause: 'why' }) })), [
    'outer',
    'inner',
    'why',
  ]);
  assert.deepEqual(causeChain(new Error('only')), ['only']);
  assert.deepEqual(causeChain(name), ['TypeError'], 'an empty message falls back to the name');
  assert.deepEqual(causeChain(new Error('a', { cause: new Error('b', { cause: new Error('c') }) }), 2), [
    'a',
    'b',
  ]);
  assert.deepEqual(causeChain('plain'), ['plain']);
  assert.deepEqual(causeChain(undefined), []);
});

test('a node problem document is re-rendered with the node code', () => {
  const problem = Problem.fromDocument(
    { type: 'urn:svc:deploys-frozen', title: 'Deploys are frozen', status: 409 },
    409,
  );
  assert.equal(problem.code, 'deploys-frozen');
  assert.equal(renderFailureLine(problem), 'svc: Deploys are frozen [urn:svc:deploys-frozen]');
  const odd = Problem.fromDocument({ type: 'urn:svc:future-code', title: 'New', status: 418 }, 418);
  assert.equal(renderFailureLine(odd), 'svc: New [urn:svc:future-code]');
});
