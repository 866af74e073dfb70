// `svc wg init|peers`, `svc sail --transport wireguard` and `svc health` through the real
// executable, on a shared directory bucket: every refusal, the key only on the node's disk, the
// written file owner-readable, peers from the other nodes' published halves, the node record.
// The real `wg` tool and a real tunnel: test/wireguard-netns.test.ts.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord, WireguardPeerRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson } from '../src/store/store.ts';
import { PRIVATE_KEY_FILE, publicKeyOf } from '../src/wireguard/keypair.ts';
import { type RunResult, runSvc, startSail, tempDir, waitFor } from './helpers/svc.ts';

const bucketDir = tempDir('svc-wg-bucket-');
const endpoint = pathToFileURL(bucketDir).href;
const env = {
  SVC_S3_ENDPOINT: endpoint,
  SVC_SILENCE_WARNINGS: '1',
  SVC_TRANSPORT: undefined,
  SVC_WG_ADDRESS: undefined,
};
const svc = (args: string[]) => runSvc(args, { env });

function refused(result: RunResult, title: string, detail: RegExp = /./): void {
  assert.equal(result.code, 1, result.stdout);
  assert.equal(result.stdout, '');
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  assert.ok(line.startsWith(`svc: ${title}: `), line);
  assert.match(line, detail);
  assert.match(line, / \[urn:svc:invalid-input\]$/);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

const node = (id: string, address: string, ...more: string[]) => [
  '--node-id',
  id,
  '--state-dir',
  join(bucketDir, '..', `${bucketDir.split('/').at(-1)}-${id}`),
  '--transport',
  'wireguard',
  '--wg-address',
  address,
  ...more,
];

test('a node whose transport is not wireguard is refused by both commands', async () => {
  const stateDir = tempDir('svc-wg-none-');
  for (const command of ['init', 'peers']) {
    refused(await svc(['wg', command, '--state-dir', stateDir]), 'This node runs no WireGuard tunnel');
    refused(
      await svc([
        'wg',
        command,
        '--state-dir',
        stateDir,
        '--transport',
        'none',
        '--wg-address',
        '10.9.0.1/24',
      ]),
      'This node runs no WireGuard tunnel',
    );
  }
  assert.deepEqual(readdirSync(stateDir), [], 'a refused command makes nothing');
});

test('wg settings are checked: each refusal names the flag', async () => {
  const stateDir = tempDir('svc-wg-bad-');
  for (const command of [['wg', 'init'], ['wg', 'peers'], ['sail']]) {
    const base = [...command, '--state-dir', stateDir, '--transport', 'wireguard'];
    refused(await svc(base), 'Invalid setting network.wgAddress', /--wg-address .*required/);
    refused(
      await svc([...base, '--wg-address', '10.9.0.1']),
      'Invalid setting network.wgAddress',
      /--wg-address: /,
    );
    refused(
      await svc([...base, '--wg-address', '10.9.0.1/24', '--wg-endpoint', 'host:99999']),
      'Invalid setting network.wgEndpoint',
      /--wg-endpoint: /,
    );
    refused(
      await svc([...base, '--wg-address', '10.9.0.1/24', '--wg-port', '0']),
      'Invalid setting network.wgPort',
      /--wg-port: /,
    );
  }
  refused(
    await svc(['sail', '--state-dir', stateDir, '--transport', 'tcp']),
    'Invalid setting network.transport',
  );
});

test('peers never makes a keypair', async () => {
  const args = node('lonely', '10.9.0.9/24');
  refused(await svc(['wg', 'peers', ...args]), 'No WireGuard key in the state directory', /svc wg init/);
  assert.throws(() => statSync(join(args[3], PRIVATE_KEY_FILE)));
});

test('init makes the key on the node only, publishes the public half, renders peers; peers re-renders', async () => {
  const a = node('wg-a', '10.9.0.1/24', '--wg-endpoint', '192.0.2.1');
  const b = node('wg-b', '10.9.0.2/24', '--wg-endpoint', '192.0.2.2:4000', '--wg-port', '4000');

  const initA = await svc(['wg', 'init', ...a]);
  assert.equal(initA.code, 0, initA.stderr);
  const fileA = join(a[3], 'wg-svc.conf');
  assert.equal(
    initA.stdout,
    `wrote ${fileA}\nbring the tunnel up with: wg-quick up ${fileA}\napply later changes to a running tunnel with: wg syncconf wg-svc <(wg-quick strip ${fileA})\n`,
  );
  assert.equal(statSync(fileA).mode & 0o777, 0o600);
  assert.equal(statSync(join(a[3], PRIVATE_KEY_FILE)).mode & 0o777, 0o600);
  const privateA = readFileSync(join(a[3], PRIVATE_KEY_FILE), 'utf8').trim();
  assert.doesNotMatch(readFileSync(fileA, 'utf8'), /\[Peer\]/);
  assert.match(
    readFileSync(fileA, 'utf8'),
    new RegExp(
      `\\[Interface\\]\nAddress = 10\\.9\\.0\\.1/24\nListenPort = 51820\nPrivateKey = ${privateA.replaceAll('+', '\\+')}\n`,
    ),
  );

  const initB = await svc(['wg', 'init', '--stdout', ...b]);
  assert.equal(initB.code, 0, initB.stderr);
  assert.throws(() => statSync(join(b[3], 'wg-svc.conf')), '--stdout writes no file');
  const privateB = readFileSync(join(b[3], PRIVATE_KEY_FILE), 'utf8').trim();
  assert.match(initB.stdout, /^# .*\n# .*\n\[Interface\]\nAddress = 10\.9\.0\.2\/24\nListenPort = 4000\n/);
  assert.ok(
    initB.stdout.includes(
      `\n[Peer]\nPublicKey = ${publicKeyOf(privateA)}\nEndpoint = 192.0.2.1:51820\nAllowedIPs = 10.9.0.1/32\n`,
    ),
  );
  assert.ok(!initB.stdout.includes(privateA));

  const peersA = await svc(['wg', 'peers', '--stdout', ...a]);
  assert.equal(peersA.code, 0, peersA.stderr);
  assert.ok(peersA.stdout.includes(`PrivateKey = ${privateA}\n`));
  assert.ok(
    peersA.stdout.endsWith(
      `[Peer]\nPublicKey = ${publicKeyOf(privateB)}\nEndpoint = 192.0.2.2:4000\nAllowedIPs = 10.9.0.2/32\n`,
    ),
  );
  assert.ok(!peersA.stdout.includes(privateB));
  const againA = await svc(['wg', 'init', '--stdout', ...a]);
  assert.equal(againA.stdout, peersA.stdout, 'init reuses the kept keypair; the rendering is stable');

  const store = await openStore({ endpoint });
  try {
    const published = await getJson<WireguardPeerRecord>(store, keys.wireguardPeer('wg-b'));
    assert.deepEqual(
      { ...published?.value, publishedAt: undefined },
      {
        v: 1,
        node: 'wg-b',
        publicKey: publicKeyOf(privateB),
        address: '10.9.0.2/24',
        endpoint: '192.0.2.2:4000',
        publishedAt: undefined,
      },
    );
  } finally {
    await store.close();
  }
  for (const file of filesUnder(bucketDir)) {
    const text = readFileSync(file, 'utf8');
    assert.ok(!text.includes(privateA) && !text.includes(privateB), `${file} holds a private key`);
  }
});

test('sail over wireguard registers its tunnel and advertises its tunnel address; health resolves the same listen', async () => {
  const stateDir = tempDir('svc-wg-sail-');
  const sail = await startSail(
    [
      '--node-id',
      'wg-sail',
      '--transport',
      'wireguard',
      '--wg-address',
      '127.0.0.2/8',
      '--wg-endpoint',
      'wg-sail.example',
    ],
    { env, stateDir },
  );
  const store = await openStore({ endpoint });
  try {
    const record = await waitFor(
      async () => (await getJson<NodeRecord>(store, keys.nodeRecord('wg-sail')))?.value,
      'node record',
    );
    assert.ok(record);
    const publicKey = publicKeyOf(readFileSync(join(stateDir, PRIVATE_KEY_FILE), 'utf8').trim());
    assert.deepEqual(record.wireguard, {
      publicKey,
      address: '127.0.0.2/8',
      endpoint: 'wg-sail.example:51820',
    });
    assert.equal(
      record.advertise,
      sail.listen.replace('127.0.0.1:', '127.0.0.2:'),
      'the tunnel address with the listen port',
    );
    assert.equal(
      (await getJson<WireguardPeerRecord>(store, keys.wireguardPeer('wg-sail')))?.value.publicKey,
      publicKey,
    );
  } finally {
    await store.close();
    await sail.stop();
  }
  // health: the listen address follows the tunnel address, as sail resolves it.
  const health = await svc(['health', '--transport', 'wireguard', '--wg-address', '127.0.0.77/8']);
  assert.equal(health.code, 1);
  assert.match(
    health.stderr,
    /^svc: Node is not answering: nothing answered at http:\/\/127\.0\.0\.77:7311\/\.well-known\/svc\/health within 2 s \[urn:svc:not-found\]\n$/,
  );
  refused(
    await svc(['health', '--transport', 'wireguard']),
    'Invalid setting network.wgAddress',
    /--wg-address/,
  );
});
