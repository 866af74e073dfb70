// Shapes of docs/ingress.md "The routing document" and of the fleet state it is rendered from (the
// rules of the same section).

/** One node as the registry cache sees it; liveness is decided by the caller (heartbeat age). */
export interface RoutingNode {
  id: string;
  /** Advertised `host:port` of the daemon; a route's upstream is this host with the process's port. */
  address: string;
  state: 'starting' | 'ready' | 'draining';
  live: boolean;
  processes: RoutingProcess[];
}

export interface RoutingProcess {
  application: string;
  /** Public port the process answers on at the node's advertised host. */
  port: number;
  ready: boolean;
}

export interface RoutingApplication {
  name: string;
  blocked: boolean;
  retired: boolean;
}

export interface RoutingClaim {
  /** Lowercased, fully qualified custom host (docs/api.md claim rule). */
  host: string;
  application: string;
  /** Claimed with `wildcard=1`: also covers the single label below `host`. */
  wildcard: boolean;
}

/** Everything the renderer reads. Plain data so the node fills it from its registry cache. */
export interface RoutingInput {
  nodes: RoutingNode[];
  applications: RoutingApplication[];
  claims: RoutingClaim[];
  platformDomains: string[];
  /** The node's `api.public` setting. */
  apiPublic: boolean;
  /** Id of the rendering node; what `prefer=self` resolves to. */
  selfNodeId: string;
}

export interface Upstream {
  node: string;
  address: string;
}

export interface Route {
  host: string;
  application: string;
  upstreams: Upstream[];
}

export interface ApiRouting {
  hosts: string[];
  upstreams: Upstream[];
  denied: string[];
}

export interface FleetRouting {
  v: 1;
  routes: Route[];
  api?: ApiRouting;
}
