// docs/ingress.md "The Traefik format" (docs/routing-vectors.md "Traefik rendering as
// implemented"): the routing document as Traefik v3 dynamic configuration, served by GET /v1/ingress/routes/proxyb.
import { HEALTH_PATH } from '../runtime-contract/environment.ts';
import { compare, isRenderedRoute, routedApplications } from './render.ts';
import { endsRun, inner, joinRuns, type Run, type RunItems, runEnd, samePieces, sameRun } from './text.ts';
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
 * text of runs of routes renderRouting made is kept, so an unchanged run is joined in as it is.
 */
export function renderProxybBytes(doc: FleetRouting, options: ProxybOptions): string {
  const entryPoints = JSON.stringify(options.entryPoints);
  const prefer = options.preferNode === '' ? undefined : options.preferNode;
  const kept = keptRuns(entryPoints, prefer);
  if (kept.sources.size > 2 * doc.routes.length + 64) kept.sources = new Map();
  // Host routers, in document (host) order, which is their name order; the few others apart.
  const hosts: Source[] = [];
  const others: Source[] = [];

  for (const route of doc.routes) {
    let source = kept.sources.get(route);
    if (source === undefined) {
      source = routeSource(route, prefer);
      // A route renderRouting made is frozen, so it stands for its text; any other is read afresh.
      if (isRenderedRoute(route)) kept.sources.set(route, source);
      else source.id = source;
    }
    (source.kind === HOST_ROUTER ? hosts : others).push(source);
  }

  if (doc.api) {
    const denied = doc.api.denied.flatMap((p) => [`Path(\`${p}\`)`, `PathPrefix(\`${p}/\`)`]);
    const healthCheck = `{"interval":"10s","path":"${API_HEALTH}","timeout":"3s","unhealthyInterval":"1s"}`;
    for (const domain of doc.api.hosts) {
      const host = `Host(\`${domain}\`)`;
      const apiRule = JSON.stringify([host, ...denied.map((m) => `!${m}`)].join(' && '));
      const denyRule = JSON.stringify(`${host} && (${denied.join(' || ')})`);
      for (const [key, kind, rule, upstreams] of [
        [`svc_api_${domain}`, API_ROUTER, apiRule, doc.api.upstreams],
        [`svc_apideny_${domain}`, DENY_ROUTER, denyRule, []],
      ] as const) {
        const source: Source = {
          id: {},
          key,
          keyText: inner(key),
          baseText: '',
          applicationText: '',
          kind,
          ends: endsRun(key),
          failover: kind === API_ROUTER && failover(upstreams, prefer),
          upstreams,
          base: '',
          rule,
          healthCheck,
        };
        source.id = source;
        others.push(source);
      }
    }
  }

  const sources = inNameOrder(hosts, others);
  if (sources.length === 0) return '{}';

  // One join makes one flat string. Every router and service text starts with the comma that
  // separates it from the one before; the first of each map drops it.
  const parts: string[] = ['{"http":{"middlewares":{', middlewaresText(doc, sources)];
  parts.push('"svc_retry":{"retry":{"attempts":3}}},"routers":{');
  const routersStart = parts.length;
  const routers: RunItems<Source> = {
    id: (source) => source.id,
    ends: (source) => source.ends,
    write: (items, start, end, out) => {
      for (let i = start; i < end; i++) writeRouter(items[i], entryPoints, out);
    },
  };
  joinRuns(sources, routers, kept.routers, parts);
  parts[routersStart] = parts[routersStart].slice(1);
  parts.push('},"services":{');
  const servicesStart = parts.length;
  serviceTexts(sources, prefer, kept.services, parts);
  if (parts.length > servicesStart) parts[servicesStart] = parts[servicesStart].slice(1);
  parts.push('}}}');
  // Every piece the very one of the last rendering with these options: so are the bytes.
  if (kept.last !== undefined && samePieces(kept.last.parts, parts)) return kept.last.text;
  const text = parts.join('');
  kept.last = { parts, text };
  return text;
}

