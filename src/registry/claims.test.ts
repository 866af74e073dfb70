// Domain claims against a real local-directory bucket (docs/api.md "Custom
// domains"): conflicts, idempotence, the limit, and the write order —
// a claim cut short between its two writes routes nothing, and claiming again repairs it.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { refuses, tempStore } from '../../test/helpers/temp-store.ts';
import { routingInputFromRegistry } from '../routing/input.ts';
import type { Store } from '../store/store.ts';
import { getJson } from '../store/store.ts';
import {
  ensureApplicationForDeploy,
  getApplication,
  listApplications,
  retireApplication,
  setBlocked,
} from './applications.ts';
import {
  type ClaimRequest,
  claimDomain,
  domainsOf,
  MAX_DOMAINS_PER_APPLICATION,
  releaseDomain,
} from './domains.ts';
import { keys } from './keys.ts';
import type { DomainClaim } from './records.ts';

const platformDomains = ['apps.test'];

function claim(application: string, host: string, extra: Partial<ClaimRequest> = {}): ClaimRequest {
  return { application, host, wildcard: false, by: 'op-1', reaches: () => true, platformDomains, ...extra };
}

async function routedClaims(store: Store) {
  const claims: DomainClaim[] = [];
  for (const object of (await store.list(keys.domainClaimsPrefix, { recursive: true })).objects) {
    claims.push((await getJson<DomainClaim>(store, object.key))!.value);
  }
  const input = routingInputFromRegistry({
    nodes: [],
    applications: await listApplications(store),
    claims,
    nowMs: Date.now(),
    platformDomains,
    apiPublic: false,
    selfNodeId: 'n1',
  });
  return input.claims;
}

