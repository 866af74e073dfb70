// Writes testdata/routing/*.json (docs/routing-vectors.md), the vectors docs/ingress.md's routing document
// and proxyb rendering are checked against on both sides of the TypeScript/Go seam.
//
// Every case names its input here. Where a case carries `hand` expectations they were written from
// the spec, not from the code: the script refuses to write a vector whose rendering disagrees with
// them. Cases without `hand` were rendered, then read and checked against the spec before commit.
//
//   scripts/with-node node scripts/write-routing-vectors.ts           write every file
//   scripts/with-node node scripts/write-routing-vectors.ts --check   fail if any file would change
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { renderProxyb } from '../src/routing/proxyb.ts';
import { renderRouting, resolvePrefer } from '../src/routing/render.ts';
import { type Resolution, resolveRequest } from '../src/routing/resolve.ts';
import type {
  FleetRouting,
  Route,
  RoutingInput,
  RoutingNode,
  RoutingProcess,
  Upstream,
} from '../src/routing/types.ts';

interface Case {
  name: string;
  description: string;
  input: RoutingInput;
  entryPoints?: string[];
  /** Prefer values besides none; `self` is always added. */
  prefers?: string[];
  lookups?: { host: string; path?: string; want?: Resolution }[];
  hand?: {
    expected?: FleetRouting;
    expectedPrefer?: Record<string, FleetRouting>;
    proxyb?: Record<string, unknown>;
  };
}

// ---- input helpers: node nK lives at 10.0.0.K, daemon port 7070 ----

const ip = (id: string): string => `10.0.0.${id.slice(1)}`;
const proc = (application: string, port: number, ready = true): RoutingProcess => ({
  application,
  port,
  ready,
});
const node = (id: string, processes: RoutingProcess[], extra: Partial<RoutingNode> = {}): RoutingNode => ({
  id,
  address: `${ip(id)}:7070`,
  state: 'ready',
  live: true,
  processes,
  ...extra,
});
const app = (name: string, extra: { blocked?: boolean; retired?: boolean } = {}) => ({
  name,
  blocked: extra.blocked ?? false,
  retired: extra.retired ?? false,
});
const claim = (host: string, application: string, wildcard = false) => ({ host, application, wildcard });
const fleet = (over: Partial<RoutingInput>): RoutingInput => ({
  nodes: [],
  applications: [],
  claims: [],
  platformDomains: ['svc.test'],
  apiPublic: false,
  selfNodeId: 'n1',
  ...over,
});

// ---- expectation helpers, for writing documents by hand ----

const up = (id: string, port: number): Upstream => ({ node: id, address: `${ip(id)}:${port}` });
const daemon = (id: string): Upstream => ({ node: id, address: `${ip(id)}:7070` });
const route = (host: string, application: string, ...upstreams: Upstream[]): Route => ({
  host,
  application,
  upstreams,
});
const DENIED = ['/v1/storage', '/v1/ingress/routes'];
const doc = (routes: Route[], api?: { hosts: string[]; upstreams: Upstream[] }): FleetRouting =>
  api
    ? { v: 1, routes, api: { hosts: api.hosts, upstreams: api.upstreams, denied: DENIED } }
    : { v: 1, routes };

const RETRY = { svc_retry: { retry: { attempts: 3 } } };
const hostRouter = (host: string, application: string, entryPoints = ['web']) => ({
  entryPoints,
  middlewares: [`svc_app_${application}`, 'svc_retry'],
  rule: `Host(\`${host}\`)`,
  service: `svc_${host}`,
});
const wildRouter = (base: string, regex: string, application: string, entryPoints = ['web']) => ({
  entryPoints,
  middlewares: [`svc_app_${application}`, 'svc_retry'],
  priority: 1,
  rule: `HostRegexp(\`${regex}\`)`,
  service: `svc_wild_${base}`,
});
const apiRouter = (domain: string, entryPoints = ['web']) => ({
  entryPoints,
  middlewares: ['svc_retry'],
  priority: 2,
  rule: `Host(\`${domain}\`) && !Path(\`/v1/storage\`) && !PathPrefix(\`/v1/storage/\`) && !Path(\`/v1/ingress/routes\`) && !PathPrefix(\`/v1/ingress/routes/\`)`,
  service: `svc_api_${domain}`,
});
const denyRouter = (domain: string, entryPoints = ['web']) => ({
  entryPoints,
  priority: 3,
  rule: `Host(\`${domain}\`) && (Path(\`/v1/storage\`) || PathPrefix(\`/v1/storage/\`) || Path(\`/v1/ingress/routes\`) || PathPrefix(\`/v1/ingress/routes/\`))`,
  service: 'noop@internal',
});
const cellLb = (hostname: string, ...addresses: string[]) => ({
  loadBalancer: {
    healthCheck: {
      hostname,
      interval: '10s',
      path: '/.well-known/cell/health',
      timeout: '3s',
      unhealthyInterval: '1s',
    },
    servers: addresses.map((a) => ({ url: `http://${a}` })),
  },
});
const apiLb = (...addresses: string[]) => ({
  loadBalancer: {
    healthCheck: { interval: '10s', path: '/.well-known/svc/health', timeout: '3s', unhealthyInterval: '1s' },
    servers: addresses.map((a) => ({ url: `http://${a}` })),
  },
});
const failover = (key: string) => ({ failover: { fallback: `${key}_peers`, service: `${key}_local` } });
// Every application a router names gets its headers middleware, in name order before svc_retry.
const http = (
  routers: Record<string, { rule: string; middlewares?: string[] }>,
  services: Record<string, unknown>,
) => {
  const named = Object.values(routers)
    .flatMap((r) => r.middlewares ?? [])
    .filter((m) => m.startsWith('svc_app_'));
  const middlewares: Record<string, unknown> = {};
  for (const m of [...new Set(named)].sort()) {
    middlewares[m] = { headers: { customRequestHeaders: { 'Svc-Application': m.slice('svc_app_'.length) } } };
  }
  return { http: { middlewares: { ...middlewares, ...RETRY }, routers, services } };
};

// ---- the cases ----

const cases: Case[] = [];

cases.push({
  name: '01-empty-fleet',
  description:
    'Hand-checked. No node runs anything and api.public is off: the document has v 1 and an empty routes array (never omitted), no api. With no router at all proxyb is the empty object {}, not empty maps.',
  input: fleet({}),
  lookups: [{ host: 'svc.test', want: { route: 'unknown', matched: '' } }],
  hand: { expected: doc([]), expectedPrefer: { self: doc([]) }, proxyb: { '': {}, self: {} } },
});

