// What every part of the running daemon shares: settings, the bucket, who this node is.

import type { Logger } from 'pino';
import type { SigningKeyPair } from '../auth/ed25519.ts';
import type { AuthState } from '../auth/state.ts';
import type { Settings } from '../config/settings.ts';
import type { RoutingSource } from '../ingress/rendered-routing.ts';
import type { EventSink } from '../observability/events.ts';
import type { Store } from '../store/store.ts';
import type { DeployService } from './deploys/service.ts';
import type { LeaseKeeper } from './fleet/lease.ts';
import type { FleetView } from './fleet/service.ts';

/** The daemon's shared state, handed to every route plugin and background loop. */
export interface NodeContext {
  settings: Settings;
  store: Store;
  nodeId: string;
  version: string;
  log: Logger;
  /** The fleet state of the last reconcile pass, for the routing routes; set by the reconcile loop. */
  routing?: RoutingSource;
  /** This node's signing key (src/auth/node-key.ts); set by the identity service at boot. */
  nodeKey?: SigningKeyPair;
  /** The token verifier and admitted ingress tokens (src/auth/state.ts); created on first use. */
  auth?: AuthState;
  /** The deploy runner: staging, queue and limits, publishing (src/node/deploys/); set by its service. */
  deploys?: DeployService;
  /** The coordinator lease as this node keeps it (src/node/fleet/lease.ts); set by the fleet service. */
  lease?: LeaseKeeper;
  /** What GET /v1/state reports of the fleet (src/node/fleet/service.ts); set by the fleet service. */
  fleet?: FleetView;
  /**
   * Where this node's parts record fleet events (src/observability/); set by the observability
   * service at boot, a sink that does nothing when observability is off.
   */
  events?: EventSink;
  /** A fresh single-use node token (src/auth/node-key.ts), for forwarding to the coordinator. */
  mintNodeToken?: () => Promise<string>;
}
