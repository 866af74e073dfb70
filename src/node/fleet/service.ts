// The fleet concern of the daemon (docs/fleet.md "The fleet"; docs/api.md "State"):
// registers this node, keeps its heartbeat, runs the coordinator lease and the reconcile loop
// with its supervisor, and on stop drains (docs/cli.md "svc sail"; SIGTERM): the record says
// `draining`, every process is stopped, the lease is released if held, then the daemon exits.
// docs/fleet.md.

import { join } from 'node:path';
import { mintNodeToken } from '../../auth/node-key.ts';
import { reapTokenUses } from '../../auth/token-uses.ts';
import { type EventInput, noEvents, RECONCILE_PASS } from '../../observability/events.ts';
import { onFleetChanged } from '../../registry/changes.ts';
import { isNodeLive, LivenessTracker, PROMPT_READ_MS } from '../../registry/liveness.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { egressEnvironment } from '../../runtime-contract/egress.ts';
import { bucketEnvironment, GEOIP_DB_VARIABLE } from '../../runtime-contract/environment.ts';
import { SecretsKeeper } from '../../secrets/keeper.ts';
import { ensureSealKey } from '../../secrets/node-key.ts';
import { ensureKeypair } from '../../wireguard/keypair.ts';
import { publishTunnel, tunnelOf } from '../../wireguard/publication.ts';
import type { DaemonService, NodeContext } from '../context.ts';
import { deployReaperFor } from '../deploys/reaper.ts';
import { applicationOfDeployId } from '../deploys/records.ts';
import { RuntimeProbe } from '../deploys/runner.ts';
import { runtimeHostSocketPath } from '../runtime-host.ts';
import { RegistryCache } from './cache.ts';
import { tellDeploymentMoved } from './deployment-moved.ts';
import { LeaseKeeper, systemClock } from './lease.ts';
import { ApplicationLimits, detectControllers } from './limits.ts';
import { listedAppsStore } from './listed-store.ts';
import { NodeRegistration } from './node-record.ts';
import {
  CHANGE_WATCH_EVERY_MS,
  PASS_INTERVAL_MS,
  type ProcessSupervisor,
  Reconciler,
  type ReconcileStatus,
} from './reconcile.ts';
import { Supervisor } from './supervisor.ts';

export interface FleetServiceOptions {
  /** The supervisor to run; the default starts `--cell-bin` processes. */
  supervisor?: (
    ctx: NodeContext,
    onReadinessChange: () => void,
    secretsFile: (application: string) => string,
  ) => ProcessSupervisor;
}

export function fleetService(options: FleetServiceOptions = {}): DaemonService {
  let running: RunningFleet | null = null;
  return {
    name: 'fleet',
    async start(ctx) {
      running = await startFleet(ctx, options);
    },
    async stop(options) {
      await (options?.keepApplications ? running?.detach() : running?.drain());
      running = null;
    },
  };
}

/**
 * Over WireGuard the record carries the tunnel's public side, and the node (re)publishes it, so
 * peers re-rendering their configuration find it (docs/wireguard.md). The keypair is the one
 * `svc wg init` made, or a new one it will reuse.
 */
async function wireguardIdentity(ctx: NodeContext): Promise<Pick<NodeRecord, 'wireguard'>> {
  if (ctx.settings.network.transport !== 'wireguard') return {};
  const tunnel = tunnelOf(ctx.settings, await ensureKeypair(ctx.settings.node.stateDir));
  await publishTunnel(ctx.store, ctx.nodeId, tunnel);
  return { wireguard: tunnel };
}

interface RunningFleet {
  drain(): Promise<void>;
  /** Stops the fleet's work but leaves the runtime processes serving, for the next run to adopt. */
  detach(): Promise<void>;
}

