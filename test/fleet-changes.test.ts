// Changes reach serving fleet-wide within one reconcile pass (docs/fleet.md "Change marker"):
// three real `svc sail` processes on one MinIO bucket, with the default registry schedule (full
// re-read every 5 min, node records every 30 s), so nothing but the change marker can carry a
// change in time. Each change is made through one node's API and must show in every node's
// routing document (`GET /v1/ingress/routes`) within 10 s. Runtime processes come from the cell
// stand-in (test/helpers/cell-standin.ts, named as such: it honours the runtime contract's `serve`).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { call, ensureDeployedApplication } from './helpers/applications.ts';
import { standinArtifact } from './helpers/artifacts.ts';
import { CELL_STANDIN, getDeploy, postDeploy } from './helpers/deploys.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const INGRESS_TOKEN = 'ingress-changes-0123456789';
/** The bound the fleet promises: one pass (5 s) plus the pass itself, with room for the test's own polling. */
const CHANGE_DEADLINE_MS = 10_000;
/** Three nodes starting, placing and running the first processes. */
const START_DEADLINE_MS = 120_000;

const minioStarting = useMinio();
let store: Store;
let admin: Signer;
let nodes: SailProcess[] = [];

/** host -> the nodes its upstreams are on, sorted. */
type Routes = Map<string, string[]>;

function operator(id: string, applications = ['*']): Promise<Signer> {
  return trustOperator(store, signerFor(id), applications.includes('*') ? 'admin' : 'operator', applications);
}

before(async () => {
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await operator('op-admin');
  await ensureDeployedApplication(store, 'shop', {});
  await ensureDeployedApplication(store, 'cart', {});
  const zones = { 'node-a': 'a', 'node-b': 'b', 'node-c': 'c' };
  nodes = await Promise.all(
    Object.entries(zones).map(([id, zone]) =>
      startSail(
        [
          ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
          ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
          ...['--node-id', id, '--node-labels', `zone=${zone}`, '--cell-bin', CELL_STANDIN],
          ...['--ingress-token', INGRESS_TOKEN, '--platform-domains', 'svc.test'],
          // At info, so a node's log shows the calls it answered (deployment-moved among them).
        ],
        { env: { SVC_LOG_LEVEL: 'info' } },
      ),
    ),
  );
  await everywhere(
    (routes) => sameNodes(routes, 'shop.svc.test', ['node-a', 'node-b', 'node-c']),
    'shop served by all three nodes, on every node',
    START_DEADLINE_MS,
  );
});

after(async () => {
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
});

async function routesOf(node: SailProcess): Promise<Routes> {
  const response = await fetch(`${node.url}/v1/ingress/routes`, {
    headers: { authorization: `Bearer ${INGRESS_TOKEN}` },
  });
  assert.equal(response.status, 200, `routing document of ${node.nodeId}`);
  const doc = (await response.json()) as { routes: { host: string; upstreams: { node: string }[] }[] };
  return new Map(doc.routes.map((r) => [r.host, r.upstreams.map((u) => u.node).sort()]));
}

function sameNodes(routes: Routes, host: string, expected: string[]): boolean {
  const got = routes.get(host);
  return got !== undefined && got.join() === expected.join();
}

/** Polls every node's routing document until `holds` is true of all three, within the deadline. */
async function everywhere(
  holds: (routes: Routes) => boolean,
  what: string,
  deadlineMs = CHANGE_DEADLINE_MS,
): Promise<void> {
  let last: Record<string, unknown> = {};
  try {
    await waitFor(
      async () => {
        const all = await Promise.all(nodes.map(routesOf));
        last = Object.fromEntries(all.map((routes, i) => [nodes[i]!.nodeId, Object.fromEntries(routes)]));
        return all.every(holds);
      },
      what,
      deadlineMs,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${JSON.stringify(last)}`);
  }
}

async function change(node: SailProcess, method: string, path: string, body?: unknown): Promise<void> {
  const answer = await call(node.url, method, path, { signer: admin, body });
  assert.equal(answer.status, 200, `${method} ${path} on ${node.nodeId}: ${JSON.stringify(answer.body)}`);
}

const all = ['node-a', 'node-b', 'node-c'];

test('a deploy through one node is told at once to every other node running it', async () => {
  const accepted = await postDeploy(nodes[0]!.url, 'shop', standinArtifact(), { signer: admin });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const id = (accepted.body as { id: string }).id;
  await waitFor(
    async () => (await getDeploy(nodes[0]!.url, id, { signer: admin })).body.state === 'deployed',
    'the deploy through node-a deployed',
    START_DEADLINE_MS,
  );
  // Only node-a's call writes this line: a node that learns of the move from its own pass does not.
  for (const node of nodes.slice(1)) {
    await waitFor(
      () =>
        node
          .log()
          .split('\n')
          .some(
            (line) =>
              line.includes('"event":"deployment.moved-elsewhere"') &&
              line.includes('"application":"shop"') &&
              line.includes('"by":"node-a"') &&
              line.includes('"signalled":true'),
          ),
      `${node.nodeId} told by node-a that shop's deployment moved`,
      CHANGE_DEADLINE_MS,
    );
  }
});

