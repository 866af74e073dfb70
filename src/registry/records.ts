// The typed registry records svc keeps in the bucket (docs/bucket-layout.md "What svc keeps in the
// bucket"; the page of each concern gives its fields). Keys are in keys.ts. Every record carries `v: 1`.

/** How many nodes run an application: every eligible node, or a fixed count. */
export type Replicas = 'all' | number;

/** Where deployed code came from (the deploy metadata's `source`); all four members non-empty when given. */
export interface DeploySource {
  provider: string;
  repo: string;
  ref: string;
  commit: string;
}

/** One application (docs/applications.md "The application record"); created by its first deploy. */
export interface ApplicationRecord {
  v: 1;
  name: string;
  createdAt: string;
  updatedAt: string;
  /** Who deployed first and so created the application. */
  createdBy?: string;
  /** Fleet-owned labels; removed from a non-admin's view. */
  labels: Record<string, string>;
  /** Visible to every caller. */
  blocked: boolean;
  /** Present while retired; unretire is allowed until `graceUntil`. */
  retired?: { at: string; by: string; graceUntil: string };
  /** Node labels a placement must match; null places anywhere. */
  selector: Record<string, string> | null;
  replicas: Replicas;
  /** Claimed custom hosts, sorted. */
  domains: string[];
  /** The subset of `domains` claimed with their subdomains, sorted. */
  wildcardDomains: string[];
  /** The deployment the last successful deploy produced, when known. */
  deployment?: string;
}

/** A custom domain claim at `_svc/domains/<host>.json`; its referent is the application. */
export interface DomainClaim {
  v: 1;
  host: string;
  application: string;
  wildcard: boolean;
  claimedAt: string;
  by: string;
}

/** What the supervisor reports for one runtime process (docs/fleet.md "Node record"). */
export interface ProcessStatus {
  application: string;
  port: number;
  /** `cell --version` of the executable that runs it. */
  runtimeVersion: string;
  ready: boolean;
  state: 'starting' | 'ready' | 'crashloop' | 'stopping';
  restarts: number;
  pid?: number;
  /** The deployment the process serves, as its health says (absent until it serves one). */
  deployment?: string;
  /**
   * Why it is not ready, when it is not: the runtime's own health detail (a deployment that
   * failed to start names its error), or how the process last exited. An addition to the spec's
   * ProcessStatus.
   */
  detail?: string;
}

/** A node's registry record at `_svc/fleet/nodes/<id>.json`, rewritten on every heartbeat. */
export interface NodeRecord {
  v: 1;
  id: string;
  /** `host:port` other nodes and ingresses reach the daemon at. */
  advertise: string;
  listen: string;
  labels: Record<string, string>;
  versions: { svc: string; cell?: string };
  /**
   * The node's platform domains (`--platform-domains`), so the CLI's bucket path can refuse a
   * claim under one as the node would. Absent on records of older versions.
   */
  platformDomains?: string[];
  state: 'starting' | 'ready' | 'draining';
  /** Wall-clock time of the last heartbeat, ms since the epoch. */
  beatMs: number;
  startedAt: string;
  processes: ProcessStatus[];
  /** Raw X25519 public key (base64url) secrets are sealed to (docs/decisions.md "Secrets"). */
  sealKey?: string;
  /** Present when the node runs with `--transport wireguard`: what peers need to reach it. */
  wireguard?: WireguardTunnel;
}

/** The public side of a node's WireGuard tunnel; the private key never leaves the node's disk. */
export interface WireguardTunnel {
  /** Base64 X25519 public key, as `wg pubkey` prints it. */
  publicKey: string;
  /** Tunnel address with prefix length (`--wg-address`). */
  address: string;
  /** `host:port` peers send tunnel traffic to (`--wg-endpoint`); absent when peers cannot reach it first. */
  endpoint?: string;
}

/**
 * A node's published WireGuard public half at `_svc/wireguard/<id>.json`, written by `svc wg init`
 * and by `svc sail`, so a node is a peer before its first heartbeat.
 */
export interface WireguardPeerRecord extends WireguardTunnel {
  v: 1;
  node: string;
  publishedAt: string;
}

/** The coordinator lease at `_svc/fleet/coordinator.json` (docs/fleet.md "Coordinator lease and fencing"). */
export interface CoordinatorLease {
  v: 1;
  node: string;
  /** Incremented on every change of holder; never reused. */
  fence: number;
  acquiredAt: string;
  /** Changes on every renewal, so that the object's ETag does too. */
  renewedAt: string;
  /** ms since the epoch. */
  expiresMs: number;
}

/** The coordinator's placement decision for one application. */
export interface PlacementRecord {
  v: 1;
  application: string;
  nodes: string[];
  /** Fence of the lease the decision was taken under. */
  fence: number;
  decidedAt: string;
}

/** The fleet freeze (docs/applications.md "The fleet freeze"). */
export interface FreezeRecord {
  v: 1;
  frozenAt: string;
  by: string;
  reason?: string;
}