async function startFleet(ctx: NodeContext, options: FleetServiceOptions): Promise<RunningFleet> {
  const { settings, store, nodeId, log } = ctx;
  const clock = systemClock;
  const cell = (await new RuntimeProbe().version(settings.runtime.cellBin)) ?? undefined;
  const sealKey = await ensureSealKey(settings.node.stateDir);
  const secrets = new SecretsKeeper({
    store,
    nodeId,
    pair: sealKey,
    dir: join(settings.node.stateDir, 'secrets'),
    resealEveryMs: settings.registry.resyncMs,
    mono: clock.mono,
    log,
  });
  const registration = new NodeRegistration(store, {
    id: nodeId,
    sealKey: sealKey.publicKey,
    advertise: settings.node.advertise ?? settings.node.listen,
    listen: settings.node.listen,
    labels: settings.node.labels,
    platformDomains: settings.platform.domains,
    versions: cell ? { svc: ctx.version, cell } : { svc: ctx.version },
    ...(await wireguardIdentity(ctx)),
  });
  await registration.beat({ state: 'starting' });
  const events = ctx.events ?? noEvents;
  events.emit({
    kind: 'node.joined',
    advertise: settings.node.advertise ?? settings.node.listen,
    svc: ctx.version,
    ...(cell ? { cell } : {}),
  });
  let heldFence: number | null = null;

  const lease = new LeaseKeeper({
    store,
    nodeId,
    ttlMs: settings.coordinator.leaseTtlMs,
    clock,
    onAcquired: (fence) => {
      heldFence = fence;
      events.emit({ kind: 'coordinator.acquired', fence });
      log.info({ event: 'coordinator.acquired', fence }, 'this node coordinates');
    },
    onLost: (why) => {
      events.emit({ kind: 'coordinator.lost', why, ...(heldFence !== null ? { fence: heldFence } : {}) });
      log.warn({ event: 'coordinator.lost', why }, 'coordinator lease lost');
    },
  });
  const liveness = new LivenessTracker(settings.liveness);
  const cache = new RegistryCache({
    store,
    ownWrite: (key, etag) => registration.isOwnWrite(key, etag),
    knownLease: (etag) => lease.known(etag),
    onUnreadable: (key, err) => log.warn({ key, err }, 'registry object is not readable JSON; left out'),
  });
  // Passes run one at a time: the loop's, and the ones asked for by a change (passSoon).
  let passing: Promise<unknown> = Promise.resolve();
  let passQueued = false;
  const runPass = () => {
    passing = passing.then(() => reconciler.pass());
    return passing;
  };
  const passSoon = () => {
    if (draining || passQueued) return;
    passQueued = true;
    void passing.then(() => {
      passQueued = false;
      return draining ? undefined : runPass();
    });
  };
  const deaths = new DeathWatch();
  const supervisor = (options.supervisor ?? defaultSupervisor)(ctx, passSoon, (application) =>
    secrets.fileFor(application),
  );
  // The reaper reads listings from the cache's last full listing (src/node/fleet/listed-store.ts).
  const reaper = deployReaperFor({ ...ctx, store: listedAppsStore(store, () => cache.appsListing) });
  const reconciler = new Reconciler({
    store,
    nodeId,
    cache,
    lease,
    liveness,
    registration,
    supervisor,
    resyncMs: settings.registry.resyncMs,
    nodeRefreshMs: settings.registry.nodeRefreshMs,
    reapIntervalMs: settings.coordinator.reapIntervalMs,
    reap: async () => {
      const result = await reaper.reap();
      // A deploy whose node stopped answering is failed here, not by the node that accepted it.
      for (const deploy of result.failed) {
        const application = applicationOfDeployId(deploy);
        events.emit({
          kind: 'deploy.failed',
          ...(application ? { application } : {}),
          deploy,
          code: 'deploy-timeout',
          by: 'reaper',
        });
      }
      if (result.failed.length || result.deleted.length)
        log.info({ event: 'deploys.reaped', ...result }, 'reaped');
      await reapTokenUses(store, clock.wall());
    },
    routing: { platformDomains: settings.platform.domains, apiPublic: settings.api.public },
    mono: clock.mono,
    wall: clock.wall,
    onPass: (status) => {
      log.debug({ event: 'reconcile.pass', ...status }, 'reconcile pass');
      events.emit(passEvent(status));
      if (lease.isCoordinator())
        for (const dead of deaths.seen(
          cache.nodes.values(),
          clock.wall(),
          (node) => !liveness.isLost(node.id),
        ))
          events.emit(dead);
    },
    onLiveness: (change) => log.info({ event: 'liveness.changed', ...change }, 'node liveness changed'),
    // An operator key registered or revoked elsewhere takes effect here at once.
    onRegistryChanged: () => ctx.auth?.verifier.forgetAll(),
    secrets,
    log,
  });

  ctx.lease = lease;
  ctx.mintNodeToken ??= () => mintNodeToken(ctx);
  /** The other nodes' records this node keeps, those it does not judge dead. */
  const otherLiveNodes = () =>
    [...cache.nodes.values()]
      .map((c) => c.value)
      .filter((record) => record.id !== nodeId && !liveness.isDead(record.id));
  ctx.routing = { current: () => reconciler.routing() };
  ctx.fleet = {
    node: () => registration.current(),
    lease: () => lease.lease(),
    coordinator: () => {
      const held = lease.view();
      if (!held) return null;
      const self = held.node === nodeId && lease.isCoordinator();
      return {
        node: held.node,
        fence: held.fence,
        self,
        ...(self ? { unplaced: reconciler.unplaced() } : {}),
      };
    },
    processes: () => supervisor.statuses(),
    processesOf: (application) => {
      const others = otherLiveNodes();
      const mine = supervisor.statuses().map((p) => ({ ...p, node: nodeId }));
      const theirs = others.flatMap((record) =>
        (record.processes ?? []).map((p) => ({ ...p, node: record.id })),
      );
      return [...mine, ...theirs]
        .filter((p) => p.application === application)
        .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
    },
    placements: () => reconciler.placements(),
    applications: () => cache.currentApplications(),
    reconcile: () => reconciler.status(),
    changed: () => {
      cache.applicationsChanged();
      reconciler.refreshSoon();
      passSoon();
    },
    selectorMoved: (application) => {
      supervisor.notify?.(application);
      const mint = ctx.mintNodeToken;
      if (mint) void tellDeploymentMoved({ application, nodes: otherLiveNodes(), mintToken: mint, log });
    },
    deploymentMovedElsewhere: (application) => supervisor.notify?.(application),
    runtimeHealthMoved: (application) => supervisor.healthMoved?.(application),
  };

  // A registry change made in this process (an API call this node answered) acts here at once.
  const unsubscribe = onFleetChanged(() => ctx.fleet?.changed());
  // Background work is bucket work: a failure is trouble, and no silence seen meanwhile is evidence.
  const loops = new Loops(log, () => liveness.trouble(clock.mono()));
  loops.every(PASS_INTERVAL_MS, runPass);
  // The beat alone: what the record says changes only in a pass, which moves the change marker.
  loops.every(
    settings.liveness.heartbeatMs,
    async () => {
      const sent = clock.mono();
      await registration.beat();
      if (clock.mono() - sent > PROMPT_READ_MS) liveness.trouble(clock.mono());
    },
    false,
  );
  loops.every(lease.renewEveryMs, () => (lease.isCoordinator() ? lease.renew() : Promise.resolve()), false);
  // A follower reads the lease once a lifetime, just before its copy runs out, and takes it at
  // expiry: takeover does not wait for a pass, and the view of who coordinates stays current.
  let draining = false;
  loops.every(CHANGE_WATCH_EVERY_MS, async () => {
    if (!draining && (await reconciler.markerMoved())) passSoon();
  });
  loops.every(
    Math.max(50, Math.floor(settings.coordinator.leaseTtlMs / 12)),
    () => (!draining && lease.lookDue() ? lease.tryAcquire() : Promise.resolve()),
    false,
  );

  return {
    async drain() {
      draining = true;
      unsubscribe();
      events.emit({ kind: 'node.draining' });
      reconciler.drain();
      loops.stop();
      await passing.catch(() => {});
      const step = async (what: string, work: () => Promise<unknown>) => {
        try {
          await work();
        } catch (err) {
          log.warn({ err }, `draining: ${what} failed`);
        }
      };
      await step('marking the node draining', () => registration.beat({ state: 'draining' }));
      await step('stopping processes', () => supervisor.stop());
      await step('recording no processes', () => registration.beat({ state: 'draining', processes: [] }));
      await step('releasing the coordinator lease', () => lease.release());
      events.emit({ kind: 'node.drained' });
      log.info({ event: 'node.drained' }, 'drained');
    },
    async detach() {
      draining = true;
      reconciler.drain();
      loops.stop();
      await passing.catch(() => {});
      // A last beat: the next run's first one comes within the liveness window from here.
      await registration.beat().catch((err) => log.warn({ err }, 'restarting: the last heartbeat failed'));
      // The node record keeps saying `ready` with its processes: they serve on, and the next run
      // beats again within the liveness window.
      await (supervisor.detach?.() ?? supervisor.stop());
      try {
        await lease.release();
      } catch (err) {
        log.warn({ err }, 'restarting: releasing the coordinator lease failed');
      }
      log.info({ event: 'node.detached' }, 'left the applications serving');
    },
  };
}

