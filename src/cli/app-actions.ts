// docs/cli.md "svc app" (all but `app lease`, and its domains) and "Flag groups" (naming an
// application): each
// subcommand calls a node, or, where the table gives a bucket path and no node is named, writes
// the registry directly with the bucket credentials.

import { hostname, userInfo } from 'node:os';
import type { Settings } from '../config/settings.ts';
import { invalidInput } from '../problem.ts';
import { parseReplicas } from '../registry/application-bodies.ts';
import { checkDeletable, deleteApplicationData } from '../registry/application-deletion.ts';
import {
  getApplication,
  retireApplication,
  setReplicas,
  setSelector,
  unretireApplication,
} from '../registry/applications.ts';
import {
  checkClaimHost,
  claimDomain,
  type DomainAnswer,
  domainsOf,
  releaseDomain,
} from '../registry/domains.ts';
import { keys } from '../registry/keys.ts';
import { isNodeLive } from '../registry/liveness.ts';
import { resolveApplicationName } from '../registry/names.ts';
import type { ApplicationRecord } from '../registry/records.ts';
import type { Store } from '../store/store.ts';
import { withCliCoordinatorLease } from './cli-lease.ts';
import { callNode, hasNode, resolveTarget, type Target } from './client.ts';
import { checkDns, type DnsCheck, dnsLookups, probeLabel } from './domain-dns.ts';
import { openCommandBucket, settingsFromCommand } from './flags.ts';
import { readNodeRecords } from './fleet.ts';
import { say, table, warn } from './output.ts';

/** Flags every app subcommand may carry (commander's camelCase keys). */
export interface AppFlags extends Record<string, unknown> {
  name: string;
  env?: string;
  node?: string;
  remote?: string;
  key?: string;
  config?: string;
  json?: boolean;
}

type Redacted = ApplicationRecord | Omit<ApplicationRecord, 'labels'>;

// ---- Choosing the path ----

const BUCKET_FLAGS = ['endpoint', 'region', 'bucket', 'prefix', 'accessKey', 'secretKey'] as const;

/** Where a command with a bucket path goes: a node when one is named and no bucket flag is given. */
type Way = { node: Target } | { bucket: BucketSession };

export interface BucketSession {
  store: Store;
  settings: Settings;
  /** Who the registry records as the actor of a bucket-path change. */
  by: string;
}

async function nodeOnly(flags: AppFlags): Promise<Target> {
  return resolveTarget(flags);
}

async function nodeOrBucket(flags: AppFlags): Promise<Way> {
  const bucketFlag = BUCKET_FLAGS.some((flag) => flags[flag] !== undefined);
  if (flags.node !== undefined || !bucketFlag) {
    const target = await resolveTarget(flags);
    if (flags.node !== undefined || hasNode(target)) return { node: target };
  }
  const settings = settingsFromCommand(flags);
  const store = await openCommandBucket(settings);
  return { bucket: { store, settings, by: bucketActor() } };
}

export function bucketActor(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host still says where it came from.
  }
  return `bucket:${user}@${hostname()}`;
}

/** Runs one command on the chosen way, closing the bucket afterwards. */
export async function onWay<T>(
  flags: AppFlags,
  viaNode: (target: Target) => Promise<T>,
  viaBucket: (session: BucketSession) => Promise<T>,
): Promise<T> {
  const way = await nodeOrBucket(flags);
  if ('node' in way) return viaNode(way.node);
  try {
    return await viaBucket(way.bucket);
  } finally {
    await way.bucket.store.close();
  }
}

const appPath = (name: string, rest = '') => `/v1/applications/${encodeURIComponent(name)}${rest}`;

async function call<T>(target: Target, method: string, path: string, body?: unknown): Promise<T> {
  return (await callNode(target, method, path, body === undefined ? {} : { body })) as T;
}

// ---- list, show ----

/** A runtime process as GET /v1/applications/:name lists it beside the record. */
interface ProcessLine {
  node: string;
  state: string;
  ready: boolean;
  deployment?: string;
  detail?: string;
}

