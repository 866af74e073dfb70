// What the console shows (docs/console.md "Where the data comes from"), read the way the commands
// read it: through the node API with the operator's key for everything the API serves, and through
// the bucket only where a command already reads it there (`svc fleet nodes`, `svc deployment
// list`, `svc traces`, `svc metrics`). What the key does not reach is never shown: the node
// narrows what it answers, and bucket reads are narrowed to the applications the node listed.

import type { Target } from '../cli/client.ts';
import { callNode } from '../cli/client.ts';
import { checkDns, type DnsCheck, type DnsLookups } from '../cli/domain-dns.ts';
import { type NodeRow, nodeRows, readNodeRecords } from '../cli/fleet.ts';
import type { FleetEvent } from '../observability/events.ts';
import { readTraces } from '../observability/traces.ts';
import { isProblem, Problem } from '../problem.ts';
import { platformHostsOf } from '../registry/domains.ts';
import type {
  ApplicationRecord,
  CoordinatorLease,
  FreezeRecord,
  NodeRecord,
  ProcessStatus,
} from '../registry/records.ts';
import { type History, readHistory } from '../runtime-tools/history.ts';
import type { Store } from '../store/store.ts';
import { readSeries, type Series } from './series.ts';

/** Where the console reads from: the node (always) and the bucket (when one is named). */
export interface ConsoleSource {
  target: Target;
  store: Store | null;
  dns: DnsLookups;
  now?: () => number;
}

/** An application record as the node shows it (labels absent for a non-admin). */
export type AppRecord = Omit<ApplicationRecord, 'labels'> & { labels?: Record<string, string> };

export interface Placement {
  application: string;
  state: 'placed' | 'pending';
  nodes: string[];
}

interface StateDocument {
  node: NodeRecord | null;
  lease: CoordinatorLease | null;
  coordinator: { node: string; fence: number; self: boolean } | null;
  processes: ProcessStatus[];
  placements: Placement[];
  scoped?: true;
}

/** A section that could not be read: the refusal, shown where the section would be. */
export interface Unavailable {
  unavailable: { status: number; code: string; title: string; detail?: string };
}

export type Section<T> = T | Unavailable;

export function isUnavailable<T>(value: Section<T>): value is Unavailable {
  return typeof value === 'object' && value !== null && 'unavailable' in value;
}

/** A refusal as a page shows it. */
export function unavailable(err: unknown): Unavailable {
  if (!isProblem(err)) throw err;
  return {
    unavailable: {
      status: err.status,
      code: err.code,
      title: err.title,
      ...(err.detail ? { detail: err.detail } : {}),
    },
  };
}

const NO_BUCKET: Unavailable = {
  unavailable: {
    status: 409,
    code: 'capability-missing',
    title: 'No bucket named',
    detail:
      'this part is read from the bucket, as the command that shows it does: start svc console with the bucket flags (--endpoint, --bucket, ... or SVC_S3_*)',
  },
};

async function section<T>(read: () => Promise<T>): Promise<Section<T>> {
  try {
    return await read();
  } catch (err) {
    return unavailable(err);
  }
}

const app = (name: string) => `/v1/applications/${encodeURIComponent(name)}`;

// ---- DNS status, cached: the applications list checks every claimed domain ----

/** How long a DNS verdict is reused, and how long the applications list waits for new ones. */
const DNS_TTL_MS = 60_000;
const DNS_BUDGET_MS = 300;
const DNS_CONCURRENCY = 8;

interface DnsCache {
  verdicts: Map<string, { check: DnsCheck; atMs: number }>;
  pending: Map<string, Promise<DnsCheck>>;
  queue: (() => Promise<void>)[];
  running: number;
}

const dnsCaches = new WeakMap<ConsoleSource, DnsCache>();

function dnsCache(source: ConsoleSource): DnsCache {
  let cache = dnsCaches.get(source);
  if (!cache) {
    cache = { verdicts: new Map(), pending: new Map(), queue: [], running: 0 };
    dnsCaches.set(source, cache);
  }
  return cache;
}

