// Renders the node's WireGuard interface configuration (wg-quick format): `[Interface]` with the
// tunnel address, listen port and this node's private key, then one `[Peer]` per other node with
// its public key, endpoint and its tunnel address alone as `AllowedIPs`. Pure: same input, same
// bytes. Peers come from the bucket, so each field is checked before it becomes a line: a value
// that is not what it claims to be leaves the peer out instead of reaching the file.

import { isNodeId } from '../registry/names.ts';
import type { WireguardTunnel } from '../registry/records.ts';
import { hostRoute, parseEndpoint, parseTunnelAddress } from './address.ts';
import { isWireguardKey } from './keypair.ts';

export interface InterfaceInput {
  nodeId: string;
  /** Tunnel address with prefix length. */
  address: string;
  listenPort: number;
  privateKey: string;
  publicKey: string;
}

export interface PeerInput extends WireguardTunnel {
  node: string;
}

export interface Rendered {
  text: string;
  /** Node ids rendered as peers, in file order. */
  peers: string[];
  /** Peers left out, and why. */
  skipped: { node: string; why: string }[];
}

export function renderInterface(self: InterfaceInput, candidates: readonly PeerInput[]): Rendered {
  const lines = [
    `# WireGuard interface of svc node "${self.nodeId}", rendered by svc wg.`,
    '# Re-render with `svc wg peers` when nodes join, leave or rotate keys. Keep this file private.',
    '[Interface]',
    `Address = ${self.address}`,
    `ListenPort = ${self.listenPort}`,
    `PrivateKey = ${self.privateKey}`,
  ];
  const selfAddress = parseTunnelAddress(self.address);
  const taken = {
    keys: new Set([self.publicKey]),
    routes: new Set(typeof selfAddress === 'string' ? [] : [hostRoute(selfAddress)]),
  };
  const peers: string[] = [];
  const skipped: Rendered['skipped'] = [];
  const ordered = [...candidates].sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  for (const candidate of ordered) {
    if (candidate.node === self.nodeId || peers.includes(candidate.node)) continue;
    const peer = checkPeer(candidate, self.listenPort);
    if (typeof peer === 'string') {
      skipped.push({ node: candidate.node, why: peer });
      continue;
    }
    if (taken.keys.has(peer.publicKey)) {
      skipped.push({ node: candidate.node, why: 'its public key is already in use by another node' });
      continue;
    }
    if (taken.routes.has(peer.route)) {
      skipped.push({ node: candidate.node, why: `its tunnel address ${peer.route} is already taken` });
      continue;
    }
    taken.keys.add(peer.publicKey);
    taken.routes.add(peer.route);
    peers.push(candidate.node);
    lines.push('', `# node "${candidate.node}"`, '[Peer]', `PublicKey = ${peer.publicKey}`);
    if (peer.endpoint) lines.push(`Endpoint = ${peer.endpoint}`);
    lines.push(`AllowedIPs = ${peer.route}`);
  }
  return { text: `${lines.join('\n')}\n`, peers, skipped };
}

interface CheckedPeer {
  publicKey: string;
  route: string;
  endpoint?: string;
}

function checkPeer(peer: PeerInput, defaultPort: number): CheckedPeer | string {
  if (typeof peer.node !== 'string' || !isNodeId(peer.node)) return 'its node id is malformed';
  if (typeof peer.publicKey !== 'string' || !isWireguardKey(peer.publicKey))
    return 'its public key is not a base64 WireGuard key';
  const address = typeof peer.address === 'string' ? parseTunnelAddress(peer.address) : 'no tunnel address';
  if (typeof address === 'string') return `its tunnel address is unusable: ${address}`;
  if (peer.endpoint === undefined) return { publicKey: peer.publicKey, route: hostRoute(address) };
  const endpoint =
    typeof peer.endpoint === 'string' ? parseEndpoint(peer.endpoint, defaultPort) : 'not a string';
  if (typeof endpoint === 'string') return `its endpoint is unusable: ${endpoint}`;
  return { publicKey: peer.publicKey, route: hostRoute(address), endpoint: endpoint.endpoint };
}
