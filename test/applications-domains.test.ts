// docs/api.md "Custom domains" against a real `svc sail`:
// every refusal of the table, idempotence, no downgrade, `platformHosts`, and a property test
// that the node's verdict on generated hosts is the CLI's (`checkClaimHost`).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { claimHostViolation } from '../src/registry/domains.ts';
import { keys } from '../src/registry/keys.ts';
import type { DomainClaim } from '../src/registry/records.ts';
import { getJson } from '../src/store/store.ts';
import { assertProblem, type Bucket, call, openBucket, type Signer } from './helpers/applications.ts';
import type { SailProcess } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let shopAll: Signer;
let shopOnly: Signer;
let blogOnly: Signer;
let peer: Signer;

const claim = (name: string, host: string, signer: Signer, query = '') =>
  call(node.url, 'POST', `/v1/applications/${name}/domains/${encodeURIComponent(host)}${query}`, { signer });
const release = (name: string, host: string, signer: Signer) =>
  call(node.url, 'DELETE', `/v1/applications/${name}/domains/${encodeURIComponent(host)}`, { signer });

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  shopAll = await bucket.operator('op-shop-all', 'operator', ['shop', 'shop-*']);
  shopOnly = await bucket.operator('op-shop-only', 'operator', ['shop', 'shop-dev']);
  blogOnly = await bucket.operator('op-blog', 'operator', ['blog']);
  peer = await bucket.node('node-peer');
  for (const name of ['shop', 'shop-dev', 'blog', 'full', 'frozen']) await bucket.application(name);
  node = await bucket.sail(['--platform-domains', 'apps.test', '--platform-domains', 'other.test']);
});
after(async () => {
  await bucket?.close();
});

