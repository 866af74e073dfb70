// The address classification the fetch wrapper runs inside workerd, the setting's entries and the
// workerd config they make (docs/runtime.md "Outbound requests").

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  EGRESS_ALLOW_VARIABLE,
  egressEntriesFor,
  egressEnvironment,
  parseEgressEntry,
} from '../../src/runtime-contract/egress.ts';
import { ADDRESS_SOURCE, EGRESS_ENTRY_MODULE, egressRanges } from './egress.ts';
import { renderWorkerdConfig, type WorkerdPlan } from './workerd.ts';

// The worker's own copy of the code, loaded as a module.
const address = (await import(`data:text/javascript,${encodeURIComponent(ADDRESS_SOURCE)}`)) as {
  parseAddress(text: string): { bits: number; n: bigint } | null;
  parseCidr(text: string): { bits: number; n: bigint; len: number } | null;
  inCidr(a: { bits: number; n: bigint }, c: { bits: number; n: bigint; len: number }): boolean;
  addressKind(a: { bits: number; n: bigint }): string;
};

function kind(text: string): string {
  const parsed = address.parseAddress(text);
  assert.ok(parsed, `${text} parses`);
  return address.addressKind(parsed);
}

test('addresses are classified by the range that keeps them from being public', () => {
  assert.equal(kind('127.0.0.1'), 'loopback');
  assert.equal(kind('127.255.0.9'), 'loopback');
  assert.equal(kind('10.1.2.3'), 'private (RFC 1918)');
  assert.equal(kind('172.31.255.255'), 'private (RFC 1918)');
  assert.equal(kind('172.32.0.1'), 'public');
  assert.equal(kind('192.168.0.10'), 'private (RFC 1918)');
  assert.equal(kind('169.254.169.254'), 'link-local');
  assert.equal(kind('100.64.0.1'), 'carrier-grade NAT (RFC 6598)');
  assert.equal(kind('0.0.0.0'), 'unspecified');
  assert.equal(kind('8.8.8.8'), 'public');
  assert.equal(kind('[::1]'), 'loopback');
  assert.equal(kind('[::]'), 'unspecified');
  assert.equal(kind('[fd00::1]'), 'unique-local');
  assert.equal(kind('[fe80::1]'), 'link-local');
  assert.equal(kind('[::ffff:127.0.0.1]'), 'loopback');
  assert.equal(kind('[::ffff:7f00:1]'), 'loopback');
  assert.equal(kind('[2606:4700::1111]'), 'public');
  for (const text of ['1.2.3', '256.1.1.1', 'example.com', '[1::2::3]', '[1:2:3:4:5:6:7:8:9]', 'localhost'])
    assert.equal(address.parseAddress(text), null, text);
});

test('an address is in a range by its leading bits, of its own family only', () => {
  const inRange = (a: string, c: string) => address.inCidr(address.parseAddress(a)!, address.parseCidr(c)!);
  assert.ok(inRange('192.168.1.77', '192.168.1.0/24'));
  assert.ok(!inRange('192.168.2.1', '192.168.1.0/24'));
  assert.ok(inRange('127.0.0.1', '127.0.0.1'));
  assert.ok(inRange('[fd12::9]', 'fd00::/8'));
  assert.ok(!inRange('[::ffff:10.0.0.1]', '10.0.0.0/8'));
  assert.ok(inRange('1.2.3.4', '0.0.0.0/0'));
  assert.equal(address.parseCidr('10.0.0.0/33'), null);
});

test('entries of the setting: for every application, or app=… for one', () => {
  assert.deepEqual(parseEgressEntry('10.0.0.0/8'), { application: null, target: '10.0.0.0/8' });
  assert.deepEqual(parseEgressEntry('shop=db.lan'), { application: 'shop', target: 'db.lan' });
  assert.deepEqual(parseEgressEntry('shop=fd00::/8'), { application: 'shop', target: 'fd00::/8' });
  assert.match(parseEgressEntry('10.0.0.0/40') as string, /is not a CIDR range/);
  assert.match(parseEgressEntry('db.lan/24') as string, /is not a CIDR range/);
  assert.match(parseEgressEntry('Shop!=10.0.0.1') as string, /is not an application name/);
  assert.match(parseEgressEntry('db lan') as string, /is not an IP address, a CIDR range or a host name/);
  const env = { [EGRESS_ALLOW_VARIABLE]: '10.0.0.0/8\nshop=db.lan\nother=192.168.1.5\nnot valid' };
  assert.deepEqual(egressEntriesFor(env, 'shop'), ['10.0.0.0/8', 'db.lan']);
  assert.deepEqual(egressEntriesFor({}, 'shop'), []);
});

test("the node hands every application's entries over; each runtime keeps its own", () => {
  assert.deepEqual(egressEnvironment([]), {});
  const env = egressEnvironment(['10.0.0.0/8', 'shop=db.lan', 'blog=192.168.1.5']);
  assert.deepEqual(Object.keys(env), [EGRESS_ALLOW_VARIABLE]);
  assert.deepEqual(egressEntriesFor(env, 'shop'), ['10.0.0.0/8', 'db.lan']);
  assert.deepEqual(egressEntriesFor(env, 'blog'), ['10.0.0.0/8', '192.168.1.5']);
});

test('entries become ranges: addresses as single-address ranges, names resolved now', async () => {
  const lines: string[] = [];
  // localhost is answered from /etc/hosts: no query leaves the machine.
  const ranges = await egressRanges(['10.0.0.0/8', '192.168.1.5', 'fd00::1', 'localhost'], (line) =>
    lines.push(line),
  );
  assert.deepEqual(ranges.slice(0, 3), ['10.0.0.0/8', '192.168.1.5/32', 'fd00::1/128']);
  assert.ok(ranges.includes('127.0.0.1/32'), ranges.join(' '));
  assert.equal(lines.join('\n'), '');
  // A stand-in resolver for a name that does not resolve, so that no query goes to a real server.
  const unresolved = await egressRanges(
    ['db.lan'],
    (line) => lines.push(line),
    async () => {
      throw new Error('getaddrinfo ENOTFOUND db.lan');
    },
  );
  assert.deepEqual(unresolved, []);
  assert.match(
    lines.join('\n'),
    /egress-allow names db\.lan, which does not resolve \(getaddrinfo ENOTFOUND db\.lan\): left out/,
  );
});

const plan = (egressAllow: string[]): WorkerdPlan => ({
  address: 'unix:/tmp/x.sock',
  modules: [{ name: 'src/index', type: 'esm', file: 'modules/src/index' }],
  compatibilityDate: '2025-06-01',
  compatibilityFlags: [],
  vars: [],
  assets: null,
  egressAllow,
});

test('the config loads the fetch wrapper first and widens the network only for allowed ranges', () => {
  const plain = renderWorkerdConfig(plan([]));
  assert.match(plain, new RegExp(`modules = \\[ \\(name = "${EGRESS_ENTRY_MODULE}"`));
  assert.match(plain, /import \* as main from \\"\.\/src\/index\\"/);
  assert.doesNotMatch(plain, /name = "internet"/);
  const allowed = renderWorkerdConfig(plan(['192.168.1.0/24']));
  assert.match(
    allowed,
    /\(name = "internet", network = \(allow = \[ "public", "192\.168\.1\.0\/24" \], tlsOptions = \(trustBrowserCas = true\)\)\)/,
  );
});
