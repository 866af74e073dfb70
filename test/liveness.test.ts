// Liveness on real parts (docs/fleet.md "Liveness"): three `svc sail` nodes on one MinIO of this
// file's own, runtime processes from the cell stand-in (test/helpers/cell-standin.ts, a named
// stand-in honouring the runtime contract's `serve`). The shipped heartbeat and dead window; a
// lost window of 12 s and a 3 s lease, so that the outage below outlasts both in a short test.
//
// 1. MinIO frozen (SIGSTOP) longer than the lost window and the lease, then thawed: a coordinator
//    takes the lease under a higher fence, and no application moves and no process restarts
//    (placements, pids and restart counts as before; no placement written, nobody judged lost).
// 2. A node and its runtime processes SIGKILLed: it leaves every other node's routing document
//    (bench/node-loss.bench.ts measures how fast).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { keys } from '../src/registry/keys.ts';
import { DEFAULT_LIVENESS } from '../src/registry/liveness.ts';
import type { PlacementRecord } from '../src/registry/records.ts';
import type { FleetRouting } from '../src/routing/types.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { call, ensureDeployedApplication } from './helpers/applications.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { IngressClient } from './helpers/ingress-client.ts';
import { type Minio, startMinio } from './helpers/minio.ts';
import { type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TTL_MS = 3_000;
const LOST_MS = 12_000;
/** Longer than the lost window and the lease lifetime, with room for a pass stuck in a request. */
const OUTAGE_MS = LOST_MS + 3_000;
/** Room for passes that are slow on a loaded machine. */
const SLACK_MS = 6_000;
const TOKEN = 'liveness-ingress-token-0123456789';
const DOMAIN = 'svc.test';
const APPS = { everywhere: 'all', pair: 2, single: 1 } as const;

let minio: Minio;
let store: Store;
let admin: Signer;
const nodes: SailProcess[] = [];
const ids = ['node-a', 'node-b', 'node-c'];

before(async () => {
  minio = await startMinio();
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'));
  for (const [name, replicas] of Object.entries(APPS))
    await ensureDeployedApplication(store, name, { replicas });
  for (const [index, id] of ids.entries()) {
    nodes.push(
      await startSail(
        [
          ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
          ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
          ...['--node-id', id, '--cell-bin', CELL_STANDIN],
          ...[
            '--port-range-start',
            String(33000 + index * 100),
            '--port-range-end',
            String(33099 + index * 100),
          ],
          ...['--platform-domains', DOMAIN, '--ingress-token', TOKEN],
          ...['--coordinator-lease-ttl-ms', String(TTL_MS), '--node-lost-after-ms', String(LOST_MS)],
          ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
        ],
        { env: { SVC_LOG_LEVEL: 'info' } },
      ),
    );
  }
});

after(async () => {
  minio?.thaw();
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
  await minio?.stop();
});

interface Running {
  node: string;
  application: string;
  pid: number;
  restarts: number;
  ready: boolean;
}

// biome-ignore lint/suspicious/noExplicitAny: tests read the state document member by member.
async function state(node: SailProcess): Promise<any> {
  const answer = await call(node.url, 'GET', '/v1/state', { signer: admin });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

function alive(): SailProcess[] {
  return nodes.filter((node) => node.child.exitCode === null && node.child.signalCode === null);
}

/** Every runtime process of the given nodes, as each node's own state reports it. */
async function processes(among: SailProcess[]): Promise<Running[]> {
  const out: Running[] = [];
  for (const node of among) {
    for (const p of (await state(node)).processes as Running[])
      out.push({
        node: node.nodeId,
        application: p.application,
        pid: p.pid,
        restarts: p.restarts,
        ready: p.ready,
      });
  }
  return out.sort((a, b) => `${a.node}/${a.application}`.localeCompare(`${b.node}/${b.application}`));
}

async function placements(): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const name of Object.keys(APPS))
    out[name] = (await getJson<PlacementRecord>(store, keys.placement(name)))?.value.nodes ?? [];
  return out;
}

async function coordinator(among: SailProcess[]): Promise<{ node: string; fence: number } | null> {
  const states = await Promise.all(among.map((node) => state(node)));
  const selves = states.filter((s) => s.coordinator?.self === true);
  const agreed = states.every((s) => s.coordinator && s.coordinator.node === selves[0]?.coordinator.node);
  if (selves.length !== 1 || !agreed) return null;
  return { node: selves[0].coordinator.node, fence: selves[0].coordinator.fence };
}

function routing(node: SailProcess): Promise<FleetRouting> {
  return new IngressClient(node.url, TOKEN).routes();
}

/** The nodes a routing document sends anything to: application upstreams and the API's. */
function routedNodes(doc: FleetRouting): Set<string> {
  const upstreams = [...doc.routes.flatMap((route) => route.upstreams), ...(doc.api?.upstreams ?? [])];
  return new Set(upstreams.map((upstream) => upstream.node));
}

