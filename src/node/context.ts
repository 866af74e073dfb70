// What every part of the running daemon shares: settings, the bucket, who this node is, and the
// slots the daemon's services fill at boot. The bottom of node/: every slot is typed by a narrow
// interface declared here (what its readers ask of it), never by the class that fills it, so any
// part may import this file without importing the parts. It imports types only, and only from
// folders below node/ (auth's key and state types, config, store, registry, routing, observability's
// event sink, the ingress routes' source) and from leaf modules of node/deploys and node/fleet.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { D1Service } from '../../runtime/src/bindings/d1.ts';
import type { QueueWakers } from '../../runtime/src/bindings/queue-runner.ts';
import type { HealthAsks } from '../../runtime/src/host/health-asks.ts';
import type { SigningKeyPair } from '../auth/ed25519.ts';
import type { AuthState } from '../auth/state.ts';
import type { Settings } from '../config/settings.ts';
import type { RoutingSource } from '../ingress/rendered-routing.ts';
import type { EventSink } from '../observability/events.ts';
import type { ApplicationRecord, CoordinatorLease, NodeRecord, ProcessStatus } from '../registry/records.ts';
import type { Store } from '../store/store.ts';
import type { DeployLimits, DeployTicket } from './deploys/limits.ts';
import type { AcceptorView, DeployRecord, DeployRecordWriter, DeployStatus } from './deploys/records.ts';
import type { Unplaced } from './fleet/placement.ts';
import type { PlacementView, ReconcileStatus } from './fleet/reconcile.ts';

/** The daemon's shared state, handed to every route plugin and background loop. */
export interface NodeContext {
  settings: Settings;
  store: Store;
  nodeId: string;
  version: string;
  log: Logger;
  /** The fleet state of the last reconcile pass, for the routing routes; set by the fleet service. */
  routing?: RoutingSource;
  /** This node's signing key (src/auth/node-key.ts); set by the identity service at boot. */
  nodeKey?: SigningKeyPair;
  /** The token verifier and admitted ingress tokens (src/node/identity-service.ts); created on first use. */
  auth?: AuthState;
  /** The deploy runner (src/node/deploys/service.ts); set by the deploy service. */
  deploys?: Deploys;
  /** The coordinator lease as this node keeps it (src/node/fleet/lease.ts); set by the fleet service. */
  lease?: LeaseGate;
  /** What GET /v1/state reports of the fleet (src/node/fleet/service.ts); set by the fleet service. */
  fleet?: FleetView;
  /**
   * Where this node's parts record fleet events (src/observability/); set by the observability
   * service at boot, a sink that does nothing when observability is off.
   */
  events?: EventSink;
  /** What the Prometheus metrics (src/metrics/) are told directly; set when `--metrics-listen` is given. */
  metrics?: MetricsTap;
  /** A fresh single-use node token (src/auth/node-key.ts), for forwarding to the coordinator. */
  mintNodeToken?: () => Promise<string>;
  /** The node's D1 databases (runtime/src/bindings/d1.ts); set by the runtime host service. */
  d1?: D1Service;
  /** Wakes this node's queue consumers (runtime/src/bindings/queue-runner.ts); set by the runtime host service. */
  queueWakers?: QueueWakers;
  /**
   * Asks a runtime connected to this node's runtime host for its health over that connection
   * (runtime/src/host/health-asks.ts); set by the runtime host service.
   */
  runtimeHealth?: Pick<HealthAsks, 'ask'>;
}

/**
 * What the daemon's parts tell the Prometheus metrics directly: the observability part each
 * access-log request it counted, the runtime host each request to its binding sockets.
 */
export interface MetricsTap {
  served(
    application: string,
    request: { status: number; durationMs: number; bytesIn: number; bytesOut: number },
  ): void;
  observeBindingCall(req: IncomingMessage, res: ServerResponse): void;
}

/**
 * A background part of the daemon (identity, deploys, heartbeat, lease, reconcile loop...).
 * The daemon (src/node/daemon.ts) starts its services in list order once the bucket is open and
 * stops them in reverse order.
 */
