// docs/ingress.md "The Traefik format" (docs/routing-vectors.md "Traefik rendering as
// implemented"): the routing document as Traefik v3 dynamic configuration, served by GET /v1/ingress/routes/proxyb.
import { HEALTH_PATH } from '../runtime-contract/environment.ts';
import { compare, isRenderedRoute, routedApplications } from './render.ts';
import { endsRun, inner, joinRuns, type Run, runEnd, sameRun } from './text.ts';
import type { FleetRouting, Route, Upstream } from './types.ts';

export interface ProxybOptions {
  /** The node's `ingress.entryPoints` setting, on every router. */
  entryPoints: string[];
  /** The prefer-resolved node id (`self` already replaced); absent when no prefer was asked. */
  preferNode?: string;
}

export interface TraefikRouter {
  entryPoints: string[];
  middlewares?: string[];
  priority?: number;
  rule: string;
  service: string;
}

export interface TraefikHealthCheck {
  hostname?: string;
  interval: string;
  path: string;
  timeout: string;
  /** How often a server that failed its check is checked again (Traefik v3.5 and later). */
  unhealthyInterval: string;
}

export type TraefikService =
  | { loadBalancer: { healthCheck: TraefikHealthCheck; servers: { url: string }[] } }
  | { failover: { fallback: string; service: string } };

/** The header naming the application a request was routed to (docs/ingress.md "Misdirected requests"). */
export const APPLICATION_HEADER = 'Svc-Application';

export type TraefikMiddleware =
  | { retry: { attempts: number } }
  | { headers: { customRequestHeaders: Record<string, string> } };

export interface ProxybConfig {
  http?: {
    middlewares: Record<string, TraefikMiddleware>;
    routers: Record<string, TraefikRouter>;
    services: Record<string, TraefikService>;
  };
}

const API_HEALTH = '/.well-known/svc/health';

/** The Traefik dynamic configuration as an object (tests, tools); the node serves renderProxybBytes. */
export function renderProxyb(doc: FleetRouting, options: ProxybOptions): ProxybConfig {
  // JSON.parse keeps key order, so serializeProxyb of this object gives back the served bytes.
  return JSON.parse(renderProxybBytes(doc, options)) as ProxybConfig;
}

/** The bytes of a configuration renderProxyb returned (keys already in code-unit order). */
export function serializeProxyb(config: ProxybConfig): string {
  return JSON.stringify(config);
}

/**
 * The served bytes: compact JSON, every object's keys in code-unit order, so an unchanged fleet
 * gives identical bytes (Traefik's HTTP provider reloads, and resets health state, on any change of
 * bytes). The text is written directly, in name order, without building the two name-keyed maps:
 * at ten thousand applications those cost more than everything else (see bench/RESULTS.md). The
 * text of a route renderRouting made is kept with the route, so the next rendering of an
 * unchanged route only joins it in.
 */
export function renderProxybBytes(doc: FleetRouting, options: ProxybOptions): string {
  const entryPoints = JSON.stringify(options.entryPoints);
  const prefer = options.preferNode === '' ? undefined : options.preferNode;
  const kept = keptTexts(entryPoints, prefer);
  // Host routers, in document (host) order, which is their name order; the few others apart.
  const hosts: Source[] = [];
  const others: Source[] = [];

  for (const route of doc.routes) {
    const rendered = isRenderedRoute(route);
    let source = rendered ? kept.get(route) : undefined;
    if (source === undefined) {
      source = routeSource(route, entryPoints, prefer);
      if (rendered) kept.set(route, source);
    }
    (source.kind === HOST_ROUTER ? hosts : others).push(source);
  }

  if (doc.api) {
    const denied = doc.api.denied.flatMap((p) => [`Path(\`${p}\`)`, `PathPrefix(\`${p}/\`)`]);
    const healthCheck = `{"interval":"10s","path":"${API_HEALTH}","timeout":"3s","unhealthyInterval":"1s"}`;
    for (const domain of doc.api.hosts) {
      const host = `Host(\`${domain}\`)`;
      const apiRule = JSON.stringify([host, ...denied.map((m) => `!${m}`)].join(' && '));
      others.push(
        source(`svc_api_${domain}`, apiRule, doc.api.upstreams, healthCheck, API_ROUTER, entryPoints, prefer),
      );
      const denyRule = JSON.stringify(`${host} && (${denied.join(' || ')})`);
      others.push(
        source(`svc_apideny_${domain}`, denyRule, [], healthCheck, DENY_ROUTER, entryPoints, prefer),
      );
    }
  }

  const sources = inNameOrder(hosts, others);
  if (sources.length === 0) return '{}';

  // One join makes one flat string. Every router and service text starts with the comma that
  // separates it from the one before; the first of each map drops it.
  const parts: string[] = ['{"http":{"middlewares":{', middlewaresText(doc, sources)];
  parts.push('"svc_retry":{"retry":{"attempts":3}}},"routers":{');
  const routersStart = parts.length;
  joinRuns(
    sources,
    (source) => source.ends,
    (source) => source.router,
    routerRuns,
    parts,
  );
  parts[routersStart] = parts[routersStart].slice(1);
  parts.push('},"services":{');
  const servicesStart = parts.length;
  serviceTexts(sources, parts);
  if (parts.length > servicesStart) parts[servicesStart] = parts[servicesStart].slice(1);
  parts.push('}}}');
  return parts.join('');
}

