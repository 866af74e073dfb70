// docs/ingress.md "The routing document", its rules, hosts and `prefer`. Refinements the spec leaves open are
// in docs/routing-vectors.md.
import type { ApiRouting, FleetRouting, Route, RoutingInput, Upstream } from './types.ts';

/** Path prefixes an ingress answers itself on an API host (docs/ingress.md "The routing document"). */
export const DENIED_PREFIXES: readonly string[] = ['/v1/storage', '/v1/ingress/routes'];

/**
 * Renders the fleet's routing document. Pure and deterministic: the same input, in any array
 * order, gives the same document. `prefer` is the query value: absent or empty keeps the fleet
 * order, `self` means `input.selfNodeId`, anything else is a node id taken verbatim.
 */
export function renderRouting(input: RoutingInput, prefer?: string): FleetRouting {
  const preferNode = resolvePrefer(prefer, input.selfNodeId);
  const upstreams = servingUpstreams(input, preferNode);
  // Array#sort without a comparator orders strings by UTF-16 code unit, like compare(), only faster.
  const serving = [...upstreams.keys()].sort();
  const platform = [...new Set(input.platformDomains.filter((d) => d !== ''))].sort();
  const owner = new Map<string, string>();

  // First writer wins, so the order of these passes is the precedence of rule 4: platform hosts,
  // then exact claims, then env hosts, then wildcard keys; inside a pass, the smaller name first.
  const write = (host: string, application: string): void => {
    if (!owner.has(host)) owner.set(host, application);
  };

  for (const name of serving) {
    for (const domain of platform) write(`${name}.${domain}`, name);
  }

  const claims = input.claims
    .filter((c) => upstreams.has(c.application) && !atOrUnder(c.host, platform))
    .sort((a, b) => compare(a.application, b.application) || compare(a.host, b.host));
  for (const claim of claims) write(claim.host, claim.application);

  const wildcards = uniqueWildcards(claims);
  for (const { host: base, application: holder } of wildcards) {
    for (const name of withPrefix(serving, `${holder}-`))
      write(`${name.slice(holder.length + 1)}.${base}`, name);
  }
  for (const { host: base, application: holder } of wildcards) write(`*.${base}`, holder);

  // The hosts of one application share its upstream array: the document is read-only data.
  const routes: Route[] = [];
  for (const host of [...owner.keys()].sort()) {
    const application = owner.get(host)!;
    routes.push({ host, application, upstreams: upstreams.get(application)! });
  }
  const doc: FleetRouting = { v: 1, routes };
  const api = renderApi(input, platform, owner, preferNode);
  if (api) doc.api = api;
  return doc;
}

/** The served bytes. Key order is fixed by construction in renderRouting, so this is stable. */
export function serializeRouting(doc: FleetRouting): string {
  return JSON.stringify(doc);
}

/** What a `prefer` query value means: undefined for the fleet's own order. */
export function resolvePrefer(prefer: string | undefined, selfNodeId: string): string | undefined {
  if (prefer === undefined || prefer === '') return undefined;
  return prefer === 'self' ? selfNodeId : prefer;
}

/** Code-unit order, the order the spec means by "sorted" (not locale order). */
export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// Rule 3 and docs/api.md: only live, non-draining nodes count, only ready processes, and never a blocked
// or retired application. A process for an application the registry does not know is an orphan
// about to be reaped, not something to route to.
function servingUpstreams(input: RoutingInput, preferNode: string | undefined): Map<string, Upstream[]> {
  // One lookup per process: a routable application maps to its list, any other to null.
  const lists = new Map<string, Upstream[] | null>();
  for (const app of input.applications) {
    const ok = !app.blocked && !app.retired && lists.get(app.name) !== null;
    lists.set(app.name, ok ? [] : null);
  }
  // Visiting nodes in id order leaves most lists already sorted.
  for (const node of [...input.nodes].sort((a, b) => compare(a.id, b.id))) {
    if (!node.live || node.state === 'draining') continue;
    const prefix = `${addressHost(node.address)}:`;
    for (const proc of node.processes) {
      if (!proc.ready) continue;
      lists.get(proc.application)?.push({ node: node.id, address: prefix + proc.port });
    }
  }
  // The same map, left with only the applications that have upstreams (a second map of ten
  // thousand entries is garbage collection work the render can do without).
  for (const [name, list] of lists) {
    if (list === null || list.length === 0) lists.delete(name);
    else lists.set(name, preferFirst(sortUpstreams(list), preferNode));
  }
  return lists as Map<string, Upstream[]>;
}

