// docs/api.md "Applications" and docs/applications.md "Lifecycle" against a real
// `svc sail` on a local-directory bucket: every route, its redaction, and every refusal with its
// status, `type` and title.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getApplication } from '../src/registry/applications.ts';
import { keys } from '../src/registry/keys.ts';
import type { ApplicationRecord } from '../src/registry/records.ts';
import { getJson, putJson } from '../src/store/store.ts';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import type { SailProcess } from './helpers/svc.ts';
import { waitFor } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let shopAdmin: Signer;
let shopOperator: Signer;
let outsider: Signer;
let peer: Signer;

const api = (method: string, path: string, signer?: Signer, body?: unknown) =>
  call(node.url, method, path, { signer, body });

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shopAdmin = await bucket.operator('op-shop-admin', 'admin', ['shop', 'shop-*']);
  shopOperator = await bucket.operator('op-shop', 'operator', ['shop', 'shop-*']);
  outsider = await bucket.operator('op-outsider', 'operator', ['blog']);
  peer = await bucket.node('node-peer');
  for (const name of ['shop', 'shop-dev', 'blog', 'zeta', 'alpha']) await bucket.application(name);
  node = await bucket.sail(['--platform-domains', 'apps.test'], { SVC_LOG_LEVEL: 'info' });
});
after(async () => {
  await bucket?.close();
});

describe('GET /v1/applications', () => {
  test('an admin sees every record, in name order, with labels', async () => {
    await api('POST', '/v1/applications/shop/labels', admin, { labels: { team: 'web' } });
    const answer = await api('GET', '/v1/applications', admin);
    assert.equal(answer.status, 200);
    assert.deepEqual(
      answer.body.applications.map((a: ApplicationRecord) => a.name),
      ['alpha', 'blog', 'shop', 'shop-dev', 'zeta'],
    );
    assert.equal(answer.body.scoped, undefined);
    assert.deepEqual(answer.body.applications[2].labels, { team: 'web' });
  });

  test('a non-admin sees what its key reaches, without labels, blocked visible, scoped', async () => {
    await api('POST', '/v1/applications/shop-dev/block', admin);
    const answer = await api('GET', '/v1/applications', shopOperator);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.scoped, true);
    assert.deepEqual(
      answer.body.applications.map((a: ApplicationRecord) => a.name),
      ['shop', 'shop-dev'],
    );
    for (const record of answer.body.applications) assert.ok(!('labels' in record));
    assert.equal(answer.body.applications[1].blocked, true);
    await api('POST', '/v1/applications/shop-dev/unblock', admin);
  });

  test('refusals: no token, a node token', async () => {
    assertProblem(await api('GET', '/v1/applications'), 401, 'auth-invalid', 'Token rejected');
    assertProblem(await api('GET', '/v1/applications', peer), 403, 'auth-scope', 'Operator key required');
  });
});

describe('GET /v1/applications/:name', () => {
  test('full for an admin, redacted for an operator', async () => {
    const full = await api('GET', '/v1/applications/shop', admin);
    assert.equal(full.status, 200);
    assert.deepEqual(full.body.application.labels, { team: 'web' });
    assert.equal(full.body.application.replicas, 'all');
    const redacted = await api('GET', '/v1/applications/shop', shopOperator);
    assert.equal(redacted.status, 200);
    assert.ok(!('labels' in redacted.body.application));
    assert.equal(redacted.body.application.blocked, false);
  });

  test('refusals: out of scope, missing, not a name, node token', async () => {
    assertProblem(await api('GET', '/v1/applications/shop', outsider), 403, 'auth-scope', 'Out of scope');
    assertProblem(await api('GET', '/v1/applications/ghost', admin), 404, 'not-found', 'No such application');
    assertProblem(
      await api('GET', '/v1/applications/Shop', admin),
      400,
      'invalid-slug',
      'Invalid application name',
    );
    assertProblem(
      await api('GET', '/v1/applications/shop', peer),
      403,
      'auth-scope',
      'Operator key required',
    );
  });
});