function routeSource(route: Route, prefer: string | undefined): Source {
  const wildcard = route.host.startsWith('*.');
  const base = wildcard ? route.host.slice(2) : route.host;
  const key = wildcard ? `svc_wild_${base}` : `svc_${base}`;
  return {
    id: route,
    key,
    keyText: inner(key),
    baseText: inner(base),
    applicationText: inner(route.application),
    kind: wildcard ? WILD_ROUTER : HOST_ROUTER,
    ends: endsRun(key),
    failover: failover(route.upstreams, prefer),
    upstreams: route.upstreams,
    base,
    application: route.application,
    rule: '',
    healthCheck: '',
  };
}

/** What one router, and its services unless it is a deny router, are written from. */
interface Source {
  /** What the text is written from: the route renderRouting made, else the source itself. */
  id: object;
  /** Router and service name. */
  key: string;
  /** `key`, `base` and `application` as they appear inside a JSON string. */
  keyText: string;
  baseText: string;
  applicationText: string;
  kind: number;
  /** Whether a run of kept text ends after this source (text.ts endsRun of the key). */
  ends: boolean;
  /** Whether the service is a failover to `<key>_local` from `<key>_peers`. */
  failover: boolean;
  upstreams: readonly Upstream[];
  /** The route's host, or for a wildcard its base; empty for the API routers. */
  base: string;
  /** The route's application (host and wildcard routers). */
  application?: string;
  /** JSON text of the rule and the health check of the API routers; empty for the others. */
  rule: string;
  healthCheck: string;
}

// Failover only when the preferred node answers and someone else can take over.
function failover(upstreams: readonly Upstream[], prefer: string | undefined): boolean {
  if (prefer === undefined) return false;
  let local = 0;
  for (const u of upstreams) if (u.node === prefer) local++;
  return local > 0 && local < upstreams.length;
}

/** A run of sources and the text of their services, and the failover halves it ends with. */
interface ServiceRun extends Run {
  left: Pending[];
}

interface Pending {
  source: Source;
  kind: number;
}

// Services are the routers' names plus `<key>_local` and `<key>_peers` of each failover. Those
// sort after every name that extends `<key>` with a character below "_", which all come right
// after `<key>` in router order; so they wait on a stack, whose top is always the smallest, until
// the next router name passes them. This keeps the walk linear instead of a second sort.
//
// The text is kept per run of sources as for the routers (text.ts joinRuns), for a run that
// started with nothing waiting and whose waiting halves the next run's first name passes, which
// is nearly every run: then the run's text ends with those halves, and the next run starts with
// nothing waiting.
function serviceTexts(
  sources: Source[],
  prefer: string | undefined,
  runs: WeakMap<object, ServiceRun>,
  out: string[],
): void {
  const how: RunItems<Source> = { id: (s) => s.id, ends: (s) => s.ends, write: () => {} };
  const pending: Pending[] = [];
  for (let start = 0; start < sources.length; ) {
    const end = runEnd(sources, start, how);
    const next = end < sources.length ? sources[end].key : undefined;
    const fresh = pending.length === 0;
    const kept = fresh ? runs.get(sources[start].id) : undefined;
    if (kept !== undefined && sameRun(kept, sources, start, end, how) && allBefore(kept.left, next)) {
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
        writeService(top.source, top.kind, prefer, pieces);
      }
      writeService(source, BALANCER, prefer, pieces);
      if (source.failover) pending.push({ source, kind: PEERS }, { source, kind: LOCAL });
    }
    if (fresh && allBefore(pending, next)) {
      const left = [...pending];
      while (pending.length > 0) {
        const top = pending.pop()!;
        writeService(top.source, top.kind, prefer, pieces);
      }
      const ids = sources.slice(start, end).map(how.id);
      const text = pieces.join('');
      runs.set(ids[0], { ids, text, left });
      out.push(text);
    } else {
      out.push(pieces.join(''));
    }
    start = end;
  }
  while (pending.length > 0) {
    const top = pending.pop()!;
    writeService(top.source, top.kind, prefer, out);
  }
}

/** Whether every waiting half sorts before `next` (the next service name; none at the end). */
function allBefore(pending: Pending[], next: string | undefined): boolean {
  if (next === undefined) return true;
  for (const { source, kind } of pending) if (!sortsBefore(source.key, SUFFIX[kind], next)) return false;
  return true;
}