function sortUpstreams(list: Upstream[]): Upstream[] {
  const order = (a: Upstream, b: Upstream) => compare(a.node, b.node) || compare(a.address, b.address);
  let sorted = true;
  for (let i = 1; i < list.length && sorted; i++) sorted = order(list[i - 1], list[i]) < 0;
  if (sorted) return list;
  list.sort(order);
  return list.filter((u, i) => i === 0 || order(list[i - 1], u) !== 0);
}

// The host part of an advertised `host:port`; a bracketed IPv6 literal keeps its brackets so that
// `host:port` stays parseable.
function addressHost(address: string): string {
  if (address.startsWith('[')) {
    const end = address.indexOf(']');
    if (end > 0) return address.slice(0, end + 1);
  }
  const colon = address.lastIndexOf(':');
  return colon < 0 ? address : address.slice(0, colon);
}

// A claim at or under a platform domain breaks the claim rule; it can only be left over from a
// change of platform domains, and honouring it would hand a platform host or an API apex to it.
function atOrUnder(host: string, platform: string[]): boolean {
  for (const domain of platform) {
    if (host === domain || host.endsWith(`.${domain}`)) return true;
  }
  return false;
}

// A holder claiming the same base twice (or two holders racing) must not produce duplicates; the
// claims are already in precedence order, so the first occurrence of a (base, holder) pair stays.
function uniqueWildcards(claims: RoutingInput['claims']): RoutingInput['claims'] {
  const seen = new Set<string>();
  const out: RoutingInput['claims'] = [];
  for (const claim of claims) {
    if (!claim.wildcard) continue;
    const key = `${claim.application} ${claim.host}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(claim);
  }
  return out;
}

/** Names in `sorted` that start with `prefix`, by binary search: they form one contiguous run. */
function withPrefix(sorted: string[], prefix: string): string[] {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < prefix) lo = mid + 1;
    else hi = mid;
  }
  let end = lo;
  while (end < sorted.length && sorted[end].startsWith(prefix)) end++;
  return sorted.slice(lo, end);
}

// Rule 6: an application route takes the host from the API. An api object that names no host or
// no daemon would route nothing, so it is left out like the spec's "does not publish".
function renderApi(
  input: RoutingInput,
  platform: string[],
  routes: Map<string, string>,
  preferNode: string | undefined,
): ApiRouting | undefined {
  if (!input.apiPublic) return undefined;
  const hosts = platform.filter((d) => !routes.has(d));
  const daemons = input.nodes
    .filter((n) => n.live && n.state !== 'draining')
    .map((n) => ({ node: n.id, address: n.address }));
  const upstreams = sortUpstreams(daemons);
  if (hosts.length === 0 || upstreams.length === 0) return undefined;
  return { hosts, upstreams: preferFirst(upstreams, preferNode), denied: [...DENIED_PREFIXES] };
}

// The preferred node's upstreams first, each part in its order. Runs once per application, so it
// allocates nothing when the list is already in that order (no such upstream, or all in front).
function preferFirst(list: Upstream[], node: string | undefined): Upstream[] {
  if (node === undefined) return list;
  let front = 0;
  while (front < list.length && list[front].node === node) front++;
  let next = front;
  while (next < list.length && list[next].node !== node) next++;
  if (next === list.length) return list;
  const out = list.slice(0, front);
  for (let i = front; i < list.length; i++) if (list[i].node === node) out.push(list[i]);
  for (let i = front; i < list.length; i++) if (list[i].node !== node) out.push(list[i]);
  return out;
}
