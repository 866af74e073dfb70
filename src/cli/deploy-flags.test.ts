// What `svc deploy` takes from its flags and environment before reading any file.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Problem } from '../problem.ts';
import {
  checkWorkerConfigFlag,
  metadataFromFlags,
  parseQueueTimeout,
  sourceFromEnvironment,
} from './deploy-flags.ts';

const refusal = (title: string) => (err: unknown) =>
  err instanceof Problem && err.code === 'invalid-input' && err.title === title;

test('a deploy from CI carries its source', () => {
  assert.deepEqual(
    sourceFromEnvironment({
      GITHUB_ACTIONS: 'true',
      GITHUB_REPOSITORY: 'acme/shop',
      GITHUB_REF: 'refs/heads/main',
      GITHUB_SHA: 'abc',
    }),
    { provider: 'github', repo: 'acme/shop', ref: 'refs/heads/main', commit: 'abc' },
  );
  assert.equal(sourceFromEnvironment({}), undefined);
});

test('--queue-timeout is a non-negative number of seconds, in milliseconds', () => {
  assert.equal(parseQueueTimeout('600'), 600_000);
  assert.equal(parseQueueTimeout('0'), 0);
  assert.equal(parseQueueTimeout('1.5'), 1500);
  for (const bad of ['', ' ', '-1', 'soon', 'Infinity']) {
    assert.throws(() => parseQueueTimeout(bad), refusal('Invalid queue timeout'), JSON.stringify(bad));
  }
});

test('metadata carries replicas and a node selector when given, nothing otherwise', () => {
  assert.deepEqual(metadataFromFlags({}, {}), {});
  assert.deepEqual(metadataFromFlags({ replicas: 'all', nodeSelector: ['role=edge', 'zone=a=b'] }, {}), {
    replicas: 'all',
    nodeSelector: { role: 'edge', zone: 'a=b' },
  });
  assert.deepEqual(metadataFromFlags({ replicas: '3' }, {}), { replicas: 3 });
});

test('metadata refuses a bad --replicas and a bad or repeated --node-selector', () => {
  for (const bad of ['0', '-1', '1.5', 'two', '']) {
    assert.throws(() => metadataFromFlags({ replicas: bad }, {}), refusal('Invalid --replicas'), bad);
  }
  for (const bad of [['role'], ['=edge'], ['role=a', 'role=b']]) {
    assert.throws(
      () => metadataFromFlags({ nodeSelector: bad }, {}),
      refusal('Invalid --node-selector'),
      bad.join(' '),
    );
  }
});

test('a selector key such as __proto__ is an own key, not a prototype change', () => {
  const { nodeSelector } = metadataFromFlags({ nodeSelector: ['__proto__=x'] }, {});
  assert.equal(Object.getPrototypeOf(nodeSelector), Object.prototype);
  assert.deepEqual(Object.keys(nodeSelector!), ['__proto__']);
});

test("--config naming a worker config is refused with the flag that takes it (-c); svc's own config passes", () => {
  for (const given of ['wrangler.toml', './wrangler.jsonc', 'deploy/cell.json', 'wrangler.json']) {
    assert.throws(
      () => checkWorkerConfigFlag({ config: given }),
      (err: unknown) => {
        assert.ok(refusal('Invalid --config')(err), String(err));
        assert.equal((err as Problem).status, 400);
        assert.match((err as Problem).detail!, new RegExp(`with -c ${given.replace('.', '\\.')}`));
        return true;
      },
    );
  }
  checkWorkerConfigFlag({ config: 'svc.config.jsonc' });
  checkWorkerConfigFlag({});
});