{
  const d = doc([route('hello.svc.test', 'hello', up('n1', 8001))], {
    hosts: ['svc.test'],
    upstreams: [daemon('n1')],
  });
  const p = http(
    {
      'svc_api_svc.test': apiRouter('svc.test'),
      'svc_apideny_svc.test': denyRouter('svc.test'),
      'svc_hello.svc.test': hostRouter('hello.svc.test', 'hello'),
    },
    {
      'svc_api_svc.test': apiLb('10.0.0.1:7070'),
      'svc_hello.svc.test': cellLb('hello.svc.test', '10.0.0.1:8001'),
    },
  );
  const hello = {
    route: 'ok' as const,
    matched: 'hello.svc.test',
    application: 'hello',
    upstreams: [up('n1', 8001)],
  };
  const api = { route: 'ok' as const, matched: 'svc.test', upstreams: [daemon('n1')] };
  cases.push({
    name: '02-single-app',
    description:
      'Hand-checked. One node runs one ready process of hello on public port 8001; the node advertises 10.0.0.1:7070. The route upstream is the advertised HOST with the process port (10.0.0.1:8001); the API upstream is the advertised address itself. api.public is on, so the bare platform apex svc.test is an API host with both denied prefixes. proxyb: host router without priority, API router priority 2 with the four negated matchers, deny router priority 3 to noop@internal without the retry middleware; health checks: cell health with hostname for the host service, svc health without hostname for the API. prefer=self names the only node: nothing moves and there is no failover (no other node answers). Lookups: host lowercased and port dropped; denied paths at a segment boundary only.',
    input: fleet({
      nodes: [node('n1', [proc('hello', 8001)])],
      applications: [app('hello')],
      apiPublic: true,
    }),
    lookups: [
      { host: 'HELLO.svc.test:8443', want: hello },
      { host: 'svc.test', path: '/v1/storage/objects/x', want: { route: 'denied', matched: 'svc.test' } },
      { host: 'svc.test', path: '/v1/storage', want: { route: 'denied', matched: 'svc.test' } },
      { host: 'svc.test', path: '/v1/ingress/routes/proxyb', want: { route: 'denied', matched: 'svc.test' } },
      { host: 'svc.test', path: '/v1/storagex', want: api },
      { host: 'svc.test', path: '/v1/state', want: api },
      { host: 'other.svc.test', want: { route: 'unknown', matched: '' } },
    ],
    hand: { expected: d, expectedPrefer: { self: d }, proxyb: { '': p, self: p } },
  });
}

{
  const d = (...ups: Upstream[]) => doc([route('hello.svc.test', 'hello', ...ups)]);
  const ep = ['web', 'websecure'];
  const routers = { 'svc_hello.svc.test': hostRouter('hello.svc.test', 'hello', ep) };
  const plain = http(routers, {
    'svc_hello.svc.test': cellLb('hello.svc.test', '10.0.0.1:8001', '10.0.0.2:8002'),
  });
  const fo = (local: string, peers: string) =>
    http(routers, {
      'svc_hello.svc.test': failover('svc_hello.svc.test'),
      'svc_hello.svc.test_local': cellLb('hello.svc.test', local),
      'svc_hello.svc.test_peers': cellLb('hello.svc.test', peers),
    });
  cases.push({
    name: '03-two-nodes-prefer',
    description:
      'Hand-checked. hello runs on n1 (port 8001) and n2 (port 8002); the input lists n2 first but the document sorts upstreams by node id (n1, n2). api.public is off so there is no api and no API router. The rendering node is n2: prefer=self moves n2 first; prefer=n1 leaves the fleet order; prefer=n9 names no node and changes nothing. proxyb: with no prefer (or n9) one load balancer over both servers in document order; with self or n1 a failover service whose primary <key>_local holds the preferred node and whose fallback <key>_peers holds the other, both halves carrying the host health check; the failover itself carries none. Two entry points appear on the router.',
    input: fleet({
      nodes: [node('n2', [proc('hello', 8002)]), node('n1', [proc('hello', 8001)])],
      applications: [app('hello')],
      selfNodeId: 'n2',
    }),
    entryPoints: ep,
    prefers: ['n1', 'n9'],
    lookups: [{ host: 'svc.test', want: { route: 'unknown', matched: '' } }],
    hand: {
      expected: d(up('n1', 8001), up('n2', 8002)),
      expectedPrefer: {
        self: d(up('n2', 8002), up('n1', 8001)),
        n1: d(up('n1', 8001), up('n2', 8002)),
        n9: d(up('n1', 8001), up('n2', 8002)),
      },
      proxyb: {
        '': plain,
        self: fo('10.0.0.2:8002', '10.0.0.1:8001'),
        n1: fo('10.0.0.1:8001', '10.0.0.2:8002'),
        n9: plain,
      },
    },
  });
}

{
  const d = doc(
    [route('blog.apps.example.org', 'blog', up('n1', 8001)), route('blog.svc.test', 'blog', up('n1', 8001))],
    { hosts: ['apps.example.org', 'svc.test'], upstreams: [daemon('n1')] },
  );
  const p = http(
    {
      'svc_api_apps.example.org': apiRouter('apps.example.org'),
      'svc_api_svc.test': apiRouter('svc.test'),
      'svc_apideny_apps.example.org': denyRouter('apps.example.org'),
      'svc_apideny_svc.test': denyRouter('svc.test'),
      'svc_blog.apps.example.org': hostRouter('blog.apps.example.org', 'blog'),
      'svc_blog.svc.test': hostRouter('blog.svc.test', 'blog'),
    },
    {
      'svc_api_apps.example.org': apiLb('10.0.0.1:7070'),
      'svc_api_svc.test': apiLb('10.0.0.1:7070'),
      'svc_blog.apps.example.org': cellLb('blog.apps.example.org', '10.0.0.1:8001'),
      'svc_blog.svc.test': cellLb('blog.svc.test', '10.0.0.1:8001'),
    },
  );
  cases.push({
    name: '04-multiple-platform-domains',
    description:
      'Hand-checked. Two platform domains given out of order (svc.test, apps.example.org). blog gets one route under each; routes and api.hosts are sorted in code-unit order, so apps.example.org comes first. Each apex gets its own API router, deny router and API service (svc_api_<domain>), all over the same daemon. proxyb keys are sorted: svc_api_... before svc_apideny_... because "_" (0x5F) sorts before "d".',
    input: fleet({
      nodes: [node('n1', [proc('blog', 8001)])],
      applications: [app('blog')],
      platformDomains: ['svc.test', 'apps.example.org'],
      apiPublic: true,
    }),
    hand: { expected: d, expectedPrefer: { self: d }, proxyb: { '': p, self: p } },
  });
}

