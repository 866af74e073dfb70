import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Problem } from '../problem.ts';
import { loadConfigFile } from './file.ts';
import { defaultSettings, resolveSettings } from './settings.ts';

const resolveWith = (flags: Record<string, unknown>, env: Record<string, string>, file: unknown = {}) =>
  resolveSettings({ flags, env, file, filePath: 'svc.config.jsonc' });

test('defaults hold when nothing is set', () => {
  const settings = resolveWith({}, {});
  const defaults = defaultSettings();
  assert.equal(settings.node.listen, defaults.node.listen);
  assert.equal(settings.api.jsonBytes, 65_536);
  assert.equal(settings.coordinator.leaseTtlMs, 45_000);
  assert.deepEqual(settings.ingress.entryPoints, ['web']);
  assert.equal(settings.api.public, true);
});

test('flag beats environment beats file', () => {
  const file = { node: { listen: '127.0.0.1:1001' }, api: { jsonBytes: 10 } };
  assert.equal(resolveWith({}, {}, file).node.listen, '127.0.0.1:1001');
  assert.equal(resolveWith({}, { SVC_LISTEN: '127.0.0.1:1002' }, file).node.listen, '127.0.0.1:1002');
  assert.equal(
    resolveWith({ listen: '127.0.0.1:1003' }, { SVC_LISTEN: '127.0.0.1:1002' }, file).node.listen,
    '127.0.0.1:1003',
  );
  assert.equal(resolveWith({}, { SVC_JSON_BYTES: '20' }, file).api.jsonBytes, 20);
});

test('an unwritten boolean leaves the decision to environment and file; --no- negates', () => {
  assert.equal(resolveWith({}, {}, { api: { public: false } }).api.public, false);
  assert.equal(resolveWith({}, { SVC_API_PUBLIC: 'true' }, { api: { public: false } }).api.public, true);
  assert.equal(resolveWith({ apiPublic: false }, { SVC_API_PUBLIC: 'true' }).api.public, false);
  assert.equal(resolveWith({ observability: true }, {}).observability.enabled, true);
});

test('repeatable flags and comma-separated environment lists', () => {
  const settings = resolveWith(
    { platformDomains: ['a.test', 'b.test'], nodeLabels: ['zone=x', 'tier=y'] },
    {},
  );
  assert.deepEqual(settings.platform.domains, ['a.test', 'b.test']);
  assert.deepEqual(settings.node.labels, { zone: 'x', tier: 'y' });
  assert.deepEqual(resolveWith({}, { SVC_INGRESS_TOKEN: 'new,old' }).ingress.token, ['new', 'old']);
  assert.deepEqual(resolveWith({ cellEnv: ['A=1,2', 'B='] }, {}).runtime.cellEnv, { A: '1,2', B: '' });
  assert.deepEqual(resolveWith({}, { SVC_S3_BUCKET: 'b', SVC_S3_ENDPOINT: 'http://x' }).bucket, {
    bucket: 'b',
    endpoint: 'http://x',
  });
});

function assertInvalid(fn: () => unknown, setting: string, source: string) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof Problem);
    assert.equal(err.code, 'invalid-input');
    assert.match(err.title, new RegExp(setting.replace('.', '\\.')));
    assert.match(err.detail ?? '', new RegExp(source));
    return true;
  });
}

test('a malformed value is invalid-input naming the setting and its source', () => {
  assertInvalid(() => resolveWith({ jsonBytes: 'lots' }, {}), 'api.jsonBytes', '--json-bytes');
  assertInvalid(
    () => resolveWith({}, { SVC_REGISTRY_RESYNC_MS: '-5' }),
    'registry.resyncMs',
    'SVC_REGISTRY_RESYNC_MS',
  );
  assertInvalid(() => resolveWith({}, {}, { api: { public: 'perhaps' } }), 'api.public', 'svc.config.jsonc');
  assertInvalid(() => resolveWith({ nodeLabels: ['novalue'] }, {}), 'node.labels', '--node-labels');
  assertInvalid(() => resolveWith({ listen: 'nowhere' }, {}), 'node.listen', 'host:port');
  assertInvalid(() => resolveWith({ transport: 'carrier-pigeon' }, {}), 'network.transport', 'wireguard');
});