/** A run of sources and the text of their services, and the failover halves still to write. */
interface ServiceRun extends Run<Source> {
  left: Pending[];
}

interface Pending {
  source: Source;
  kind: number;
}

const routerRuns = new WeakMap<Source, Run<Source>>();
const serviceRuns = new WeakMap<Source, ServiceRun>();
const middlewareTexts = new WeakMap<readonly string[], string>();

// Services are the routers' names plus `<key>_local` and `<key>_peers` of each failover. Those
// sort after every name that extends `<key>` with a character below "_", which all come right
// after `<key>` in router order; so they wait on a stack, whose top is always the smallest, until
// the next router name passes them. This keeps the walk linear instead of a second sort.
//
// The text is kept per run of sources as for the routers (text.ts joinRuns), for a run that
// started with nothing waiting and whose waiting halves the next run's first name passes, which
// is nearly every run: then the run's text ends with those halves, and the next run starts with
// nothing waiting.
function serviceTexts(sources: Source[], out: string[]): void {
  const pending: Pending[] = [];
  for (let start = 0; start < sources.length; ) {
    const end = runEnd(sources, start, (source) => source.ends);
    const next = end < sources.length ? sources[end].key : undefined;
    const fresh = pending.length === 0;
    const kept = fresh ? serviceRuns.get(sources[start]) : undefined;
    if (kept !== undefined && sameRun(kept, sources, start, end) && allBefore(kept.left, next)) {
      out.push(kept.text);
      start = end;
      continue;
    }
    const pieces: string[] = [];
    for (let i = start; i < end; i++) {
      const source = sources[i];
      if (source.kind === DENY_ROUTER) continue;
      while (pending.length > 0) {
        const top = pending[pending.length - 1];
        if (!sortsBefore(top.source.key, SUFFIX[top.kind], source.key)) break;
        pending.pop();
        pieces.push(top.source.services[top.kind]);
      }
      pieces.push(source.services[BALANCER]);
      if (source.services.length > 1) pending.push({ source, kind: PEERS }, { source, kind: LOCAL });
    }
    if (fresh && allBefore(pending, next)) {
      const left = [...pending];
      while (pending.length > 0) {
        const top = pending.pop()!;
        pieces.push(top.source.services[top.kind]);
      }
      const text = pieces.join('');
      serviceRuns.set(sources[start], { items: sources.slice(start, end), text, left });
      out.push(text);
    } else {
      for (const piece of pieces) out.push(piece);
    }
    start = end;
  }
  while (pending.length > 0) {
    const top = pending.pop()!;
    out.push(top.source.services[top.kind]);
  }
}

/** Whether every waiting half sorts before `next` (the next service name; none at the end). */
function allBefore(pending: Pending[], next: string | undefined): boolean {
  if (next === undefined) return true;
  for (const { source, kind } of pending) if (!sortsBefore(source.key, SUFFIX[kind], next)) return false;
  return true;
}