function defaultSupervisor(
  ctx: NodeContext,
  onReadinessChange: () => void,
  secretsFile: (application: string) => string,
): ProcessSupervisor {
  const { runtime, deploy, bucket } = ctx.settings;
  return new Supervisor({
    cellBin: runtime.cellBin,
    cellEnv: {
      ...egressEnvironment(runtime.egressAllow),
      ...(runtime.geoipDb ? { [GEOIP_DB_VARIABLE]: runtime.geoipDb } : {}),
      ...runtime.cellEnv,
    },
    bindHost: runtime.bindHost,
    portRange: [runtime.portRangeStart, runtime.portRangeEnd],
    portQuarantineMs: runtime.portQuarantineMs,
    outputBytes: deploy.outputBytes,
    nodeId: ctx.nodeId,
    bucketEnv: bucketEnvironment(bucket, ctx.store.description),
    log: ctx.log,
    observability: ctx.settings.observability.enabled,
    events: ctx.events,
    processFile: join(ctx.settings.node.stateDir, 'processes.json'),
    portFile: join(ctx.settings.node.stateDir, 'ports.json'),
    hostSocket: runtimeHostSocketPath(ctx.settings.node.stateDir),
    objectsDir: join(ctx.settings.node.stateDir, 'objects'),
    onReadinessChange,
    secretsFile,
    askHealth: (application, timeoutMs) =>
      ctx.runtimeHealth?.ask(application, timeoutMs) ?? Promise.resolve(null),
    limits: new ApplicationLimits({
      settings: { memoryMb: runtime.appMemoryMb, cpuMs: runtime.appCpuMs, cpus: runtime.appCpus },
      controllers: detectControllers(ctx.nodeId),
      log: ctx.log,
      events: ctx.events,
    }),
  });
}

