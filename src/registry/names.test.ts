// Application names and `--name`/`--env` resolution (docs/api.md "Identifiers and name rules";
// docs/cli.md "Flag groups").

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../problem.ts';
import {
  checkNodeId,
  checkOperatorId,
  isApplicationName,
  isNodeId,
  isOperatorId,
  isScriptName,
  resolveApplicationName,
} from './names.ts';

test('application names: 1-63 lowercase alphanumerics with single inner hyphens', () => {
  for (const name of ['a', 'shop', 'shop-dev', 'a1-b2-c3', '0', 'x'.repeat(63)])
    assert.ok(isApplicationName(name), name);
  for (const name of ['', 'Shop', 'shop--dev', '-shop', 'shop-', 'sh_op', 'sh.op', 'x'.repeat(64), 'shöp']) {
    assert.ok(!isApplicationName(name), name);
  }
  assert.ok(!isApplicationName(undefined));
  assert.ok(!isApplicationName(42));
});

test('--name alone and --name with --env', () => {
  assert.equal(resolveApplicationName('shop'), 'shop');
  assert.equal(resolveApplicationName('shop', 'dev'), 'shop-dev');
});

test('invalid-slug names both parts', () => {
  const cases: [string | undefined, string | undefined][] = [
    ['Shop', undefined],
    ['shop', 'Dev'],
    ['shop-', 'dev'],
    ['x'.repeat(40), 'y'.repeat(30)],
    ['shop', ''],
  ];
  for (const [name, env] of cases) {
    assert.throws(
      () => resolveApplicationName(name, env),
      (err: unknown) => {
        assert.ok(err instanceof Problem);
        assert.equal(err.code, 'invalid-slug');
        assert.equal(err.title, 'Invalid application name');
        assert.ok(err.detail?.includes(`--name ${JSON.stringify(name)}`));
        if (env !== undefined) assert.ok(err.detail?.includes(`--env ${JSON.stringify(env)}`));
        return true;
      },
    );
  }
});

test('property: a resolved name is always an application name', () => {
  fc.assert(
    fc.property(
      fc.string({ maxLength: 40 }),
      fc.option(fc.string({ maxLength: 40 }), { nil: undefined }),
      (name, env) => {
        try {
          assert.ok(isApplicationName(resolveApplicationName(name, env)));
        } catch (err) {
          assert.ok(err instanceof Problem && err.code === 'invalid-slug');
        }
      },
    ),
  );
});

test('node and operator ids: 1-128 of [A-Za-z0-9_.-], never . or ..', () => {
  for (const id of ['n1', 'node-1a2b', 'Edge_2.eu', '...', 'x'.repeat(128)]) {
    assert.ok(isNodeId(id), id);
    assert.ok(isOperatorId(id), id);
    assert.equal(checkNodeId(id, '--node-id'), id);
  }
  for (const id of ['', '.', '..', 'a/b', 'a b', 'nöde', 'x'.repeat(129), undefined, 7]) {
    assert.ok(!isNodeId(id), String(id));
    assert.ok(!isOperatorId(id), String(id));
  }
  assert.throws(
    () => checkNodeId('..', '--node-id'),
    (err: unknown) =>
      err instanceof Problem &&
      err.code === 'invalid-slug' &&
      err.title === 'Invalid node id' &&
      err.detail!.startsWith('--node-id: ".."'),
  );
  assert.throws(
    () => checkOperatorId('a/b'),
    (err: unknown) =>
      err instanceof Problem && err.code === 'invalid-slug' && err.title === 'Invalid operator id',
  );
});

test('script names: the application-name rule, never a reserved folder of deploy/', () => {
  for (const name of ['worker', 'api-v2', 'x'.repeat(63)]) assert.ok(isScriptName(name), name);
  for (const name of ['images', 'queues', 'Worker', 'a--b', '', 'x'.repeat(64), null]) {
    assert.ok(!isScriptName(name), String(name));
  }
});
