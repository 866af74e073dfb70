// docs/ingress.md "The routing document" and "The Traefik format": invariants that must hold
// for every fleet, checked on generated fleets whose small name pools force collisions.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { renderProxyb, renderProxybBytes, serializeProxyb } from './proxyb.ts';
import { compare, renderRouting, resolvePrefer, serializeRouting } from './render.ts';
import { endsRun } from './text.ts';
import type { FleetRouting, RoutingInput, Upstream } from './types.ts';

const APPS = ['a', 'b', 'a-b', 'a-x', 'b-x', 'shop', 'shop-dev', 'shop-dev-x', 'api', 'x', 'x-apps'];
const PLATFORM = ['svc.test', 'svc.test.net', 'api.svc.test', 'example.com', 'apps.example.com'];
const HOSTS = [
  'example.com',
  'x.example.com',
  'a.example.com',
  'shop.example',
  'dev.shop.example',
  'svc.test',
  'a.svc.test',
  'x.apps.example.com',
  'shop.example.org',
  'shop.example.org.uk',
];
const NODES = ['n1', 'n2', 'n3', 'n10'];

const inputArb: fc.Arbitrary<RoutingInput> = fc.record({
  nodes: fc.uniqueArray(
    fc.record({
      id: fc.constantFrom(...NODES),
      address: fc.constantFrom('10.0.0.1:7070', '10.0.0.2:7070', '[fd00::1]:7070', 'node.lan:7070'),
      state: fc.constantFrom('starting' as const, 'ready' as const, 'draining' as const),
      live: fc.boolean(),
      processes: fc.array(
        fc.record({
          application: fc.constantFrom(...APPS, 'ghost'),
          port: fc.integer({ min: 8000, max: 8003 }),
          ready: fc.boolean(),
        }),
        { maxLength: 6 },
      ),
    }),
    { selector: (n) => n.id, maxLength: 4 },
  ),
  applications: fc.uniqueArray(
    fc.record({ name: fc.constantFrom(...APPS), blocked: fc.boolean(), retired: fc.boolean() }),
    { selector: (a) => a.name, maxLength: APPS.length },
  ),
  claims: fc.array(
    fc.record({
      host: fc.constantFrom(...HOSTS),
      application: fc.constantFrom(...APPS),
      wildcard: fc.boolean(),
    }),
    { maxLength: 6 },
  ),
  platformDomains: fc.uniqueArray(fc.constantFrom(...PLATFORM), { maxLength: 3 }),
  apiPublic: fc.boolean(),
  selfNodeId: fc.constantFrom(...NODES),
});

const preferArb = fc.constantFrom(undefined, '', 'self', 'none', ...NODES);

function atOrUnder(host: string, domain: string): boolean {
  return host === domain || host.endsWith(`.${domain}`);
}

// Deterministic Fisher-Yates driven by a seed, so a failing shuffle is reproducible.
function shuffled<T>(list: T[], seed: number): T[] {
  const out = [...list];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

function shuffleInput(input: RoutingInput, seed: number): RoutingInput {
  return {
    ...input,
    nodes: shuffled(
      input.nodes.map((n, i) => ({ ...n, processes: shuffled(n.processes, seed + i) })),
      seed,
    ),
    applications: shuffled(input.applications, seed + 7),
    claims: shuffled(input.claims, seed + 13),
    platformDomains: shuffled(input.platformDomains, seed + 17),
  };
}

const key = (u: Upstream) => `${u.node} ${u.address}`;

test('routes are sorted by host in code-unit order, each host once', () => {
  fc.assert(
    fc.property(inputArb, preferArb, (input, prefer) => {
      const { routes } = renderRouting(input, prefer);
      for (let i = 1; i < routes.length; i++) assert.equal(compare(routes[i - 1].host, routes[i].host), -1);
    }),
  );
});

test('upstreams are never empty and, in fleet order, sorted by node id', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const doc = renderRouting(input);
      for (const route of doc.routes) {
        assert.ok(route.upstreams.length > 0, route.host);
        for (let i = 1; i < route.upstreams.length; i++) {
          assert.ok(compare(route.upstreams[i - 1].node, route.upstreams[i].node) <= 0);
        }
      }
      if (doc.api) {
        assert.ok(doc.api.upstreams.length > 0 && doc.api.hosts.length > 0);
        assert.deepEqual([...doc.api.hosts].sort(compare), doc.api.hosts);
      }
    }),
  );
});