cases.push({
  name: '05-api-public-off',
  description:
    'Generated, reviewed. The fleet of 04 with api.public off: the same two blog routes, no api member at all, and proxyb carries only the two host routers and services (no svc_api_ or svc_apideny_ router). The bare apexes resolve as unknown.',
  input: fleet({
    nodes: [node('n1', [proc('blog', 8001)])],
    applications: [app('blog')],
    platformDomains: ['svc.test', 'apps.example.org'],
    apiPublic: false,
  }),
  lookups: [{ host: 'svc.test', path: '/v1/storage' }, { host: 'blog.svc.test' }],
});

{
  const d = doc([route('web.svc.test', 'web', up('n1', 8001))], {
    hosts: ['svc.test'],
    upstreams: [daemon('n1')],
  });
  const p = http(
    {
      'svc_api_svc.test': apiRouter('svc.test'),
      'svc_apideny_svc.test': denyRouter('svc.test'),
      'svc_web.svc.test': hostRouter('web.svc.test', 'web'),
    },
    {
      'svc_api_svc.test': apiLb('10.0.0.1:7070'),
      'svc_web.svc.test': cellLb('web.svc.test', '10.0.0.1:8001'),
    },
  );
  cases.push({
    name: '06-draining-node',
    description:
      'Hand-checked. web runs ready on n1 and on n2, but n2 is draining: rule 3 drops it from the route and from api.upstreams. worker runs only on the draining n2, so it has no upstreams and is left out entirely (rule 2). The rendering node is the draining n2 itself: prefer=self and prefer=n2 name a node that answers nowhere, so nothing moves and proxyb has no failover.',
    input: fleet({
      nodes: [
        node('n1', [proc('web', 8001)]),
        node('n2', [proc('web', 8002), proc('worker', 8003)], { state: 'draining' }),
      ],
      applications: [app('web'), app('worker')],
      apiPublic: true,
      selfNodeId: 'n2',
    }),
    prefers: ['n2'],
    lookups: [{ host: 'worker.svc.test', want: { route: 'unknown', matched: '' } }],
    hand: { expected: d, expectedPrefer: { self: d, n2: d }, proxyb: { '': p, self: p, n2: p } },
  });
}

{
  const d = doc([route('web.svc.test', 'web', up('n1', 8001), up('n3', 8001))], {
    hosts: ['svc.test'],
    upstreams: [daemon('n1'), daemon('n3')],
  });
  const dSelf = doc([route('web.svc.test', 'web', up('n3', 8001), up('n1', 8001))], {
    hosts: ['svc.test'],
    upstreams: [daemon('n3'), daemon('n1')],
  });
  cases.push({
    name: '07-dead-node',
    description:
      'Hand-checked. n2 stopped beating (live false) although its record still lists ready processes: it is dropped from web and from api.upstreams, and only-on-2 (which ran only there) is absent. A live node in state starting (n3) counts like ready for both routes and the API. prefer=self (n3) moves n3 first on the route and on the API upstreams; prefer=n2 names a dead node and changes nothing.',
    input: fleet({
      nodes: [
        node('n1', [proc('web', 8001)]),
        node('n2', [proc('web', 8001), proc('only-on-2', 8002)], { live: false }),
        node('n3', [proc('web', 8001)], { state: 'starting' }),
      ],
      applications: [app('web'), app('only-on-2')],
      apiPublic: true,
      selfNodeId: 'n3',
    }),
    prefers: ['n2'],
    hand: { expected: d, expectedPrefer: { self: dSelf, n2: d } },
  });
}

cases.push({
  name: '08-process-not-ready',
  description:
    'Generated, reviewed. alpha is ready on n1 but not yet on n2, so only n1 is an upstream and prefer=n2 causes no failover in proxyb. beta has processes on both nodes, none ready: it is absent (rule 2), although its claim beta.example exists; the claimed host resolves unknown.',
  input: fleet({
    nodes: [
      node('n1', [proc('alpha', 8001), proc('beta', 8002, false)]),
      node('n2', [proc('alpha', 8001, false), proc('beta', 8002, false)]),
    ],
    applications: [app('alpha'), app('beta')],
    claims: [claim('beta.example', 'beta')],
  }),
  prefers: ['n2'],
  lookups: [{ host: 'beta.example' }, { host: 'alpha.svc.test' }],
});

{
  const d = doc([route('ok.svc.test', 'ok', up('n1', 8003))]);
  cases.push({
    name: '09-blocked-application',
    description:
      'Hand-checked. banned is blocked but a node still reports a ready process for it (the supervisor has not stopped it yet): it is never routed, neither its platform host nor its custom domain banned.example nor its wildcard key *.banned.example; banned-dev, its serving env application, gets no env route under banned.example because the holder has no upstreams, but keeps its own platform host. ok is unaffected. Only ok and banned-dev routes remain.',
    input: fleet({
      nodes: [node('n1', [proc('banned', 8001), proc('banned-dev', 8002), proc('ok', 8003)])],
      applications: [app('banned', { blocked: true }), app('banned-dev'), app('ok')],
      claims: [claim('banned.example', 'banned', true)],
    }),
    lookups: [
      { host: 'banned.example', want: { route: 'unknown', matched: '' } },
      { host: 'dev.banned.example', want: { route: 'unknown', matched: '' } },
    ],
    hand: {
      expected: doc([route('banned-dev.svc.test', 'banned-dev', up('n1', 8002)), ...d.routes]),
    },
  });
}

cases.push({
  name: '10-retired-application',
  description:
    'Generated, reviewed. old is retired (and still has a ready process on n1 and n2); it is never routed, nor is its claimed domain old.example. new keeps its route on both nodes. Only new.svc.test remains.',
  input: fleet({
    nodes: [
      node('n1', [proc('old', 8001), proc('new', 8002)]),
      node('n2', [proc('old', 8001), proc('new', 8002)]),
    ],
    applications: [app('old', { retired: true }), app('new')],
    claims: [claim('old.example', 'old')],
  }),
  lookups: [{ host: 'old.example' }, { host: 'old.svc.test' }],
});

cases.push({
  name: '11-process-without-application',
  description:
    'Generated, reviewed. n1 reports a ready process for ghost, which is not in the registry (deleted; the reaper has yet to stop it). A process alone never creates a route: only known, unblocked, unretired applications are routed, so only real.svc.test appears.',
  input: fleet({
    nodes: [node('n1', [proc('ghost', 8001), proc('real', 8002)])],
    applications: [app('real')],
  }),
});