test('deployment-moved refuses a call without a token, a name that is no application name and a key out of scope', async () => {
  const anonymous = await fetch(`${nodes[1]!.url}/v1/applications/shop/deployment-moved`, { method: 'POST' });
  assert.equal(anonymous.status, 401);
  const problem = (await anonymous.json()) as { type: string; title: string };
  assert.equal(problem.type, 'urn:svc:auth-invalid');
  assert.equal(problem.title, 'Token rejected');
  const bad = await call(nodes[1]!.url, 'POST', '/v1/applications/Not_A_Name/deployment-moved', {
    signer: admin,
  });
  assert.equal(bad.status, 400);
  assert.equal((bad.body as { type: string }).type, 'urn:svc:invalid-slug');
  assert.equal((bad.body as { title: string }).title, 'Invalid application name');
  const blogOnly = await operator('op-blog-only', ['blog']);
  const outside = await call(nodes[1]!.url, 'POST', '/v1/applications/shop/deployment-moved', {
    signer: blogOnly,
  });
  assert.equal(outside.status, 403);
  assert.equal((outside.body as { type: string }).type, 'urn:svc:auth-scope');
  assert.equal((outside.body as { title: string }).title, 'Out of scope');
});

test('block and unblock reach every node within 10 s', async () => {
  await change(nodes[0]!, 'POST', '/v1/applications/shop/block');
  await everywhere((routes) => !routes.has('shop.svc.test'), 'blocked shop gone everywhere');
  await change(nodes[1]!, 'POST', '/v1/applications/shop/unblock');
  await everywhere((routes) => sameNodes(routes, 'shop.svc.test', all), 'unblocked shop back on all three');
});

test('retire and unretire reach every node within 10 s', async () => {
  await change(nodes[2]!, 'POST', '/v1/applications/shop/retire');
  await everywhere((routes) => !routes.has('shop.svc.test'), 'retired shop gone everywhere');
  await change(nodes[0]!, 'POST', '/v1/applications/shop/unretire');
  await everywhere((routes) => sameNodes(routes, 'shop.svc.test', all), 'unretired shop back on all three');
});

test('replicas and selector reach every node within 10 s', async () => {
  await change(nodes[1]!, 'POST', '/v1/applications/shop/selector', { selector: { zone: 'b' } });
  await everywhere((routes) => sameNodes(routes, 'shop.svc.test', ['node-b']), 'shop only on node-b');
  await change(nodes[2]!, 'POST', '/v1/applications/shop/selector', { selector: null });
  await change(nodes[2]!, 'POST', '/v1/applications/shop/replicas', { replicas: 1 });
  await everywhere((routes) => routes.get('shop.svc.test')?.length === 1, 'shop on one node');
  await change(nodes[0]!, 'POST', '/v1/applications/shop/replicas', { replicas: 'all' });
  await everywhere((routes) => sameNodes(routes, 'shop.svc.test', all), 'shop on all three again');
});

test('a domain claim and its release reach every node within 10 s', async () => {
  await change(nodes[2]!, 'POST', '/v1/applications/shop/domains/shop.example.com');
  await everywhere((routes) => routes.has('shop.example.com'), 'the claimed host routed everywhere');
  await change(nodes[1]!, 'DELETE', '/v1/applications/shop/domains/shop.example.com');
  await everywhere((routes) => !routes.has('shop.example.com'), 'the released host gone everywhere');
});

test('a deletion reaches every node within 10 s', async () => {
  await everywhere((routes) => routes.has('cart.svc.test'), 'cart served everywhere', START_DEADLINE_MS);
  await change(nodes[0]!, 'DELETE', '/v1/applications/cart?force=1');
  await everywhere((routes) => !routes.has('cart.svc.test'), 'deleted cart gone everywhere');
});

test('an operator key revoked through one node is refused by every node within 10 s', async () => {
  const doomed = await operator('op-doomed');
  // Every node has verified the key, so each holds it in its key cache (GET /v1/state, unlike
  // the operator routes, does not re-read the operator record per request).
  for (const node of nodes) {
    const answer = await call(node.url, 'GET', '/v1/state', { signer: doomed });
    assert.equal(answer.status, 200, `${node.nodeId} knows op-doomed`);
  }
  await change(nodes[1]!, 'DELETE', '/v1/operators/op-doomed');
  await waitFor(
    async () => {
      const answers = await Promise.all(
        nodes.map((node) => call(node.url, 'GET', '/v1/state', { signer: doomed })),
      );
      return answers.every((a) => a.status === 401);
    },
    'op-doomed refused everywhere',
    CHANGE_DEADLINE_MS,
  );
});