test('no wildcard key under a platform domain; claims there are ignored', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const doc = renderRouting(input);
      const pds = input.platformDomains;
      const underPlatform = (host: string) => pds.some((d) => atOrUnder(host, d));
      for (const route of doc.routes) {
        if (route.host.startsWith('*.')) assert.ok(!underPlatform(route.host.slice(2)), route.host);
        if (!underPlatform(route.host) || pds.some((d) => route.host === `${route.application}.${d}`))
          continue;
        // Anything else under a platform domain can only be an env host of a claim made above it.
        const dot = route.host.indexOf('.');
        const base = route.host.slice(dot + 1);
        const env = route.host.slice(0, dot);
        const holder = route.application.slice(0, route.application.length - env.length - 1);
        assert.ok(route.application.endsWith(`-${env}`), route.host);
        assert.ok(
          input.claims.some((c) => c.wildcard && c.host === base && c.application === holder) &&
            !underPlatform(base),
          route.host,
        );
      }
    }),
  );
});

test('only serving, routable applications get routes; api hosts never repeat a route host', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const doc = renderRouting(input);
      const hosts = new Set(doc.routes.map((r) => r.host));
      for (const route of doc.routes) {
        const app = input.applications.find((a) => a.name === route.application);
        assert.ok(app && !app.blocked && !app.retired, route.application);
        for (const u of route.upstreams) {
          const node = input.nodes.find((n) => n.id === u.node)!;
          assert.ok(node.live && node.state !== 'draining');
        }
      }
      for (const host of doc.api?.hosts ?? []) assert.ok(!hosts.has(host), host);
      if (doc.api) assert.ok(input.apiPublic && input.platformDomains.length > 0);
    }),
  );
});

test('prefer only reorders: same routes, same upstreams, the preferred node first, the rest in order', () => {
  fc.assert(
    fc.property(inputArb, preferArb, (input, prefer) => {
      const base = renderRouting(input);
      const doc = renderRouting(input, prefer);
      const node = resolvePrefer(prefer, input.selfNodeId);
      const check = (before: Upstream[], after: Upstream[]) => {
        assert.deepEqual(after.map(key).sort(), before.map(key).sort());
        const n = node === undefined ? 0 : before.filter((u) => u.node === node).length;
        assert.ok(after.slice(0, n).every((u) => u.node === node));
        assert.deepEqual(
          after.slice(n),
          before.filter((u) => u.node !== node),
        );
      };
      assert.deepEqual(
        doc.routes.map((r) => [r.host, r.application]),
        base.routes.map((r) => [r.host, r.application]),
      );
      for (const [i, r] of doc.routes.entries()) check(base.routes[i].upstreams, r.upstreams);
      assert.equal(doc.api === undefined, base.api === undefined);
      if (doc.api && base.api) {
        assert.deepEqual(doc.api.hosts, base.api.hosts);
        assert.deepEqual(doc.api.denied, base.api.denied);
        check(base.api.upstreams, doc.api.upstreams);
      }
    }),
  );
});

test('rendering is deterministic: the same fleet in any order gives the same bytes in both formats', () => {
  fc.assert(
    fc.property(inputArb, preferArb, fc.integer(), (input, prefer, seed) => {
      const again = shuffleInput(input, seed);
      const a = renderRouting(input, prefer);
      const b = renderRouting(again, prefer);
      assert.equal(serializeRouting(b), serializeRouting(a));
      const options = { entryPoints: ['web'], preferNode: resolvePrefer(prefer, input.selfNodeId) };
      assert.equal(serializeProxyb(renderProxyb(b, options)), serializeProxyb(renderProxyb(a, options)));
    }),
  );
});

test('proxyb is consistent: sorted keys, every service exists, no empty server list, deny routers bare', () => {
  fc.assert(
    fc.property(inputArb, preferArb, (input, prefer) => {
      const doc = renderRouting(input, prefer);
      const config = renderProxyb(doc, {
        entryPoints: ['web'],
        preferNode: resolvePrefer(prefer, input.selfNodeId),
      });
      if (!config.http) {
        assert.equal(doc.routes.length, 0);
        assert.equal(doc.api, undefined);
        assert.equal(serializeProxyb(config), '{}');
        return;
      }
      const { routers, services } = config.http;
      assert.deepEqual(Object.keys(routers), Object.keys(routers).sort(compare));
      assert.deepEqual(Object.keys(services), Object.keys(services).sort(compare));
      const expectedRouters = doc.routes.length + 2 * (doc.api?.hosts.length ?? 0);
      assert.equal(Object.keys(routers).length, expectedRouters);
      for (const router of Object.values(routers)) {
        if (router.service === 'noop@internal') {
          assert.equal(router.priority, 3);
          assert.equal(router.middlewares, undefined);
          continue;
        }
        if (router.priority === 2) assert.deepEqual(router.middlewares, ['svc_retry']);
        else {
          // An application's router names the application to the front, then retries.
          const [named, retry] = router.middlewares!;
          assert.equal(retry, 'svc_retry');
          const application = named!.replace(/^svc_app_/, '');
          assert.ok(
            doc.routes.some((r) => r.application === application),
            named,
          );
          assert.deepEqual(config.http.middlewares[named!], {
            headers: { customRequestHeaders: { 'Svc-Application': application } },
          });
        }
        assert.ok(router.service in services, router.service);
      }
      for (const service of Object.values(services)) {
        if ('failover' in service) {
          const { service: local, fallback } = service.failover;
          assert.ok(local in services && fallback in services);
        } else {
          assert.ok(service.loadBalancer.servers.length > 0);
        }
      }
    }),
  );
});