export async function appList(flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const answer = await call<{ applications: Redacted[]; scoped?: true }>(
    await nodeOnly(flags),
    'GET',
    '/v1/applications',
  );
  // `--name` is required of every app subcommand: the listing is that application and, without
  // `--env`, its environments.
  const applications = answer.applications.filter(
    (record) => record.name === name || (flags.env === undefined && record.name.startsWith(`${name}-`)),
  );
  if (flags.json) {
    say(JSON.stringify(answer.scoped ? { applications, scoped: true } : { applications }, null, 2));
    return;
  }
  if (applications.length === 0) {
    say(`No application named ${name}${flags.env === undefined ? ` or ${name}-<env>` : ''}`);
    return;
  }
  const withLabels = applications.some((record) => 'labels' in record);
  const header = ['NAME', 'STATE', 'REPLICAS', 'SELECTOR', 'DOMAINS', ...(withLabels ? ['LABELS'] : [])];
  const rows = applications.map((record) => [
    record.name,
    stateOf(record),
    String(record.replicas),
    record.selector ? pairs(record.selector) : '-',
    String(record.domains.length),
    ...(withLabels
      ? ['labels' in record && Object.keys(record.labels).length ? pairs(record.labels) : '-']
      : []),
  ]);
  for (const line of table(header, rows)) say(line);
}

export async function appShow(flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const { application, processes } = await call<{ application: Redacted; processes?: ProcessLine[] }>(
    await nodeOnly(flags),
    'GET',
    appPath(name),
  );
  if (flags.json) {
    say(JSON.stringify(processes ? { application, processes } : { application }, null, 2));
    return;
  }
  const lines: [string, string][] = [
    ['state', stateOf(application)],
    ['replicas', String(application.replicas)],
    ['selector', application.selector ? pairs(application.selector) : 'none (any node)'],
  ];
  if (application.retired) {
    lines.push([
      'retired',
      `at ${application.retired.at} by ${application.retired.by}; unretire until ${application.retired.graceUntil}`,
    ]);
  }
  const hosts = hostLines(application);
  lines.push(['domains', hosts[0] ?? 'none']);
  for (const host of hosts.slice(1)) lines.push(['', host]);
  if ('labels' in application)
    lines.push(['labels', Object.keys(application.labels).length ? pairs(application.labels) : 'none']);
  lines.push([
    'created',
    `${application.createdAt}${application.createdBy ? ` by ${application.createdBy}` : ''}`,
  ]);
  if (application.deployment) lines.push(['deployment', application.deployment]);
  if (processes) {
    // Where it runs, and why it is not ready where it is not (the runtime's own words).
    if (processes.length === 0)
      lines.push(['processes', application.deployment ? 'none yet' : 'none (no deployment)']);
    for (const [i, p] of processes.entries()) {
      const serving = p.deployment ? ` ${p.deployment}` : '';
      lines.push([
        i === 0 ? 'processes' : '',
        `${p.node}: ${p.state}${serving}${p.ready || !p.detail ? '' : `: ${p.detail}`}`,
      ]);
    }
  }
  say(application.name);
  for (const [key, value] of lines) say(`  ${key.padEnd(10)}  ${value}`);
}

// ---- block, unblock, label (node only, admin) ----

export async function appBlock(flags: AppFlags, blocked: boolean): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  await call(await nodeOnly(flags), 'POST', appPath(name, blocked ? '/block' : '/unblock'));
  say(blocked ? `Blocked ${name}: it is no longer served, deployed or given domains` : `Unblocked ${name}`);
}

export async function appLabel(pairsGiven: string[], flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const labels = parsePairs(pairsGiven, 'label');
  const { application } = await call<{ application: Redacted }>(
    await nodeOnly(flags),
    'POST',
    appPath(name, '/labels'),
    {
      labels,
    },
  );
  const now = 'labels' in application ? application.labels : labels;
  say(Object.keys(now).length ? `Labels of ${name}: ${pairs(now)}` : `Cleared the labels of ${name}`);
}

// ---- retire, unretire, selector, replicas (node, else bucket) ----

export async function appRetire(flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const record = await onWay(
    flags,
    async (target) =>
      (await call<{ application: Redacted }>(target, 'POST', appPath(name, '/retire'))).application,
    ({ store, settings, by }) => retireApplication(store, name, by, settings.applications.retireGraceMs),
  );
  say(`Retired ${name}: no longer served; unretire until ${record.retired?.graceUntil}, delete after that`);
}

export async function appUnretire(flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  // The answer is the record after the call, which looks the same whether or not it was
  // retired: read it first, so the line says which of the two happened.
  const wasRetired = await onWay(
    flags,
    async (target) => {
      const before = (await call<{ application: Redacted }>(target, 'GET', appPath(name))).application;
      if (before.retired) await call(target, 'POST', appPath(name, '/unretire'));
      return before.retired !== undefined;
    },
    async ({ store }) => {
      const before = await getApplication(store, name);
      if (before.retired) await unretireApplication(store, name);
      return before.retired !== undefined;
    },
  );
  say(
    wasRetired
      ? `Unretired ${name}: it is served again`
      : `${name} was not retired: nothing changed, it is served as before`,
  );
}