test('geoip-db names a MaxMind DB file, stored absolute; a missing or other file is refused naming the setting', () => {
  assert.equal(resolveWith({}, {}).runtime.geoipDb, undefined);
  const dir = mkdtempSync(join(tmpdir(), 'svc-geoip-'));
  const db = join(dir, 'GeoLite2-City.mmdb');
  // What matters to the check: the metadata marker near the end of the file.
  writeFileSync(
    db,
    Buffer.concat([Buffer.alloc(64), Buffer.from([0xab, 0xcd, 0xef]), Buffer.from('MaxMind.com')]),
  );
  assert.equal(resolveWith({ geoipDb: db }, {}).runtime.geoipDb, db);
  assert.equal(resolveWith({}, { SVC_GEOIP_DB: db }).runtime.geoipDb, db);
  assert.equal(resolveWith({}, {}, { runtime: { geoipDb: db } }).runtime.geoipDb, db);
  const cwd = process.cwd();
  try {
    process.chdir(dir);
    assert.equal(resolveWith({ geoipDb: 'GeoLite2-City.mmdb' }, {}).runtime.geoipDb, db);
  } finally {
    process.chdir(cwd);
  }
  assertInvalid(
    () => resolveWith({ geoipDb: join(dir, 'nope.mmdb') }, {}),
    'runtime.geoipDb',
    '--geoip-db: .*nope\\.mmdb does not exist',
  );
  const csv = join(dir, 'GeoLite2-City.csv');
  writeFileSync(csv, 'network,geoname_id\n81.2.69.0/24,2643743\n');
  assertInvalid(
    () => resolveWith({}, { SVC_GEOIP_DB: csv }),
    'runtime.geoipDb',
    'SVC_GEOIP_DB: .* is not a MaxMind DB',
  );
  assertInvalid(() => resolveWith({ geoipDb: dir }, {}), 'runtime.geoipDb', 'is a directory');
});

test('egress-allow takes addresses, ranges and host names, for every application or app=… for one', () => {
  assert.deepEqual(resolveWith({}, {}).runtime.egressAllow, []);
  assert.deepEqual(resolveWith({ egressAllow: ['10.0.0.0/8', 'shop=db.lan'] }, {}).runtime.egressAllow, [
    '10.0.0.0/8',
    'shop=db.lan',
  ]);
  assert.deepEqual(resolveWith({}, { SVC_EGRESS_ALLOW: '192.168.1.5,shop=fd00::/8' }).runtime.egressAllow, [
    '192.168.1.5',
    'shop=fd00::/8',
  ]);
  for (const [entry, why] of [
    ['10.0.0.0/40', /"10\.0\.0\.0\/40" is not a CIDR range/],
    ['Shop!=10.0.0.1', /"Shop!" is not an application name/],
    ['db lan', /"db lan" is not an IP address, a CIDR range or a host name/],
  ] as const) {
    assert.throws(
      () => resolveWith({ egressAllow: [entry] }, {}),
      (err: unknown) => {
        assert.ok(err instanceof Problem);
        assert.equal(err.status, 400);
        assert.equal(err.code, 'invalid-input');
        assert.equal(err.title, 'Invalid setting runtime.egressAllow');
        assert.match(err.detail ?? '', why);
        return true;
      },
    );
  }
});

test('the config file is JSONC; unknown keys and bad syntax are refused naming the file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-config-'));
  const good = join(dir, 'good.jsonc');
  writeFileSync(good, '// comment\n{ "node": { "listen": "127.0.0.1:9" }, "remote": "prod", }\n');
  assert.equal(loadConfigFile(good, {}).data.remote, 'prod');
  const typo = join(dir, 'typo.jsonc');
  writeFileSync(typo, '{ "node": { "lisen": "x" } }');
  assert.throws(() => loadConfigFile(typo, {}), /Unknown setting node\.lisen/);
  const broken = join(dir, 'broken.jsonc');
  writeFileSync(broken, '{ "node": ');
  assert.throws(
    () => loadConfigFile(broken, {}),
    (err: unknown) => err instanceof Problem && err.code === 'invalid-input',
  );
  assert.throws(() => loadConfigFile(join(dir, 'missing.jsonc'), {}), /Config file not found/);
  assert.deepEqual(loadConfigFile(undefined, {}).data, {});
});

test('the liveness windows must leave a live node room to be seen beating', () => {
  assert.deepEqual(resolveWith({}, {}).liveness, {
    heartbeatMs: 5_000,
    deadAfterMs: 9_000,
    lostAfterMs: 60_000,
  });
  const ok = resolveWith({ heartbeatMs: 1_000, nodeDeadAfterMs: 3_000, nodeLostAfterMs: 3_000 }, {});
  assert.deepEqual(ok.liveness, { heartbeatMs: 1_000, deadAfterMs: 3_000, lostAfterMs: 3_000 });
  assertInvalid(() => resolveWith({ heartbeatMs: 50 }, {}), 'liveness.heartbeatMs', 'between 100 and 20000');
  assertInvalid(
    () => resolveWith({ heartbeatMs: 30_000 }, {}),
    'liveness.heartbeatMs',
    'between 100 and 20000',
  );
  assertInvalid(
    () => resolveWith({}, { SVC_NODE_DEAD_AFTER_MS: '5000' }),
    'liveness.deadAfterMs',
    'more than liveness.heartbeatMs \\(5000 ms\\)',
  );
  assertInvalid(
    () => resolveWith({}, {}, { liveness: { lostAfterMs: 8_000 } }),
    'liveness.lostAfterMs',
    'at least liveness.deadAfterMs \\(9000 ms\\)',
  );
});