export interface DaemonService {
  name: string;
  start(ctx: NodeContext): Promise<void>;
  /** `keepApplications`: the daemon is restarting; leave the runtime processes serving. */
  stop(options?: StopOptions): Promise<void>;
}

export interface StopOptions {
  keepApplications?: boolean;
}

/** What deploy intake, the deploy routes and the reaper ask of this node's deploy runner. */
export interface Deploys {
  /** The queue and capacity limits intake admits a deploy under. */
  readonly limits: DeployLimits;
  /** Aborted when the node stops: intake gives up receiving. */
  readonly stopping: AbortSignal;
  /** Whether this node runs this deploy now (queued, active, or writing how it ended). */
  runs(id: string): boolean;
  /** What this node, which accepted the deploy, says of it: working on it, or why not. */
  view(record: DeployRecord): AcceptorView;
  /** Each record written for a deploy this node runs, as it is written; null when it runs none. */
  watchRecord(
    id: string,
    watcher: (record: DeployRecord) => void,
  ): { record: DeployRecord; stop: () => void } | null;
  /** The staging directory and the runtime's version; `capability-missing` when either is absent. */
  capabilities(): Promise<{ staging: string; runtimeVersion: string }>;
  /** `version-skew` when another answering node serves the application on another runtime. */
  checkVersionSkew(application: string, runtimeVersion: string): Promise<void>;
  /** Takes a staged, recorded deploy into the queue; it runs when a runner slot is free. */
  enqueue(staged: StagedDeploy): DeployStatus;
}

/** What intake hands over to the runner once an artifact is staged and checked. */
export interface StagedDeploy {
  id: string;
  application: string;
  /** `<staging>/<id>`, removed when the deploy ends. */
  dir: string;
  /** The unpacked artifact and its worker config. */
  root: string;
  config: string;
  ticket: DeployTicket;
  writer: DeployRecordWriter;
}

/** What the rest of the daemon asks of the coordinator lease (deletion, the shard reaper). */
export interface LeaseGate {
  /** The holder as this node last saw it; null when nobody holds an unexpired lease. */
  view(): { node: string } | null;
  isCoordinator(): boolean;
  /** Offers this node as coordinator once; afterwards `isCoordinator()` and `view()` tell who won. */
  tryAcquire(): Promise<unknown>;
}

/** docs/api.md "State". */
export interface CoordinatorView {
  node: string;
  fence: number;
  self: boolean;
  unplaced?: Unplaced[];
}

/** One node's process of an application. */
export interface NodeProcess extends ProcessStatus {
  node: string;
}

/** What GET /v1/state and the application routes read of the fleet concern (`ctx.fleet`). */
export interface FleetView {
  node(): NodeRecord | null;
  lease(): CoordinatorLease | null;
  coordinator(): CoordinatorView | null;
  processes(): ProcessStatus[];
  /**
   * The application's runtime processes on every live node, from the node records this node
   * keeps (its own from memory): no request of its own.
   */
  processesOf(application: string): NodeProcess[];
  placements(): PlacementView[];
  /**
   * Every application record in name order, from the registry cache: a change this node made
   * shows at once, one made elsewhere within a pass (docs/fleet.md "Registry cache").
   */
  applications(): Promise<ApplicationRecord[]>;
  reconcile(): ReconcileStatus;
  /**
   * This node changed the registry (a deploy created or moved an application): re-list it and
   * run a pass now instead of within the resync interval.
   */
  changed(): void;
  /**
   * The application's selector was moved by this node (a deploy, a rollback): its runtime process
   * on this node looks at it now, and every other live node running the application is told to
   * do the same (src/node/fleet/deployment-moved.ts); the application record's `deployment`
   * carries the move to the rest.
   */
  selectorMoved(application: string): void;
  /** Another node said it moved the application's selector: the runtime process here looks now. */
  deploymentMovedElsewhere(application: string): void;
  /**
   * The application's runtime process said over the runtime host's socket that its health answer
   * changed: the supervisor probes it now (docs/supervisor.md "The supervisor", Readiness).
   */
  runtimeHealthMoved?(application: string): void;
}
