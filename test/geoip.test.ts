// request.cf from the operator's GeoIP database (docs/runtime.md "Geolocation"),
// end to end: two real nodes (`svc sail` with the real runtime) serve one application, one with
// `--geoip-db` naming the fixture database, one without. The requests go to the runtime's port as
// the ingress sends them, with X-Forwarded-For. With the database: an address it holds gives the
// fields, one it does not an empty request.cf, and a request.cf a client forges in the front's
// header never reaches the worker. Without one: request.cf is workerd's own, as before. A path
// that is no MaxMind DB is refused at start, naming the setting.
//
// The fixture, runtime/front/testdata/geoip-fixture.mmdb, is committed with its generator
// (runtime/front/geoip_fixture_test.go, whose test checks the file is what it writes), so this
// test needs no Go of its own.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { getJson } from '../src/store/store.ts';
import { type Bucket, deployToEveryNode, openBucket, type Signer } from './helpers/applications.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const APP = 'located';
const SERVE_DEADLINE_MS = 90_000;
const FIXTURE = resolve(import.meta.dirname, '..', 'runtime', 'front', 'testdata', 'geoip-fixture.mmdb');
const BLOB_HEADER = 'cell-cf-blob';

const WORKER = `export default {
  async fetch(request) {
    return Response.json({ cf: request.cf ?? null, headers: [...request.headers.keys()] });
  },
};
`;

const LONDON = {
  asn: 20712,
  asOrganization: 'Andrews & Arnold Ltd',
  country: 'GB',
  continent: 'EU',
  city: 'London',
  postalCode: 'EC4R',
  latitude: '51.51420',
  longitude: '-0.09310',
  timezone: 'Europe/London',
  region: 'England',
  regionCode: 'ENG',
};

describe('request.cf from --geoip-db', () => {
  let bucket: Bucket;
  let admin: Signer;
  let located: SailProcess;
  let plain: SailProcess;
  const ports = new Map<string, number>();

  const portOn = (node: SailProcess) =>
    waitFor(
      async () => {
        const record = await getJson<NodeRecord>(bucket.store, keys.nodeRecord(node.nodeId));
        return record?.value.processes?.find((p) => p.application === APP && p.ready)?.port ?? null;
      },
      () => `${APP} to be ready on ${node.nodeId}\n${node.log().slice(-3000)}`,
      SERVE_DEADLINE_MS,
    ) as Promise<number>;

  /** What the worker saw of a request to `node` carrying `headers`. */
  const seen = async (node: SailProcess, headers: Record<string, string>) => {
    const response = await fetch(`http://127.0.0.1:${ports.get(node.nodeId)}/`, { headers });
    const text = await response.text();
    assert.equal(response.status, 200, text);
    return JSON.parse(text) as { cf: Record<string, unknown> | null; headers: string[] };
  };

  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-admin', 'admin', ['*']);
    [located, plain] = await Promise.all([
      bucket.sail(['--cell-bin', CELL_REAL, '--geoip-db', FIXTURE]),
      bucket.sail(['--cell-bin', CELL_REAL]),
    ]);
    await deployToEveryNode(located!, admin, {
      'cell.json': JSON.stringify({ name: APP, main: 'w.js', compatibility_date: '2025-06-01' }),
      'w.js': WORKER,
    });
    for (const node of [located!, plain!]) ports.set(node.nodeId, await portOn(node));
  });
  after(async () => {
    await bucket?.close();
  });

  test("an address the database holds: Cloudflare's fields, from the rightmost X-Forwarded-For entry", async () => {
    // The ingress appends the address it saw; what came before is the client's to write.
    const london = await seen(located, { 'X-Forwarded-For': '216.160.83.56, 81.2.69.160' });
    assert.deepEqual(london.cf, LONDON);
    const linkoping = await seen(located, { 'X-Forwarded-For': '89.160.20.129' });
    assert.equal(linkoping.cf?.country, 'SE');
    assert.equal(linkoping.cf?.isEUCountry, '1');
    assert.equal(linkoping.cf?.city, 'Linköping');
    assert.equal(linkoping.cf?.asn, undefined, 'a field the database lacks is left out');
    const milton = await seen(located, { 'X-Forwarded-For': '216.160.83.56' });
    assert.equal(milton.cf?.metroCode, '819');
    assert.equal(milton.cf?.isEUCountry, undefined);
    assert.deepEqual(
      (await seen(located, { 'X-Forwarded-For': '2001:218:5::1' })).cf,
      { country: 'JP', continent: 'AS' },
      'IPv6, and a record with a country only',
    );
  });

  test('an address the database does not hold: request.cf is an empty object', async () => {
    assert.deepEqual((await seen(located, { 'X-Forwarded-For': '8.8.8.8' })).cf, {});
    // No X-Forwarded-For: the peer, here loopback, which no database holds.
    assert.deepEqual((await seen(located, {})).cf, {});
  });

  test('a request.cf the client forges in the front header is dropped, with or without a database', async () => {
    const forged = { [BLOB_HEADER]: JSON.stringify({ country: 'XX', city: 'Forged' }) };
    const withDb = await seen(located, { ...forged, 'X-Forwarded-For': '81.2.69.160' });
    assert.deepEqual(withDb.cf, LONDON);
    assert.ok(!withDb.headers.includes(BLOB_HEADER), JSON.stringify(withDb.headers));
    assert.deepEqual((await seen(located, { ...forged, 'X-Forwarded-For': '8.8.8.8' })).cf, {});
    const withoutDb = await seen(plain, { ...forged, 'X-Forwarded-For': '81.2.69.160' });
    assert.ok(!withoutDb.headers.includes(BLOB_HEADER), JSON.stringify(withoutDb.headers));
    assert.notEqual(withoutDb.cf?.country, 'XX');
  });

  test("without a database request.cf is workerd's own, as before: no geolocation", async () => {
    const { cf } = await seen(plain, { 'X-Forwarded-For': '81.2.69.160' });
    assert.deepEqual(Object.keys(cf ?? {}).sort(), ['clientPid', 'clientUid']);
  });
});

test('svc sail refuses a --geoip-db that is no MaxMind DB, in one line naming the setting', async () => {
  const dir = tempDir('svc-geoip-');
  const csv = join(dir, 'GeoLite2-City-Blocks-IPv4.csv');
  writeFileSync(csv, 'network,geoname_id\n81.2.69.0/24,2643743\n');
  for (const [args, env, said] of [
    [['--geoip-db', join(dir, 'GeoLite2-City.mmdb')], {}, /--geoip-db: .*GeoLite2-City\.mmdb does not exist/],
    [[], { SVC_GEOIP_DB: csv }, /SVC_GEOIP_DB: .*\.csv is not a MaxMind DB/],
  ] as const) {
    const { code, stderr } = await runSvc(['sail', ...args], { env });
    assert.equal(code, 1, stderr);
    assert.match(stderr, /^svc: Invalid setting runtime\.geoipDb: .*\[urn:svc:invalid-input\]\n$/);
    assert.match(stderr, said);
  }
});
