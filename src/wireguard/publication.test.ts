// Which nodes are peers: published objects always, node records only while live; the published
// object wins; nothing private is published.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tempStore } from '../../test/helpers/temp-store.ts';
import { keys } from '../registry/keys.ts';
import { NODE_DEAD_AFTER_MS } from '../registry/liveness.ts';
import type { NodeRecord } from '../registry/records.ts';
import { getJson, putJson } from '../store/store.ts';
import { generateKeypair } from './keypair.ts';
import { publishTunnel, registeredTunnels } from './publication.ts';

const NOW = 1_800_000_000_000;

function nodeRecord(id: string, beatMs: number, wireguard?: NodeRecord['wireguard']): NodeRecord {
  return {
    v: 1,
    id,
    advertise: '10.44.0.9:7311',
    listen: '10.44.0.9:7311',
    labels: {},
    versions: { svc: 'test' },
    state: 'ready',
    beatMs,
    startedAt: new Date(beatMs).toISOString(),
    processes: [],
    ...(wireguard ? { wireguard } : {}),
  };
}

test('peers: published tunnels, live registered tunnels, the published one winning', async () => {
  const store = await tempStore();
  const [p, q, r, s] = [generateKeypair(), generateKeypair(), generateKeypair(), generateKeypair()];
  await publishTunnel(store, 'published', {
    publicKey: p.publicKey,
    address: '10.44.0.1/24',
    endpoint: 'h:1',
  });
  await putJson(
    store,
    keys.nodeRecord('live'),
    nodeRecord('live', NOW - 1000, { publicKey: q.publicKey, address: '10.44.0.2/24' }),
  );
  await putJson(
    store,
    keys.nodeRecord('dead'),
    nodeRecord('dead', NOW - NODE_DEAD_AFTER_MS - 1, { publicKey: r.publicKey, address: '10.44.0.3/24' }),
  );
  await putJson(store, keys.nodeRecord('plain'), nodeRecord('plain', NOW));
  // Rotated: the record still carries the old key, the published object the new one.
  await putJson(
    store,
    keys.nodeRecord('rotated'),
    nodeRecord('rotated', NOW, { publicKey: r.publicKey, address: '10.44.0.4/24' }),
  );
  await publishTunnel(store, 'rotated', { publicKey: s.publicKey, address: '10.44.0.4/24' });
  await store.put(keys.wireguardPeer('broken'), '{not json');
  const unreadable: string[] = [];
  const peers = await registeredTunnels(store, (key) => unreadable.push(key), NOW);
  assert.deepEqual(
    peers.sort((x, y) => x.node.localeCompare(y.node)),
    [
      { node: 'live', publicKey: q.publicKey, address: '10.44.0.2/24' },
      { node: 'published', publicKey: p.publicKey, address: '10.44.0.1/24', endpoint: 'h:1' },
      { node: 'rotated', publicKey: s.publicKey, address: '10.44.0.4/24' },
    ],
  );
  assert.deepEqual(unreadable, [keys.wireguardPeer('broken')]);
  const published = await getJson<Record<string, unknown>>(store, keys.wireguardPeer('published'));
  assert.deepEqual(Object.keys(published?.value ?? {}).sort(), [
    'address',
    'endpoint',
    'node',
    'publicKey',
    'publishedAt',
    'v',
  ]);
  await store.close();
});
