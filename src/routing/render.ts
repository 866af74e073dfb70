// docs/ingress.md "The routing document", its rules, hosts and `prefer`. Refinements the spec leaves open are
// in docs/routing-vectors.md.
import { endsRun, joinRuns, type Run, type RunItems, samePieces } from './text.ts';
import type { ApiRouting, FleetRouting, Route, RoutingClaim, RoutingInput, Upstream } from './types.ts';

/** Path prefixes an ingress answers itself on an API host (docs/ingress.md "The routing document"). */
export const DENIED_PREFIXES: readonly string[] = ['/v1/storage', '/v1/ingress/routes'];

/**
 * Renders the fleet's routing document. Pure and deterministic: the same input, in any array
 * order, gives the same document. `prefer` is the query value: absent or empty keeps the fleet
 * order, `self` means `input.selfNodeId`, anything else is a node id taken verbatim.
 *
 * The document is frozen, and so is everything in it: an upstream, an application's upstream
 * list and a route that are unchanged since an earlier rendering are that rendering's very objects
 * (see "Kept between renderings" below), so serializeRouting and renderProxybBytes can keep the
 * text they wrote for them and an unchanged application costs a lookup, not a rewrite.
 */
export function renderRouting(input: RoutingInput, prefer?: string): FleetRouting {
  const preferNode = resolvePrefer(prefer, input.selfNodeId);
  const kept = keptFor(preferNode);
  const upstreams = servingUpstreams(input, preferNode, kept);
  // Array#sort without a comparator orders strings by UTF-16 code unit, like compare(), only faster.
  const serving = [...upstreams.keys()].sort();
  const platform = [...new Set(input.platformDomains.filter((d) => d !== ''))].sort();
  const claims = input.claims
    .filter((c) => upstreams.has(c.application) && !atOrUnder(c.host, platform))
    .sort((a, b) => compare(a.application, b.application) || compare(a.host, b.host));
  // Which application answers which host depends on these three alone; while they stay the same,
  // as they do from one pass to the next unless an application starts or stops serving or a
  // claim changes, the hosts need neither writing out nor sorting again.
  const last = kept.layout;
  const same =
    last !== undefined &&
    sameStrings(last.serving, serving) &&
    sameStrings(last.platform, platform) &&
    sameClaims(last.claims, claims);
  const layout = same ? last : hostLayout(serving, platform, claims);
  kept.layout = layout;

  // The hosts of one application share its upstream array.
  const routes: Route[] = [];
  for (let i = 0; i < layout.hosts.length; i++) {
    const application = layout.owners[i];
    const list = upstreams.get(application)!;
    const before = same ? layout.routes[i] : undefined;
    routes.push(
      before !== undefined && before.upstreams === list
        ? before
        : keptRoute(kept, layout.hosts[i], application, list),
    );
  }
  layout.routes = routes;
  layoutOf.set(routes, layout);
  forgetUnused(kept, routes, upstreams);
  const doc: FleetRouting = { v: 1, routes: Object.freeze(routes) as Route[] };
  const api = renderApi(input, platform, layout.owner, preferNode);
  if (api) doc.api = api;
  renderedDocuments.add(Object.freeze(doc));
  return doc;
}

/** Which application answers each host, and the routes last rendered from it, by host. */
interface Layout {
  serving: string[];
  platform: string[];
  claims: RoutingClaim[];
  /** Every routed host, sorted, and the application answering each. */
  hosts: string[];
  owners: string[];
  owner: Map<string, string>;
  routes: Route[];
  /** The distinct owners, sorted, once asked for. */
  applications?: readonly string[];
}

function hostLayout(serving: string[], platform: string[], claims: RoutingClaim[]): Layout {
  const owner = new Map<string, string>();
  // First writer wins, so the order of these passes is the precedence of rule 4: platform hosts,
  // then exact claims, then env hosts, then wildcard keys; inside a pass, the smaller name first.
  const write = (host: string, application: string): void => {
    if (!owner.has(host)) owner.set(host, application);
  };
  for (const name of serving) {
    for (const domain of platform) write(`${name}.${domain}`, name);
  }
  for (const claim of claims) write(claim.host, claim.application);
  const wildcards = uniqueWildcards(claims);
  for (const { host: base, application: holder } of wildcards) {
    for (const name of withPrefix(serving, `${holder}-`))
      write(`${name.slice(holder.length + 1)}.${base}`, name);
  }
  for (const { host: base, application: holder } of wildcards) write(`*.${base}`, holder);
  // Array#sort without a comparator orders strings by UTF-16 code unit, like compare(), only faster.
  const hosts = [...owner.keys()].sort();
  const owners = hosts.map((host) => owner.get(host)!);
  // Copies: the next rendering compares its claims with these, and the input's may be changed.
  const copies = claims.map(({ host, application, wildcard }) => ({ host, application, wildcard }));
  return { serving, platform, claims: copies, hosts, owners, owner, routes: [] };
}

