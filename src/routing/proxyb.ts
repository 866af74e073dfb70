// docs/ingress.md "The Traefik format" (docs/routing-vectors.md "Traefik rendering as
// implemented"): the routing document as Traefik v3 dynamic configuration, served by GET /v1/ingress/routes/proxyb.
import { HEALTH_PATH } from '../runtime-contract/environment.ts';
import { compare } from './render.ts';
import { inner, TextSink } from './text.ts';
import type { FleetRouting, Upstream } from './types.ts';

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
 * at ten thousand applications those cost more than everything else (see bench/RESULTS.md).
 */
export function renderProxybBytes(doc: FleetRouting, options: ProxybOptions): string {
  const entryPoints = JSON.stringify(options.entryPoints);
  const prefer = options.preferNode === '' ? undefined : options.preferNode;
  // Host routers, in document (host) order, which is their name order; the few others apart.
  const hosts: Source[] = [];
  const others: Source[] = [];

  const add = (
    key: string,
    keyText: string,
    rule: string,
    upstreams: Upstream[],
    healthCheck: string,
    kind: number,
    application?: string,
  ) => {
    let local = 0;
    if (prefer !== undefined) for (const u of upstreams) if (u.node === prefer) local++;
    // Failover only when the preferred node answers and someone else can take over.
    const failover = local > 0 && local < upstreams.length;
    (kind === HOST_ROUTER ? hosts : others).push({
      key,
      keyText,
      rule,
      upstreams,
      healthCheck,
      kind,
      failover,
      ...(application !== undefined ? { application: inner(application) } : {}),
    });
  };

  for (const route of doc.routes) {
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
      add(
        `svc_wild_${base}`,
        `svc_wild_${text}`,
        rule,
        route.upstreams,
        healthCheck,
        WILD_ROUTER,
        route.application,
      );
    } else {
      add(
        `svc_${base}`,
        `svc_${text}`,
        `"Host(\`${text}\`)"`,
        route.upstreams,
        healthCheck,
        HOST_ROUTER,
        route.application,
      );
    }
  }

  if (doc.api) {
    const denied = doc.api.denied.flatMap((p) => [`Path(\`${p}\`)`, `PathPrefix(\`${p}/\`)`]);
    const healthCheck = `{"interval":"10s","path":"${API_HEALTH}","timeout":"3s","unhealthyInterval":"1s"}`;
    for (const domain of doc.api.hosts) {
      const host = `Host(\`${domain}\`)`;
      const api = `svc_api_${domain}`;
      const apiRule = JSON.stringify([host, ...denied.map((m) => `!${m}`)].join(' && '));
      add(api, inner(api), apiRule, doc.api.upstreams, healthCheck, API_ROUTER);
      const deny = `svc_apideny_${domain}`;
      const denyRule = JSON.stringify(`${host} && (${denied.join(' || ')})`);
      add(deny, inner(deny), denyRule, [], healthCheck, DENY_ROUTER);
    }
  }

  const sources = inNameOrder(hosts, others);
  if (sources.length === 0) return '{}';

  const out = new TextSink();
  // One headers middleware per application, naming it to the front (docs/ingress.md "Misdirected
  // requests"); `svc_app_` sorts before `svc_retry`.
  out.add('{"http":{"middlewares":{');
  for (const application of applicationsInOrder(doc)) {
    const text = inner(application);
    out.add(`"svc_app_${text}":{"headers":{"customRequestHeaders":{"${APPLICATION_HEADER}":"${text}"}}},`);
  }
  out.add('"svc_retry":{"retry":{"attempts":3}}},"routers":{');
  for (let i = 0; i < sources.length; i++) {
    out.add(`${i === 0 ? '"' : ',"'}${sources[i].keyText}":${routerText(sources[i], entryPoints)}`);
  }
  out.add('},"services":{');
  // Services are the routers' names plus `<key>_local` and `<key>_peers` of each failover. Those
  // sort after every name that extends `<key>` with a character below "_", which all come right
  // after `<key>` in router order; so they wait on a stack, whose top is always the smallest, until
  // the next router name passes them. This keeps the walk linear instead of a second sort.
  const pending: { source: Source; kind: number }[] = [];
  let first = true;
  const emit = (source: Source, kind: number, value: string) => {
    out.add(`${first ? '"' : ',"'}${source.keyText}${SUFFIX[kind]}":${value}`);
    first = false;
  };
  for (const source of sources) {
    if (source.kind === DENY_ROUTER) continue;
    while (pending.length > 0) {
      const top = pending[pending.length - 1];
      if (!sortsBefore(top.source.key, SUFFIX[top.kind], source.key)) break;
      pending.pop();
      emit(top.source, top.kind, balancerText(top.source, top.kind, prefer));
    }
    if (!source.failover) {
      emit(source, BALANCER, balancerText(source, BALANCER, prefer));
      continue;
    }
    emit(
      source,
      BALANCER,
      `{"failover":{"fallback":"${source.keyText}_peers","service":"${source.keyText}_local"}}`,
    );
    pending.push({ source, kind: PEERS }, { source, kind: LOCAL });
  }
  while (pending.length > 0) {
    const next = pending.pop()!;
    emit(next.source, next.kind, balancerText(next.source, next.kind, prefer));
  }
  out.add('}}}');
  return out.finish();
}

/** The routed applications, each once, in code-unit order. */
function applicationsInOrder(doc: FleetRouting): string[] {
  return [...new Set(doc.routes.map((r) => r.application))].sort(compare);
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

/** What one router, and its service unless it is a deny router, is written from. */
interface Source {
  /** Router and service name. */
  key: string;
  /** `key` as it appears inside a JSON string. */
  keyText: string;
  /** JSON text of the rule string. */
  rule: string;
  upstreams: Upstream[];
  /** JSON text of the health check the source's load balancers carry. */
  healthCheck: string;
  kind: number;
  failover: boolean;
  /** The route's application as it appears inside a JSON string (host and wildcard routers). */
  application?: string;
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
function routerText(source: Source, entryPoints: string): string {
  if (source.kind === DENY_ROUTER) {
    return `{"entryPoints":${entryPoints},"priority":3,"rule":${source.rule},"service":"noop@internal"}`;
  }
  const priority =
    source.kind === WILD_ROUTER ? ',"priority":1' : source.kind === API_ROUTER ? ',"priority":2' : '';
  const named = source.application !== undefined ? `"svc_app_${source.application}",` : '';
  return `{"entryPoints":${entryPoints},"middlewares":[${named}"svc_retry"]${priority},"rule":${source.rule},"service":"${source.keyText}"}`;
}

// Traefik refuses a failover whose primary has no health check, so both halves carry the
// source's. The failover service itself gets none: in Traefik that option only reports status to
// a parent service, and its parent here is a router.
function balancerText(source: Source, kind: number, prefer: string | undefined): string {
  let servers = '';
  for (const u of source.upstreams) {
    if ((kind === LOCAL && u.node !== prefer) || (kind === PEERS && u.node === prefer)) continue;
    servers += `${servers === '' ? '' : ','}{"url":"http://${inner(u.address)}"}`;
  }
  return `{"loadBalancer":{"healthCheck":${source.healthCheck},"servers":[${servers}]}}`;
}

// Valid bases only contain dots among the metacharacters; escaping all of them keeps a malformed
// base from widening the match.
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