describe('domain claims', () => {
  let store: Store;
  before(async () => {
    store = await tempStore();
    for (const name of ['shop', 'shop-dev', 'other', 'secret', 'full'])
      await ensureApplicationForDeploy(store, name, {}, 'op-1');
  });
  after(async () => {
    await store?.close();
  });

  test('claims, answers platformHosts, and re-claiming is idempotent', async () => {
    const first = await claimDomain(store, claim('shop', 'shop.example'));
    assert.deepEqual(first.application.domains, ['shop.example']);
    assert.deepEqual(first.platformHosts, ['shop.apps.test']);
    assert.equal(first.host, 'shop.example');
    const again = await claimDomain(store, claim('shop', 'shop.example'));
    assert.deepEqual(again.application.domains, ['shop.example']);
    const record = await getJson<DomainClaim>(store, keys.domainClaim('shop.example'));
    assert.equal(record?.value.application, 'shop');
    assert.equal(record?.value.wildcard, false);
  });

  test('a wildcard claim upgrades, and is never downgraded by a plain re-claim', async () => {
    await claimDomain(store, claim('shop', 'shop.example', { wildcard: true }));
    const plain = await claimDomain(store, claim('shop', 'shop.example'));
    assert.deepEqual(plain.application.wildcardDomains, ['shop.example']);
    assert.equal((await getJson<DomainClaim>(store, keys.domainClaim('shop.example')))?.value.wildcard, true);
    assert.deepEqual(domainsOf(plain.application), {
      application: 'shop',
      domains: ['shop.example'],
      wildcardDomains: ['shop.example'],
    });
  });

  test('reference-held: the host, its wildcard parent, a child of a wildcard base; holder named only in scope', async () => {
    const held = await refuses(
      () => claimDomain(store, claim('other', 'shop.example')),
      'reference-held',
      'Domain is held by another application',
    );
    assert.match(held.detail!, /application "shop"/);
    const hidden = await refuses(
      () => claimDomain(store, claim('other', 'shop.example', { reaches: (n) => n === 'other' })),
      'reference-held',
      'Domain is held by another application',
    );
    assert.doesNotMatch(hidden.detail!, /shop"/);
    assert.match(hidden.detail!, /another application/);

    // shop holds shop.example with subdomains: one label under it is shop's.
    const parent = await refuses(
      () => claimDomain(store, claim('shop-dev', 'dev.shop.example')),
      'reference-held',
      'Domain is held by another application',
    );
    assert.match(parent.detail!, /subdomains are claimed with "shop.example"/);
    // Two labels under is not covered by the wildcard.
    await claimDomain(store, claim('other', 'a.b.shop.example'));

    // A wildcard base with a host one label under it held by someone else.
    await claimDomain(store, claim('secret', 'api.corp.example'));
    const child = await refuses(
      () =>
        claimDomain(
          store,
          claim('other', 'corp.example', { wildcard: true, reaches: (n) => n !== 'secret' }),
        ),
      'reference-held',
      'Domain is held by another application',
    );
    assert.match(child.detail!, /"api.corp.example" is one label under it, held by another application/);
    // Nothing was left behind by the refusals.
    assert.equal(await store.stat(keys.domainClaim('corp.example')), null);
    // Without subdomains the base is free.
    await claimDomain(store, claim('other', 'corp.example'));
  });

  test('a blocked application cannot claim but can release', async () => {
    await claimDomain(store, claim('other', 'blocked.example'));
    await setBlocked(store, 'other', true);
    await refuses(
      () => claimDomain(store, claim('other', 'new.example')),
      'application-blocked',
      'Application is blocked',
    );
    const released = await releaseDomain(store, 'other', 'blocked.example', platformDomains);
    assert.ok(!released.application.domains.includes('blocked.example'));
    assert.deepEqual(released.platformHosts, [], 'a blocked application answers nowhere');
    assert.equal(await store.stat(keys.domainClaim('blocked.example')), null);
    await setBlocked(store, 'other', false);
  });

  test('a retired application answers at no platform host', async () => {
    await ensureApplicationForDeploy(store, 'gone', {}, 'op-1');
    await retireApplication(store, 'gone', 'op-1', 1000);
    assert.deepEqual((await claimDomain(store, claim('gone', 'gone.example'))).platformHosts, []);
  });

  test('releasing a host not held, or for a missing application, is not-found in the same words', async () => {
    const a = await refuses(
      () => releaseDomain(store, 'other', 'shop.example', platformDomains),
      'not-found',
      'No such domain',
    );
    const b = await refuses(
      () => releaseDomain(store, 'ghost', 'shop.example', platformDomains),
      'not-found',
      'No such domain',
    );
    assert.equal(a.detail!.replace('other', 'X'), b.detail!.replace('ghost', 'X'));
    await refuses(
      () => claimDomain(store, claim('ghost', 'ghost.example')),
      'not-found',
      'No such application',
    );
  });

  test(`at most ${MAX_DOMAINS_PER_APPLICATION} domains; re-claiming a held one stays allowed`, async () => {
    for (let i = 0; i < MAX_DOMAINS_PER_APPLICATION; i++)
      await claimDomain(store, claim('full', `h${i}.full.example`));
    await refuses(
      () => claimDomain(store, claim('full', 'one-more.example')),
      'invalid-input',
      'Too many domains',
    );
    assert.equal(await store.stat(keys.domainClaim('one-more.example')), null);
    await claimDomain(store, claim('full', 'h0.full.example'));
    assert.equal((await getApplication(store, 'full')).domains.length, MAX_DOMAINS_PER_APPLICATION);
  });

  test('concurrent claims of one host: exactly one application wins', async () => {
    const results = await Promise.allSettled(
      ['shop', 'other', 'secret'].map((name) => claimDomain(store, claim(name, 'contested.example'))),
    );
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    const holder = (await getJson<DomainClaim>(store, keys.domainClaim('contested.example')))!.value
      .application;
    for (const name of ['shop', 'other', 'secret']) {
      assert.equal(
        (await getApplication(store, name)).domains.includes('contested.example'),
        name === holder,
      );
    }
  });

  test('crash between the claim write and the listing: nothing routed; claiming again repairs', async () => {
    const crash = new Error('crash between writes');
    await assert.rejects(
      claimDomain(store, claim('secret', 'half.example', { afterClaimWritten: () => Promise.reject(crash) })),
      crash,
    );
    assert.equal(
      (await getJson<DomainClaim>(store, keys.domainClaim('half.example')))?.value.application,
      'secret',
    );
    assert.ok(!(await getApplication(store, 'secret')).domains.includes('half.example'));
    assert.ok(
      !(await routedClaims(store)).some((c) => c.host === 'half.example'),
      'a half claim is not routed',
    );
    // Another application still cannot take it.
    await refuses(
      () => claimDomain(store, claim('other', 'half.example')),
      'reference-held',
      'Domain is held by another application',
    );

    const repaired = await claimDomain(store, claim('secret', 'half.example'));
    assert.ok(repaired.application.domains.includes('half.example'));
    assert.ok(
      (await routedClaims(store)).some((c) => c.host === 'half.example' && c.application === 'secret'),
    );
  });

  test('crash in a wildcard upgrade: routed as the exact claim until re-run', async () => {
    await claimDomain(store, claim('secret', 'up.example'));
    await assert.rejects(
      claimDomain(
        store,
        claim('secret', 'up.example', {
          wildcard: true,
          afterClaimWritten: () => Promise.reject(new Error('x')),
        }),
      ),
    );
    const before = (await routedClaims(store)).find((c) => c.host === 'up.example');
    assert.equal(before?.wildcard, false);
    await claimDomain(store, claim('secret', 'up.example'));
    const afterRepair = (await routedClaims(store)).find((c) => c.host === 'up.example');
    assert.equal(afterRepair?.wildcard, true, 'a plain re-claim finishes the upgrade: never downgraded');
  });

  test('a release cut short (unlisted, claim left) is finished by releasing again', async () => {
    await claimDomain(store, claim('secret', 'leftover.example'));
    // The state a crash after the first release write leaves.
    const { updateApplication } = await import('./applications.ts');
    await updateApplication(store, 'secret', (r) => ({
      ...r,
      domains: r.domains.filter((h) => h !== 'leftover.example'),
    }));
    await releaseDomain(store, 'secret', 'leftover.example', platformDomains);
    assert.equal(await store.stat(keys.domainClaim('leftover.example')), null);
  });
});

test('every host reads back from its claim key, long ones split into two segments', () => {
  const ofLength = (n: number) => Array.from({ length: n }, (_, i) => (i % 64 === 63 ? '.' : 'a')).join('');
  const hosts = fc.oneof(fc.domain({ size: 'large' }), fc.integer({ min: 1, max: 253 }).map(ofLength));
  fc.assert(
    fc.property(hosts, (host) => {
      const key = keys.domainClaim(host);
      assert.equal(keys.hostOfClaim(key), host);
      for (const segment of key.split('/')) assert.ok(Buffer.byteLength(segment) <= 240, segment);
    }),
  );
});
