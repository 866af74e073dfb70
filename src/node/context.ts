// What every part of the running daemon shares: settings, the bucket, who this node is.

import type { Logger } from 'pino';
import type { Settings } from '../config/settings.ts';
import type { RoutingSource } from '../ingress/routes.ts';
import type { Store } from '../store/store.ts';

/** The daemon's shared state, handed to every route plugin and background loop. */
export interface NodeContext {
  settings: Settings;
  store: Store;
  nodeId: string;
  version: string;
  log: Logger;
  /** The fleet state of the last reconcile pass, for the routing routes; set by the reconcile loop. */
  routing?: RoutingSource;
}
