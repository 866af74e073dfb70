// The WireGuard settings as `svc sail`, `svc wg` and `svc health` resolve them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveSettings } from '../config/settings.ts';
import { Problem } from '../problem.ts';

const resolveWith = (flags: Record<string, unknown>, env: Record<string, string> = {}) =>
  resolveSettings({ flags, env, file: {}, filePath: 'svc.config.jsonc' });

function refused(
  flags: Record<string, unknown>,
  title: string,
  detail: RegExp,
  env: Record<string, string> = {},
) {
  assert.throws(
    () => resolveWith(flags, env),
    (err: unknown) => {
      assert.ok(err instanceof Problem);
      assert.equal(err.code, 'invalid-input');
      assert.equal(err.title, title);
      assert.match(err.detail ?? '', detail);
      return true;
    },
  );
}

test('--transport wireguard without --wg-address is refused naming the flag', () => {
  refused(
    { transport: 'wireguard' },
    'Invalid setting network.wgAddress',
    /--wg-address .*required with --transport wireguard/,
  );
});

test('a malformed tunnel address is refused naming where it came from', () => {
  for (const bad of ['10.44.0.1', '10.44.0.1/33', 'fd44::1/129', 'nonsense/24', '10.44.0.1/24\n[Peer]', '']) {
    refused(
      { transport: 'wireguard', wgAddress: bad },
      'Invalid setting network.wgAddress',
      /^--wg-address: /,
    );
  }
  refused({ transport: 'wireguard' }, 'Invalid setting network.wgAddress', /^SVC_WG_ADDRESS: /, {
    SVC_WG_ADDRESS: '10.0.0.1',
  });
});

test('a malformed endpoint or port is refused naming the flag', () => {
  const base = { transport: 'wireguard', wgAddress: '10.44.0.1/24' };
  for (const bad of [
    'host:0',
    'host:65536',
    'host:port',
    'fd00::1',
    '[nope]:51820',
    'bad_host:1',
    'a b:1',
    '',
  ]) {
    refused({ ...base, wgEndpoint: bad }, 'Invalid setting network.wgEndpoint', /^--wg-endpoint: /);
  }
  refused({ ...base, wgPort: '0' }, 'Invalid setting network.wgPort', /^--wg-port: .*1-65535/);
  refused({ ...base, wgPort: '70000' }, 'Invalid setting network.wgPort', /^--wg-port: /);
  assert.throws(() => resolveWith({ ...base, wgPort: 'x' }), /Invalid setting network.wgPort: --wg-port/);
  refused({ transport: 'tunnel' }, 'Invalid setting network.transport', /expected wireguard or none/);
});

test('the endpoint takes --wg-port when it names no port; IPv6 stays bracketed', () => {
  const base = { transport: 'wireguard', wgAddress: '10.44.0.1/24' };
  assert.equal(
    resolveWith({ ...base, wgEndpoint: 'node-a.example' }).network.wgEndpoint,
    'node-a.example:51820',
  );
  assert.equal(
    resolveWith({ ...base, wgEndpoint: '192.0.2.1', wgPort: '51999' }).network.wgEndpoint,
    '192.0.2.1:51999',
  );
  assert.equal(resolveWith({ ...base, wgEndpoint: '192.0.2.1:4000' }).network.wgEndpoint, '192.0.2.1:4000');
  assert.equal(
    resolveWith({ ...base, wgEndpoint: '[2001:db8::1]' }).network.wgEndpoint,
    '[2001:db8::1]:51820',
  );
  assert.equal(resolveWith(base).network.wgEndpoint, undefined);
});

test('over WireGuard the node listens, advertises and binds runtimes on its tunnel address', () => {
  const settings = resolveWith({ transport: 'wireguard', wgAddress: '10.44.0.7/24' });
  assert.equal(settings.node.listen, '10.44.0.7:7311');
  assert.equal(settings.node.advertise, '10.44.0.7:7311');
  assert.equal(settings.runtime.bindHost, '10.44.0.7');
  const six = resolveWith({ transport: 'wireguard', wgAddress: 'fd44::7/64' });
  assert.equal(six.node.listen, '[fd44::7]:7311');
  assert.equal(six.runtime.bindHost, 'fd44::7');
});

test('given addresses win over the tunnel defaults; a wildcard listen still advertises the tunnel', () => {
  const settings = resolveWith({ transport: 'wireguard', wgAddress: '10.44.0.7/24', listen: '0.0.0.0:9000' });
  assert.equal(settings.node.listen, '0.0.0.0:9000');
  assert.equal(settings.node.advertise, '10.44.0.7:9000');
  const explicit = resolveWith(
    { transport: 'wireguard', wgAddress: '10.44.0.7/24', advertise: 'n.example:1', bindHost: '0.0.0.0' },
    {},
  );
  assert.equal(explicit.node.advertise, 'n.example:1');
  assert.equal(explicit.runtime.bindHost, '0.0.0.0');
});

test('--transport none is unchanged: loopback defaults, no address needed', () => {
  const settings = resolveWith({ transport: 'none', wgAddress: '10.44.0.7/24' });
  assert.equal(settings.node.listen, '127.0.0.1:7311');
  assert.equal(settings.node.advertise, undefined);
  assert.equal(settings.runtime.bindHost, '127.0.0.1');
});