test('no prefer never renders a failover', () => {
  fc.assert(
    fc.property(inputArb, (input) => {
      const config = renderProxyb(renderRouting(input), { entryPoints: ['web'] });
      for (const service of Object.values(config.http?.services ?? {})) assert.ok(!('failover' in service));
    }),
  );
});

test('the document is served with its keys in spec order', () => {
  const doc: FleetRouting = renderRouting({
    nodes: [
      {
        id: 'n1',
        address: 'h:1',
        state: 'ready',
        live: true,
        processes: [{ application: 'a', port: 2, ready: true }],
      },
    ],
    applications: [{ name: 'a', blocked: false, retired: false }],
    claims: [],
    platformDomains: ['p.test'],
    apiPublic: true,
    selfNodeId: 'n1',
  });
  assert.equal(
    serializeRouting(doc),
    '{"v":1,"routes":[{"host":"a.p.test","application":"a","upstreams":[{"node":"n1","address":"h:2"}]}],' +
      '"api":{"hosts":["p.test"],"upstreams":[{"node":"n1","address":"h:1"}],"denied":["/v1/storage","/v1/ingress/routes"]}}',
  );
});

test('an empty preferNode is no prefer', () => {
  const doc: FleetRouting = {
    v: 1,
    routes: [
      {
        host: 'a.p.test',
        application: 'a',
        upstreams: [
          { node: '', address: 'h:1' },
          { node: 'n2', address: 'h:2' },
        ],
      },
    ],
  };
  const config = renderProxyb(doc, { entryPoints: ['web'], preferNode: '' });
  assert.ok('loadBalancer' in config.http!.services['svc_a.p.test']);
});

test('failover halves sort after every name that extends their key with a character below "_"', () => {
  const ups = [
    { node: 'n1', address: 'h1:1' },
    { node: 'n2', address: 'h2:1' },
  ];
  const hosts = ['a.test', 'a.test-b', 'a.test.net', 'a.test.net.uk', 'a.test0', 'a.testx', 'b.test'];
  const doc: FleetRouting = {
    v: 1,
    routes: hosts.map((host) => ({ host, application: 'a', upstreams: ups })),
  };
  const names = Object.keys(renderProxyb(doc, { entryPoints: ['web'], preferNode: 'n1' }).http!.services);
  const expected = hosts.flatMap((h) => [`svc_${h}`, `svc_${h}_local`, `svc_${h}_peers`]).sort(compare);
  assert.deepEqual(names, expected);
  assert.equal(names[1], 'svc_a.test-b');
});

test('text that needs escaping or is not ASCII comes out as JSON.stringify writes it', () => {
  const hosts = [
    'bücher.example',
    'quote".example',
    'back\\slash.example',
    'ctl\u0001.example',
    'lone\ud800.example',
  ];
  const doc: FleetRouting = {
    v: 1,
    routes: hosts.sort(compare).map((host) => ({
      host,
      application: 'a',
      upstreams: [
        { node: 'n1', address: `${host}:1` },
        { node: 'n2', address: 'h2:1' },
      ],
    })),
  };
  for (const preferNode of [undefined, 'n1']) {
    const config = renderProxyb(doc, { entryPoints: ['wéb'], preferNode });
    const services = config.http!.services as Record<
      string,
      { loadBalancer?: { healthCheck: { hostname: string } } }
    >;
    assert.equal(
      services['svc_bücher.example'].loadBalancer?.healthCheck.hostname ?? 'failover',
      preferNode ? 'failover' : 'bücher.example',
    );
    assert.ok(`svc_lone\ud800.example` in services);
    assert.equal(renderProxybBytes(doc, { entryPoints: ['wéb'], preferNode }), JSON.stringify(config));
  }
});

// What renderRouting keeps between renderings (upstreams, lists, routes, the hosts' layout) and the
// text the writers keep for them must never show in the output. Two references that keep nothing:
// a `prefer` naming no node changes nothing in the document and starts with nothing kept, so it
// renders the fleet as a first rendering; and a copy of a document is no document renderRouting
// made, so both writers write it from scratch.
let ghosts = 0;

