// The routing routes on a real `svc sail` (docs/ingress.md "The routing document", "The Traefik
// format"; docs/api.md "Routing and storage"): a MinIO bucket behind the test S3 proxy, whose
// fault hook refuses the domain-claim listings so that the node's first reconcile pass cannot
// complete until the test lets it. Runtime processes come from the cell stand-in
// (test/helpers/cell-standin.ts, named as such: it honours the runtime contract's `serve`).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { ensureDeployedApplication } from './helpers/applications.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { useMinio } from './helpers/minio.ts';
import { type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import { type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const NEW_TOKEN = 'ingress-new-0123456789';
const OLD_TOKEN = 'ingress-old-0123456789';
const NODE_ID = 'edge-1';
/** A few passes, and room for the S3 store's bounded retries of the refused listings. */
const PASS_WAIT_MS = 6 * PASS_INTERVAL_MS;

const minioStarting = useMinio();
let proxy: S3Proxy;
let store: Store;
let node: SailProcess;
/** While true, the proxy refuses the node's listings of `_svc/domains/`: no pass completes. */
let holdRouting = true;

const isClaimListing = (path: string) => decodeURIComponent(path).includes('prefix=_svc/domains/');

before(async () => {
  const minio = await minioStarting;
  const bucket = await minio.createBucket();
  const options = minio.bucketOptions(bucket);
  store = await openStore({ ...options, stateDir: tempDir() });
  proxy = await startS3Proxy(minio.endpoint, {
    fault: (request) => (holdRouting && isClaimListing(request.path) ? 'refuse' : undefined),
  });
  // Applications exist before the node starts: its first pass places and runs them at once.
  await ensureDeployedApplication(store, 'shop', {});
  node = await startSail([
    ...['--endpoint', proxy.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
    ...['--node-id', NODE_ID, '--cell-bin', CELL_STANDIN],
    ...['--ingress-token', NEW_TOKEN, '--ingress-token', OLD_TOKEN],
    ...['--platform-domains', 'svc.test', '--api-public'],
    ...['--proxyb-entrypoints', 'web', '--proxyb-entrypoints', 'websecure'],
    ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
  ]);
});

after(async () => {
  await node?.stop();
  await proxy?.close();
  await store?.close();
});

interface Answer {
  status: number;
  contentType: string | null;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a routing document or a problem, read member by member
  body: any;
}

async function get(path: string, headers: Record<string, string> = bearer(NEW_TOKEN)): Promise<Answer> {
  const response = await fetch(`${node.url}${path}`, { headers });
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, contentType: response.headers.get('content-type'), text, body };
}

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

function assertProblem(answer: Answer, status: number, code: string, title?: string, what = ''): void {
  assert.equal(answer.status, status, `${what} status: ${answer.text}`);
  assert.equal(answer.contentType, 'application/problem+json', `${what} content type`);
  assert.equal(answer.body.type, `urn:svc:${code}`, `${what} type`);
  assert.equal(answer.body.status, status, `${what} body status`);
  if (title !== undefined) assert.equal(answer.body.title, title, `${what} title`);
}

test('until the first reconcile pass completes, both routes answer 503 draining naming the node', async () => {
  // The node is up and its passes are being refused at the claims listing.
  await waitFor(() => proxy.seen.some((r) => isClaimListing(r.path)), 'a pass to reach the claims listing');
  for (const token of [NEW_TOKEN, OLD_TOKEN]) {
    for (const path of [
      '/v1/ingress/routes',
      '/v1/ingress/routes/proxyb',
      '/v1/ingress/routes?prefer=self',
    ]) {
      const answer = await get(path, bearer(token));
      assertProblem(answer, 503, 'draining', 'Routing is not known yet', path);
      assert.match(answer.body.detail, new RegExp(`node ${NODE_ID}\\b`), 'the detail names the node');
    }
  }
});

test('refusals: no token, a wrong token and a bad version header; unknown format; prefer twice', async () => {
  for (const path of ['/v1/ingress/routes', '/v1/ingress/routes/proxyb', '/v1/ingress/routes/nginx']) {
    for (const headers of [{}, bearer('wrong'), bearer(`${NEW_TOKEN}x`), { authorization: NEW_TOKEN }]) {
      assertProblem(await get(path, headers), 401, 'auth-invalid', 'Token rejected', path);
    }
    const version = await get(path, { ...bearer(NEW_TOKEN), 'x-svc-storage-version': '2' });
    assertProblem(version, 400, 'invalid-input', 'Unsupported storage protocol version', path);
  }
  for (const format of ['nginx', 'traefik', 'PROXYB', '__proto__', 'constructor']) {
    const answer = await get(`/v1/ingress/routes/${format}`);
    assertProblem(answer, 404, 'not-found', 'Unknown routing format', format);
    assert.equal(answer.body.detail, 'this node renders: proxyb');
  }
  const twice = await get('/v1/ingress/routes?prefer=self&prefer=edge-2');
  assertProblem(twice, 400, 'invalid-input', 'Malformed request');
});

test('once a pass completes: the serving application, the API host, and proxyb for both entry points', async () => {
  holdRouting = false;
  const doc = (await waitFor(
    async () => {
      const answer = await get('/v1/ingress/routes');
      return answer.status === 200 && answer.body.routes.length > 0 ? answer : null;
    },
    'a routing document naming shop',
    PASS_WAIT_MS,
  ))!.body;
  assert.equal(doc.v, 1);
  assert.equal(doc.routes.length, 1);
  const [route] = doc.routes;
  assert.equal(route.host, 'shop.svc.test');
  assert.equal(route.application, 'shop');
  assert.equal(route.upstreams.length, 1);
  assert.equal(route.upstreams[0].node, NODE_ID);
  assert.match(route.upstreams[0].address, /^127\.0\.0\.1:\d+$/);
  assert.deepEqual(doc.api, {
    hosts: ['svc.test'],
    upstreams: [{ node: NODE_ID, address: node.listen }],
    denied: ['/v1/storage', '/v1/ingress/routes'],
  });
  // The upstream is the running process itself.
  const served = await fetch(`http://${route.upstreams[0].address}/`);
  assert.equal(await served.text(), 'standin shop');

  const proxyb = await get('/v1/ingress/routes/proxyb');
  assert.equal(proxyb.status, 200);
  const { routers, services, middlewares } = proxyb.body.http;
  assert.deepEqual(Object.keys(routers), ['svc_api_svc.test', 'svc_apideny_svc.test', 'svc_shop.svc.test']);
  for (const router of Object.values(routers) as { entryPoints: string[] }[]) {
    assert.deepEqual(router.entryPoints, ['web', 'websecure']);
  }
  assert.deepEqual(services['svc_shop.svc.test'].loadBalancer.servers, [
    { url: `http://${route.upstreams[0].address}` },
  ]);
  // The application's router names it to the front (docs/ingress.md "Misdirected requests").
  assert.deepEqual(middlewares, {
    svc_app_shop: { headers: { customRequestHeaders: { 'Svc-Application': 'shop' } } },
    svc_retry: { retry: { attempts: 3 } },
  });
  assert.deepEqual(routers['svc_shop.svc.test'].middlewares, ['svc_app_shop', 'svc_retry']);
  // One node: prefer=self matches it, but nobody else can take over, so no failover.
  assert.equal((await get('/v1/ingress/routes/proxyb?prefer=self')).text, proxyb.text);
});

test('an unchanged fleet answers identical bytes pass after pass', async () => {
  const first = await get('/v1/ingress/routes/proxyb?prefer=self');
  const generic = await get('/v1/ingress/routes');
  const listings = proxy.seen.filter((r) => isClaimListing(r.path)).length;
  // Two more passes have read the registry (each pass lists the claims once a second).
  await waitFor(
    () => proxy.seen.filter((r) => isClaimListing(r.path)).length >= listings + 2,
    'two more passes',
    PASS_WAIT_MS,
  );
  assert.equal((await get('/v1/ingress/routes/proxyb?prefer=self')).text, first.text);
  assert.equal((await get('/v1/ingress/routes')).text, generic.text);
});