/** One host's verdict, from the cache while fresh; at most a few lookups run at once. */
function checkDnsCached(
  source: ConsoleSource,
  host: string,
  platformHosts: readonly string[],
): Promise<DnsCheck> {
  const cache = dnsCache(source);
  const key = `${host} ${platformHosts.join(',')}`;
  const now = (source.now ?? Date.now)();
  const fresh = cache.verdicts.get(key);
  if (fresh && now - fresh.atMs < DNS_TTL_MS) return Promise.resolve(fresh.check);
  const pending = cache.pending.get(key);
  if (pending) return pending;
  const started = new Promise<DnsCheck>((resolve) => {
    cache.queue.push(async () => {
      const check = await checkDns(source.dns, host, platformHosts);
      cache.verdicts.set(key, { check, atMs: (source.now ?? Date.now)() });
      cache.pending.delete(key);
      resolve(check);
    });
  });
  cache.pending.set(key, started);
  drain(cache);
  return started;
}

function drain(cache: DnsCache): void {
  while (cache.running < DNS_CONCURRENCY && cache.queue.length > 0) {
    const next = cache.queue.shift()!;
    cache.running++;
    next().finally(() => {
      cache.running--;
      drain(cache);
    });
  }
}

/**
 * The verdict of every host the list shows, waiting at most DNS_BUDGET_MS for lookups not cached:
 * a host still being looked up is left out (the page says so) and is cached for the next load.
 */
async function dnsVerdicts(
  source: ConsoleSource,
  hosts: readonly { host: string; platformHosts: readonly string[] }[],
): Promise<Map<string, DnsCheck>> {
  const out = new Map<string, DnsCheck>();
  const checks = hosts.map(({ host, platformHosts }) =>
    checkDnsCached(source, host, platformHosts).then((check) => {
      out.set(host, check);
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(checks),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, DNS_BUDGET_MS);
    }),
  ]);
  clearTimeout(timer);
  return new Map(out);
}

async function listApplications(
  source: ConsoleSource,
): Promise<{ applications: AppRecord[]; scoped: boolean }> {
  const answer = (await callNode(source.target, 'GET', '/v1/applications')) as {
    applications: AppRecord[];
    scoped?: boolean;
  };
  return { applications: answer.applications, scoped: answer.scoped === true };
}

async function readFreeze(source: ConsoleSource): Promise<FreezeRecord | null> {
  try {
    return ((await callNode(source.target, 'GET', '/v1/fleet/freeze')) as { freeze: FreezeRecord }).freeze;
  } catch (err) {
    if (isProblem(err) && err.code === 'not-found') return null;
    throw err;
  }
}

/**
 * The node records: every one from the bucket, else the answering node's own from its state. Read
 * beside the node calls, not after them: a page waits for the slower of the two, not their sum.
 */
async function nodeRecords(source: ConsoleSource, state: Promise<StateDocument>): Promise<NodeRecord[]> {
  if (source.store) return readNodeRecords(source.store);
  const { node } = await state;
  return node ? [node] : [];
}

function readState(source: ConsoleSource): Promise<StateDocument> {
  return callNode(source.target, 'GET', '/v1/state') as Promise<StateDocument>;
}

function keepReachable(records: NodeRecord[], reachable: ReadonlySet<string> | null): NodeRecord[] {
  if (!reachable) return records;
  return records.map((r) => ({ ...r, processes: r.processes.filter((p) => reachable.has(p.application)) }));
}

export interface FleetView {
  actor: string;
  scoped: boolean;
  fromBucket: boolean;
  nodes: NodeRow[];
  processes: Map<string, number>;
  coordinator: StateDocument['coordinator'];
  lease: CoordinatorLease | null;
  freeze: FreezeRecord | null;
  applications: number;
}

/**
 * The state's placements name every application in the registry the key reaches (narrowed for a
 * scoped key), so the fleet page needs no listing of every record.
 */