describe('block and unblock', () => {
  test('an admin blocks and unblocks; each emits one event naming the actor', async () => {
    const blocked = await api('POST', '/v1/applications/blog/block', admin);
    assert.equal(blocked.status, 200);
    assert.equal(blocked.body.application.blocked, true);
    const unblocked = await api('POST', '/v1/applications/blog/unblock', admin);
    assert.equal(unblocked.body.application.blocked, false);
    // Whole lines only: the log is written asynchronously, and other applications' events
    // (an earlier test unblocks shop-dev) must not satisfy the wait.
    const blogEvents = () =>
      node
        .log()
        .split('\n')
        .slice(0, -1)
        .filter((line) => line.includes('"event":"application.'))
        .map((line) => JSON.parse(line))
        .filter((e) => e.application === 'blog');
    await waitFor(
      () => blogEvents().some((e) => e.event === 'application.unblocked'),
      'the unblock event of blog',
    );
    const events = blogEvents();
    assert.deepEqual(
      events.map((e) => [e.event, e.actor]),
      [
        ['application.blocked', 'op-admin'],
        ['application.unblocked', 'op-admin'],
      ],
    );
  });

  test('scope is checked first, then the admin tier', async () => {
    // Out of scope and not an admin: the scope refusal wins.
    assertProblem(
      await api('POST', '/v1/applications/shop/block', outsider),
      403,
      'auth-scope',
      'Out of scope',
    );
    // An admin whose scope does not reach the name.
    assertProblem(
      await api('POST', '/v1/applications/blog/block', shopAdmin),
      403,
      'auth-scope',
      'Out of scope',
    );
    // In scope, operator tier.
    assertProblem(
      await api('POST', '/v1/applications/shop/block', shopOperator),
      403,
      'auth-scope',
      'Admin key required',
    );
    assertProblem(
      await api('POST', '/v1/applications/shop/unblock', shopOperator),
      403,
      'auth-scope',
      'Admin key required',
    );
    assertProblem(
      await api('POST', '/v1/applications/shop/block', peer),
      403,
      'auth-scope',
      'Operator key required',
    );
  });

  test('missing application', async () => {
    assertProblem(
      await api('POST', '/v1/applications/ghost/block', admin),
      404,
      'not-found',
      'No such application',
    );
    assertProblem(
      await api('POST', '/v1/applications/ghost/unblock', admin),
      404,
      'not-found',
      'No such application',
    );
  });
});

describe('labels', () => {
  test('replaced wholesale; {} clears', async () => {
    await api('POST', '/v1/applications/zeta/labels', admin, { labels: { a: '1', b: '2' } });
    const replaced = await api('POST', '/v1/applications/zeta/labels', admin, { labels: { c: '3' } });
    assert.deepEqual(replaced.body.application.labels, { c: '3' });
    const cleared = await api('POST', '/v1/applications/zeta/labels', admin, { labels: {} });
    assert.deepEqual(cleared.body.application.labels, {});
  });

  test('refusals: bodies, tier, missing application', async () => {
    for (const body of [
      undefined,
      {},
      { labels: null },
      { labels: 'a=b' },
      { labels: ['a'] },
      { labels: { a: 1 } },
      [1],
    ]) {
      assertProblem(
        await api('POST', '/v1/applications/zeta/labels', admin, body),
        400,
        'invalid-input',
        'Invalid labels',
      );
    }
    assertProblem(
      await call(node.url, 'POST', '/v1/applications/zeta/labels', { signer: admin, rawBody: '{"labels":' }),
      400,
      'invalid-input',
      'Malformed JSON body',
    );
    assertProblem(
      await api('POST', '/v1/applications/shop/labels', shopOperator, { labels: {} }),
      403,
      'auth-scope',
      'Admin key required',
    );
    assertProblem(
      await api('POST', '/v1/applications/ghost/labels', admin, { labels: {} }),
      404,
      'not-found',
      'No such application',
    );
  });
});

