// The CLI's DNS check after `app domain add` (docs/applications.md "Custom domains") against a real DNS
// server on loopback: ok by CNAME or shared address, pending, unknown — and never a failure.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { checkDns, dnsLookups } from '../src/cli/domain-dns.ts';
import { type DnsServer, startDnsServer } from './helpers/dns.ts';

let dns: DnsServer;
before(async () => {
  dns = await startDnsServer({
    'shop.apps.test': { a: ['192.0.2.10'], aaaa: ['2001:db8::10'] },
    'cname.example': { cname: 'shop.apps.test' },
    'same-ip.example': { a: ['192.0.2.10'] },
    'elsewhere.example': { a: ['198.51.100.7'] },
    'other-cname.example': { cname: 'lb.elsewhere.example' },
    '*.wild.example': { cname: 'shop.apps.test' },
  });
});
after(async () => {
  await dns?.close();
});

const platform = ['shop.apps.test'];

test('a CNAME to a platform host is ok', async () => {
  const check = await checkDns(dnsLookups(dns.address), 'cname.example', platform);
  assert.deepEqual(check, { verdict: 'ok', why: 'cname.example is a CNAME for shop.apps.test' });
});

test('sharing an address with a platform host is ok', async () => {
  const check = await checkDns(dnsLookups(dns.address), 'same-ip.example', platform);
  assert.equal(check.verdict, 'ok');
  assert.match(check.why, /192\.0\.2\.10/);
});

test('a wildcard record is checked under a label nothing is deployed at', async () => {
  assert.equal(
    (await checkDns(dnsLookups(dns.address), 'svc-dns-check-1a2b.wild.example', platform)).verdict,
    'ok',
  );
});

test('a host that resolves nowhere or elsewhere is pending', async () => {
  const missing = await checkDns(dnsLookups(dns.address), 'missing.example', platform);
  assert.deepEqual(missing, { verdict: 'pending', why: 'missing.example does not resolve yet' });
  const elsewhere = await checkDns(dnsLookups(dns.address), 'elsewhere.example', platform);
  assert.equal(elsewhere.verdict, 'pending');
  assert.match(elsewhere.why, /resolves to 198\.51\.100\.7, not here/);
  const cname = await checkDns(dnsLookups(dns.address), 'other-cname.example', platform);
  assert.equal(cname.verdict, 'pending');
  assert.match(cname.why, /CNAME for lb\.elsewhere\.example/);
});

test('no platform host, an unresolvable platform host, or a dead server is unknown', async () => {
  assert.equal((await checkDns(dnsLookups(dns.address), 'cname.example', [])).verdict, 'unknown');
  assert.equal(
    (await checkDns(dnsLookups(dns.address), 'elsewhere.example', ['nothing.apps.test'])).verdict,
    'unknown',
  );
  const closed = await startDnsServer();
  const address = closed.address;
  await closed.close();
  const dead = await checkDns(dnsLookups(address), 'cname.example', platform);
  assert.equal(dead.verdict, 'unknown');
  assert.match(dead.why, /looking up cname\.example failed/);
});
