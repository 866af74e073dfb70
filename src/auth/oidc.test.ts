// Workload token verification against a real OpenID issuer served over loopback HTTP
// (test/helpers/oidc-issuer.ts): the algorithm table, issuer selection before any fetch, the
// 300 s cache, the 30 s backoff, the 64-issuer bound, skew, and auth-invalid vs trust-mismatch.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hs256Token, startTestIssuer, type TestIssuer } from '../../test/helpers/oidc-issuer.ts';
import { Problem } from '../problem.ts';
import type { TrustPolicy } from '../registry/trust.ts';
import { WorkloadVerifier } from './oidc.ts';

function policyFor(issuer: string, subjects: string[], audience = 'svc'): TrustPolicy {
  return { v: 1, application: 'shop', entries: [{ issuer, audience, subjects }], updatedAt: '' };
}

async function refuses(run: Promise<unknown>, code: 'auth-invalid' | 'trust-mismatch'): Promise<Problem> {
  try {
    await run;
  } catch (err) {
    assert.ok(err instanceof Problem, String(err));
    assert.equal(err.code, code, `${err.title}: ${err.detail}`);
    return err;
  }
  assert.fail(`expected ${code}`);
}

describe('workload tokens', () => {
  let issuer: TestIssuer;
  let clock = Date.now();
  let policy: TrustPolicy | null;
  let verifier: WorkloadVerifier;
  const subject = 'repo:acme/shop:ref:refs/heads/main';

  before(async () => {
    issuer = await startTestIssuer();
  });
  after(async () => {
    await issuer.close();
  });

  const fresh = () => {
    clock = Date.now();
    issuer.requests.length = 0;
    policy = policyFor(issuer.issuer, ['repo:acme/shop:*']);
    verifier = new WorkloadVerifier({ loadPolicy: async () => policy, now: () => clock });
  };

  test('a matching subject is admitted, for every algorithm of the table the issuer holds', async () => {
    fresh();
    for (const alg of ['RS256', 'ES256', 'EdDSA', 'PS384', 'ES512']) {
      const token = await issuer.sign({ sub: subject, aud: 'svc' }, { alg });
      const caller = await verifier.verify(token, 'shop');
      assert.deepEqual(caller, { kind: 'workload', issuer: issuer.issuer, subject, application: 'shop' });
    }
  });

  test('another subject or audience is trust-mismatch, ending with the command that trusts it', async () => {
    fresh();
    const other = await issuer.sign({ sub: 'repo:evil/fork:ref:refs/heads/main', aud: 'svc' });
    const problem = await refuses(verifier.verify(other, 'shop'), 'trust-mismatch');
    assert.equal(problem.status, 403);
    assert.match(
      problem.detail!,
      /svc trust add --name shop --issuer http:\/\/127\.0\.0\.1:\d+ --subject repo:evil\/fork:ref:refs\/heads\/main$/,
    );
    const wrongAudience = await issuer.sign({ sub: subject, aud: 'sts.amazonaws.com' });
    const second = await refuses(verifier.verify(wrongAudience, 'shop'), 'trust-mismatch');
    assert.match(second.detail!, /--audience sts\.amazonaws\.com$/);
  });

  test('an audience list is admitted when one of its members is trusted', async () => {
    fresh();
    const token = await issuer.sign({ sub: subject, aud: ['other', 'svc'] });
    assert.equal((await verifier.verify(token, 'shop')).kind, 'workload');
  });

  test('HS256, none and unknown algorithms are refused outright, nothing fetched', async () => {
    fresh();
    await refuses(
      verifier.verify(await hs256Token({ iss: issuer.issuer, sub: subject, aud: 'svc' }), 'shop'),
      'auth-invalid',
    );
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(
      JSON.stringify({ iss: issuer.issuer, sub: subject, aud: 'svc', exp: 9e9 }),
    ).toString('base64url')}.`;
    await refuses(verifier.verify(none, 'shop'), 'auth-invalid');
    assert.deepEqual(issuer.requests, []);
  });

  test('an issuer the policy does not name is auth-invalid before anything is fetched', async () => {
    fresh();
    policy = policyFor('https://token.actions.githubusercontent.com', ['*']);
    await refuses(verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop'), 'auth-invalid');
    policy = null;
    await refuses(verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop'), 'auth-invalid');
    await refuses(verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), null), 'auth-invalid');
    assert.deepEqual(issuer.requests, []);
  });

  test('expired beyond skew, not yet valid, bad signature, missing sub or exp: auth-invalid', async () => {
    fresh();
    await refuses(
      verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }, { iatOffsetS: -400 }), 'shop'),
      'auth-invalid',
    );
    // Expired 20 s ago: inside the 30 s skew.
    assert.equal(
      (await verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }, { iatOffsetS: -320 }), 'shop'))
        .kind,
      'workload',
    );
    await refuses(
      verifier.verify(
        await issuer.sign({ sub: subject, aud: 'svc', nbf: Math.floor(Date.now() / 1000) + 120 }),
        'shop',
      ),
      'auth-invalid',
    );
    const token = await issuer.sign({ sub: subject, aud: 'svc' });
    const [h, p, s] = token.split('.') as [string, string, string];
    const flipped = `${h}.${p}.${s.startsWith('A') ? `B${s.slice(1)}` : `A${s.slice(1)}`}`;
    await refuses(verifier.verify(flipped, 'shop'), 'auth-invalid');
    await refuses(verifier.verify(await issuer.sign({ aud: 'svc' }), 'shop'), 'auth-invalid');
    await refuses(verifier.verify('not.a.token', 'shop'), 'auth-invalid');
    await refuses(verifier.verify('x'.repeat(20_000), 'shop'), 'auth-invalid');
  });

  test('discovery and keys are fetched once and cached for 300 s', async () => {
    fresh();
    for (let i = 0; i < 3; i++)
      await verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop');
    const once = issuer.requests.length;
    assert.equal(once, 2, `discovery + jwks, got ${issuer.requests.join(', ')}`);
    clock += 299_000;
    await verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop');
    assert.equal(issuer.requests.length, once);
    clock += 2_000;
    await verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop');
    assert.ok(issuer.requests.length > once, 'rediscovered after 300 s');
  });

  test('a failed discovery backs the issuer off for 30 s', async () => {
    fresh();
    issuer.failDiscovery(true);
    try {
      await refuses(verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop'), 'auth-invalid');
      assert.equal(issuer.requests.length, 1);
      issuer.failDiscovery(false);
      clock += 29_000;
      await refuses(verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop'), 'auth-invalid');
      assert.equal(issuer.requests.length, 1, 'nothing fetched during the backoff');
      clock += 2_000;
      assert.equal(
        (await verifier.verify(await issuer.sign({ sub: subject, aud: 'svc' }), 'shop')).kind,
        'workload',
      );
    } finally {
      issuer.failDiscovery(false);
    }
  });

  test('a discovery document naming another issuer is refused', async () => {
    const suffixed = await startTestIssuer({ issuerSuffix: '/tenant' });
    try {
      const v = new WorkloadVerifier({
        // The policy names the issuer with a trailing slash: discovery answers without it.
        loadPolicy: async () => policyFor(`${suffixed.issuer}/`, ['*']),
      });
      const token = await suffixed.sign({ iss: `${suffixed.issuer}/`, sub: 'x', aud: 'svc' });
      await refuses(v.verify(token, 'shop'), 'auth-invalid');
    } finally {
      await suffixed.close();
    }
  });

  test('at most 64 issuers are cached; the least recently used goes first', async () => {
    const v = new WorkloadVerifier({
      loadPolicy: async () => null,
      maxIssuers: 64,
      fetch: async () => new Response('{}', { status: 404 }),
    });
    // Reach the cache through its public face: tokens whose issuers the policy names.
    const issuers = Array.from({ length: 70 }, (_, i) => `https://issuer-${i}.example`);
    const named = new WorkloadVerifier({
      loadPolicy: async () => ({
        v: 1,
        application: 'shop',
        entries: issuers.map((iss) => ({ issuer: iss, audience: 'svc', subjects: ['*'] })),
        updatedAt: '',
      }),
      fetch: async () => new Response('{}', { status: 404 }),
    });
    const unsigned = (iss: string) =>
      `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(
        JSON.stringify({ iss, sub: 's', aud: 'svc', exp: 9e9 }),
      ).toString('base64url')}.c2ln`;
    for (const iss of issuers) await refuses(named.verify(unsigned(iss), 'shop'), 'auth-invalid');
    assert.equal(named.cachedIssuers.length, 64);
    assert.equal(named.cachedIssuers[0], 'https://issuer-6.example');
    assert.equal(v.cachedIssuers.length, 0);
  });

  test('a request that takes longer than the bound fails and backs off', async () => {
    let calls = 0;
    const v = new WorkloadVerifier({
      loadPolicy: async () => policyFor('https://slow.example', ['*']),
      requestMs: 50,
      fetch: (_input, init) => {
        calls++;
        return new Promise((_resolve, reject) => {
          init?.signal?.addEventListener('abort', () => reject(init.signal!.reason));
        });
      },
    });
    const unsigned = `${Buffer.from('{"alg":"ES256"}').toString('base64url')}.${Buffer.from(
      JSON.stringify({ iss: 'https://slow.example', sub: 's', aud: 'svc', exp: 9e9 }),
    ).toString('base64url')}.c2ln`;
    await refuses(v.verify(unsigned, 'shop'), 'auth-invalid');
    await refuses(v.verify(unsigned, 'shop'), 'auth-invalid');
    assert.equal(calls, 1);
  });
});