{
  const ups = [up('n1', 8001), up('n2', 8001)];
  const d = doc([
    route('shop.example', 'shop', ...ups),
    route('shop.svc.test', 'shop', ...ups),
    route('www.shop.example', 'shop', ...ups),
  ]);
  cases.push({
    name: '12-custom-domains',
    description:
      'Hand-checked. shop claims shop.example and www.shop.example without subdomains: one route each, same upstreams as its platform host, and no *.shop.example key. idle claims idle.example but runs nowhere, so its claim names nothing. A host one label under a base that is not wildcard-claimed resolves unknown.',
    input: fleet({
      nodes: [node('n1', [proc('shop', 8001)]), node('n2', [proc('shop', 8001)])],
      applications: [app('shop'), app('idle')],
      claims: [
        claim('www.shop.example', 'shop'),
        claim('shop.example', 'shop'),
        claim('idle.example', 'idle'),
      ],
    }),
    lookups: [
      { host: 'cdn.shop.example', want: { route: 'unknown', matched: '' } },
      { host: 'idle.example', want: { route: 'unknown', matched: '' } },
    ],
    hand: { expected: d },
  });
}

{
  const shop = up('n1', 8001);
  const dev = up('n1', 8002);
  const staging = up('n2', 8003);
  const d = doc([
    route('*.shop.example', 'shop', shop),
    route('dev.shop.example', 'shop-dev', dev),
    route('shop-dev.svc.test', 'shop-dev', dev),
    route('shop-staging.svc.test', 'shop-staging', staging),
    route('shop.example', 'shop', shop),
    route('shop.svc.test', 'shop', shop),
    route('staging.shop.example', 'shop-staging', staging),
  ]);
  const p = http(
    {
      'svc_dev.shop.example': hostRouter('dev.shop.example', 'shop-dev'),
      'svc_shop-dev.svc.test': hostRouter('shop-dev.svc.test', 'shop-dev'),
      'svc_shop-staging.svc.test': hostRouter('shop-staging.svc.test', 'shop-staging'),
      'svc_shop.example': hostRouter('shop.example', 'shop'),
      'svc_shop.svc.test': hostRouter('shop.svc.test', 'shop'),
      'svc_staging.shop.example': hostRouter('staging.shop.example', 'shop-staging'),
      'svc_wild_shop.example': wildRouter('shop.example', '^[^.]+\\.shop\\.example$', 'shop'),
    },
    {
      'svc_dev.shop.example': cellLb('dev.shop.example', '10.0.0.1:8002'),
      'svc_shop-dev.svc.test': cellLb('shop-dev.svc.test', '10.0.0.1:8002'),
      'svc_shop-staging.svc.test': cellLb('shop-staging.svc.test', '10.0.0.2:8003'),
      'svc_shop.example': cellLb('shop.example', '10.0.0.1:8001'),
      'svc_shop.svc.test': cellLb('shop.svc.test', '10.0.0.1:8001'),
      'svc_staging.shop.example': cellLb('staging.shop.example', '10.0.0.2:8003'),
      'svc_wild_shop.example': cellLb('shop.example', '10.0.0.1:8001'),
    },
  );
  cases.push({
    name: '13-wildcard-claim-env-routes',
    description:
      'Hand-checked. shop claims shop.example with subdomains. Routes, in rule 4 order: platform hosts of shop, shop-dev, shop-staging; the claimed base shop.example; env routes dev.shop.example -> shop-dev and staging.shop.example -> shop-staging (each with its own upstreams, since <holder>-<env> is serving); then the key *.shop.example -> shop. shop-old is not running, so old.shop.example is not named and falls to the wildcard. The document sorts in code-unit order: "*" (0x2A) first, and shop-dev.svc.test before shop.example because "-" (0x2D) < "." (0x2E). proxyb: svc_wild_shop.example with priority 1, a HostRegexp of exactly one label under the base (one backslash before each dot in the rule string), health check hostname = the base. Lookups show rule 7: one label below the base hits the key, two labels below it hit nothing.',
    input: fleet({
      nodes: [
        node('n1', [proc('shop', 8001), proc('shop-dev', 8002)]),
        node('n2', [proc('shop-staging', 8003)]),
      ],
      applications: [app('shop'), app('shop-dev'), app('shop-staging'), app('shop-old')],
      claims: [claim('shop.example', 'shop', true)],
    }),
    lookups: [
      {
        host: 'staging.shop.example',
        want: {
          route: 'ok',
          matched: 'staging.shop.example',
          application: 'shop-staging',
          upstreams: [staging],
        },
      },
      {
        host: 'old.shop.example',
        want: { route: 'ok', matched: '*.shop.example', application: 'shop', upstreams: [shop] },
      },
      {
        host: 'Anything.Shop.Example:443',
        want: { route: 'ok', matched: '*.shop.example', application: 'shop', upstreams: [shop] },
      },
      { host: 'a.b.shop.example', want: { route: 'unknown', matched: '' } },
      {
        host: 'shop.example',
        want: { route: 'ok', matched: 'shop.example', application: 'shop', upstreams: [shop] },
      },
    ],
    hand: { expected: d, expectedPrefer: { self: d }, proxyb: { '': p, self: p } },
  });
}

{
  const shop = up('n1', 8001);
  const promo = up('n1', 8002);
  const sale = up('n1', 8003);
  const d = doc([
    route('*.shop.example', 'shop', shop),
    route('promo.svc.test', 'promo', promo),
    route('sale.shop.example', 'promo', promo),
    route('shop-sale.svc.test', 'shop-sale', sale),
    route('shop.example', 'shop', shop),
    route('shop.svc.test', 'shop', shop),
  ]);
  cases.push({
    name: '14-exact-claim-beats-wildcard',
    description:
      'Hand-checked. shop holds shop.example with subdomains; promo holds the exact claim sale.shop.example (left over from before the wildcard, or a race the claim rule lost). shop-sale is serving, so the env class would name sale.shop.example -> shop-sale, but the exact-claim class comes first and wins: sale.shop.example -> promo. shop-sale keeps its platform host. The request lookups show an exact route beating the enclosing *.shop.example key.',
    input: fleet({
      nodes: [node('n1', [proc('shop', 8001), proc('promo', 8002), proc('shop-sale', 8003)])],
      applications: [app('shop'), app('promo'), app('shop-sale')],
      claims: [claim('shop.example', 'shop', true), claim('sale.shop.example', 'promo')],
    }),
    lookups: [
      {
        host: 'sale.shop.example',
        want: { route: 'ok', matched: 'sale.shop.example', application: 'promo', upstreams: [promo] },
      },
      {
        host: 'other.shop.example',
        want: { route: 'ok', matched: '*.shop.example', application: 'shop', upstreams: [shop] },
      },
    ],
    hand: { expected: d },
  });
}