export async function fleetView(source: ConsoleSource): Promise<FleetView> {
  const reading = readState(source);
  const [state, freeze, allRecords] = await Promise.all([
    reading,
    readFreeze(source),
    nodeRecords(source, reading),
  ]);
  const scoped = state.scoped === true;
  const reachable = scoped ? new Set(state.placements.map((p) => p.application)) : null;
  const records = keepReachable(allRecords, reachable);
  return {
    actor: source.target.key?.id ?? '',
    scoped,
    fromBucket: source.store !== null,
    nodes: nodeRows(records, (source.now ?? Date.now)()),
    processes: new Map(records.map((r) => [r.id, r.processes.length])),
    coordinator: state.coordinator,
    lease: state.lease,
    freeze,
    applications: state.placements.length,
  };
}

/** One replica: a node's process of the application. */
export interface Replica extends ProcessStatus {
  node: string;
}

export interface ApplicationsView {
  scoped: boolean;
  fromBucket: boolean;
  applications: AppRecord[];
  replicas: Map<string, Replica[]>;
  placements: Map<string, Placement>;
  freeze: FreezeRecord | null;
  /** DNS verdicts by host; a host absent is still being looked up. */
  dns: Map<string, DnsCheck>;
}

export async function applicationsView(source: ConsoleSource): Promise<ApplicationsView> {
  const reading = readState(source);
  const [state, listing, freeze, allRecords] = await Promise.all([
    reading,
    listApplications(source),
    readFreeze(source),
    nodeRecords(source, reading),
  ]);
  const reachable = listing.scoped ? new Set(listing.applications.map((a) => a.name)) : null;
  const records = keepReachable(allRecords, reachable);
  const platformDomains = platformDomainsOf(records);
  const dns = await dnsVerdicts(
    source,
    listing.applications.flatMap((a) => {
      const platformHosts = platformHostsOf({ labels: {}, ...a }, platformDomains);
      return a.domains.map((host) => ({ host, platformHosts }));
    }),
  );
  return {
    scoped: listing.scoped,
    fromBucket: source.store !== null,
    dns,
    applications: listing.applications,
    replicas: replicasByApplication(records),
    placements: new Map(state.placements.map((p) => [p.application, p])),
    freeze,
  };
}

function platformDomainsOf(records: readonly NodeRecord[]): string[] {
  return [...new Set(records.flatMap((r) => r.platformDomains ?? []))].sort();
}

function replicasByApplication(records: readonly NodeRecord[]): Map<string, Replica[]> {
  const out = new Map<string, Replica[]>();
  for (const record of records) {
    for (const process of record.processes) {
      const list = out.get(process.application) ?? [];
      list.push({ ...process, node: record.id });
      out.set(process.application, list);
    }
  }
  return out;
}

export interface DomainStatus {
  host: string;
  wildcard: boolean;
  dns: DnsCheck;
}

export interface ApplicationView {
  application: AppRecord;
  scoped: boolean;
  replicas: Replica[];
  placement: Placement | null;
  platformHosts: string[];
  domains: DomainStatus[];
  history: Section<History>;
  secrets: Section<{ name: string; changedAt?: string; by?: string }[]>;
  bindings: Section<{ kind: 'KV namespace' | 'R2 bucket'; binding: string; target: string }[]>;
  events: Section<FleetEvent[]>;
  series: Section<Series>;
  freeze: FreezeRecord | null;
}

/** The window the application page's events and charts cover. */
export const APPLICATION_WINDOW_MS = 3_600_000;
const APPLICATION_EVENTS = 50;
const CHART_STEPS = 60;