// One headers middleware per application, naming it to the front (docs/ingress.md "Misdirected
// requests"), in code-unit order of name; `svc_app_` sorts before `svc_retry`. The text is kept for
// the list of applications renderRouting gives, which stays the same object while the same hosts
// are routed to the same applications.
function middlewaresText(doc: FleetRouting, sources: Source[]): string {
  const applications = routedApplications(doc);
  if (applications === undefined) return applicationsInOrder(sources).map(middlewareText).join('');
  let text = middlewareTexts.get(applications);
  if (text === undefined) {
    text = applications.map(middlewareText).join('');
    middlewareTexts.set(applications, text);
  }
  return text;
}

function middlewareText(application: string): string {
  const text = inner(application);
  return `"svc_app_${text}":{"headers":{"customRequestHeaders":{"${APPLICATION_HEADER}":"${text}"}}},`;
}

// What renderProxybBytes wrote for each route renderRouting made (frozen, so the text cannot go
// stale), per entry points and `prefer`, for the few most recently rendered; a WeakMap, so the
// text goes with its route.
const KEPT_OPTIONS = 4;
const keptByOptions = new Map<string, WeakMap<Route, Source>>();

function keptTexts(entryPoints: string, prefer: string | undefined): WeakMap<Route, Source> {
  const key = `${entryPoints} ${prefer === undefined ? '' : `=${prefer}`}`;
  const kept = keptByOptions.get(key) ?? new WeakMap<Route, Source>();
  keptByOptions.delete(key); // re-inserted last: the most recently used
  keptByOptions.set(key, kept);
  if (keptByOptions.size > KEPT_OPTIONS) keptByOptions.delete(keptByOptions.keys().next().value!);
  return kept;
}

function routeSource(route: Route, entryPoints: string, prefer: string | undefined): Source {
  const wildcard = route.host.startsWith('*.');
  const base = wildcard ? route.host.slice(2) : route.host;
  const text = inner(base);
  // A wildcard service checks health under the base: the pattern is no host a process answers.
  // A server that failed its check is checked again every second, so a restarted front is back
  // in Traefik about a second after it is healthy (docs/ingress.md "Upstream health at the
  // ingress"); healthy servers are checked every 10 s, which is what the fleet pays for.
  const healthCheck = `{"hostname":"${text}","interval":"10s","path":"${HEALTH_PATH}","timeout":"3s","unhealthyInterval":"1s"}`;
  if (wildcard) {
    const rule = JSON.stringify(`HostRegexp(\`^[^.]+\\.${escapeRegex(base)}$\`)`);
    return source(
      `svc_wild_${base}`,
      rule,
      route.upstreams,
      healthCheck,
      WILD_ROUTER,
      entryPoints,
      prefer,
      route.application,
    );
  }
  return source(
    `svc_${base}`,
    `"Host(\`${text}\`)"`,
    route.upstreams,
    healthCheck,
    HOST_ROUTER,
    entryPoints,
    prefer,
    route.application,
  );
}

function source(
  key: string,
  rule: string,
  upstreams: Upstream[],
  healthCheck: string,
  kind: number,
  entryPoints: string,
  prefer: string | undefined,
  application?: string,
): Source {
  const keyText = inner(key);
  const named = application === undefined ? undefined : inner(application);
  const router = `,"${keyText}":${routerText(kind, keyText, rule, entryPoints, named)}`;
  const app = { ends: endsRun(key), ...(application === undefined ? {} : { application }) };
  if (kind === DENY_ROUTER) return { key, kind, router, services: [], ...app };
  let local = 0;
  if (prefer !== undefined) for (const u of upstreams) if (u.node === prefer) local++;
  // Failover only when the preferred node answers and someone else can take over.
  if (local === 0 || local === upstreams.length) {
    const balancer = `,"${keyText}":${balancerText(upstreams, healthCheck, BALANCER, prefer)}`;
    return { key, kind, router, services: [balancer], ...app };
  }
  const failover = `,"${keyText}":{"failover":{"fallback":"${keyText}_peers","service":"${keyText}_local"}}`;
  const localText = `,"${keyText}_local":${balancerText(upstreams, healthCheck, LOCAL, prefer)}`;
  const peersText = `,"${keyText}_peers":${balancerText(upstreams, healthCheck, PEERS, prefer)}`;
  return { key, kind, router, services: [failover, localText, peersText], ...app };
}

