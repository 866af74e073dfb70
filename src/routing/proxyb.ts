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

const CELL_HEALTH = '/.well-known/cell/health';
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
  const sources: Source[] = [];
  const routers: Item[] = [];
  const services: Item[] = [];

  const add = (source: Source, routerKind: number) => {
    const index = sources.push(source) - 1;
    routers.push({ name: source.key, index, kind: routerKind });
    if (routerKind === DENY_ROUTER) return;
    let local = 0;
    if (prefer !== undefined) for (const u of source.upstreams) if (u.node === prefer) local++;
    // Failover only when the preferred node answers and someone else can take over.
    if (local > 0 && local < source.upstreams.length) {
      services.push({ name: source.key, index, kind: FAILOVER });
      services.push({ name: `${source.key}_local`, index, kind: LOCAL });
      services.push({ name: `${source.key}_peers`, index, kind: PEERS });
    } else {
      services.push({ name: source.key, index, kind: BALANCER });
    }
  };

  for (const route of doc.routes) {
    const wildcard = route.host.startsWith('*.');
    const base = wildcard ? route.host.slice(2) : route.host;
    const baseText = inner(base);
    // A wildcard service checks health under the base: the pattern is no host a process answers.
    const healthCheck = `{"hostname":"${baseText}","interval":"10s","path":"${CELL_HEALTH}","timeout":"3s"}`;
    if (wildcard) {
      const rule = JSON.stringify(`HostRegexp(\`^[^.]+\\.${escapeRegex(base)}$\`)`);
      const key = `svc_wild_${base}`;
      add(
        { key, keyText: `svc_wild_${baseText}`, rule, upstreams: route.upstreams, healthCheck },
        WILD_ROUTER,
      );
    } else {
      const rule = `"Host(\`${baseText}\`)"`;
      add(
        { key: `svc_${base}`, keyText: `svc_${baseText}`, rule, upstreams: route.upstreams, healthCheck },
        HOST_ROUTER,
      );
    }
  }

  if (doc.api) {
    const denied = doc.api.denied.flatMap((p) => [`Path(\`${p}\`)`, `PathPrefix(\`${p}/\`)`]);
    const healthCheck = `{"interval":"10s","path":"${API_HEALTH}","timeout":"3s"}`;
    const upstreams = doc.api.upstreams;
    for (const domain of doc.api.hosts) {
      const host = `Host(\`${domain}\`)`;
      const api = `svc_api_${domain}`;
      const apiRule = JSON.stringify([host, ...denied.map((m) => `!${m}`)].join(' && '));
      add({ key: api, keyText: inner(api), rule: apiRule, upstreams, healthCheck }, API_ROUTER);
      const deny = `svc_apideny_${domain}`;
      const denyRule = JSON.stringify(`${host} && (${denied.join(' || ')})`);
      add({ key: deny, keyText: inner(deny), rule: denyRule, upstreams: [], healthCheck }, DENY_ROUTER);
    }
  }

  if (routers.length === 0) return '{}';
  const byName = (a: Item, b: Item) => compare(a.name, b.name);
  routers.sort(byName);
  services.sort(byName);

  const out = new TextSink();
  out.add('{"http":{"middlewares":{"svc_retry":{"retry":{"attempts":3}}},"routers":{');
  for (let i = 0; i < routers.length; i++) {
    const source = sources[routers[i].index];
    out.add(`${i === 0 ? '"' : ',"'}${source.keyText}":${routerText(source, routers[i].kind, entryPoints)}`);
  }
  out.add('},"services":{');
  for (let i = 0; i < services.length; i++) {
    const { index, kind } = services[i];
    const source = sources[index];
    const suffix = kind === LOCAL ? '_local' : kind === PEERS ? '_peers' : '';
    out.add(`${i === 0 ? '"' : ',"'}${source.keyText}${suffix}":${serviceText(source, kind, prefer)}`);
  }
  out.add('}}}');
  return out.finish();
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
}

/** One name of the output, pointing at what it is written from. */
interface Item {
  name: string;
  index: number;
  kind: number;
}

const HOST_ROUTER = 0;
const WILD_ROUTER = 1;
const API_ROUTER = 2;
const DENY_ROUTER = 3;
const BALANCER = 0;
const FAILOVER = 1;
const LOCAL = 2;
const PEERS = 3;

// Keys in code-unit order: entryPoints, middlewares, priority, rule, service. Priorities: deny 3
// above API 2, wildcard 1 below everything, host routers unset. Deny routers go without the retry
// middleware: Traefik answers them itself.
function routerText(source: Source, kind: number, entryPoints: string): string {
  if (kind === DENY_ROUTER) {
    return `{"entryPoints":${entryPoints},"priority":3,"rule":${source.rule},"service":"noop@internal"}`;
  }
  const priority = kind === WILD_ROUTER ? ',"priority":1' : kind === API_ROUTER ? ',"priority":2' : '';
  return `{"entryPoints":${entryPoints},"middlewares":["svc_retry"]${priority},"rule":${source.rule},"service":"${source.keyText}"}`;
}

// Traefik refuses a failover whose primary has no health check, so both halves carry the
// source's. The failover service gets none: in Traefik that option only reports status to a
// parent service, and its parent here is a router.
function serviceText(source: Source, kind: number, prefer: string | undefined): string {
  if (kind === FAILOVER) {
    return `{"failover":{"fallback":"${source.keyText}_peers","service":"${source.keyText}_local"}}`;
  }
  let servers = '';
  for (const u of source.upstreams) {
    if ((kind === LOCAL && u.node !== prefer) || (kind === PEERS && u.node === prefer)) continue;
    servers += `${servers === '' ? '' : ','}{"url":"http://${inner(u.address)}"}`;
  }
  return `{"loadBalancer":{"healthCheck":${source.healthCheck},"servers":[${servers}]}}`;
}

// Collects the text in fixed-size buffers so that the pieces die young: keeping tens of thousands
// of small strings alive until one final join made garbage collection the largest cost.
class TextSink {
  static readonly SIZE = 1 << 20;
  full: Buffer[] = [];
  buffer = Buffer.allocUnsafe(TextSink.SIZE);
  length = 0;
  chunk = '';

  add(text: string): void {
    this.chunk += text;
    if (this.chunk.length >= 1 << 15) this.flush();
  }

  finish(): string {
    this.flush();
    if (this.full.length === 0) return this.buffer.toString('utf8', 0, this.length);
    const all = [...this.full, this.buffer.subarray(0, this.length)];
    return Buffer.concat(all).toString('utf8');
  }

  // A chunk never straddles two buffers, so no UTF-8 sequence is ever cut in half.
  private flush(): void {
    const size = Buffer.byteLength(this.chunk);
    if (this.length + size > this.buffer.length) {
      this.full.push(this.buffer.subarray(0, this.length));
      this.buffer = Buffer.allocUnsafe(Math.max(size, TextSink.SIZE));
      this.length = 0;
    }
    this.length += this.buffer.write(this.chunk, this.length);
    this.chunk = '';
  }
}

/** `text` as it appears inside a JSON string; valid hosts and addresses come back unchanged. */
function inner(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff))
      return JSON.stringify(text).slice(1, -1);
  }
  return text;
}

// Valid bases only contain dots among the metacharacters; escaping all of them keeps a malformed
// base from widening the match.
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