{
  const hello = up('n1', 8001);
  const evil = up('n1', 8002);
  const d = doc(
    [
      route('evil-x.svc.test', 'evil-x', up('n1', 8003)),
      route('evil.svc.test', 'evil', evil),
      route('hello.svc.test', 'hello', hello),
    ],
    {
      hosts: ['svc.test'],
      upstreams: [daemon('n1')],
    },
  );
  cases.push({
    name: '15-claim-never-shadows-platform',
    description:
      "Hand-checked. The registry holds claims by evil that break the claim rule because they sit at or under the platform domain svc.test (left from before svc.test became a platform domain): hello.svc.test, ghost.svc.test, and the apex svc.test claimed with its subdomains. All are ignored: hello.svc.test stays hello's platform host; ghost.svc.test is not taken even though ghost is not running; svc.test remains the API host; there is no *.svc.test (rule 5), and evil-x, although serving, gets no env route x.svc.test from that claim. evil and evil-x keep only their own platform hosts.",
    input: fleet({
      nodes: [node('n1', [proc('hello', 8001), proc('evil', 8002), proc('evil-x', 8003)])],
      applications: [app('hello'), app('evil'), app('evil-x'), app('ghost')],
      claims: [
        claim('hello.svc.test', 'evil'),
        claim('ghost.svc.test', 'evil'),
        claim('svc.test', 'evil', true),
      ],
      apiPublic: true,
    }),
    lookups: [
      {
        host: 'hello.svc.test',
        want: { route: 'ok', matched: 'hello.svc.test', application: 'hello', upstreams: [hello] },
      },
      { host: 'ghost.svc.test', want: { route: 'unknown', matched: '' } },
      { host: 'svc.test', path: '/v1/storage', want: { route: 'denied', matched: 'svc.test' } },
      { host: 'x.svc.test', want: { route: 'unknown', matched: '' } },
    ],
    hand: { expected: d },
  });
}

{
  const api = up('n1', 8001);
  const docs = up('n1', 8002);
  const d = doc(
    [
      route('api.api.svc.test', 'api', api),
      route('api.svc.test', 'api', api),
      route('docs.api.svc.test', 'docs', docs),
      route('docs.svc.test', 'docs', docs),
    ],
    { hosts: ['svc.test'], upstreams: [daemon('n1')] },
  );
  const p = http(
    {
      'svc_api.api.svc.test': hostRouter('api.api.svc.test', 'api'),
      'svc_api.svc.test': hostRouter('api.svc.test', 'api'),
      'svc_api_svc.test': apiRouter('svc.test'),
      'svc_apideny_svc.test': denyRouter('svc.test'),
      'svc_docs.api.svc.test': hostRouter('docs.api.svc.test', 'docs'),
      'svc_docs.svc.test': hostRouter('docs.svc.test', 'docs'),
    },
    {
      'svc_api.api.svc.test': cellLb('api.api.svc.test', '10.0.0.1:8001'),
      'svc_api.svc.test': cellLb('api.svc.test', '10.0.0.1:8001'),
      'svc_api_svc.test': apiLb('10.0.0.1:7070'),
      'svc_docs.api.svc.test': cellLb('docs.api.svc.test', '10.0.0.1:8002'),
      'svc_docs.svc.test': cellLb('docs.svc.test', '10.0.0.1:8002'),
    },
  );
  cases.push({
    name: '16-api-host-collision',
    description:
      'Hand-checked. Platform domains svc.test and api.svc.test, api.public on. The application named api has the platform host api.svc.test, which is also the bare apex of the second platform domain: rule 6, the application route wins, so api.hosts is only ["svc.test"] and there is no svc_api_api.svc.test router. Every application also gets a host under api.svc.test (api.api.svc.test, docs.api.svc.test). proxyb key order: "svc_api." < "svc_api_" < "svc_apideny_" since "." (0x2E) < "_" (0x5F) < "d".',
    input: fleet({
      nodes: [node('n1', [proc('api', 8001), proc('docs', 8002)])],
      applications: [app('api'), app('docs')],
      platformDomains: ['svc.test', 'api.svc.test'],
      apiPublic: true,
    }),
    lookups: [
      {
        host: 'api.svc.test',
        path: '/v1/storage',
        want: { route: 'ok', matched: 'api.svc.test', application: 'api', upstreams: [api] },
      },
    ],
    hand: { expected: d, expectedPrefer: { self: d }, proxyb: { '': p, self: p } },
  });
}

{
  const web = up('n1', 8001);
  const webApps = up('n1', 8002);
  const d = doc([
    route('*.example.com', 'web', web),
    route('apps.example.com', 'web-apps', webApps),
    route('example.com', 'web', web),
    route('web-apps.apps.example.com', 'web-apps', webApps),
    route('web.apps.example.com', 'web', web),
  ]);
  cases.push({
    name: '17-api-apex-taken-by-env-route',
    description:
      'Hand-checked. The only platform domain is apps.example.com; web claims example.com with subdomains (legal: the claim is above the platform domain, not under it). web-apps is serving, so its env route apps.example.com equals the platform apex: rule 6, the application route wins. With every apex taken there is no API host left and the api member is omitted (an api naming no host would route nothing), although api.public is on. The web-apps platform host web-apps.apps.example.com sorts before web.apps.example.com ("-" < ".").',
    input: fleet({
      nodes: [node('n1', [proc('web', 8001), proc('web-apps', 8002)])],
      applications: [app('web'), app('web-apps')],
      claims: [claim('example.com', 'web', true)],
      platformDomains: ['apps.example.com'],
      apiPublic: true,
    }),
    lookups: [
      {
        host: 'apps.example.com',
        path: '/v1/storage',
        want: { route: 'ok', matched: 'apps.example.com', application: 'web-apps', upstreams: [webApps] },
      },
      { host: 'x.apps.example.com', want: { route: 'unknown', matched: '' } },
    ],
    hand: { expected: d },
  });
}