describe('claiming', () => {
  test('answers the record, the host and the platform hosts', async () => {
    const answer = await claim('shop', 'Shop.Example', shopAll);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.host, 'shop.example');
    assert.deepEqual(answer.body.platformHosts, ['shop.apps.test', 'shop.other.test']);
    assert.deepEqual(answer.body.application.domains, ['shop.example']);
    assert.ok(!('labels' in answer.body.application), 'redacted for a non-admin');
    const stored = await getJson<DomainClaim>(bucket.store, keys.domainClaim('shop.example'));
    assert.equal(stored?.value.application, 'shop');
    assert.equal(stored?.value.by, 'op-shop-all');
  });

  test('re-claiming is idempotent; a wildcard claim is never downgraded', async () => {
    assert.equal((await claim('shop', 'shop.example', shopAll)).status, 200);
    const wild = await claim('shop', 'shop.example', shopAll, '?wildcard=1');
    assert.deepEqual(wild.body.application.wildcardDomains, ['shop.example']);
    const plain = await claim('shop', 'shop.example', shopAll);
    assert.deepEqual(plain.body.application.wildcardDomains, ['shop.example']);
    assert.deepEqual(plain.body.application.domains, ['shop.example']);
  });

  test('hosts of 236 to 253 characters are claimed and released on a directory bucket', async () => {
    const label = (n: number) => 'a'.repeat(n);
    // 63-character labels and a shorter last one, up to the 253-character limit.
    for (const length of [236, 240, 253]) {
      const host = `${[label(63), label(63), label(63)].join('.')}.${label(length - 3 * 64 - 8)}.example`;
      assert.equal(host.length, length);
      const claimed = await claim('blog', host, admin);
      assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
      assert.equal((await getJson<DomainClaim>(bucket.store, keys.domainClaim(host)))?.value.host, host);
      const released = await release('blog', host, admin);
      assert.equal(released.status, 200, JSON.stringify(released.body));
      assert.equal(await getJson(bucket.store, keys.domainClaim(host)), null);
    }
  });

  test('only wildcard=1 counts', async () => {
    for (const value of ['true', 'yes', '0', '']) {
      const answer = await claim(
        'shop',
        `only-one-${value || 'empty'}.example`,
        shopAll,
        `?wildcard=${value}`,
      );
      assert.equal(answer.status, 200);
      assert.ok(!answer.body.application.wildcardDomains.includes(answer.body.host), value);
    }
  });

  test('auth-scope: wildcard needs a key reaching <name>-*; out of scope; node tokens', async () => {
    assertProblem(
      await claim('shop', 'wild.example', shopOnly, '?wildcard=1'),
      403,
      'auth-scope',
      'Out of scope',
      /shop-\*/,
    );
    assertProblem(await claim('blog', 'blog.example', shopAll), 403, 'auth-scope', 'Out of scope');
    assertProblem(await claim('shop', 'peer.example', peer), 403, 'auth-scope', 'Operator key required');
    assertProblem(await release('shop', 'shop.example', peer), 403, 'auth-scope', 'Operator key required');
    assertProblem(await release('blog', 'blog.example', shopAll), 403, 'auth-scope', 'Out of scope');
  });

  test('invalid-input: no host to claim, each rule named', async () => {
    const cases: [string, RegExp][] = [
      ['http://x.example', /no scheme/],
      ['x.example/a', /no path/],
      ['x.example:443', /no port/],
      ['*.x.example', /no wildcard/],
      ['x.example.', /no trailing dot/],
      ['a..example', /no empty label/],
      [`${'a'.repeat(64)}.example`, /at most 63 characters/],
      [`${'abcdefghi.'.repeat(25)}example`, /at most 253 characters/],
      ['-a.example', /inner hyphens/],
      ['a_b.example', /no underscore/],
      ['localhost', /at least two labels/],
      ['10.1.2.3', /digits alone/],
    ];
    for (const [host, rule] of cases) {
      assertProblem(await claim('shop', host, shopAll), 400, 'invalid-input', 'Not a host to claim', rule);
    }
  });

  test('invalid-input: a platform domain or a host under one, named', async () => {
    for (const host of ['apps.test', 'shop.apps.test', 'a.b.other.test', 'OTHER.test']) {
      assertProblem(
        await claim('shop', host, shopAll),
        400,
        'invalid-input',
        'Host is under a platform domain',
        /apps\.test|other\.test/,
      );
    }
  });

  test('invalid-input: at most 64 domains', async () => {
    for (let i = 0; i < 64; i++) assert.equal((await claim('full', `d${i}.full.example`, admin)).status, 200);
    assertProblem(await claim('full', 'more.example', admin), 400, 'invalid-input', 'Too many domains');
    assert.equal(
      (await claim('full', 'd7.full.example', admin)).status,
      200,
      're-claiming a held host is fine',
    );
  });

  test('not-found: missing application on POST; on DELETE the same words for both', async () => {
    assertProblem(await claim('ghost', 'ghost.example', admin), 404, 'not-found', 'No such application');
    const missingApp = await release('ghost', 'shop.example', admin);
    const notHeld = await release('blog', 'shop.example', admin);
    assertProblem(missingApp, 404, 'not-found', 'No such domain');
    assertProblem(notHeld, 404, 'not-found', 'No such domain');
    assert.equal(missingApp.body.detail.replace('ghost', 'X'), notHeld.body.detail.replace('blog', 'X'));
  });

  test('application-blocked on claim; releasing stays open', async () => {
    assert.equal((await claim('frozen', 'frozen.example', admin)).status, 200);
    await call(node.url, 'POST', '/v1/applications/frozen/block', { signer: admin });
    assertProblem(
      await claim('frozen', 'another.example', admin),
      409,
      'application-blocked',
      'Application is blocked',
    );
    const released = await release('frozen', 'frozen.example', admin);
    assert.equal(released.status, 200);
    assert.deepEqual(released.body.application.domains, []);
    assert.deepEqual(released.body.platformHosts, [], 'a blocked application answers at no platform host');
  });

  test('reference-held: the host, its wildcard parent, a child of a wildcard base; holder named only in scope', async () => {
    const inScope = await claim('shop-dev', 'shop.example', shopAll);
    assertProblem(
      inScope,
      409,
      'reference-held',
      'Domain is held by another application',
      /application "shop"/,
    );
    const outOfScope = await claim('blog', 'shop.example', blogOnly);
    assertProblem(
      outOfScope,
      409,
      'reference-held',
      'Domain is held by another application',
      /another application/,
    );
    assert.doesNotMatch(outOfScope.body.detail, /"shop"/);
    // shop.example covers its subdomains: dev.shop.example is shop's.
    assertProblem(
      await claim('blog', 'dev.shop.example', blogOnly),
      409,
      'reference-held',
      'Domain is held by another application',
      /subdomains are claimed with "shop.example", held by another application/,
    );
    // A base whose one-label child is held by another.
    assert.equal((await claim('blog', 'api.corp.example', blogOnly)).status, 200);
    assertProblem(
      await claim('shop', 'corp.example', shopAll, '?wildcard=1'),
      409,
      'reference-held',
      'Domain is held by another application',
      /"api.corp.example" is one label under it, held by another application/,
    );
    assertProblem(
      await claim('shop', 'corp.example', admin, '?wildcard=1'),
      409,
      'reference-held',
      'Domain is held by another application',
      /held by application "blog"/,
    );
  });

  test('release removes the claim and the listing', async () => {
    assert.equal((await claim('blog', 'gone.example', blogOnly)).status, 200);
    const released = await release('blog', 'gone.example', blogOnly);
    assert.equal(released.status, 200);
    assert.equal(released.body.host, 'gone.example');
    assert.ok(!released.body.application.domains.includes('gone.example'));
    assert.equal(await bucket.store.stat(keys.domainClaim('gone.example')), null);
    assertProblem(await release('blog', 'gone.example', blogOnly), 404, 'not-found', 'No such domain');
  });
});

test('property: the node refuses exactly the hosts the CLI check refuses', async () => {
  const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?$/);
  const host = fc.oneof(
    fc.array(label, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.')),
    fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => `${labels.join('.')}.apps.test`),
    fc.string({ minLength: 1, maxLength: 30 }),
    fc.constantFrom('a.B', 'x.1', 'x..y', 'x.y.', '_x.y', 'x-.y', 'x.y:1', 'ä.de', 'a.b/c', 'a.b?c', 'a.b#c'),
  );
  await fc.assert(
    fc.asyncProperty(host, async (candidate) => {
      // `.` and `..` are path segments no URL keeps, and an empty segment is another route.
      fc.pre(candidate !== '.' && candidate !== '..' && candidate.trim() !== '');
      const verdict = claimHostViolation(candidate, ['apps.test', 'other.test']);
      const answer = await claim('blog', candidate, admin);
      if ('host' in verdict) {
        // Accepted by both (a held host would be reference-held; these are fresh per run).
        assert.ok(
          answer.status === 200 ||
            answer.body.type === 'urn:svc:reference-held' ||
            answer.body.title === 'Too many domains',
          `${candidate}: ${JSON.stringify(answer.body)}`,
        );
        if (answer.status === 200) await release('blog', verdict.host, admin);
      } else {
        assert.equal(answer.status, 400, `${candidate}: ${JSON.stringify(answer.body)}`);
        assert.equal(answer.body.type, 'urn:svc:invalid-input');
        assert.equal(answer.body.title, verdict.violation.title, candidate);
      }
    }),
    { numRuns: 150 },
  );
});