/** The routed applications, each once, in code-unit order. */
function applicationsInOrder(sources: Source[]): string[] {
  const applications = new Set<string>();
  for (const { application } of sources) if (application !== undefined) applications.add(application);
  // Array#sort without a comparator is code-unit order, like compare(), only faster.
  return [...applications].sort();
}

// Sorting every name costs a comparison of long strings each; the host routers already come in
// name order from a document renderRouting wrote (anything else is sorted), so only the wildcard
// and API names are sorted and merged in.
function inNameOrder(hosts: Source[], others: Source[]): Source[] {
  const byKey = (a: Source, b: Source) => compare(a.key, b.key);
  for (let i = 1; i < hosts.length; i++) {
    if (compare(hosts[i - 1].key, hosts[i].key) > 0) {
      hosts.sort(byKey);
      break;
    }
  }
  if (others.length === 0) return hosts;
  others.sort(byKey);
  const out: Source[] = [];
  let h = 0;
  for (const other of others) {
    while (h < hosts.length && compare(hosts[h].key, other.key) <= 0) out.push(hosts[h++]);
    out.push(other);
  }
  while (h < hosts.length) out.push(hosts[h++]);
  return out;
}

/** The text of one router and of its services (none for a deny router), ready to be joined. */
interface Source {
  /** Router and service name. */
  key: string;
  kind: number;
  /** `,"<key>":{...}`. */
  router: string;
  /** `,"<name>":{...}` for the service named `key` and, for a failover, its `_local` and `_peers`. */
  services: string[];
  /** The route's application (host and wildcard routers). */
  application?: string;
  /** Whether a run of kept text ends after this source (text.ts endsRun of the key). */
  ends: boolean;
}

const HOST_ROUTER = 0;
const WILD_ROUTER = 1;
const API_ROUTER = 2;
const DENY_ROUTER = 3;
const BALANCER = 0;
const LOCAL = 1;
const PEERS = 2;
/** What each kind of load balancer adds to its source's name. */
const SUFFIX = ['', '_local', '_peers'];

/** Whether `<prefix><suffix>` sorts before `name`, without writing the concatenation out. */
function sortsBefore(prefix: string, suffix: string, name: string): boolean {
  if (!name.startsWith(prefix)) return compare(prefix, name) < 0;
  for (let i = 0; i < suffix.length; i++) {
    const at = prefix.length + i;
    if (at === name.length) return false;
    const d = suffix.charCodeAt(i) - name.charCodeAt(at);
    if (d !== 0) return d < 0;
  }
  return name.length > prefix.length + suffix.length;
}

// Keys in code-unit order: entryPoints, middlewares, priority, rule, service. Priorities: deny 3
// above API 2, wildcard 1 below everything, host routers unset. Deny routers go without the retry
// middleware: Traefik answers them itself. An application's routers first name it in the request
// (a client's own header is replaced), then retry.
function routerText(
  kind: number,
  keyText: string,
  rule: string,
  entryPoints: string,
  application: string | undefined,
): string {
  if (kind === DENY_ROUTER) {
    return `{"entryPoints":${entryPoints},"priority":3,"rule":${rule},"service":"noop@internal"}`;
  }
  const priority = kind === WILD_ROUTER ? ',"priority":1' : kind === API_ROUTER ? ',"priority":2' : '';
  const named = application !== undefined ? `"svc_app_${application}",` : '';
  return `{"entryPoints":${entryPoints},"middlewares":[${named}"svc_retry"]${priority},"rule":${rule},"service":"${keyText}"}`;
}

// Traefik refuses a failover whose primary has no health check, so both halves carry the
// source's. The failover service itself gets none: in Traefik that option only reports status to
// a parent service, and its parent here is a router.
function balancerText(
  upstreams: Upstream[],
  healthCheck: string,
  kind: number,
  prefer: string | undefined,
): string {
  let servers = '';
  for (const u of upstreams) {
    if ((kind === LOCAL && u.node !== prefer) || (kind === PEERS && u.node === prefer)) continue;
    servers += `${servers === '' ? '' : ','}{"url":"http://${inner(u.address)}"}`;
  }
  return `{"loadBalancer":{"healthCheck":${healthCheck},"servers":[${servers}]}}`;
}

// Valid bases only contain dots among the metacharacters; escaping all of them keeps a malformed
// base from widening the match.
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
