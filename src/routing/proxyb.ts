// Spec 2 "Rendering for the second proxy (proxyb)": the routing document as Traefik v3 dynamic
// configuration, served by GET /v1/ingress/routes/proxyb.
import { compare } from './render.ts';
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
}

export type TraefikService =
  | { loadBalancer: { healthCheck: TraefikHealthCheck; servers: { url: string }[] } }
  | { failover: { fallback: string; service: string } };

export interface ProxybConfig {
  http?: {
    middlewares: Record<string, { retry: { attempts: number } }>;
    routers: Record<string, TraefikRouter>;
    services: Record<string, TraefikService>;
  };
}

const RETRY = 'svc_retry';
const CELL_HEALTH = '/.well-known/cell/health';
const API_HEALTH = '/.well-known/svc/health';

/**
 * Renders the Traefik dynamic configuration. Every object is built with its keys in code-unit
 * order, so JSON.stringify gives identical bytes for an unchanged fleet: Traefik's HTTP provider
 * reloads, and resets health state, on any change of bytes.
 */
export function renderProxyb(doc: FleetRouting, options: ProxybOptions): ProxybConfig {
  const entryPoints = [...options.entryPoints];
  const routers = new Map<string, TraefikRouter>();
  const services = new Map<string, TraefikService>();
  const prefer = options.preferNode === '' ? undefined : options.preferNode;

  for (const route of doc.routes) {
    const wildcard = route.host.startsWith('*.');
    const base = wildcard ? route.host.slice(2) : route.host;
    const key = wildcard ? `svc_wild_${base}` : `svc_${route.host}`;
    const rule = wildcard ? `HostRegexp(\`^[^.]+\\.${escapeRegex(base)}$\`)` : `Host(\`${route.host}\`)`;
    routers.set(
      key,
      wildcard
        ? { entryPoints, middlewares: [RETRY], priority: 1, rule, service: key }
        : { entryPoints, middlewares: [RETRY], rule, service: key },
    );
    // A wildcard service checks health under the base: the pattern is no host a process answers.
    const healthCheck = { hostname: base, interval: '10s', path: CELL_HEALTH, timeout: '3s' };
    addServices(services, key, route.upstreams, healthCheck, prefer);
  }

  if (doc.api) {
    const denied = doc.api.denied.flatMap((p) => [`Path(\`${p}\`)`, `PathPrefix(\`${p}/\`)`]);
    const healthCheck = { interval: '10s', path: API_HEALTH, timeout: '3s' };
    for (const domain of doc.api.hosts) {
      const key = `svc_api_${domain}`;
      const host = `Host(\`${domain}\`)`;
      routers.set(`svc_apideny_${domain}`, {
        entryPoints,
        priority: 3,
        rule: `${host} && (${denied.join(' || ')})`,
        service: 'noop@internal',
      });
      routers.set(key, {
        entryPoints,
        middlewares: [RETRY],
        priority: 2,
        rule: [host, ...denied.map((m) => `!${m}`)].join(' && '),
        service: key,
      });
      addServices(services, key, doc.api.upstreams, healthCheck, prefer);
    }
  }

  if (routers.size === 0) return {};
  return {
    http: {
      middlewares: { [RETRY]: { retry: { attempts: 3 } } },
      routers: sortedRecord(routers),
      services: sortedRecord(services),
    },
  };
}

/** The served bytes; key order is already canonical by construction. */
export function serializeProxyb(config: ProxybConfig): string {
  return JSON.stringify(config);
}

// Failover only when the preferred node answers and someone else can take over; Traefik refuses a
// failover whose primary has no health check, so both halves carry the route's. The failover
// service gets none: in Traefik that option only reports status to a parent service, and its
// parent here is a router.
function addServices(
  services: Map<string, TraefikService>,
  key: string,
  upstreams: Upstream[],
  healthCheck: TraefikHealthCheck,
  prefer: string | undefined,
): void {
  const local = prefer === undefined ? [] : upstreams.filter((u) => u.node === prefer);
  if (local.length > 0 && local.length < upstreams.length) {
    const peers = upstreams.filter((u) => u.node !== prefer);
    services.set(key, { failover: { fallback: `${key}_peers`, service: `${key}_local` } });
    services.set(`${key}_local`, loadBalancer(local, healthCheck));
    services.set(`${key}_peers`, loadBalancer(peers, healthCheck));
    return;
  }
  services.set(key, loadBalancer(upstreams, healthCheck));
}

function loadBalancer(upstreams: Upstream[], healthCheck: TraefikHealthCheck): TraefikService {
  return { loadBalancer: { healthCheck, servers: upstreams.map((u) => ({ url: `http://${u.address}` })) } };
}

function sortedRecord<T>(map: Map<string, T>): Record<string, T> {
  const out: Record<string, T> = {};
  for (const name of [...map.keys()].sort(compare)) out[name] = map.get(name)!;
  return out;
}

// Valid bases only contain dots among the metacharacters; escaping all of them keeps a malformed
// base from widening the match.
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
