// The reconcile loop (docs/fleet.md "Reconcile loop": one pass every 5 s on every node; docs/applications.md
// "Lifecycle": a blocked application stops on each node's next pass; docs/ingress.md "The routing document":
// only what is running is routed). A pass: refresh what is due of the registry cache, offer this node as
// coordinator when nobody holds the lease, and as coordinator place applications (written under the fence)
// and reap deploys when due; then tell the supervisor what this node should run, publish the node record when
// it changed and the routing input for the ingress routes.

import { bumpFleetMarker } from '../../registry/changes.ts';
import { keys } from '../../registry/keys.ts';
import type { LivenessChange, LivenessTracker } from '../../registry/liveness.ts';
import type {
  ApplicationRecord,
  NodeRecord,
  PlacementRecord,
  ProcessStatus,
} from '../../registry/records.ts';
import { routingInputFromRegistry } from '../../routing/input.ts';
import type { RoutingInput } from '../../routing/types.ts';
import { getJson, isCasConflict, putJson, type Store } from '../../store/store.ts';
import type { RegistryCache } from './cache.ts';
import type { LeaseKeeper } from './lease.ts';
import type { NodeRegistration } from './node-record.ts';
import { placeApplications, type Unplaced } from './placement.ts';

/** docs/api.md: one pass every 5 s. */
export const PASS_INTERVAL_MS = 5_000;

/**
 * After a change (seen or made), the marker is also read every `CHANGE_WATCH_EVERY_MS` for
 * `CHANGE_WATCH_MS`, and a pass runs as soon as it moves: a change that travels in several hops
 * (a block makes nodes stop processes and publish their records; replicas make the coordinator
 * place, then nodes start processes, then publish) takes a second per hop, not a pass. An idle
 * fleet does not watch, so its cost stays one HEAD per pass.
 */
export const CHANGE_WATCH_MS = 30_000;
export const CHANGE_WATCH_EVERY_MS = 1_000;

/** What the loop needs of the supervisor (src/node/fleet/supervisor.ts). */
export interface ProcessSupervisor {
  /** `deployment`: what the application record says is selected, so a move can be told. */
  apply(desired: readonly { application: string; deployment?: string }[]): void | Promise<void>;
  statuses(): ProcessStatus[];
  stop(): Promise<void>;
  /** The application's selector moved: its runtime process should look now. */
  notify?(application: string): void;
  /** The application's runtime process said its health changed: probe it now. */
  healthMoved?(application: string): void;
  /** Stops supervising and leaves the processes running (the daemon restarts keeping them). */
  detach?(): Promise<void>;
}

/** The last pass of the loop (docs/api.md DaemonState `reconcile`). */
export interface ReconcileStatus {
  /** Passes completed since start. */
  passes: number;
  lastPassAt: string | null;
  lastPassMs: number | null;
  ok: boolean;
  /** Why the last pass failed; absent when it did not. */
  error?: string;
  coordinator: boolean;
  /** Applications this node was told to run on the last pass. */
  desired: string[];
  /** Placement records written on the last pass. */
  placementsWritten: number;
}

/** One entry of DaemonState `placements`: a missing placement is pending, never an assignment. */
export interface PlacementView {
  application: string;
  state: 'placed' | 'pending';
  nodes: string[];
  fence?: number;
  decidedAt?: string;
}