export async function applicationView(source: ConsoleSource, name: string): Promise<ApplicationView> {
  // The record first: a name out of scope or without a record is the page's own refusal.
  const reading = readState(source);
  const [{ application }, state, freeze, records] = await Promise.all([
    callNode(source.target, 'GET', app(name)) as Promise<{ application: AppRecord }>,
    reading,
    readFreeze(source),
    nodeRecords(source, reading),
  ]);
  const replicas = replicasByApplication(records).get(name) ?? [];
  const platformDomains = platformDomainsOf(records);
  const platformHosts = platformHostsOf({ labels: {}, ...application }, platformDomains);
  const now = (source.now ?? Date.now)();
  const store = source.store;
  const [domains, history, secrets, bindings, events, series] = await Promise.all([
    Promise.all(
      application.domains.map(async (host) => ({
        host,
        wildcard: application.wildcardDomains.includes(host),
        dns: await checkDnsCached(source, host, platformHosts),
      })),
    ),
    store ? section(() => readHistory(store, name)) : NO_BUCKET,
    section(async () => {
      const answer = (await callNode(source.target, 'GET', `${app(name)}/secrets`)) as {
        secrets: { name: string; changedAt?: string; by?: string }[];
      };
      return answer.secrets;
    }),
    section(() => readBindings(source, name)),
    store
      ? section(async () => {
          const result = await readTraces(store, {
            application: name,
            sinceMs: now - APPLICATION_WINDOW_MS,
            limit: APPLICATION_EVENTS,
            all: false,
          });
          return result.events.reverse();
        })
      : NO_BUCKET,
    store
      ? section(() =>
          readSeries(store, {
            application: name,
            sinceMs: now - APPLICATION_WINDOW_MS,
            nowMs: now,
            steps: CHART_STEPS,
          }),
        )
      : NO_BUCKET,
  ]);
  return {
    application,
    scoped: state.scoped === true,
    replicas,
    placement: state.placements.find((p) => p.application === name) ?? null,
    platformHosts,
    domains,
    history,
    secrets,
    bindings,
    events,
    series,
    freeze,
  };
}

async function readBindings(
  source: ConsoleSource,
  name: string,
): Promise<{ kind: 'KV namespace' | 'R2 bucket'; binding: string; target: string }[]> {
  const [kv, r2] = await Promise.all([
    callNode(source.target, 'GET', `${app(name)}/kv/namespaces`) as Promise<{
      namespaces: { binding: string; id: string }[];
    }>,
    callNode(source.target, 'GET', `${app(name)}/r2/buckets`) as Promise<{
      buckets: { binding: string; bucket_name: string }[];
    }>,
  ]);
  return [
    ...kv.namespaces.map((n) => ({ kind: 'KV namespace' as const, binding: n.binding, target: n.id })),
    ...r2.buckets.map((b) => ({ kind: 'R2 bucket' as const, binding: b.binding, target: b.bucket_name })),
  ];
}

export interface EventsQuery {
  sinceMs: number;
  application?: string;
  kind?: string;
  limit: number;
  all: boolean;
}

export interface EventsView {
  scoped: boolean;
  events: FleetEvent[];
  heldBack: number;
  beyondLimit: number;
  applications: string[];
}

/** Fleet events, newest first; a scoped key sees only the events of applications it reaches. */
export async function eventsView(source: ConsoleSource, query: EventsQuery): Promise<EventsView> {
  const store = source.store;
  if (!store)
    throw new Problem('capability-missing', NO_BUCKET.unavailable.title, NO_BUCKET.unavailable.detail);
  const [state, result] = await Promise.all([
    readState(source),
    readTraces(store, {
      sinceMs: query.sinceMs,
      limit: Number.MAX_SAFE_INTEGER,
      all: query.all,
      ...(query.application ? { application: query.application } : {}),
    }),
  ]);
  // The placements name every application the key reaches (docs/fleet.md "GET /v1/state").
  const names = state.placements.map((p) => p.application).sort();
  const scoped = state.scoped === true;
  const reachable = new Set(names);
  const kept = result.events.filter(
    (e) =>
      (!scoped || (e.application !== undefined && reachable.has(e.application))) &&
      (!query.kind || e.kind === query.kind || e.kind.startsWith(`${query.kind}.`)),
  );
  const beyondLimit = Math.max(0, kept.length - query.limit);
  return {
    scoped,
    events: kept.slice(beyondLimit).reverse(),
    heldBack: result.heldBack,
    beyondLimit,
    applications: names,
  };
}