const middlewareTexts = new WeakMap<readonly string[], string>();

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

// What is kept per entry points and `prefer`, for the few most recently rendered: the sources of
// routes renderRouting made, the text of runs of routers and of services (WeakMaps, so the text
// goes with its routes), and the last rendering's pieces and text.
const KEPT_OPTIONS = 4;

interface KeptForOptions {
  /** Dropped whole when it holds twice the routes of a rendering: what is in use comes back. */
  sources: Map<Route, Source>;
  routers: WeakMap<object, Run>;
  services: WeakMap<object, ServiceRun>;
  last?: { parts: string[]; text: string };
}

const keptByOptions = new Map<string, KeptForOptions>();

function keptRuns(entryPoints: string, prefer: string | undefined): KeptForOptions {
  const key = `${entryPoints} ${prefer === undefined ? '' : `=${prefer}`}`;
  const kept = keptByOptions.get(key) ?? {
    sources: new Map(),
    routers: new WeakMap(),
    services: new WeakMap(),
  };
  keptByOptions.delete(key); // re-inserted last: the most recently used
  keptByOptions.set(key, kept);
  if (keptByOptions.size > KEPT_OPTIONS) keptByOptions.delete(keptByOptions.keys().next().value!);
  return kept;
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
function writeRouter(source: Source, entryPoints: string, out: string[]): void {
  const { keyText } = source;
  if (source.kind === DENY_ROUTER) {
    out.push(
      `,"${keyText}":{"entryPoints":${entryPoints},"priority":3,"rule":${source.rule},"service":"noop@internal"}`,
    );
    return;
  }
  const named = source.application !== undefined ? `"svc_app_${source.applicationText}",` : '';
  let rest: string;
  if (source.kind === HOST_ROUTER) rest = `,"rule":"Host(\`${source.baseText}\`)"`;
  else if (source.kind === WILD_ROUTER) {
    rest = `,"priority":1,"rule":${JSON.stringify(`HostRegexp(\`^[^.]+\\.${escapeRegex(source.base)}$\`)`)}`;
  } else rest = `,"priority":2,"rule":${source.rule}`;
  out.push(
    `,"${keyText}":{"entryPoints":${entryPoints},"middlewares":[${named}"svc_retry"]${rest},"service":"${keyText}"}`,
  );
}

// Traefik refuses a failover whose primary has no health check, so both halves carry the
// source's. The failover service itself gets none: in Traefik that option only reports status to
// a parent service, and its parent here is a router.
function writeService(source: Source, kind: number, prefer: string | undefined, out: string[]): void {
  const { keyText } = source;
  if (kind === BALANCER && source.failover) {
    out.push(`,"${keyText}":{"failover":{"fallback":"${keyText}_peers","service":"${keyText}_local"}}`);
    return;
  }
  // A wildcard service checks health under the base: the pattern is no host a process answers. A
  // server that failed its check is checked again every second, so a restarted front is back in
  // Traefik about a second after it is healthy (docs/ingress.md "Upstream health at the
  // ingress"); healthy servers are checked every 10 s, which is what the fleet pays for.
  const health =
    source.kind === API_ROUTER ? source.healthCheck : `{"hostname":"${source.baseText}${APPLICATION_HEALTH}`;
  let servers = '';
  for (const u of source.upstreams) {
    if ((kind === LOCAL && u.node !== prefer) || (kind === PEERS && u.node === prefer)) continue;
    servers += `${servers === '' ? '' : ','}{"url":"http://${inner(u.address)}"}`;
  }
  out.push(`,"${keyText}${SUFFIX[kind]}":{"loadBalancer":{"healthCheck":${health},"servers":[${servers}]}}`);
}

/** An application service's health check after its hostname. */
const APPLICATION_HEALTH = `","interval":"10s","path":"${HEALTH_PATH}","timeout":"3s","unhealthyInterval":"1s"}`;

// Valid bases only contain dots among the metacharacters; escaping all of them keeps a malformed
// base from widening the match.
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