function sameStrings(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameClaims(a: RoutingClaim[], b: RoutingClaim[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i].host !== b[i].host || a[i].application !== b[i].application || a[i].wildcard !== b[i].wildcard)
      return false;
  }
  return true;
}

/**
 * The served bytes: `JSON.stringify(doc)`. A document renderRouting returned is written from the
 * text kept for each of its routes (frozen, so the text cannot go stale); any other is stringified.
 */
export function serializeRouting(doc: FleetRouting): string {
  if (!renderedDocuments.has(doc)) return JSON.stringify(doc);
  const api = doc.api === undefined ? '' : `,"api":${JSON.stringify(doc.api)}`;
  if (doc.routes.length === 0) return `{"v":1,"routes":[]${api}}`;
  // Every route's text starts with the comma that separates it from the one before; the first
  // drops it. One join makes one flat string.
  const parts = ['{"v":1,"routes":['];
  joinRuns(doc.routes, routeItems, routeRuns, parts);
  parts[1] = parts[1].slice(1);
  parts.push(`]${api}}`);
  // Every piece the very one of a recent serialization: so are the bytes.
  for (const last of lastSerialized) if (samePieces(last.parts, parts)) return last.text;
  const text = parts.join('');
  lastSerialized.unshift({ parts, text });
  if (lastSerialized.length > KEPT_PREFERS) lastSerialized.pop();
  return text;
}

/** The last few serializations (one per `prefer` a node serves, as a rule), newest first. */
const lastSerialized: { parts: string[]; text: string }[] = [];

/** The routed applications of a document renderRouting made, each once, in code-unit order. */
export function routedApplications(doc: FleetRouting): readonly string[] | undefined {
  const layout = renderedDocuments.has(doc) ? layoutOf.get(doc.routes) : undefined;
  if (layout === undefined) return undefined;
  // Array#sort without a comparator orders strings by UTF-16 code unit, like compare(), only faster.
  layout.applications ??= Object.freeze([...new Set(layout.owners)].sort());
  return layout.applications;
}

/** Whether `route` is one renderRouting made and still keeps: frozen, with a frozen upstream list. */
export function isRenderedRoute(route: Route): boolean {
  for (const kept of keptByPrefer.values()) if (kept.routes.get(route.host) === route) return true;
  return false;
}

// Kept between renderings. The node renders the whole fleet every reconcile pass although from one
// pass to the next few applications change, so a rendering reuses the upstreams, upstream lists
// and routes of the last ones when they are equal (and the hosts' layout while no application
// started or stopped serving and no claim changed), and the writers keep the text of runs of
// routes keyed on those frozen objects (WeakMaps: the text lives as long as its routes) and give
// back the last bytes when every run is unchanged. Upstreams depend on nothing but the node and
// the port; lists and routes also on `prefer`, so those are kept per resolved `prefer`, for the
// few most recently rendered. What a rendering no longer uses is dropped once it outnumbers what
// it uses. The price is memory: about a copy of the served text plus the objects it is written
// from, per kept `prefer` (bench/RESULTS.md, Routing render, has the figures).

/** Resolved `prefer` values whose lists and routes are kept; others render from scratch. */
const KEPT_PREFERS = 4;

interface Kept {
  layout?: Layout;
  /** Application name to its sorted, prefer-ordered, frozen upstream list. */
  lists: Map<string, Upstream[]>;
  /** Host to its frozen route. */
  routes: Map<string, Route>;
}

const keptByPrefer = new Map<string | undefined, Kept>();
interface KeptNode {
  /** The node's address host and `:`, which every upstream address of it starts with. */
  prefix: string;
  /** The frozen upstream of each port seen on the node. */
  ports: Map<number, Upstream>;
}

const upstreamsByNode = new Map<string, KeptNode>();
const renderedDocuments = new WeakSet<FleetRouting>();
const routeRuns = new WeakMap<object, Run>();
const routeItems: RunItems<Route> = {
  id: (route) => route,
  ends: (route) => endsRun(route.host),
  write: writeRoutes,
};
const layoutOf = new WeakMap<Route[], Layout>();

function keptFor(preferNode: string | undefined): Kept {
  let kept = keptByPrefer.get(preferNode);
  if (kept === undefined) kept = { lists: new Map(), routes: new Map() };
  keptByPrefer.delete(preferNode); // re-inserted last: the most recently used
  keptByPrefer.set(preferNode, kept);
  if (keptByPrefer.size > KEPT_PREFERS) keptByPrefer.delete(keptByPrefer.keys().next().value);
  return kept;
}

