// The rendered interface configuration: stable order, every peer, only this node's private key,
// and nothing from the bucket that is not what it claims to be.
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../problem.ts';
import {
  ensureKeypair,
  generateKeypair,
  isWireguardKey,
  PRIVATE_KEY_FILE,
  publicKeyOf,
  readKeypair,
  requireKeypair,
} from './keypair.ts';
import { type PeerInput, renderInterface } from './render.ts';

const self = { nodeId: 'node-a', address: '10.44.0.1/24', listenPort: 51820, ...generateKeypair() };
const others = ['node-c', 'node-b', 'node-d'].map((node, i) => ({ node, pair: generateKeypair(), i }));
const peers: PeerInput[] = others.map(({ node, pair, i }) => ({
  node,
  publicKey: pair.publicKey,
  address: i === 2 ? `fd44::${i + 2}/64` : `10.44.0.${i + 2}/24`,
  endpoint: `192.0.2.${i + 2}:51820`,
}));

test('renders the interface and one peer per other node, sorted by node id', () => {
  const rendered = renderInterface(self, [
    ...peers,
    { node: 'node-a', publicKey: self.publicKey, address: self.address },
  ]);
  assert.deepEqual(rendered.peers, ['node-b', 'node-c', 'node-d']);
  assert.deepEqual(rendered.skipped, []);
  const sections = rendered.text.split(/^(?=\[)/m).map((s) => s.replace(/^#.*\n/gm, '').trim());
  assert.equal(
    sections[1],
    `[Interface]\nAddress = 10.44.0.1/24\nListenPort = 51820\nPrivateKey = ${self.privateKey}`,
  );
  const byNode = Object.fromEntries(others.map((o) => [o.node, o.pair.publicKey]));
  assert.equal(
    sections[2],
    `[Peer]\nPublicKey = ${byNode['node-b']}\nEndpoint = 192.0.2.3:51820\nAllowedIPs = 10.44.0.3/32`,
  );
  assert.equal(
    sections[3],
    `[Peer]\nPublicKey = ${byNode['node-c']}\nEndpoint = 192.0.2.2:51820\nAllowedIPs = 10.44.0.2/32`,
  );
  assert.equal(
    sections[4],
    `[Peer]\nPublicKey = ${byNode['node-d']}\nEndpoint = 192.0.2.4:51820\nAllowedIPs = fd44::4/128`,
  );
  assert.equal(sections.length, 5);
});

test('the same nodes in any order render the same bytes', () => {
  const first = renderInterface(self, peers).text;
  fc.assert(
    fc.property(fc.shuffledSubarray(peers, { minLength: peers.length }), (shuffled) => {
      assert.equal(renderInterface(self, shuffled).text, first);
    }),
  );
});

test("no private key but this node's own reaches the file", () => {
  const text = renderInterface(self, peers).text;
  for (const { pair } of others) assert.ok(!text.includes(pair.privateKey));
  assert.equal(text.split(self.privateKey).length, 2);
});

test('a peer without an endpoint renders without one; bad peers are left out with a reason', () => {
  const rendered = renderInterface(self, [
    { node: 'node-e', publicKey: generateKeypair().publicKey, address: '10.44.0.9/24' },
    { node: 'node-f', publicKey: 'not a key', address: '10.44.0.10/24' },
    { node: 'node-g', publicKey: generateKeypair().publicKey, address: '10.44.0.1/24' },
    { node: 'node-h', publicKey: self.publicKey, address: '10.44.0.11/24' },
    {
      node: 'node-i',
      publicKey: generateKeypair().publicKey,
      address: '10.44.0.12/24',
      endpoint: 'x:1\n[Peer]',
    },
    { node: 'bad\nid', publicKey: generateKeypair().publicKey, address: '10.44.0.13/24' },
  ]);
  assert.deepEqual(rendered.peers, ['node-e']);
  assert.match(rendered.text, /\[Peer\]\nPublicKey = \S+\nAllowedIPs = 10\.44\.0\.9\/32\n$/);
  assert.deepEqual(
    rendered.skipped.map((s) => s.node),
    ['bad\nid', 'node-f', 'node-g', 'node-h', 'node-i'],
  );
});

test('whatever the bucket holds, each peer adds one [Peer] block of known lines', () => {
  const anything = fc.oneof(
    fc.string(),
    fc.constant(generateKeypair().publicKey),
    fc.constant('10.44.0.5/24'),
  );
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          node: fc.string(),
          publicKey: anything,
          address: anything,
          endpoint: fc.option(anything, { nil: undefined }),
        }),
      ),
      (candidates) => {
        const rendered = renderInterface(self, candidates as PeerInput[]);
        const lines = rendered.text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
        for (const line of lines)
          assert.match(
            line,
            /^(\[Interface\]|\[Peer\]|(Address|ListenPort|PrivateKey|PublicKey|Endpoint|AllowedIPs) = \S+)$/,
          );
        assert.equal(lines.filter((l) => l === '[Peer]').length, rendered.peers.length);
        for (const line of rendered.text.split('\n').filter((l) => l.startsWith('#')))
          assert.ok(!line.includes('\r'));
      },
    ),
  );
});

test('keys are 32 bytes of base64 and the public half matches what it derives from', () => {
  const pair = generateKeypair();
  assert.ok(isWireguardKey(pair.privateKey) && isWireguardKey(pair.publicKey));
  assert.equal(Buffer.from(pair.publicKey, 'base64').length, 32);
  assert.equal(publicKeyOf(pair.privateKey), pair.publicKey);
  // RFC 7748 section 6.1: Alice's private and public key.
  const alice = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex');
  assert.equal(
    Buffer.from(publicKeyOf(alice.toString('base64')), 'base64').toString('hex'),
    '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a',
  );
});

test('the keypair is made once, kept 0600 in the state directory, and reused', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-wg-'));
  assert.equal(await readKeypair(dir), null);
  await assert.rejects(requireKeypair(dir), (err: unknown) => {
    assert.ok(err instanceof Problem);
    assert.equal(err.code, 'invalid-input');
    assert.equal(err.title, 'No WireGuard key in the state directory');
    return true;
  });
  const made = await ensureKeypair(dir);
  assert.equal(statSync(join(dir, PRIVATE_KEY_FILE)).mode & 0o777, 0o600);
  assert.equal((await readFile(join(dir, PRIVATE_KEY_FILE), 'utf8')).trim(), made.privateKey);
  assert.deepEqual(await ensureKeypair(dir), made);
  assert.deepEqual(await requireKeypair(dir), made);
  await writeFile(join(dir, PRIVATE_KEY_FILE), 'garbage\n');
  await assert.rejects(
    readKeypair(dir),
    (err: unknown) => err instanceof Problem && err.title === 'Unreadable WireGuard key',
  );
});