/** Repeating background work: each run starts `ms` after the previous one started (or ended, if later). */
class Loops {
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;
  readonly #log: { warn(obj: object, msg: string): void };
  readonly #onFailure: () => void;

  constructor(log: { warn(obj: object, msg: string): void }, onFailure: () => void = () => {}) {
    this.#log = log;
    this.#onFailure = onFailure;
  }

  every(ms: number, work: () => Promise<unknown>, now = true): void {
    const run = async () => {
      if (this.#stopped) return;
      const started = Date.now();
      try {
        await work();
      } catch (err) {
        this.#onFailure();
        this.#log.warn({ err }, 'background work failed');
      }
      schedule(Math.max(0, ms - (Date.now() - started)));
    };
    const schedule = (delay: number) => {
      if (this.#stopped) return;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        void run();
      }, delay);
      this.#timers.add(timer);
    };
    schedule(now ? 0 : ms);
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }
}

/** The reconcile loop's own event: compact, since every node emits one every 5 s. */
export function passEvent(status: ReconcileStatus): EventInput {
  return {
    kind: RECONCILE_PASS,
    ms: status.lastPassMs,
    ok: status.ok,
    ...(status.error ? { error: status.error } : {}),
    ...(status.coordinator ? { coordinator: true } : {}),
    desired: status.desired.length,
    ...(status.placementsWritten ? { placed: status.placementsWritten } : {}),
  };
}

/**
 * The coordinator's view of which nodes stopped beating: a node seen live and then judged lost
 * (the daemon's liveness tracker; by default the record's beat by the clock) is declared dead
 * once (and again only after it beat again).
 */
export class DeathWatch {
  readonly #live = new Map<string, boolean>();

  seen(
    nodes: Iterable<{ value: NodeRecord }>,
    nowMs: number,
    isLive: (node: NodeRecord) => boolean = (node) => isNodeLive(node, nowMs),
  ): EventInput[] {
    const out: EventInput[] = [];
    for (const { value: node } of nodes) {
      const live = isLive(node);
      if (this.#live.get(node.id) === true && !live) {
        out.push({
          kind: 'node.declared-dead',
          peer: node.id,
          lastBeat: new Date(node.beatMs).toISOString(),
        });
      }
      this.#live.set(node.id, live);
    }
    return out;
  }
}