function keptList(kept: Kept, application: string, list: Upstream[]): Upstream[] {
  const old = kept.lists.get(application);
  if (old !== undefined && old.length === list.length) {
    let i = 0;
    while (i < list.length && old[i] === list[i]) i++;
    if (i === list.length) return old;
  }
  kept.lists.set(application, Object.freeze(list) as Upstream[]);
  return list;
}

function keptRoute(kept: Kept, host: string, application: string, upstreams: Upstream[]): Route {
  const old = kept.routes.get(host);
  if (old !== undefined && old.application === application && old.upstreams === upstreams) return old;
  const route = Object.freeze({ host, application, upstreams });
  kept.routes.set(host, route);
  return route;
}

// Entries this rendering did not use are dropped once they outnumber those it used: an occasional
// rebuild of the maps instead of one every rendering.
function forgetUnused(kept: Kept, routes: Route[], lists: Map<string, Upstream[]>): void {
  if (kept.routes.size > 2 * routes.length + 64) kept.routes = new Map(routes.map((r) => [r.host, r]));
  if (kept.lists.size > 2 * lists.size + 64) kept.lists = new Map(lists);
}

// The routes of a rendered document are frozen objects with their keys in the served order, which
// is what JSON.stringify writes, natively and faster than anything written here.
function writeRoutes(routes: readonly Route[], start: number, end: number, out: string[]): void {
  out.push(',', JSON.stringify(routes.slice(start, end)).slice(1, -1));
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
function servingUpstreams(
  input: RoutingInput,
  preferNode: string | undefined,
  kept: Kept,
): Map<string, Upstream[]> {
  // One lookup per process: a routable application maps to its list, any other to null.
  const lists = new Map<string, Upstream[] | null>();
  for (const app of input.applications) {
    const ok = !app.blocked && !app.retired && lists.get(app.name) !== null;
    lists.set(app.name, ok ? [] : null);
  }
  // Visiting nodes in id order leaves most lists already sorted.
  for (const node of [...input.nodes].sort((a, b) => compare(a.id, b.id))) {
    if (!node.live || node.state === 'draining') continue;
    const { prefix, ports } = nodeUpstreams(node.id, node.address, node.processes.length);
    for (const proc of node.processes) {
      if (!proc.ready) continue;
      const list = lists.get(proc.application);
      if (!list) continue;
      let upstream = ports.get(proc.port);
      if (upstream === undefined) {
        upstream = Object.freeze({ node: node.id, address: prefix + proc.port });
        ports.set(proc.port, upstream);
      }
      list.push(upstream);
    }
  }
  if (upstreamsByNode.size > 2 * input.nodes.length + 16) {
    const ids = new Set(input.nodes.map((n) => n.id));
    for (const id of upstreamsByNode.keys()) if (!ids.has(id)) upstreamsByNode.delete(id);
  }
  // The same map, left with only the applications that have upstreams (a second map of ten
  // thousand entries is garbage collection work the render can do without).
  for (const [name, list] of lists) {
    if (list === null || list.length === 0) lists.delete(name);
    else lists.set(name, keptList(kept, name, preferFirst(sortUpstreams(list), preferNode)));
  }
  return lists as Map<string, Upstream[]>;
}

/** A node's kept upstreams by port; forgotten when its address changes or unused ports pile up. */
function nodeUpstreams(id: string, address: string, processes: number): KeptNode {
  const prefix = `${addressHost(address)}:`;
  const known = upstreamsByNode.get(id);
  if (known !== undefined && known.prefix === prefix && known.ports.size <= 2 * processes + 64) {
    return known;
  }
  const fresh: KeptNode = { prefix, ports: new Map() };
  upstreamsByNode.set(id, fresh);
  return fresh;
}

function sortUpstreams(list: Upstream[]): Upstream[] {
  let sorted = true;
  for (let i = 1; i < list.length && sorted; i++) sorted = upstreamOrder(list[i - 1], list[i]) < 0;
  if (sorted) return list;
  list.sort(upstreamOrder);
  return list.filter((u, i) => i === 0 || upstreamOrder(list[i - 1], u) !== 0);
}

function upstreamOrder(a: Upstream, b: Upstream): number {
  return compare(a.node, b.node) || compare(a.address, b.address);
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
  const ordered = preferFirst(upstreams, preferNode).map((u) => Object.freeze(u));
  return Object.freeze({
    hosts: Object.freeze(hosts) as string[],
    upstreams: Object.freeze(ordered) as Upstream[],
    denied: Object.freeze([...DENIED_PREFIXES]) as string[],
  });
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
