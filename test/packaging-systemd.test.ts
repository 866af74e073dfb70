// The systemd units of packaging/systemd/ as systemd itself reads them: `systemd-analyze verify`
// must print nothing (it reports unknown keys and bad values on stderr, still exiting 0), and the
// hardening the units promise must be there. The installed paths are pointed at this checkout so
// verify finds the executables and env files.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { tempDir } from './helpers/svc.ts';

const root = resolve(import.meta.dirname, '..');
const units = join(root, 'packaging', 'systemd');
const caddyBin = join(root, '.tools', 'bin', 'svc-caddy');

function installed(name: string): string {
  const dir = tempDir('svc-units-');
  const text = readFileSync(join(units, name), 'utf8')
    .replaceAll('/opt/svc/bin/svc', join(root, 'bin', 'svc'))
    .replaceAll('/usr/local/bin/svc-caddy', caddyBin)
    .replace('/etc/svc/svc.env', join(units, 'svc.env'))
    .replace('/etc/svc/caddy.env', join(units, 'caddy.env'));
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

function settings(name: string): Map<string, string> {
  const entries = readFileSync(join(units, name), 'utf8')
    .split('\n')
    .filter((line) => /^[A-Za-z]+=/.test(line))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)] as const);
  return new Map(entries);
}

const analyzeWorks = (): boolean => spawnSync('systemd-analyze', ['--version']).status === 0;

/** Installs systemd-analyze from Debian's packages when the machine lacks it (the test needs it). */
function ensureAnalyze(): void {
  if (analyzeWorks()) return;
  const installed = spawnSync('sh', ['-c', 'apt-get update -qq && apt-get install -y -qq systemd'], {
    encoding: 'utf8',
  });
  assert.ok(analyzeWorks(), `installing systemd-analyze failed:\n${installed.stderr}`);
}

test('systemd-analyze verify accepts both units without a warning', () => {
  ensureAnalyze();
  assert.ok(existsSync(caddyBin), 'svc-caddy is not built (scripts/build-caddy.sh)');
  const result = spawnSync(
    'systemd-analyze',
    ['verify', installed('svc.service'), installed('svc-caddy.service')],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stderr, '');
});

test('both units are hardened; only the ingress may bind low ports', () => {
  for (const name of ['svc.service', 'svc-caddy.service']) {
    const unit = settings(name);
    for (const [key, value] of Object.entries({
      NoNewPrivileges: 'yes',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      DynamicUser: 'yes',
      Restart: 'on-failure',
    }))
      assert.equal(unit.get(key), value, `${name} ${key}`);
    assert.ok(unit.get('StateDirectory'), `${name} StateDirectory`);
    assert.ok(unit.get('LimitNOFILE'), `${name} LimitNOFILE`);
    assert.match(unit.get('EnvironmentFile') ?? '', /^\/etc\/svc\/(svc|caddy)\.env$/);
  }
  assert.equal(settings('svc.service').get('CapabilityBoundingSet'), '');
  assert.equal(settings('svc-caddy.service').get('CapabilityBoundingSet'), 'CAP_NET_BIND_SERVICE');
  assert.equal(settings('svc-caddy.service').get('AmbientCapabilities'), 'CAP_NET_BIND_SERVICE');
});

test('the exposure systemd computes stays at OK or better', () => {
  ensureAnalyze();
  for (const name of ['svc.service', 'svc-caddy.service']) {
    const result = spawnSync('systemd-analyze', ['security', '--offline=true', installed(name)], {
      encoding: 'utf8',
    });
    const level = Number(/Overall exposure level for \S+: ([\d.]+)/.exec(result.stdout)?.[1]);
    assert.ok(level <= 4, `${name}: exposure ${level}\n${result.stdout.slice(-400)}`);
  }
});