/** Log lines (JSON) of a node written after `fromChars` of its log, with the given event. */
function events(node: SailProcess, fromChars: number, event: string): Record<string, unknown>[] {
  return node
    .log()
    .slice(fromChars)
    .split('\n')
    .filter((line) => line.includes(`"event":"${event}"`))
    .map((line) => JSON.parse(line));
}

/** Every application placed as asked, each placed process ready, and every node routing to all three. */
async function steady(): Promise<boolean> {
  const placed = await placements();
  if (placed.everywhere!.length !== 3 || placed.pair!.length !== 2 || placed.single!.length !== 1)
    return false;
  const running = await processes(nodes);
  for (const [application, on] of Object.entries(placed)) {
    for (const node of on)
      if (!running.some((p) => p.node === node && p.application === application && p.ready)) return false;
  }
  for (const node of nodes) if (routedNodes(await routing(node)).size !== 3) return false;
  return true;
}

test('MinIO frozen past the lost window and the lease, then back: a new fence, and no application moves or restarts', async () => {
  await waitFor(steady, 'every application placed, running and routed', 60_000);
  const holder = (await waitFor(() => coordinator(nodes), 'one coordinator', 4 * PASS_INTERVAL_MS))!;
  const placedBefore = await placements();
  const runningBefore = await processes(nodes);
  const logFrom = nodes.map((node) => node.log().length);

  minio.freeze();
  const frozenAt = Date.now();
  const oldHolder = nodes.find((node) => node.nodeId === holder.node)!;
  await waitFor(
    () =>
      Date.now() - frozenAt >= OUTAGE_MS &&
      events(oldHolder, logFrom[nodes.indexOf(oldHolder)]!, 'coordinator.lost').length > 0,
    'the outage to outlast the lost window, and the coordinator to give up its lease',
    OUTAGE_MS + SLACK_MS,
  );
  minio.thaw();
  const thawedAt = Date.now();

  const next = (await waitFor(
    async () => {
      const found = await coordinator(nodes);
      return found && found.fence > holder.fence ? found : null;
    },
    'a coordinator under a higher fence',
    TTL_MS + 4 * PASS_INTERVAL_MS + SLACK_MS,
  ))!;
  assert.ok(next.fence > holder.fence);
  // A false judgement would come within the lost window (plus a pass) of the bucket's return.
  await waitFor(
    async () =>
      Date.now() - thawedAt >= LOST_MS + 2 * PASS_INTERVAL_MS &&
      (await Promise.all(nodes.map(state))).every((s) => s.reconcile.ok),
    'a lost window and two passes since the return, every pass succeeding',
    LOST_MS + 4 * PASS_INTERVAL_MS + SLACK_MS,
  );

  assert.deepEqual(await placements(), placedBefore, 'no application moved');
  const runningAfter = await processes(nodes);
  assert.deepEqual(
    runningAfter.map(({ ready: _, ...p }) => p),
    runningBefore.map(({ ready: _, ...p }) => p),
    'the same processes, not restarted',
  );
  for (const [index, node] of nodes.entries()) {
    assert.deepEqual(
      events(node, logFrom[index]!, 'placement.written'),
      [],
      `${node.nodeId} wrote no placement`,
    );
    const lost = events(node, logFrom[index]!, 'liveness.changed').flatMap((e) => e.lost as string[]);
    assert.deepEqual(lost, [], `${node.nodeId} judged nobody lost`);
  }
  for (const node of nodes)
    assert.equal(routedNodes(await routing(node)).size, 3, `${node.nodeId} routes to all`);
});

test('a node killed with its processes leaves every other node routing document', async (t) => {
  await waitFor(steady, 'every application placed, running and routed', 60_000);
  const holder = (await waitFor(() => coordinator(nodes), 'one coordinator', 4 * PASS_INTERVAL_MS))!;
  // Not the coordinator, so the survivors' routing does not wait on a takeover.
  const victim = nodes.find((node) => node.nodeId !== holder.node)!;
  const pids = (await processes([victim])).map((p) => p.pid);
  assert.ok(pids.length >= 1, 'the victim runs processes');
  await victim.stop('SIGKILL');
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone with its node.
    }
  }
  const killedAt = Date.now();
  const survivors = alive();
  for (const node of survivors) {
    await waitFor(
      async () => !routedNodes(await routing(node)).has(victim.nodeId),
      `${node.nodeId} to stop routing to ${victim.nodeId}`,
      DEFAULT_LIVENESS.deadAfterMs + PASS_INTERVAL_MS + SLACK_MS - (Date.now() - killedAt),
    );
    t.diagnostic(`${node.nodeId} dropped ${victim.nodeId} ${Date.now() - killedAt} ms after the kill`);
  }
  for (const node of survivors) assert.ok(routedNodes(await routing(node)).size === 2);
});