function assertAsFromScratch(input: RoutingInput, prefer: string | undefined): void {
  const doc = renderRouting(input, prefer);
  assert.ok(Object.isFrozen(doc) && Object.isFrozen(doc.routes), 'a rendered document is frozen');
  const copy = structuredClone(doc);
  assert.equal(serializeRouting(doc), JSON.stringify(copy));
  if (prefer === undefined) {
    const first = renderRouting(input, `ghost-${ghosts++}`);
    assert.deepEqual(doc, first);
    assert.equal(serializeRouting(doc), serializeRouting(first));
  }
  for (const preferNode of [undefined, resolvePrefer(prefer, input.selfNodeId), 'n1']) {
    for (const entryPoints of [['web'], ['web', 'websecure']]) {
      const options = { entryPoints, preferNode };
      assert.equal(renderProxybBytes(doc, options), renderProxybBytes(copy, options));
    }
  }
}

test('a fleet rendered after other fleets gives what a first rendering gives, in both formats', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(inputArb, preferArb), { minLength: 2, maxLength: 8 }), (steps) => {
      for (const [input, prefer] of steps) {
        assertAsFromScratch(input, undefined);
        assertAsFromScratch(input, prefer);
      }
    }),
  );
});

test('a large fleet changing a little at a time renders as from scratch at every step', () => {
  // Large enough for many runs of kept text (about one host in 8 ends one); each step changes a
  // few processes, claims, states or addresses, in place or in a copy, as passes do.
  let seed = 7;
  const random = (n: number) => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed % n;
  };
  const names = Array.from({ length: 400 }, (_, i) => `app-${i}${i % 50 === 0 ? '-x' : ''}`);
  names.push('app-0-dev', 'app-0-x-dev', 'app-1-staging');
  let input: RoutingInput = {
    nodes: ['n1', 'n2', 'n3'].map((id, k) => ({
      id,
      address: `10.0.0.${k + 1}:7070`,
      state: 'ready' as const,
      live: true,
      processes: names.map((application, i) => ({ application, port: 20_000 + i, ready: true })),
    })),
    applications: names.map((name) => ({ name, blocked: false, retired: false })),
    claims: [
      { host: 'shop.example', application: 'app-0', wildcard: true },
      { host: 'app-7.example', application: 'app-7', wildcard: false },
    ],
    platformDomains: ['svc.test'],
    apiPublic: true,
    selfNodeId: 'n2',
  };
  for (let step = 0; step < 60; step++) {
    if (random(3) === 0) input = structuredClone(input);
    for (let change = random(4); change >= 0; change--) {
      const node = input.nodes[random(input.nodes.length)];
      const proc = node.processes[random(node.processes.length)];
      const app = input.applications[random(input.applications.length)];
      switch (random(8)) {
        case 0:
          proc.port += 1_000;
          break;
        case 1:
          proc.ready = !proc.ready;
          break;
        case 2:
          app.blocked = !app.blocked;
          break;
        case 3:
          node.state = node.state === 'draining' ? 'ready' : 'draining';
          break;
        case 4:
          node.address = node.address.startsWith('[') ? '10.9.0.1:7070' : '[fd00::9]:7070';
          break;
        case 5:
          input.claims.push({
            host: `${app.name}.example`,
            application: app.name,
            wildcard: random(2) === 0,
          });
          break;
        case 6:
          input.claims.splice(random(input.claims.length + 1), 1);
          break;
        default:
          input.platformDomains = random(2) === 0 ? ['svc.test'] : ['svc.test', 'apps.example'];
      }
    }
    for (const prefer of [undefined, 'self', 'n3']) assertAsFromScratch(input, prefer);
  }
});

test('a run of kept services is written again when a new name comes between a failover and its halves', () => {
  // `svc_<x>.svc.test` ends a run and is a failover; once `<x>.svc.test-b` is routed as well, its
  // names come before `svc_<x>.svc.test_local` ("-" sorts below "_"), so the run's kept text,
  // which ends with those halves, no longer fits.
  let i = 0;
  while (!endsRun(`svc_a${i}.svc.test`)) i++;
  const input = (platformDomains: string[]): RoutingInput => ({
    nodes: ['n1', 'n2'].map((id, k) => ({
      id,
      address: `10.0.0.${k + 1}:7070`,
      state: 'ready' as const,
      live: true,
      processes: [`a${i}`, 'zz'].map((application, p) => ({ application, port: 8000 + p, ready: true })),
    })),
    applications: [`a${i}`, 'zz'].map((name) => ({ name, blocked: false, retired: false })),
    claims: [],
    platformDomains,
    apiPublic: false,
    selfNodeId: 'n1',
  });
  for (const platformDomains of [['svc.test'], ['svc.test', 'svc.test-b']]) {
    const doc = renderRouting(input(platformDomains), 'self');
    const options = { entryPoints: ['web'], preferNode: 'n1' };
    const served = renderProxybBytes(doc, options);
    assert.equal(served, renderProxybBytes(structuredClone(doc), options));
    const names = Object.keys(JSON.parse(served).http.services);
    assert.deepEqual(names, [...names].sort(compare));
  }
});
