// the targets in bench/RESULTS.md, Idle bucket cost: bucket requests per node per hour at idle must not grow
// with the number of applications (1,000 applications: at most 2,000). Also the CPU time of one
// reconcile pass at 1,000 applications.
//
// Three nodes run the fleet's real parts (registration, registry cache, lease keeper, reconcile
// loop with placement, the secrets keeper) on one local-directory bucket behind a counting Store, on a simulated
// clock, with the default schedule (settings defaults: resync 5 min, node refresh 30 s, lease 45 s,
// reap 10 min, heartbeat `liveness.heartbeatMs`; the pass interval of reconcile.ts). The
// supervisor runs nothing (processes do not touch the bucket). A listing is counted as S3 bills
// it: one request per 1,000 keys. The first 5 simulated minutes (placing every application) are
// left out; the next 60 are counted.
// Run: scripts/with-node node bench/fleet-requests.bench.ts [applications...]

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultSettings } from '../src/config/settings.ts';
import { DeployReaper } from '../src/node/deploys/reaper.ts';
import { RegistryCache } from '../src/node/fleet/cache.ts';
import { LeaseKeeper } from '../src/node/fleet/lease.ts';
import { listedAppsStore } from '../src/node/fleet/listed-store.ts';
import { NodeRegistration } from '../src/node/fleet/node-record.ts';
import { PASS_INTERVAL_MS, Reconciler, type ReconcileStatus } from '../src/node/fleet/reconcile.ts';
import { keys } from '../src/registry/keys.ts';
import { LivenessTracker } from '../src/registry/liveness.ts';
import type { ApplicationRecord } from '../src/registry/records.ts';
import { SecretsKeeper } from '../src/secrets/keeper.ts';
import { generateSealKey } from '../src/secrets/seal.ts';
import { openDirStore } from '../src/store/dir.ts';
import { putJson, type Store } from '../src/store/store.ts';

const WARMUP_MS = 5 * 60_000;
const HOUR_MS = 3600_000;
const STEP_MS = 250;

/** Counts requests per kind, listings by 1,000-key page. */
export function counting(store: Store): { store: Store; counts: Record<string, number>; reset(): void } {
  const counts: Record<string, number> = {};
  const add = (kind: string, n = 1) => {
    counts[kind] = (counts[kind] ?? 0) + n;
  };
  return {
    counts,
    reset() {
      for (const k of Object.keys(counts)) delete counts[k];
    },
    store: {
      description: store.description,
      get: (k) => {
        add('get');
        return store.get(k);
      },
      put: (k, b, c) => {
        add('put');
        return store.put(k, b, c);
      },
      delete: (k, c) => {
        add('delete');
        return store.delete(k, c);
      },
      stat: (k) => {
        add('stat');
        return store.stat(k);
      },
      close: () => store.close(),
      async list(prefix, options) {
        const result = await store.list(prefix, options);
        add('list', Math.max(1, Math.ceil((result.objects.length + result.prefixes.length) / 1000)));
        return result;
      },
    },
  };
}

export function application(name: string): ApplicationRecord {
  const at = new Date(0).toISOString();
  return {
    v: 1,
    name,
    createdAt: at,
    updatedAt: at,
    labels: {},
    blocked: false,
    selector: null,
    replicas: 2,
    domains: [],
    wildcardDomains: [],
  };
}

/**
 * What another bench adds to each simulated node (bench/observability-requests.bench.ts): its
 * requests go through the node's counting store and its schedule runs on the simulated clock.
 */
export interface SimAddOn {
  onPass?: (status: ReconcileStatus) => void;
  tick(now: number): Promise<void>;
}
export type SimAddOnFactory = (node: {
  id: string;
  store: Store;
  clock: { wall: () => number };
  isCoordinator: () => boolean;
}) => SimAddOn;

interface SimNode {
  id: string;
  addOn?: SimAddOn;
  counter: ReturnType<typeof counting>;
  reconciler: Reconciler;
  lease: LeaseKeeper;
  registration: NodeRegistration;
  due: { pass: number; beat: number; renew: number; look: number };
}

