// The custom host claim rule (docs/applications.md "Custom domains"; docs/api.md "Custom domains"): examples
// of every rule with the words of its refusal, and properties over generated hosts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../problem.ts';
import { checkClaimHost, claimHostViolation } from './domains.ts';

const platform = ['apps.example.net', 'svc.test'];

function refusal(host: string, domains: string[] = platform): { title: string; detail: string } {
  try {
    checkClaimHost(host, domains);
  } catch (err) {
    assert.ok(err instanceof Problem);
    assert.equal(err.code, 'invalid-input');
    return { title: err.title, detail: err.detail ?? '' };
  }
  assert.fail(`${JSON.stringify(host)} was accepted`);
}

test('accepts ordinary hosts and lowercases them', () => {
  assert.equal(checkClaimHost('shop.example.com', platform), 'shop.example.com');
  assert.equal(checkClaimHost('Shop.Example.COM', platform), 'shop.example.com');
  assert.equal(checkClaimHost('xn--bcher-kva.example', platform), 'xn--bcher-kva.example');
  assert.equal(checkClaimHost('a-b.c1', platform), 'a-b.c1');
  assert.equal(checkClaimHost(`${'a'.repeat(63)}.com`, platform), `${'a'.repeat(63)}.com`);
  // Not under the platform domain, only sharing its last labels.
  assert.equal(checkClaimHost('myapps.example.net', platform), 'myapps.example.net');
});

test('each broken rule is named', () => {
  const cases: [string, RegExp][] = [
    ['', /empty/],
    ['https://shop.example.com', /no scheme/],
    ['shop.example.com/path', /no path/],
    ['shop.example.com?x=1', /no path/],
    ['*.shop.example.com', /no wildcard/],
    ['shop.example.com:8443', /no port/],
    ['[::1]', /no port/],
    ['my_shop.example.com', /no underscore/],
    ['shop.example.com.', /no trailing dot/],
    [`${'a.'.repeat(127)}com`, /at most 253 characters/],
    ['localhost', /at least two labels/],
    ['shop..example.com', /no empty label/],
    ['.example.com', /no empty label/],
    [`${'a'.repeat(64)}.com`, /at most 63 characters/],
    ['-shop.example.com', /label "-shop" must be letters, digits and inner hyphens/],
    ['shop-.example.com', /inner hyphens/],
    ['shöp.example.com', /inner hyphens/],
    ['shop example.com', /inner hyphens/],
    ['shop.exampl\u212a', /inner hyphens/],
    ['10.0.0.1', /last label is not digits alone/],
    ['shop.123', /last label is not digits alone/],
  ];
  for (const [host, rule] of cases) {
    const { title, detail } = refusal(host);
    assert.equal(title, 'Not a host to claim', host);
    assert.match(detail, rule, host);
  }
});

test('a platform domain and every host under it are refused naming the domain', () => {
  for (const host of ['apps.example.net', 'shop.apps.example.net', 'A.SVC.TEST', 'deep.er.svc.test']) {
    const { title, detail } = refusal(host);
    assert.equal(title, 'Host is under a platform domain', host);
    assert.match(detail, /(apps\.example\.net|svc\.test)/);
  }
});

// An oracle written independently of the implementation: one regular expression for the shape,
// plus the two rules a regular expression says badly.
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const SHAPE = new RegExp(`^(?:${LABEL}\\.)+${LABEL}$`);
function oracle(input: string, domains: string[]): boolean {
  const host = input.replace(/[A-Z]/g, (c) => c.toLowerCase());
  if (host.length > 253 || !SHAPE.test(host)) return false;
  if (/^[0-9]+$/.test(host.slice(host.lastIndexOf('.') + 1))) return false;
  return !domains.some((d) => host === d || host.endsWith(`.${d}`));
}

const labelChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'.split(''));
const innerChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-'.split(''));
const validLabel = fc
  .tuple(labelChar, fc.array(innerChar, { maxLength: 20 }), labelChar, fc.boolean())
  .map(([first, middle, last, short]) => (short ? first : `${first}${middle.join('')}${last}`));
const validHost = fc
  .tuple(
    fc.array(validLabel, { minLength: 1, maxLength: 4 }),
    validLabel.filter((l) => !/^[0-9]+$/.test(l)),
  )
  .map(([labels, tld]) => [...labels, tld].join('.'));
// Hosts broken in the ways an operator breaks them.
const brokenHost = fc.oneof(
  validHost.map((h) => `https://${h}`),
  validHost.map((h) => `${h}/`),
  validHost.map((h) => `${h}:80`),
  validHost.map((h) => `*.${h}`),
  validHost.map((h) => `${h}.`),
  validHost.map((h) => `_${h}`),
  validHost.map((h) => h.replace('.', '..')),
  validHost.map((h) => `-${h}`),
  validHost.map((h) => `${h}.42`),
  validLabel,
  validHost.map((h) => `${'x'.repeat(64)}.${h}`),
);
const noisyHost = fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 40 }));

test('property: generated valid hosts are accepted, upper case too, and agree with the oracle', () => {
  fc.assert(
    fc.property(validHost, fc.boolean(), (host, upper) => {
      const input = upper ? host.toUpperCase() : host;
      assert.equal(checkClaimHost(input, platform), host);
      assert.equal(oracle(input, platform), true);
    }),
  );
});

test('property: broken hosts are refused with invalid-input and agree with the oracle', () => {
  fc.assert(
    fc.property(brokenHost, (host) => {
      assert.equal(oracle(host, platform), false, host);
      assert.ok('violation' in claimHostViolation(host, platform), host);
      refusal(host);
    }),
  );
});

test('property: hosts under a platform domain are refused', () => {
  fc.assert(
    fc.property(validLabel, fc.constantFrom(...platform), (label, domain) => {
      assert.equal(refusal(`${label}.${domain}`).title, 'Host is under a platform domain');
    }),
  );
});

test('property: any string gets a verdict, never a crash, and the verdict matches the oracle', () => {
  fc.assert(
    fc.property(fc.oneof(noisyHost, validHost, brokenHost), (host) => {
      const verdict = claimHostViolation(host, platform);
      assert.equal('host' in verdict, oracle(host, platform), JSON.stringify(host));
    }),
    { numRuns: 2000 },
  );
});