export async function appSelector(flags: AppFlags & { set?: string[]; clear?: boolean }): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  if ((flags.set === undefined) === (flags.clear !== true)) {
    throw invalidInput('Give --set or --clear', 'exactly one: --set key=value (repeatable) or --clear');
  }
  const selector = flags.clear ? null : parsePairs(flags.set ?? [], 'selector');
  await onWay(
    flags,
    async (target) =>
      (await call<{ application: Redacted }>(target, 'POST', appPath(name, '/selector'), { selector }))
        .application,
    ({ store }) => setSelector(store, name, selector),
  );
  say(
    selector
      ? `${name} runs only on nodes labelled ${pairs(selector)}`
      : `Cleared the selector of ${name}: it may run on any node`,
  );
}

export async function appReplicas(flags: AppFlags & { count: string }): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const replicas = /^(all|[1-9][0-9]*)$/.test(flags.count)
    ? parseReplicas(flags.count === 'all' ? 'all' : Number(flags.count))
    : null;
  if (replicas === null) {
    throw invalidInput(
      'Invalid --count',
      `--count is \`all\` or a whole number >= 1, got ${JSON.stringify(flags.count)}`,
    );
  }
  await onWay(
    flags,
    async (target) =>
      (await call<{ application: Redacted }>(target, 'POST', appPath(name, '/replicas'), { replicas }))
        .application,
    ({ store }) => setReplicas(store, name, replicas),
  );
  say(
    replicas === 'all'
      ? `${name} runs on every eligible node`
      : `${name} runs on ${replicas} node${replicas === 1 ? '' : 's'}`,
  );
}

// ---- domains ----

export async function domainAdd(hostGiven: string, flags: AppFlags & { wildcard?: boolean }): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const local = settingsFromCommand(flags);
  const host = checkClaimHost(hostGiven, local.platform.domains);
  const wildcard = flags.wildcard === true;
  const answer = await onWay(
    flags,
    (target) =>
      call<DomainAnswer>(
        target,
        'POST',
        appPath(name, `/domains/${encodeURIComponent(host)}${wildcard ? '?wildcard=1' : ''}`),
      ),
    async ({ store, settings, by }) => {
      // The fleet's platform domains are what its live nodes say, besides any given here.
      const platformDomains = await fleetPlatformDomains(store, settings.platform.domains);
      checkClaimHost(host, platformDomains);
      return claimDomain(store, {
        application: name,
        host,
        wildcard,
        by,
        // The bucket credential reaches every application.
        reaches: () => true,
        platformDomains,
      });
    },
  );
  const lookups = dnsLookups();
  const dns = await checkDns(lookups, host, answer.platformHosts);
  const wildcardDns = wildcard
    ? await checkDns(lookups, `${probeLabel()}.${host}`, answer.platformHosts)
    : undefined;
  if (flags.json) {
    const out: Record<string, unknown> = {
      application: name,
      host,
      platformHosts: answer.platformHosts,
      dns: dns.verdict,
    };
    if (wildcardDns) out.wildcardDns = wildcardDns.verdict;
    say(JSON.stringify(out, null, 2));
  } else {
    say(`Claimed ${host}${wildcard ? ' and every name one label under it' : ''} for ${name}`);
  }
  reportDns(host, dns, answer.platformHosts, flags.json === true);
  if (wildcardDns) reportDns(`*.${host}`, wildcardDns, answer.platformHosts, flags.json === true);
}

async function fleetPlatformDomains(store: Store, given: readonly string[]): Promise<string[]> {
  const nowMs = Date.now();
  const live = (await readNodeRecords(store)).filter((record) => isNodeLive(record, nowMs));
  return [...new Set([...given, ...live.flatMap((record) => record.platformDomains ?? [])])].sort();
}

/** A match is acknowledged on stdout; anything else is one warning naming a platform host for a CNAME. */
function reportDns(host: string, check: DnsCheck, platformHosts: readonly string[], json: boolean): void {
  if (check.verdict === 'ok') {
    if (!json) say(`DNS: ${check.why}: it points here`);
    return;
  }
  const advice = platformHosts[0]
    ? `point it here with a CNAME record: ${host} CNAME ${platformHosts[0]}`
    : 'the application answers at no platform host yet (blocked, retired, or the node has no platform domain)';
  warn(`DNS for ${host} is ${check.verdict}: ${check.why}; ${advice}`);
}

export async function domainRemove(hostGiven: string, flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  // Not against the platform domains: what was claimed before a domain became one stays releasable.
  const host = checkClaimHost(hostGiven, []);
  const answer = await onWay(
    flags,
    (target) => call<DomainAnswer>(target, 'DELETE', appPath(name, `/domains/${encodeURIComponent(host)}`)),
    ({ store, settings }) => releaseDomain(store, name, host, settings.platform.domains),
  );
  if (flags.json) {
    say(JSON.stringify({ application: name, host, platformHosts: answer.platformHosts }, null, 2));
    return;
  }
  say(`Released ${host} from ${name}`);
}

