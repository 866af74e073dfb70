// Two svc nodes whose only path to each other is a WireGuard tunnel, in network namespaces this
// test creates (a veth pair carries the tunnel's UDP and nothing else reaches the tunnel
// addresses), with Debian's userspace wireguard-go. Each node runs `svc wg init`, brings its
// interface up with the rendered file through `wg-quick`, then registers with `svc sail` on its
// tunnel address. The routing document names tunnel addresses, and the application's upstream on
// the other node answers through the tunnel once `svc wg peers` re-rendered and `wg setconf`
// accepted the file. Runtime processes come from the cell stand-in (test/helpers/cell-standin.ts,
// named as such: it honours the runtime contract's `serve`). Tools are installed by
// scripts/install-wireguard.sh; a machine where namespaces cannot be created fails the test.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { PRIVATE_KEY_FILE, publicKeyOf } from '../src/wireguard/keypair.ts';
import { ensureDeployedApplication } from './helpers/applications.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { type RunResult, type SailProcess, SVC_BIN, startSail, tempDir, waitFor } from './helpers/svc.ts';

const INSTALL = resolve(import.meta.dirname, '..', 'scripts', 'install-wireguard.sh');
const TOKEN = 'ingress-wg-0123456789';
const tag = process.pid.toString(36);
const nodes = [
  { id: 'wg-a', ns: `svcwg-a-${tag}`, veth: `sva${tag}`, underlay: '192.168.99.1', tunnel: '10.99.0.1' },
  { id: 'wg-b', ns: `svcwg-b-${tag}`, veth: `svb${tag}`, underlay: '192.168.99.2', tunnel: '10.99.0.2' },
].map((n) => ({ ...n, stateDir: tempDir(`svc-${n.id}-`) }));
const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];