export interface ReconcilerOptions {
  store: Store;
  nodeId: string;
  cache: RegistryCache;
  lease: LeaseKeeper;
  /** This node's judgement of the others, fed with the pass's listing of `_svc/fleet/`. */
  liveness: LivenessTracker;
  registration: NodeRegistration;
  supervisor: ProcessSupervisor;
  /** Intervals of the schedule (settings `registry.*`, `coordinator.reapIntervalMs`). */
  resyncMs: number;
  nodeRefreshMs: number;
  reapIntervalMs: number;
  /** The coordinator's reaper pass (deployReaperFor(ctx).reap()). */
  reap: () => Promise<unknown>;
  routing: { platformDomains: string[]; apiPublic: boolean };
  mono: () => number;
  wall: () => number;
  onPass?: (status: ReconcileStatus) => void;
  /** A listing changed a judgement: nodes newly dead, newly lost, beating again. */
  onLiveness?: (change: LivenessChange) => void;
  /** The change marker moved: someone changed the registry (operator keys among it). */
  onRegistryChanged?: () => void;
  /** Secrets (src/secrets/keeper.ts): files for what runs here, copies for nodes that lack them. */
  secrets?: {
    materialize(
      applications: readonly string[],
      listed?: (application: string) => string | null,
      // The applications whose file changed (their processes are told to read it).
    ): Promise<readonly string[] | undefined>;
    reseal(
      applications: readonly string[],
      nodes: readonly NodeRecord[],
      nowMs: number,
      listed?: (application: string) => string | null,
    ): Promise<void>;
  };
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

export class Reconciler {
  readonly #o: ReconcilerOptions;
  #status: ReconcileStatus = {
    passes: 0,
    lastPassAt: null,
    lastPassMs: null,
    ok: true,
    coordinator: false,
    desired: [],
    placementsWritten: 0,
  };
  #routing: RoutingInput | null = null;
  #unplaced: Unplaced[] = [];
  #fleetAt = Number.NEGATIVE_INFINITY;
  #appsAt = Number.NEGATIVE_INFINITY;
  #reapAt = Number.NEGATIVE_INFINITY;
  /** The change marker's ETag as noted before the last full re-list; undefined before the first. */
  #marker: string | null | undefined;
  /** When this node last saw or made a change (monotonic ms); the start counts as one. */
  #changedAt: number;
  #draining = false;

  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#changedAt = options.mono();
  }

  status(): ReconcileStatus {
    return this.#status;
  }

  /** The routing input of the last pass; null until the first pass completed. */
  routing(): RoutingInput | null {
    return this.#routing;
  }

  /** Unplaced applications of the last assignment pass (meaningful only on the coordinator). */
  unplaced(): Unplaced[] {
    return this.#unplaced;
  }

  /** Stops offering this node as coordinator and running assignment (the node is draining). */
  drain(): void {
    this.#draining = true;
  }

  /** Makes the next pass re-list the applications and nodes (a change this node knows of). */
  refreshSoon(): void {
    this.#fleetAt = Number.NEGATIVE_INFINITY;
    this.#appsAt = Number.NEGATIVE_INFINITY;
    this.#changedAt = this.#o.mono();
  }

  /**
   * Between passes, while a change is recent: answers whether the marker moved since the last
   * pass noted it (one HEAD), so the caller runs a pass now. Answers false without a request
   * when nothing changed lately.
   */
  async markerMoved(): Promise<boolean> {
    if (this.#marker === undefined || this.#o.mono() - this.#changedAt > CHANGE_WATCH_MS) return false;
    const marker = (await this.#o.store.stat(keys.fleetChanged))?.etag ?? null;
    return marker !== this.#marker;
  }

  /** Placement views of every application in the registry, in name order. */
  placements(): PlacementView[] {
    const names = [...this.#o.cache.applications.keys()].sort();
    return names.map((application) => {
      const placed = this.#o.cache.placements.get(application)?.value;
      if (!placed) return { application, state: 'pending', nodes: [] };
      return {
        application,
        state: 'placed',
        nodes: placed.nodes,
        fence: placed.fence,
        decidedAt: placed.decidedAt,
      };
    });
  }

  /** One pass; a failure is recorded in the status and the next pass tries again. */
  async pass(): Promise<ReconcileStatus> {
    const o = this.#o;
    const started = o.mono();
    let error: string | undefined;
    let written = 0;
    let desired: ApplicationRecord[] = [];
    try {
      await this.#refresh(started);
      if (!this.#draining && !o.lease.isCoordinator() && o.lease.view() === null) await o.lease.tryAcquire();
      if (!this.#draining && o.lease.isCoordinator()) {
        written = await this.#assign();
        if (o.mono() - this.#reapAt >= o.reapIntervalMs) {
          this.#reapAt = o.mono();
          await o.reap();
        }
        await o.secrets?.reseal(
          [...o.cache.applications.keys()],
          this.#nodeRecords(),
          o.wall(),
          (application) => o.cache.listedEtag(keys.appSecrets(application)),
        );
      } else this.#unplaced = [];
      desired = this.desiredHere();
      // Before the supervisor: a process it starts now finds its secrets already there.
      const secretsChanged = await o.secrets?.materialize(
        desired.map((app) => app.name),
        (application) => o.cache.listedEtag(keys.appSecrets(application)),
      );
      await o.supervisor.apply(
        desired.map((app) => ({
          application: app.name,
          ...(app.deployment !== undefined ? { deployment: app.deployment } : {}),
        })),
      );
      // A running process reads its secrets file when told, not by polling it.
      for (const application of secretsChanged ?? []) o.supervisor.notify?.(application);
      const published = await o.registration.beat(
        { state: this.#draining ? 'draining' : 'ready', processes: o.supervisor.statuses() },
        true,
      );
      // Other nodes route to this node's processes as its record lists them: a changed record
      // (or a placement written above) moves the marker so they read it on their next pass.
      if (published || written > 0) await bumpFleetMarker(o.store, `node ${o.nodeId}`);
      this.#publishRouting();
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
      // Mostly the bucket failing: no silence seen meanwhile is evidence of a death.
      o.liveness.trouble(o.mono());
      o.log.warn({ err }, 'reconcile pass failed');
    }
    this.#status = {
      passes: this.#status.passes + 1,
      lastPassAt: new Date(o.wall()).toISOString(),
      lastPassMs: Math.round(o.mono() - started),
      ok: error === undefined,
      ...(error === undefined ? {} : { error }),
      coordinator: o.lease.isCoordinator(),
      desired: desired.map((app) => app.name),
      placementsWritten: written,
    };
    o.onPass?.(this.#status);
    return this.#status;
  }

  /**
   * Applications placed on this node that should run: not blocked, not retired, and with a
   * deployment. An application whose deploys all failed (or that was only created) has nothing
   * to serve, so no runtime process is started for it; the application record names the
   * deployment of its last successful deploy, so this costs no request beyond the cache's.
   */
  desiredHere(): ApplicationRecord[] {
    const { cache, nodeId } = this.#o;
    const out: ApplicationRecord[] = [];
    for (const [name, { value: app }] of cache.applications) {
      if (app.blocked || app.retired || !app.deployment) continue;
      if (cache.placements.get(name)?.value.nodes.includes(nodeId)) out.push(app);
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Re-lists what is due. Every pass lists `_svc/fleet/` (one request): it carries the change
   * marker (src/registry/changes.ts) and every node's heartbeat, which the liveness tracker takes
   * in; node records, the lease and the freeze are fetched only when the marker moved or the node
   * refresh is due. The marker's ETag is noted from the listing before anything is fetched, so a
   * change that lands meanwhile moves the marker again and is picked up by the next pass.
   */
  async #refresh(now: number): Promise<void> {
    const o = this.#o;
    await this.#listFleet();
    const marker = o.cache.markerEtag;
    const moved = this.#marker !== undefined && marker !== this.#marker;
    this.#marker = marker;
    if (moved || now - this.#fleetAt >= o.nodeRefreshMs) {
      await o.cache.syncFleet();
      this.#fleetAt = now;
      o.lease.observe(o.cache.lease?.value ?? null, o.cache.lease?.etag ?? null);
    }
    if (moved) {
      this.#appsAt = Number.NEGATIVE_INFINITY;
      this.#changedAt = o.mono();
      o.onRegistryChanged?.();
    }
    if (now - this.#appsAt >= o.resyncMs) {
      await o.cache.refreshApplications();
      this.#appsAt = now;
      for (const { value } of o.cache.placements.values()) o.lease.noteFence(value.fence);
    }
  }

  /** The listing of `_svc/fleet/`, timed, and what it shows of the other nodes' heartbeats. */
  async #listFleet(): Promise<void> {
    const o = this.#o;
    const sentMono = o.mono();
    const sentWall = o.wall();
    const listed = await o.cache.listFleet();
    const doneMono = o.mono();
    // This node's own record dates the others' on the bucket's clock: it landed by the time its
    // write answered (or, for one not remembered, by the time this listing answered).
    const own = listed.find((record) => record.id === o.nodeId);
    const change = o.liveness.observe(
      listed.filter((record) => record.id !== o.nodeId),
      {
        sentMono,
        sentWall,
        doneMono,
        ...(own
          ? { own: { modified: own.modified, landedByMono: o.registration.landedBy(own.etag) ?? doneMono } }
          : {}),
      },
    );
    if (change.dead.length || change.lost.length || change.back.length) o.onLiveness?.(change);
    // A node judged dead leaves routing now, not at the end of a pass that may take a while.
    if ((change.dead.length || change.back.length) && this.#routing) this.#publishRouting();
  }

  /** The coordinator's assignment pass; answers how many placement records it wrote. */
  async #assign(): Promise<number> {
    const o = this.#o;
    const nodes = this.#nodeRecords().filter(
      (node) => node.state !== 'draining' && (node.id === o.nodeId || !o.liveness.isLost(node.id)),
    );
    const previous = new Map<string, string[]>();
    for (const [name, { value }] of o.cache.placements) previous.set(name, value.nodes);
    const result = placeApplications({
      applications: [...o.cache.applications.values()].map((c) => c.value),
      nodes: nodes.map((node) => ({ id: node.id, labels: node.labels ?? {} })),
      previous,
    });
    let written = 0;
    for (const [application, placed] of result.placements) {
      const existing = o.cache.placements.get(application);
      if (existing && sameNodes(existing.value.nodes, placed)) continue;
      if (await this.#writePlacement(application, placed, existing?.etag ?? null)) written++;
    }
    this.#unplaced = result.unplaced;
    return written;
  }

  /** One coordinator-only write, under the fence; `lease-lost` ends the pass's assignment. */
  async #writePlacement(application: string, nodes: string[], etag: string | null): Promise<boolean> {
    const o = this.#o;
    const fence = await o.lease.assertFence();
    const record: PlacementRecord = {
      v: 1,
      application,
      nodes,
      fence,
      decidedAt: new Date(o.wall()).toISOString(),
    };
    try {
      const next = await putJson(
        o.store,
        keys.placement(application),
        record,
        etag ? { ifMatch: etag } : { ifNoneMatch: '*' },
      );
      o.cache.notePlacement(record, next);
      o.log.info({ event: 'placement.written', application, nodes, fence }, `placed ${application}`);
      return true;
    } catch (err) {
      if (!isCasConflict(err)) throw err;
      // Someone wrote it meanwhile: learn what, and whether under a newer fence.
      const found = await getJson<PlacementRecord>(o.store, keys.placement(application));
      if (found) {
        o.cache.notePlacement(found.value, found.etag);
        o.lease.noteFence(found.value.fence);
        if (found.value.fence > fence) await o.lease.assertFence(0);
      } else o.cache.placements.delete(application);
      return false;
    }
  }

  /** Node records as this node knows them, its own from memory (it may be newer than the cache). */
  #nodeRecords(): NodeRecord[] {
    const o = this.#o;
    const self = o.registration.intended();
    const others = [...o.cache.nodes.values()].map((c) => c.value).filter((n) => n.id !== self.id);
    return [...others, self];
  }

  #publishRouting(): void {
    const o = this.#o;
    this.#routing = routingInputFromRegistry({
      nodes: this.#nodeRecords(),
      applications: [...o.cache.applications.values()].map((c) => c.value),
      claims: [...o.cache.claims.values()].map((c) => c.value),
      nowMs: o.wall(),
      platformDomains: o.routing.platformDomains,
      apiPublic: o.routing.apiPublic,
      selfNodeId: o.nodeId,
      isLive: (node) => node.id === o.nodeId || !o.liveness.isDead(node.id),
    });
  }
}

function sameNodes(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