export async function simulate(
  apps: number,
  addOnFor?: SimAddOnFactory,
): Promise<{ perNode: number[]; byKind: Record<string, number>[] }> {
  const settings = defaultSettings();
  const base = await openDirStore(join(mkdtempSync(join(tmpdir(), 'svc-bench-fleet-')), 'bucket'));
  for (let i = 0; i < apps; i++) await putJson(base, keys.application(`app-${i}`), application(`app-${i}`));
  let now = 1_800_000_000_000;
  const clock = { wall: () => now, mono: () => now };
  const ttl = settings.coordinator.leaseTtlMs;
  const { heartbeatMs } = settings.liveness;
  const nodes: SimNode[] = [];
  for (const id of ['node-1', 'node-2', 'node-3']) {
    const counter = counting(base);
    const store = counter.store;
    const registration = new NodeRegistration(
      store,
      { id, advertise: `${id}:7311`, listen: `${id}:7311`, labels: {}, versions: { svc: 'bench' } },
      clock.wall,
      clock.mono,
    );
    await registration.beat({ state: 'starting' });
    const lease = new LeaseKeeper({ store, nodeId: id, ttlMs: ttl, clock });
    const cache = new RegistryCache({
      store,
      ownWrite: (k, e) => registration.isOwnWrite(k, e),
      knownLease: (etag) => lease.known(etag),
    });
    const reaper = new DeployReaper({
      store: listedAppsStore(store, () => cache.appsListing),
      now: clock.wall,
    });
    const quiet = { warn() {}, info() {} };
    // The node's secrets keeper as the daemon runs it (no application has secrets here).
    const secrets = new SecretsKeeper({
      store,
      nodeId: id,
      pair: generateSealKey(),
      dir: join(mkdtempSync(join(tmpdir(), 'svc-bench-secrets-')), 'secrets'),
      resealEveryMs: settings.registry.resyncMs,
      mono: clock.mono,
      log: quiet,
    });
    const addOn = addOnFor?.({ id, store, clock, isCoordinator: () => lease.isCoordinator() });
    const reconciler = new Reconciler({
      store,
      nodeId: id,
      cache,
      lease,
      liveness: new LivenessTracker(settings.liveness),
      registration,
      supervisor: { apply() {}, statuses: () => [], stop: async () => {} },
      resyncMs: settings.registry.resyncMs,
      nodeRefreshMs: settings.registry.nodeRefreshMs,
      reapIntervalMs: settings.coordinator.reapIntervalMs,
      reap: () => reaper.reap(),
      secrets,
      routing: { platformDomains: ['example.test'], apiPublic: true },
      mono: clock.mono,
      wall: clock.wall,
      ...(addOn?.onPass ? { onPass: addOn.onPass } : {}),
      log: quiet,
    });
    const offset = nodes.length * 1_700;
    nodes.push({
      id,
      ...(addOn ? { addOn } : {}),
      counter,
      reconciler,
      lease,
      registration,
      due: { pass: now + offset, beat: now + offset + heartbeatMs, renew: now + ttl / 3, look: now },
    });
  }
  const end = now + WARMUP_MS + HOUR_MS;
  let counted = false;
  while (now < end) {
    if (!counted && now >= end - HOUR_MS) {
      for (const node of nodes) node.counter.reset();
      counted = true;
    }
    for (const node of nodes) {
      if (now >= node.due.pass) {
        await node.reconciler.pass();
        node.due.pass += PASS_INTERVAL_MS;
      }
      if (now >= node.due.beat) {
        await node.registration.beat({});
        node.due.beat += heartbeatMs;
      }
      if (now >= node.due.renew) {
        if (node.lease.isCoordinator()) await node.lease.renew();
        node.due.renew += node.lease.renewEveryMs;
      }
      if (now >= node.due.look) {
        if (node.lease.lookDue()) await node.lease.tryAcquire();
        node.due.look += Math.max(50, Math.floor(ttl / 12));
      }
      await node.addOn?.tick(now);
    }
    now += STEP_MS;
  }
  const status = nodes.map((n) => n.reconciler.status());
  if (status.some((s) => !s.ok)) throw new Error(`a pass failed: ${JSON.stringify(status)}`);
  return {
    perNode: nodes.map((n) => Object.values(n.counter.counts).reduce((a, b) => a + b, 0)),
    byKind: nodes.map((n) => ({ ...n.counter.counts, coordinator: n.lease.isCoordinator() ? 1 : 0 })),
  };
}