/** Why the test cannot run here; null when namespaces can be made. */
function namespacesUnavailable(): string | null {
  const probe = `svcwg-probe-${tag}`;
  const made = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (made.error) return `cannot run ip: ${made.error.message}`;
  if (made.status !== 0) return `cannot create a network namespace: ${made.stderr.trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return null;
}

function sh(command: string, args: string[], input?: string): string {
  return execFileSync(command, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}
const inNs = (ns: string, command: string, ...args: string[]) =>
  sh('ip', ['netns', 'exec', ns, command, ...args]);

const bucketDir = tempDir('svc-wg-bucket-');
const env = { SVC_S3_ENDPOINT: pathToFileURL(bucketDir).href, SVC_SILENCE_WARNINGS: '1' };
const nodeFlags = (n: (typeof nodes)[0]) => [
  ...['--node-id', n.id, '--state-dir', n.stateDir],
  ...['--transport', 'wireguard', '--wg-address', `${n.tunnel}/24`, '--wg-endpoint', n.underlay],
];
/** `svc <args>` inside the node's namespace. */
function svcIn(n: (typeof nodes)[0], args: string[]): Promise<RunResult> {
  return new Promise((done, reject) => {
    const child = spawn('ip', ['netns', 'exec', n.ns, process.execPath, SVC_BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

let store: Store;
const sails: SailProcess[] = [];
const made: string[] = [];
/** The interface configuration each node brought up, by node id. */
const upFile = new Map<string, string>();

interface RoutingDoc {
  routes: { host: string; upstreams: { node: string; address: string }[] }[];
  api: { upstreams: { node: string; address: string }[] };
}

/** GET from inside a namespace (the test's own process sits outside every tunnel). */
function fetchIn(
  ns: string,
  url: string,
  headers: Record<string, string> = {},
): { status: number; text: string } | null {
  const script = `fetch(process.argv[1], { headers: JSON.parse(process.argv[2]), signal: AbortSignal.timeout(1500) })
    .then(async (r) => console.log(JSON.stringify({ status: r.status, text: await r.text() })))
    .catch(() => console.log('null'))`;
  const out = inNs(ns, process.execPath, '-e', script, url, JSON.stringify(headers));
  return JSON.parse(out) as { status: number; text: string } | null;
}

before(async () => {
  const installed = spawnSync('sh', [INSTALL], { encoding: 'utf8' });
  assert.equal(installed.status, 0, `installing the WireGuard tools failed:\n${installed.stderr}`);
  assert.equal(namespacesUnavailable(), null);
  for (const n of nodes) {
    sh('ip', ['netns', 'add', n.ns]);
    made.push(n.ns);
    inNs(n.ns, 'ip', 'link', 'set', 'lo', 'up');
  }
  sh('ip', ['link', 'add', a.veth, 'netns', a.ns, 'type', 'veth', 'peer', 'name', b.veth, 'netns', b.ns]);
  for (const n of nodes) {
    inNs(n.ns, 'ip', 'address', 'add', `${n.underlay}/24`, 'dev', n.veth);
    inNs(n.ns, 'ip', 'link', 'set', n.veth, 'up');
  }
  store = await openStore({ endpoint: env.SVC_S3_ENDPOINT });
  // The application exists before the nodes start: the first passes place it on both.
  await ensureDeployedApplication(store, 'shop', {});
});

after(async () => {
  await Promise.all(sails.map((s) => s.stop()));
  for (const n of nodes) {
    const file = upFile.get(n.id);
    if (file) spawnSync('ip', ['netns', 'exec', n.ns, 'wg-quick', 'down', file]);
  }
  for (const ns of made) {
    // Whatever still runs in a namespace this test made was started by it (wireguard-go).
    const pids = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean);
    for (const pid of pids) process.kill(Number(pid), 'SIGKILL');
    spawnSync('ip', ['netns', 'del', ns]);
  }
  await store?.close();
});

test('two nodes reach each other only through the tunnel their rendered files bring up', async () => {
  // 1. Each node makes its keypair and renders its configuration: a into its state directory
  //    (the printed up command), b on stdout. a renders first and knows no peer yet.
  const initA = await svcIn(a, ['wg', 'init', ...nodeFlags(a)]);
  assert.equal(initA.code, 0, initA.stderr);
  const fileA = join(a.stateDir, 'wg-svc.conf');
  assert.match(initA.stdout, new RegExp(`bring the tunnel up with: wg-quick up ${fileA}\n`));
  const initB = await svcIn(b, ['wg', 'init', '--stdout', ...nodeFlags(b)]);
  assert.equal(initB.code, 0, initB.stderr);
  // A second interface name: wireguard-go's control sockets share one directory across namespaces.
  const fileB = join(b.stateDir, 'wgb.conf');
  writeFileSync(fileB, initB.stdout, { mode: 0o600 });
  chmodSync(fileB, 0o600);
  const publicKey = (n: (typeof nodes)[0]) =>
    publicKeyOf(readFileSync(join(n.stateDir, PRIVATE_KEY_FILE), 'utf8').trim());
  assert.doesNotMatch(readFileSync(fileA, 'utf8'), /\[Peer\]/);
  assert.ok(
    initB.stdout.includes(
      `PublicKey = ${publicKey(a)}\nEndpoint = ${a.underlay}:51820\nAllowedIPs = ${a.tunnel}/32\n`,
    ),
  );

  // 2. wg-quick brings each interface up from the rendered file (it runs wireguard-go and feeds
  //    `wg setconf` the stripped file, so a file wg refuses fails here).
  for (const [n, file] of [
    [a, fileA],
    [b, fileB],
  ] as const) {
    inNs(n.ns, 'wg-quick', 'up', file);
    upFile.set(n.id, file);
  }
  assert.equal(inNs(a.ns, 'wg', 'show', 'wg-svc', 'public-key').trim(), publicKey(a));
  assert.equal(inNs(b.ns, 'wg', 'show', 'wgb', 'peers').trim(), publicKey(a));

  // 3. Both nodes register, listening and advertising on their tunnel addresses.
  for (const n of nodes) {
    const sail = await startSail(
      [
        ...nodeFlags(n),
        ...['--cell-bin', CELL_STANDIN, '--ingress-token', TOKEN, '--platform-domains', 'svc.test'],
        ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
      ],
      { env, stateDir: n.stateDir, listen: null, under: ['ip', 'netns', 'exec', n.ns] },
    );
    sails.push(sail);
    assert.equal(sail.url, `http://${n.tunnel}:7311`);
  }
  const health = (from: (typeof nodes)[0], to: (typeof nodes)[0]) =>
    fetchIn(from.ns, `http://${to.tunnel}:7311/.well-known/svc/health`);
  assert.equal(health(a, a)?.status, 200);
  // a has no peer for b yet: b's handshakes are dropped, and nothing else leads to a tunnel address.
  assert.equal(health(b, a), null, 'no path without the tunnel');
  assert.equal(
    fetchIn(b.ns, `http://${a.underlay}:7311/.well-known/svc/health`),
    null,
    'the node API is on the tunnel only',
  );

  // 4. a re-renders from the registered nodes; the real wg tool takes the file on the running interface.
  const peersA = await svcIn(a, ['wg', 'peers', ...nodeFlags(a)]);
  assert.equal(peersA.code, 0, peersA.stderr);
  const stripped = join(a.stateDir, 'stripped.conf');
  writeFileSync(stripped, inNs(a.ns, 'wg-quick', 'strip', fileA), { mode: 0o600 });
  inNs(a.ns, 'wg', 'setconf', 'wg-svc', stripped);
  assert.equal(inNs(a.ns, 'wg', 'show', 'wg-svc', 'peers').trim(), publicKey(b));
  assert.equal(inNs(a.ns, 'wg', 'show', 'wg-svc', 'allowed-ips').trim(), `${publicKey(b)}\t${b.tunnel}/32`);
  await waitFor(() => health(b, a)?.status === 200, 'a to answer b through the tunnel');

  // 5. The records carry the tunnels; the routing document names tunnel addresses only.
  for (const n of nodes) {
    const record = (await getJson<NodeRecord>(store, keys.nodeRecord(n.id)))?.value;
    assert.deepEqual(record?.wireguard, {
      publicKey: publicKey(n),
      address: `${n.tunnel}/24`,
      endpoint: `${n.underlay}:51820`,
    });
    assert.equal(record?.advertise, `${n.tunnel}:7311`);
  }
  const route = await waitFor<{ doc: RoutingDoc; shop: RoutingDoc['routes'][number] } | null>(
    () => {
      const answer = fetchIn(b.ns, `http://${b.tunnel}:7311/v1/ingress/routes`, {
        authorization: `Bearer ${TOKEN}`,
      });
      if (answer?.status !== 200) return null;
      const doc = JSON.parse(answer.text) as RoutingDoc;
      const shop = doc.routes.find((r) => r.host === 'shop.svc.test');
      return shop?.upstreams.length === 2 ? { doc, shop } : null;
    },
    'a routing document with shop on both nodes',
    30_000,
  );
  assert.ok(route);
  assert.deepEqual(
    route.doc.api.upstreams,
    nodes.map((n) => ({ node: n.id, address: `${n.tunnel}:7311` })),
  );
  for (const upstream of route.shop.upstreams) {
    const owner = nodes.find((n) => n.id === upstream.node)!;
    assert.match(upstream.address, new RegExp(`^${owner.tunnel.replaceAll('.', '\\.')}:\\d+$`));
    // Each upstream answers from the other node's namespace: through the tunnel.
    const other = owner === a ? b : a;
    const served = await waitFor(
      () => fetchIn(other.ns, `http://${upstream.address}/`),
      `${upstream.address} from ${other.id}`,
    );
    assert.equal(served?.status, 200);
    assert.equal(served?.text, 'standin shop');
  }
});