export async function domainList(flags: AppFlags): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const record = await onWay(
    flags,
    async (target) => (await call<{ application: Redacted }>(target, 'GET', appPath(name))).application,
    ({ store }) => getApplication(store, name),
  );
  const listed = domainsOf(record as ApplicationRecord);
  if (flags.json) {
    say(JSON.stringify(listed, null, 2));
    return;
  }
  for (const line of hostLines(record)) say(line);
}

// ---- delete ----

export async function appDelete(flags: AppFlags & { force?: boolean }): Promise<void> {
  const name = resolveApplicationName(flags.name, flags.env);
  const force = flags.force === true;
  const { deleted } = await onWay(
    flags,
    (target) => call<{ deleted: string[] }>(target, 'DELETE', appPath(name, force ? '?force=1' : '')),
    ({ store }) =>
      withCliCoordinatorLease(store, async () => {
        checkDeletable(await getApplication(store, name), force);
        return { deleted: await deleteApplicationData(store, name) };
      }),
  );
  // Workers KV entries, R2 objects, D1 databases and Durable Objects are said apart: they are data, which no
  // redeploy brings back. An R2 object is its record (`r2/<bucket>/objects/.../-`), whatever bodies it has.
  const prefix = keys.fleetPrefix(name);
  const kvEntries = deleted.filter((key) => key.startsWith(`${prefix}kv/`)).length;
  const r2Objects = deleted.filter(
    (key) =>
      key.startsWith(`${prefix}r2/`) && /^[^/]+\/objects\/(.*\/)?-$/.test(key.slice(`${prefix}r2/`.length)),
  ).length;
  // A D1 database is its whole history (lease, snapshots, segments): counted once.
  const d1Databases = new Set(
    deleted
      .filter((key) => key.startsWith(`${prefix}d1/`))
      .map((key) => key.slice(`${prefix}d1/`.length).split('/')[0]),
  ).size;
  // A Durable Object is its file's history (`objects/namespaces/<class>/<file>/...`), the
  // namespace's alarm file not one: counted once.
  const objectsPrefix = keys.runtimeObjectsNamespacesPrefix(name);
  const durableObjects = new Set(
    deleted
      .filter((key) => key.startsWith(objectsPrefix))
      .map((key) => key.slice(objectsPrefix.length).split('/').slice(0, 2))
      .filter(([, file]) => file !== keys.runtimeObjectsAlarmsFile)
      .map((path) => path.join('/')),
  ).size;
  const said = [
    ...(kvEntries > 0 ? [`${kvEntries} of them Workers KV entries`] : []),
    ...(r2Objects > 0 ? [`${r2Objects} of them R2 objects`] : []),
    ...(d1Databases > 0
      ? [`the whole history of ${d1Databases} D1 database${d1Databases === 1 ? '' : 's'}`]
      : []),
    ...(durableObjects > 0
      ? [`the storage of ${durableObjects} Durable Object${durableObjects === 1 ? '' : 's'}`]
      : []),
  ];
  const counts = said.length === 0 ? '' : ` (${said.join(', ')})`;
  say(`Deleted ${name}: ${deleted.length} store key${deleted.length === 1 ? '' : 's'} removed${counts}`);
  for (const key of deleted) say(key);
}

// ---- helpers ----

/** `key=value` arguments; the value may be empty or hold `=`; a key given twice is refused. */
export function parsePairs(given: readonly string[], what: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const pair of given) {
    const at = pair.indexOf('=');
    if (at < 1) throw invalidInput(`Invalid ${what}`, `expected key=value, got ${JSON.stringify(pair)}`);
    const key = pair.slice(0, at);
    if (Object.hasOwn(result, key))
      throw invalidInput(`Invalid ${what}`, `${JSON.stringify(key)} is given twice`);
    result[key] = pair.slice(at + 1);
  }
  return result;
}

function pairs(map: Record<string, string>): string {
  return Object.entries(map)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

function stateOf(record: Redacted): string {
  const states = [record.blocked ? 'blocked' : '', record.retired ? 'retired' : ''].filter(Boolean);
  return states.length ? states.join(',') : 'active';
}

/** One host per line, sorted, marked `(+subdomains)` when the claim covers them. */
function hostLines(record: Redacted): string[] {
  const wild = new Set(record.wildcardDomains);
  return [...record.domains].sort().map((host) => (wild.has(host) ? `${host} (+subdomains)` : host));
}