{
  // Three nodes; self is n3. a runs everywhere, b only on n2, c on n1 and n3.
  const a = [up('n1', 8001), up('n2', 8001), up('n3', 8001)];
  const b = [up('n2', 8002)];
  const c = [up('n1', 8003), up('n3', 8003)];
  const daemons = [daemon('n1'), daemon('n2'), daemon('n3')];
  const mk = (aa: Upstream[], cc: Upstream[], dd: Upstream[]) =>
    doc([route('a.svc.test', 'a', ...aa), route('b.svc.test', 'b', ...b), route('c.svc.test', 'c', ...cc)], {
      hosts: ['svc.test'],
      upstreams: dd,
    });
  const fleetOrder = mk(a, c, daemons);
  const selfDoc = mk([a[2], a[0], a[1]], [c[1], c[0]], [daemons[2], daemons[0], daemons[1]]);
  const n2Doc = mk([a[1], a[0], a[2]], c, [daemons[1], daemons[0], daemons[2]]);
  const routers = {
    'svc_a.svc.test': hostRouter('a.svc.test', 'a'),
    'svc_api_svc.test': apiRouter('svc.test'),
    'svc_apideny_svc.test': denyRouter('svc.test'),
    'svc_b.svc.test': hostRouter('b.svc.test', 'b'),
    'svc_c.svc.test': hostRouter('c.svc.test', 'c'),
  };
  const plain = http(routers, {
    'svc_a.svc.test': cellLb('a.svc.test', '10.0.0.1:8001', '10.0.0.2:8001', '10.0.0.3:8001'),
    'svc_api_svc.test': apiLb('10.0.0.1:7070', '10.0.0.2:7070', '10.0.0.3:7070'),
    'svc_b.svc.test': cellLb('b.svc.test', '10.0.0.2:8002'),
    'svc_c.svc.test': cellLb('c.svc.test', '10.0.0.1:8003', '10.0.0.3:8003'),
  });
  const selfP = http(routers, {
    'svc_a.svc.test': failover('svc_a.svc.test'),
    'svc_a.svc.test_local': cellLb('a.svc.test', '10.0.0.3:8001'),
    'svc_a.svc.test_peers': cellLb('a.svc.test', '10.0.0.1:8001', '10.0.0.2:8001'),
    'svc_api_svc.test': failover('svc_api_svc.test'),
    'svc_api_svc.test_local': apiLb('10.0.0.3:7070'),
    'svc_api_svc.test_peers': apiLb('10.0.0.1:7070', '10.0.0.2:7070'),
    'svc_b.svc.test': cellLb('b.svc.test', '10.0.0.2:8002'),
    'svc_c.svc.test': failover('svc_c.svc.test'),
    'svc_c.svc.test_local': cellLb('c.svc.test', '10.0.0.3:8003'),
    'svc_c.svc.test_peers': cellLb('c.svc.test', '10.0.0.1:8003'),
  });
  const n2P = http(routers, {
    'svc_a.svc.test': failover('svc_a.svc.test'),
    'svc_a.svc.test_local': cellLb('a.svc.test', '10.0.0.2:8001'),
    'svc_a.svc.test_peers': cellLb('a.svc.test', '10.0.0.1:8001', '10.0.0.3:8001'),
    'svc_api_svc.test': failover('svc_api_svc.test'),
    'svc_api_svc.test_local': apiLb('10.0.0.2:7070'),
    'svc_api_svc.test_peers': apiLb('10.0.0.1:7070', '10.0.0.3:7070'),
    'svc_b.svc.test': cellLb('b.svc.test', '10.0.0.2:8002'),
    'svc_c.svc.test': cellLb('c.svc.test', '10.0.0.1:8003', '10.0.0.3:8003'),
  });
  cases.push({
    name: '18-prefer-variants',
    description:
      'Hand-checked. Three nodes, rendered by n3, api.public on. a runs on all three, b only on n2, c on n1 and n3. Fleet order is by node id. prefer=self (n3) moves n3 first on a, c and the API upstreams, the rest keep their order (n1 before n2); b has no n3 upstream and is unchanged. prefer=n2 moves n2 first on a, b (already first) and the API; c has no n2 and is unchanged. prefer=n7 (no such node) and prefer=none (the adapter never sends "none"; if it arrives it is just a node id that names nobody) change nothing. proxyb: a failover wherever the preferred node answers AND another node does (a, c and the API for self; a and the API for n2), with <key>_local holding the preferred node and <key>_peers the rest in document order; b stays one load balancer because only n2 answers (prefer=n2 answers alone: no failover). The API failover halves carry the API health check.',
    input: fleet({
      nodes: [
        node('n3', [proc('c', 8003), proc('a', 8001)]),
        node('n1', [proc('a', 8001), proc('c', 8003)]),
        node('n2', [proc('b', 8002), proc('a', 8001)]),
      ],
      applications: [app('c'), app('b'), app('a')],
      apiPublic: true,
      selfNodeId: 'n3',
    }),
    prefers: ['n2', 'n7', 'none'],
    hand: {
      expected: fleetOrder,
      expectedPrefer: { self: selfDoc, n2: n2Doc, n7: fleetOrder, none: fleetOrder },
      proxyb: { '': plain, self: selfP, n2: n2P, n7: plain, none: plain },
    },
  });
}

cases.push({
  name: '19-several-processes-on-one-node',
  description:
    'Generated, reviewed. n1 runs two ready processes of app (ports 8002 and 8001, listed in that order) and n2 one. Upstreams are sorted by node id, then by address, so n1:8001, n1:8002, n2:8001. prefer=n1 keeps that order; prefer=n2 puts n2 first and keeps n1:8001 before n1:8002. In proxyb with prefer=self (n1) the _local half holds both n1 servers and _peers holds n2.',
  input: fleet({
    nodes: [node('n1', [proc('app', 8002), proc('app', 8001)]), node('n2', [proc('app', 8001)])],
    applications: [app('app')],
  }),
  prefers: ['n2'],
});

cases.push({
  name: '20-ipv6-addresses',
  description:
    'Generated, reviewed. Nodes advertise bracketed IPv6 literals ([fd00::1]:7070 and [fd00::2]:7070). A route upstream keeps the brackets and swaps the port ([fd00::1]:8001); the API upstream is the advertised address unchanged; proxyb server URLs are http://[fd00::1]:8001 and so on.',
  input: fleet({
    nodes: [
      node('n1', [proc('v6', 8001)], { address: '[fd00::1]:7070' }),
      node('n2', [proc('v6', 8001)], { address: '[fd00::2]:7070' }),
    ],
    applications: [app('v6')],
    apiPublic: true,
    selfNodeId: 'n2',
  }),
});

