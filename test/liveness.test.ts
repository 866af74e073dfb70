// Liveness on real parts (docs/fleet.md "Liveness"): three `svc sail` nodes on one MinIO of this
// file's own, reached through the test's S3 proxy (test/helpers/s3-proxy.ts) so that the bucket can
// also refuse every request, runtime processes from the cell stand-in (test/helpers/cell-standin.ts,
// a named stand-in honouring the runtime contract's `serve`). The shipped heartbeat and dead
// window; a lost window of 12 s and a 3 s lease, so that the outages below outlast both in a short
// test.
//
// 1. MinIO frozen (SIGSTOP), then every request refused (503), each longer than the lost window
//    and the lease: afterwards a coordinator holds the lease under a higher fence, and no
//    application moved and no process restarted (placements, pids and restart counts as before;
//    no placement written, nobody judged lost).
// 2. The coordinator's daemon restarted (SIGUSR2, started again on its state directory): it
//    judges nobody from the records it finds, so nothing moves either.
// 3. A node and its runtime processes SIGKILLed: it leaves every other node's routing document
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
import { type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import { ownRuntimePorts, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

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
let proxy: S3Proxy;
/** While true, the proxy answers every request 503 without forwarding it. */
let refusing = false;
let store: Store;
let admin: Signer;
const nodes: SailProcess[] = [];
const ids = ['node-a', 'node-b', 'node-c'];
const flagsOf = new Map<string, string[]>();

before(async () => {
  minio = await startMinio();
  proxy = await startS3Proxy(minio.endpoint, { fault: () => (refusing ? 'refuse' : undefined) });
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'));
  for (const [name, replicas] of Object.entries(APPS))
    await ensureDeployedApplication(store, name, { replicas });
  for (const id of ids) {
    flagsOf.set(id, [
      ...['--endpoint', proxy.endpoint, '--region', options.region, '--bucket', options.bucket],
      ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
      ...['--node-id', id, '--cell-bin', CELL_STANDIN],
      // Its processes outlive a daemon restart, to be adopted, as the real runtime's do.
      ...['--cell-env', 'STANDIN_SERVE_STAY_ORPHANED=1'],
      ...ownRuntimePorts(),
      ...['--platform-domains', DOMAIN, '--ingress-token', TOKEN],
      ...['--coordinator-lease-ttl-ms', String(TTL_MS), '--node-lost-after-ms', String(LOST_MS)],
      ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
    ]);
    nodes.push(await startSail(flagsOf.get(id)!, { env: { SVC_LOG_LEVEL: 'debug' } }));
  }
});

after(async () => {
  refusing = false;
  minio?.thaw();
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
  await proxy?.close();
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

/** What must not change across a fault: placements, and each process with its pid and restarts. */
async function snapshot(): Promise<{ placed: Record<string, string[]>; running: Omit<Running, 'ready'>[] }> {
  return {
    placed: await placements(),
    running: (await processes(nodes)).map(({ ready: _, ...p }) => p),
  };
}

/**
 * Waits until a lost window and two passes have gone by since `since` (a false judgement would
 * come within that) with every pass succeeding, then checks that nothing moved or restarted, and
 * that no node wrote a placement or judged a node lost after the log offsets `logFrom`.
 */
async function assertNothingMoved(
  before: Awaited<ReturnType<typeof snapshot>>,
  since: number,
  logFrom: number[],
): Promise<void> {
  await waitFor(
    async () =>
      Date.now() - since >= LOST_MS + 2 * PASS_INTERVAL_MS &&
      (await Promise.all(nodes.map(state))).every(
        (s) => s.reconcile.ok && Date.parse(s.reconcile.lastPassAt) > since + LOST_MS,
      ),
    'a lost window and two passes, every node passing, and succeeding',
    LOST_MS + 4 * PASS_INTERVAL_MS + SLACK_MS,
  );
  const after = await snapshot();
  assert.deepEqual(after.placed, before.placed, 'no application moved');
  assert.deepEqual(after.running, before.running, 'the same processes, not restarted');
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
}

const outages = [
  { how: 'frozen (SIGSTOP)', begin: () => minio.freeze(), end: () => minio.thaw() },
  {
    how: 'refusing every request (503)',
    begin: () => {
      refusing = true;
    },
    end: () => {
      refusing = false;
    },
  },
];

for (const outage of outages) {
  test(`MinIO ${outage.how} past the lost window and the lease, then back: a new fence, and no application moves or restarts`, async () => {
    await waitFor(steady, 'every application placed, running and routed', 60_000);
    const holder = (await waitFor(() => coordinator(nodes), 'one coordinator', 4 * PASS_INTERVAL_MS))!;
    const before = await snapshot();
    const logFrom = nodes.map((node) => node.log().length);
    const oldHolder = nodes.find((node) => node.nodeId === holder.node)!;

    outage.begin();
    const begunAt = Date.now();
    try {
      await waitFor(
        () =>
          Date.now() - begunAt >= OUTAGE_MS &&
          events(oldHolder, logFrom[nodes.indexOf(oldHolder)]!, 'coordinator.lost').length > 0,
        'the outage to outlast the lost window, and the coordinator to give up its lease',
        OUTAGE_MS + SLACK_MS,
      );
    } finally {
      outage.end();
    }
    const endedAt = Date.now();

    const next = (await waitFor(
      async () => {
        const found = await coordinator(nodes);
        return found && found.fence > holder.fence ? found : null;
      },
      'a coordinator under a higher fence',
      TTL_MS + 4 * PASS_INTERVAL_MS + SLACK_MS,
    ))!;
    assert.ok(next.fence > holder.fence);
    await assertNothingMoved(before, endedAt, logFrom);
  });
}

test("the coordinator's daemon restarted (SIGUSR2): a coordinator under a higher fence, and nothing moves", async () => {
  await waitFor(steady, 'every application placed, running and routed', 60_000);
  const holder = (await waitFor(() => coordinator(nodes), 'one coordinator', 4 * PASS_INTERVAL_MS))!;
  const before = await snapshot();
  const index = nodes.findIndex((node) => node.nodeId === holder.node);
  const old = nodes[index]!;
  const logFrom = nodes.map((node) => node.log().length);
  const stopping = old.stop('SIGUSR2');
  await waitFor(
    () => old.child.exitCode !== null || old.child.signalCode !== null,
    () => `${old.nodeId} to exit on SIGUSR2\n${old.log().slice(-4000)}`,
    30_000,
  );
  assert.equal(await stopping, 0, 'SIGUSR2 exits 0, leaving the applications serving');
  nodes[index] = await startSail(flagsOf.get(old.nodeId)!, {
    stateDir: old.stateDir,
    port: Number(old.listen.slice(old.listen.lastIndexOf(':') + 1)),
    env: { SVC_LOG_LEVEL: 'debug' },
  });
  logFrom[index] = 0;
  const restartedAt = Date.now();
  await waitFor(
    async () => ((await coordinator(nodes))?.fence ?? 0) > holder.fence,
    'a coordinator under a higher fence',
    TTL_MS + 4 * PASS_INTERVAL_MS + SLACK_MS,
  );
  await assertNothingMoved(before, restartedAt, logFrom);
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