describe('retire and unretire', () => {
  test('a node token and an operator token both retire; unretire during grace', async () => {
    const retired = await api('POST', '/v1/applications/alpha/retire', peer);
    assert.equal(retired.status, 200);
    assert.equal(retired.body.application.retired.by, 'node-peer');
    const graceMs =
      Date.parse(retired.body.application.retired.graceUntil) -
      Date.parse(retired.body.application.retired.at);
    assert.equal(graceMs, 7 * 24 * 3600_000, 'the default grace is 7 days');
    const again = await api('POST', '/v1/applications/alpha/retire', admin);
    assert.deepEqual(
      again.body.application.retired,
      retired.body.application.retired,
      'the first stamp stands',
    );
    const back = await api('POST', '/v1/applications/alpha/unretire', admin);
    assert.equal(back.status, 200);
    assert.equal(back.body.application.retired, undefined);
    const byOperator = await api('POST', '/v1/applications/shop-dev/retire', shopOperator);
    assert.equal(byOperator.body.application.retired.by, 'op-shop');
    assert.ok(!('labels' in byOperator.body.application), 'a non-admin answer is redacted');
    await api('POST', '/v1/applications/shop-dev/unretire', peer);
  });

  test('unretire past the grace is refused', async () => {
    const found = (await getJson<ApplicationRecord>(bucket.store, keys.application('zeta')))!;
    await putJson(bucket.store, keys.application('zeta'), {
      ...found.value,
      retired: { at: '2020-01-01T00:00:00.000Z', by: 'op-admin', graceUntil: '2020-01-08T00:00:00.000Z' },
    });
    assertProblem(
      await api('POST', '/v1/applications/zeta/unretire', admin),
      400,
      'invalid-input',
      'Retirement grace period is over',
    );
  });

  test('refusals: out of scope, missing, not a name', async () => {
    for (const action of ['retire', 'unretire']) {
      assertProblem(
        await api('POST', `/v1/applications/blog/${action}`, shopOperator),
        403,
        'auth-scope',
        'Out of scope',
      );
      assertProblem(
        await api('POST', `/v1/applications/ghost/${action}`, peer),
        404,
        'not-found',
        'No such application',
      );
      assertProblem(
        await api('POST', `/v1/applications/-x/${action}`, peer),
        400,
        'invalid-slug',
        'Invalid application name',
      );
    }
  });
});

describe('selector', () => {
  test('set, unsatisfiable accepted, null clears', async () => {
    const set = await api('POST', '/v1/applications/shop/selector', peer, { selector: { zone: 'nowhere' } });
    assert.equal(set.status, 200);
    assert.deepEqual(set.body.application.selector, { zone: 'nowhere' });
    const cleared = await api('POST', '/v1/applications/shop/selector', shopOperator, { selector: null });
    assert.equal(cleared.body.application.selector, null);
  });

  test('refusals: omission and bad values, scope, missing', async () => {
    for (const body of [undefined, {}, { selector: 'zone=a' }, { selector: ['a'] }, { selector: { a: 1 } }]) {
      assertProblem(
        await api('POST', '/v1/applications/shop/selector', admin, body),
        400,
        'invalid-input',
        'Invalid selector',
      );
    }
    assertProblem(
      await api('POST', '/v1/applications/blog/selector', shopOperator, { selector: null }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await api('POST', '/v1/applications/ghost/selector', admin, { selector: null }),
      404,
      'not-found',
      'No such application',
    );
  });
});

describe('replicas', () => {
  test('all or a whole number >= 1', async () => {
    assert.equal(
      (await api('POST', '/v1/applications/shop/replicas', peer, { replicas: 3 })).body.application.replicas,
      3,
    );
    assert.equal(
      (await api('POST', '/v1/applications/shop/replicas', admin, { replicas: 'all' })).body.application
        .replicas,
      'all',
    );
  });

  test('refusals: null, omission, bad values, scope, missing', async () => {
    for (const body of [
      undefined,
      {},
      { replicas: null },
      { replicas: 0 },
      { replicas: -2 },
      { replicas: 2.5 },
      { replicas: '2' },
      { replicas: 'some' },
    ]) {
      assertProblem(
        await api('POST', '/v1/applications/shop/replicas', admin, body),
        400,
        'invalid-input',
        'Invalid replicas',
      );
    }
    assertProblem(
      await api('POST', '/v1/applications/blog/replicas', shopOperator, { replicas: 1 }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await api('POST', '/v1/applications/ghost/replicas', admin, { replicas: 1 }),
      404,
      'not-found',
      'No such application',
    );
  });
});

test('every write is visible in the bucket', async () => {
  const record = await getApplication(bucket.store, 'shop');
  assert.equal(record.replicas, 'all');
  assert.deepEqual(record.labels, { team: 'web' });
});