{
  const d = doc([route('shop-staging.svc.test', 'shop-staging', up('n1', 8002))]);
  cases.push({
    name: '21-env-holder-not-serving',
    description:
      "Hand-checked. shop holds shop.example with subdomains but is not running anywhere; shop-staging is serving. Rule 4 iterates applications with upstreams, and the env routes and the *.shop.example key belong to the holder's claim, so none is named: staging.shop.example, shop.example and *.shop.example are all absent. shop-staging keeps its own platform host. (Decision recorded in docs/routing-vectors.md.)",
    input: fleet({
      nodes: [node('n1', [proc('shop', 8001, false), proc('shop-staging', 8002)])],
      applications: [app('shop'), app('shop-staging')],
      claims: [claim('shop.example', 'shop', true)],
    }),
    lookups: [
      { host: 'staging.shop.example', want: { route: 'unknown', matched: '' } },
      { host: 'shop.example', want: { route: 'unknown', matched: '' } },
    ],
    hand: { expected: d },
  });
}

cases.push({
  name: '22-env-application-blocked',
  description:
    'Generated, reviewed. shop holds shop.example with subdomains and serves; shop-staging is blocked (its process still reports ready). No env route staging.shop.example and no platform host for shop-staging; a request for staging.shop.example therefore falls to the *.shop.example key and reaches shop, the holder.',
  input: fleet({
    nodes: [node('n1', [proc('shop', 8001), proc('shop-staging', 8002)])],
    applications: [app('shop'), app('shop-staging', { blocked: true })],
    claims: [claim('shop.example', 'shop', true)],
  }),
  lookups: [{ host: 'staging.shop.example' }],
});

cases.push({
  name: '23-nested-holders',
  description:
    'Generated, reviewed. shop holds shop.example and shop-eu holds eu.example, both with subdomains; shop, shop-eu and shop-eu-test serve. Env routes of shop: eu.shop.example -> shop-eu and eu-test.shop.example -> shop-eu-test (the env is everything after "shop-", one label even with a hyphen). Env route of shop-eu: test.eu.example -> shop-eu-test. Keys *.eu.example -> shop-eu and *.shop.example -> shop. A two-label env name cannot arise because application names have no dots.',
  input: fleet({
    nodes: [node('n1', [proc('shop', 8001), proc('shop-eu', 8002), proc('shop-eu-test', 8003)])],
    applications: [app('shop'), app('shop-eu'), app('shop-eu-test')],
    claims: [claim('shop.example', 'shop', true), claim('eu.example', 'shop-eu', true)],
  }),
  lookups: [{ host: 'test.eu.example' }, { host: 'x.eu.example' }, { host: 'eu-test.shop.example' }],
});

{
  const alpha = up('n1', 8001);
  const beta = up('n1', 8002);
  const alphaX = up('n1', 8003);
  const d = doc([
    route('*.a.example', 'alpha', alpha),
    route('*.dup.example', 'alpha', alpha),
    route('a.example', 'alpha', alpha),
    route('alpha-x.svc.test', 'alpha-x', alphaX),
    route('alpha.svc.test', 'alpha', alpha),
    route('beta.svc.test', 'beta', beta),
    route('both.example', 'alpha', alpha),
    route('dup.example', 'alpha', alpha),
    route('x.a.example', 'beta', beta),
    route('x.dup.example', 'alpha-x', alphaX),
  ]);
  cases.push({
    name: '24-first-writer-wins',
    description:
      "Hand-checked. Registry states the claim rule forbids but a race or a stale read can show, to pin the precedence down. alpha and beta both claim both.example: same class, smaller name first, alpha wins. Both claim dup.example with subdomains: alpha wins the exact dup.example, and the key *.dup.example (beta's duplicate key is dropped). alpha holds a.example with subdomains and alpha-x is serving, but beta claims x.a.example exactly: the exact-claim class beats the env class, x.a.example -> beta. Under dup.example, alpha-x also gives x.dup.example (env of holder alpha); beta has no beta-x, so nothing else competes. Each host appears once.",
    input: fleet({
      nodes: [node('n1', [proc('beta', 8002), proc('alpha', 8001), proc('alpha-x', 8003)])],
      applications: [app('beta'), app('alpha'), app('alpha-x')],
      claims: [
        claim('both.example', 'beta'),
        claim('both.example', 'alpha'),
        claim('dup.example', 'beta', true),
        claim('dup.example', 'alpha', true),
        claim('a.example', 'alpha', true),
        claim('x.a.example', 'beta'),
      ],
    }),
    hand: { expected: d },
  });
}

{
  const ep = ['web', 'websecure'];
  const d = doc([
    route('*.my-shop.co.uk', 'store', up('n1', 8001)),
    route('my-shop.co.uk', 'store', up('n1', 8001)),
  ]);
  const p = http(
    {
      'svc_my-shop.co.uk': hostRouter('my-shop.co.uk', 'store', ep),
      'svc_wild_my-shop.co.uk': wildRouter('my-shop.co.uk', '^[^.]+\\.my-shop\\.co\\.uk$', 'store', ep),
    },
    {
      'svc_my-shop.co.uk': cellLb('my-shop.co.uk', '10.0.0.1:8001'),
      'svc_wild_my-shop.co.uk': cellLb('my-shop.co.uk', '10.0.0.1:8001'),
    },
  );
  cases.push({
    name: '25-wildcard-regex-escaping',
    description:
      'Hand-checked. No platform domain (so no platform hosts and no api even though api.public is on). store holds my-shop.co.uk with subdomains. The wildcard router rule escapes every dot of the base and leaves the hyphen alone: every dot of the base is preceded by one backslash in the rule string (the JSON text doubles it). Both routers carry both entry points; the wildcard service health-checks with hostname my-shop.co.uk.',
    input: fleet({
      nodes: [node('n1', [proc('store', 8001)])],
      applications: [app('store')],
      claims: [claim('my-shop.co.uk', 'store', true)],
      platformDomains: [],
      apiPublic: true,
    }),
    entryPoints: ep,
    lookups: [{ host: 'www.my-shop.co.uk' }, { host: 'my-shopxco.uk' }],
    hand: { expected: d, expectedPrefer: { self: d }, proxyb: { '': p, self: p } },
  });
}

cases.push({
  name: '26-api-only',
  description:
    'Generated, reviewed. api.public on, two live nodes, no application serving. routes is empty but api is present (hosts ["svc.test"], both daemons), so proxyb is not {}: it holds the API router, the deny router and the API service; prefer=self (n2) makes that service a failover with n2 local and n1 as peer.',
  input: fleet({ nodes: [node('n1', []), node('n2', [])], apiPublic: true, selfNodeId: 'n2' }),
  lookups: [
    { host: 'svc.test', path: '/v1/ingress/routes' },
    { host: 'svc.test', path: '/v1/state' },
  ],
});