/** CPU time of steady-state passes of the coordinator at `apps` applications (nothing due but the pass). */
async function passCpu(apps: number): Promise<{ cpuMs: number; resyncCpuMs: number }> {
  const settings = defaultSettings();
  const store = await openDirStore(join(mkdtempSync(join(tmpdir(), 'svc-bench-pass-')), 'bucket'));
  for (let i = 0; i < apps; i++) await putJson(store, keys.application(`app-${i}`), application(`app-${i}`));
  let now = 1_800_000_000_000;
  const clock = { wall: () => now, mono: () => now };
  const registration = new NodeRegistration(
    store,
    { id: 'node-1', advertise: 'a:1', listen: 'a:1', labels: {}, versions: { svc: 'bench' } },
    clock.wall,
  );
  const lease = new LeaseKeeper({ store, nodeId: 'node-1', ttlMs: 3600_000, clock });
  const cache = new RegistryCache({ store, ownWrite: (k, e) => registration.isOwnWrite(k, e) });
  const reconciler = new Reconciler({
    store,
    nodeId: 'node-1',
    cache,
    lease,
    liveness: new LivenessTracker(settings.liveness),
    registration,
    supervisor: { apply() {}, statuses: () => [], stop: async () => {} },
    resyncMs: settings.registry.resyncMs,
    nodeRefreshMs: settings.registry.nodeRefreshMs,
    reapIntervalMs: Number.MAX_SAFE_INTEGER,
    reap: async () => {},
    routing: { platformDomains: ['example.test'], apiPublic: true },
    mono: clock.mono,
    wall: clock.wall,
    log: { warn() {}, info() {} },
  });
  await reconciler.pass(); // first pass: reads everything, places everything
  const runs = 50;
  let total = 0;
  for (let i = 0; i < runs; i++) {
    now += PASS_INTERVAL_MS;
    const before = process.cpuUsage();
    await reconciler.pass();
    const used = process.cpuUsage(before);
    total += (used.user + used.system) / 1000;
  }
  now += settings.registry.resyncMs;
  const before = process.cpuUsage();
  await reconciler.pass();
  const used = process.cpuUsage(before);
  return { cpuMs: total / runs, resyncCpuMs: (used.user + used.system) / 1000 };
}

if (import.meta.main) await main();

async function main(): Promise<void> {
  const sizes = process.argv.slice(2).map(Number).filter(Number.isFinite);
  const counts = sizes.length > 0 ? sizes : [10, 100, 1000];
  const rows: string[] = [];
  let baseline = 0;
  for (const apps of counts) {
    const { perNode, byKind } = await simulate(apps);
    const max = Math.max(...perNode);
    baseline ||= max;
    rows.push(
      `| ${apps} | ${perNode.join(' / ')} | ${max} | ${(max / baseline).toFixed(2)} | ${JSON.stringify(byKind)} |`,
    );
    process.stderr.write(`${apps} applications done\n`);
  }
  console.log(
    '| Applications | Requests per node per hour (node-1 / node-2 / node-3) | Max | Ratio to smallest | By kind |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const row of rows) console.log(row);
  const cpu = await passCpu(1000);
  console.log(
    `\nCPU time of one reconcile pass, coordinator, 1,000 applications: ${cpu.cpuMs.toFixed(2)} ms (steady pass, mean of 50); ${cpu.resyncCpuMs.toFixed(1)} ms for a pass that re-lists the registry`,
  );
}
