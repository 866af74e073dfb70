// The public half of each node's tunnel in the bucket: `_svc/wireguard/<id>.json`, written by
// `svc wg init` and `svc sail`, and the same fields on the node record. Peers are every node with
// a published object, plus live nodes whose record carries a tunnel (node records are never
// deleted, so a dead one must not stay a peer forever). The published object wins: `svc wg init`
// writes it when a key rotates, before the daemon restarts and its record catches up.

import type { Settings } from '../config/settings.ts';
import { keys } from '../registry/keys.ts';
import { isNodeLive } from '../registry/liveness.ts';
import type { NodeRecord, WireguardPeerRecord, WireguardTunnel } from '../registry/records.ts';
import { getJson, putJson, type Store } from '../store/store.ts';
import type { WireguardKeypair } from './keypair.ts';
import type { PeerInput } from './render.ts';

/** The public side of this node's tunnel, from its settings and keypair. */
export function tunnelOf(settings: Settings, pair: WireguardKeypair): WireguardTunnel {
  const { wgAddress, wgEndpoint } = settings.network;
  const tunnel: WireguardTunnel = { publicKey: pair.publicKey, address: wgAddress as string };
  if (wgEndpoint !== undefined) tunnel.endpoint = wgEndpoint;
  return tunnel;
}

/** Writes this node's public half; unconditional, only this node writes its key. */
export async function publishTunnel(
  store: Store,
  nodeId: string,
  tunnel: WireguardTunnel,
  now: () => Date = () => new Date(),
): Promise<void> {
  const record: WireguardPeerRecord = { v: 1, node: nodeId, ...tunnel, publishedAt: now().toISOString() };
  await putJson(store, keys.wireguardPeer(nodeId), record);
}

/** Every node that published a tunnel or registered with one; unreadable objects are left out. */
export async function registeredTunnels(
  store: Store,
  onUnreadable: (key: string) => void = () => {},
  nowMs: number = Date.now(),
): Promise<PeerInput[]> {
  const byNode = new Map<string, PeerInput>();
  for (const record of await readAll<NodeRecord>(store, keys.nodeRecordsPrefix, onUnreadable)) {
    if (record?.wireguard && typeof record.id === 'string' && isNodeLive(record, nowMs))
      byNode.set(record.id, { node: record.id, ...pickTunnel(record.wireguard) });
  }
  for (const record of await readAll<WireguardPeerRecord>(store, keys.wireguardPeersPrefix, onUnreadable)) {
    if (record && typeof record.node === 'string')
      byNode.set(record.node, { node: record.node, ...pickTunnel(record) });
  }
  return [...byNode.values()];
}

function pickTunnel(from: WireguardTunnel): WireguardTunnel {
  const tunnel: WireguardTunnel = { publicKey: from.publicKey, address: from.address };
  if (from.endpoint !== undefined) tunnel.endpoint = from.endpoint;
  return tunnel;
}

async function readAll<T>(
  store: Store,
  prefix: string,
  onUnreadable: (key: string) => void,
): Promise<(T | null)[]> {
  const listing = await store.list(prefix, { recursive: false });
  return Promise.all(
    listing.objects
      .filter((object) => object.key.endsWith('.json'))
      .map(async (object) => {
        try {
          return (await getJson<T>(store, object.key))?.value ?? null;
        } catch {
          onUnreadable(object.key);
          return null;
        }
      }),
  );
}