cases.push({
  name: '27-api-every-node-draining',
  description:
    'Generated, reviewed. api.public on, but the only live node is draining and the other is dead: no daemon may take API traffic, so api is omitted, and its process is not routed either. routes is empty and proxyb is {}.',
  input: fleet({
    nodes: [
      node('n1', [proc('web', 8001)], { state: 'draining' }),
      node('n2', [proc('web', 8001)], { live: false }),
    ],
    applications: [app('web')],
    apiPublic: true,
  }),
});

cases.push({
  name: '28-claim-for-idle-application',
  description:
    'Generated, reviewed. lazy claims lazy.example with subdomains but has no ready process (its only process is starting). Nothing is named for it: no platform host, no lazy.example, no *.lazy.example; every such request resolves unknown. busy, with a plain claim busy.example, is served.',
  input: fleet({
    nodes: [node('n1', [proc('lazy', 8001, false), proc('busy', 8002)])],
    applications: [app('lazy'), app('busy')],
    claims: [claim('lazy.example', 'lazy', true), claim('busy.example', 'busy')],
  }),
  lookups: [{ host: 'lazy.example' }, { host: 'www.lazy.example' }, { host: 'busy.example' }],
});

{
  const ups = [up('n1', 8001), up('n2', 8001)];
  const n10 = { node: 'n10', address: '10.0.0.10:8001' };
  const n9 = { node: 'n9', address: '10.0.0.9:8001' };
  // code-unit order: n1 < n10 < n2 < n9 ("0" sorts before "2").
  const sortedUps = [ups[0], n10, ups[1], n9];
  const d = doc([
    route('a-b.svc.test', 'a-b', ...sortedUps),
    route('a.svc.test', 'a', ...sortedUps),
    route('a0.svc.test', 'a0', ...sortedUps),
    route('ab.svc.test', 'ab', ...sortedUps),
  ]);
  const procs = [proc('ab', 8001), proc('a0', 8001), proc('a', 8001), proc('a-b', 8001)];
  cases.push({
    name: '29-code-unit-order',
    description:
      'Hand-checked. Sorting is by UTF-16 code unit, not locale: hosts a-b.svc.test, a.svc.test, a0.svc.test, ab.svc.test in that order ("-" 0x2D < "." 0x2E < "0" 0x30 < "b" 0x62; a locale sort would put a.svc.test first). Node ids n1, n10, n2, n9 sort in that order too ("0" < "2").',
    input: fleet({
      nodes: [
        node('n9', procs),
        node('n2', procs),
        node('n10', procs, { address: '10.0.0.10:7070' }),
        node('n1', procs),
      ],
      applications: [app('ab'), app('a0'), app('a'), app('a-b')],
    }),
    hand: { expected: d },
  });
}

cases.push({
  name: '30-mixed-fleet',
  description:
    'Generated, reviewed. Everything at once on three nodes (n2 draining, n3 rendering): two platform domains, api.public on, a wildcard holder with an env application, an exact claim, a blocked and a retired application with live processes, a not-ready process. Use it as a smoke test of a consumer: routes sorted, every host once, *.store.example present, api.hosts both apexes, api.upstreams n1 and n3 only. proxyb with self (n3) and n1 both produce failovers where both n1 and n3 answer.',
  input: fleet({
    nodes: [
      node('n1', [proc('store', 8001), proc('store-beta', 8002), proc('blog', 8003), proc('blocked', 8004)]),
      node('n2', [proc('store', 8001), proc('blog', 8003)], { state: 'draining' }),
      node('n3', [proc('store', 8001), proc('blog', 8003, false), proc('gone', 8005)]),
    ],
    applications: [
      app('store'),
      app('store-beta'),
      app('blog'),
      app('blocked', { blocked: true }),
      app('gone', { retired: true }),
    ],
    claims: [
      claim('store.example', 'store', true),
      claim('blog.example.net', 'blog'),
      claim('blocked.example', 'blocked'),
    ],
    platformDomains: ['svc.test', 'example.org'],
    apiPublic: true,
    selfNodeId: 'n3',
  }),
  prefers: ['n1', 'n2'],
  lookups: [
    { host: 'beta.store.example' },
    { host: 'api.store.example' },
    { host: 'blocked.example' },
    { host: 'example.org', path: '/v1/storage/list' },
  ],
});

// ---- writing ----

const dir = new URL('../testdata/routing/', import.meta.url);
const check = process.argv.includes('--check');
let stale = 0;

for (const c of cases) {
  const entryPoints = c.entryPoints ?? ['web'];
  const prefers = ['self', ...(c.prefers ?? [])];
  const expected = renderRouting(c.input);
  const expectedPrefer: Record<string, FleetRouting> = {};
  for (const p of prefers) expectedPrefer[p] = renderRouting(c.input, p);
  const proxyb: Record<string, unknown> = {};
  for (const p of ['', ...prefers]) {
    proxyb[p] = renderProxyb(renderRouting(c.input, p), {
      entryPoints,
      preferNode: resolvePrefer(p, c.input.selfNodeId),
    });
  }
  if (c.hand?.expected) assert.deepEqual(expected, c.hand.expected, `${c.name}: expected`);
  for (const [p, want] of Object.entries(c.hand?.expectedPrefer ?? {})) {
    assert.deepEqual(expectedPrefer[p], want, `${c.name}: expectedPrefer ${p}`);
  }
  for (const [p, want] of Object.entries(c.hand?.proxyb ?? {})) {
    assert.deepEqual(proxyb[p], want, `${c.name}: proxyb ${p}`);
  }
  const lookups = (c.lookups ?? []).map(({ host, path = '/', want }) => {
    const got = resolveRequest(expected, host, path);
    if (want) assert.deepEqual(got, want, `${c.name}: lookup ${host}${path}`);
    return { host, path, ...got };
  });

  const vector = {
    name: c.name,
    description: c.description,
    input: c.input,
    entryPoints,
    expected,
    expectedPrefer,
    proxyb,
    ...(lookups.length > 0 ? { lookups } : {}),
  };
  const text = `${JSON.stringify(vector, null, 2)}\n`;
  const file = new URL(`${c.name}.json`, dir);
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {}
  if (current === text) continue;
  stale++;
  if (check) console.error(`stale: ${c.name}.json`);
  else writeFileSync(file, text);
}

const known = new Set(cases.map((c) => `${c.name}.json`));
for (const f of readdirSync(dir)) {
  if (!f.endsWith('.json') || known.has(f)) continue;
  stale++;
  if (check) console.error(`unknown vector: ${f}`);
  else unlinkSync(new URL(f, dir));
}

if (check && stale > 0) process.exit(1);
console.log(`${cases.length} vectors${check ? ' checked' : `, ${stale} written or removed`}`);
