// Fleet events end to end: two real `svc sail` nodes with --observability on one MinIO bucket,
// runtime processes from the cell stand-in (test/helpers/cell-standin.ts, named as such: it honours
// the runtime contract's `serve`; STANDIN_SERVE_CRASH_APPS makes one application's process print
// its error and exit at start, as a worker that throws at start does). `svc traces` reads the
// bucket alone: block and unblock name the admin key, the crashing worker's output shows through
// `--name`, reconcile passes are held back and counted, `--limit` and `--since` keep their rules,
// and it still answers with no node up.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { call, ensureDeployedApplication } from './helpers/applications.ts';
import { standinArtifact } from './helpers/artifacts.ts';
import { CELL_STANDIN, postDeploy, settledDeploy } from './helpers/deploys.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const minioStarting = useMinio();
let store: Store;
let bucketFlags: string[];
const nodes: SailProcess[] = [];
const admin = signerFor('admin-key');
/** Events reach the bucket within a flush; a few flushes and passes are allowed. */
const EVENT_WAIT_MS = 20_000;

before(async () => {
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  bucketFlags = [
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
  ];
  await trustOperator(store, admin);
  await ensureDeployedApplication(store, 'shop', {});
  await ensureDeployedApplication(store, 'broken', {});
  for (const id of ['obs-a', 'obs-b']) {
    nodes.push(
      await startSail([
        ...bucketFlags,
        ...['--node-id', id, '--observability', '--observability-flush-ms', '300'],
        ...['--cell-bin', CELL_STANDIN, '--cell-env', 'STANDIN_SERVE_CRASH_APPS=broken'],
        ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
      ]),
    );
  }
});

after(async () => {
  await Promise.all(nodes.map((node) => node.stop()));
  await store?.close();
});

async function traces(...args: string[]) {
  return runSvc(['traces', ...bucketFlags, ...args]);
}

// biome-ignore lint/suspicious/noExplicitAny: JSON output read member by member.
async function tracesJson(...args: string[]): Promise<any> {
  const run = await traces('--json', ...args);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout);
}

test('block and unblock appear in svc traces, naming the admin key', async () => {
  assert.equal(
    (await call(nodes[0]!.url, 'POST', '/v1/applications/shop/block', { signer: admin })).status,
    200,
  );
  assert.equal(
    (await call(nodes[1]!.url, 'POST', '/v1/applications/shop/unblock', { signer: admin })).status,
    200,
  );
  const shown = await waitFor(
    async () => {
      const out = await tracesJson('--name', 'shop');
      // biome-ignore lint/suspicious/noExplicitAny: see above
      const kinds = out.events.map((e: any) => e.kind);
      return kinds.includes('application.blocked') && kinds.includes('application.unblocked') ? out : null;
    },
    'block and unblock in svc traces',
    EVENT_WAIT_MS,
  );
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const byKind = (kind: string) => shown.events.find((e: any) => e.kind === kind);
  assert.equal(byKind('application.blocked').actor, 'admin-key');
  assert.equal(byKind('application.blocked').node, 'obs-a');
  assert.equal(byKind('application.unblocked').actor, 'admin-key');
  assert.equal(byKind('application.unblocked').node, 'obs-b');
  assert.ok(
    Date.parse(byKind('application.blocked').at) <= Date.parse(byKind('application.unblocked').at),
    'in order',
  );
  assert.ok(
    shown.events.every((e: { application?: string }) => e.application === 'shop'),
    '--name keeps one application',
  );

  const table = await traces('--name', 'shop');
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^TIME\s+NODE\s+KIND\s+APPLICATION\s+ACTOR\s+DETAIL/m);
  assert.match(table.stdout, /obs-a\s+application\.blocked\s+shop\s+admin-key/);
  assert.match(table.stdout, /obs-b\s+application\.unblocked\s+shop\s+admin-key/);
});

test('a worker that fails at start shows its output through svc traces --name', async () => {
  const out = await waitFor(
    async () => {
      const run = await traces('--name', 'broken');
      return /standin: crashing/.test(run.stdout) ? run : null;
    },
    "the crashing worker's output in svc traces",
    EVENT_WAIT_MS,
  ).then((run) => run!);
  assert.match(out.stdout, /process\.(exited|crash-looping)\s+broken/);
  assert.match(out.stdout, /why="cell serve exited with 3"/);
  assert.match(out.stdout, /^ {4}\| standin: crashing$/m, 'the output tail, indented under its event');
  const json = await tracesJson('--name', 'broken');
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const exited = json.events.find((e: any) => /^process\.(exited|crash-looping)$/.test(e.kind));
  assert.match(exited.tail, /standin: crashing/);
});

test('reconcile passes are held back with their count stated; --all includes them from both nodes', async () => {
  const held = await waitFor(async () => {
    const out = await tracesJson();
    return out.heldBack > 0 ? out : null;
  }, 'held-back passes');
  // biome-ignore lint/suspicious/noExplicitAny: see above
  assert.ok(held.events.every((e: any) => e.kind !== 'reconcile.pass'));
  const table = await traces();
  assert.match(table.stdout, /^\d+ reconcile passes held back \(--all includes them\)\.$/m);
  assert.doesNotMatch(table.stdout, /reconcile\.pass/);

  const all = await tracesJson('--all', '--limit', '100000');
  assert.equal(all.heldBack, 0);
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const passes = all.events.filter((e: any) => e.kind === 'reconcile.pass');
  // biome-ignore lint/suspicious/noExplicitAny: see above
  assert.deepEqual([...new Set(passes.map((e: any) => e.node))].sort(), ['obs-a', 'obs-b']);
  assert.ok(passes.length >= held.heldBack, 'every held-back pass is there with --all');
  const allTable = await traces('--all');
  assert.match(allTable.stdout, /reconcile\.pass/);
  assert.match(allTable.stdout, /Reconcile passes included \(--all\): none held back\./);
  // Node and lease events are there too.
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const kinds = new Set(all.events.map((e: any) => e.kind));
  for (const kind of ['node.joined', 'coordinator.acquired', 'process.started', 'process.ready'])
    assert.ok(kinds.has(kind), `${kind} in ${[...kinds]}`);
});

test('--observability gives runtime processes CELL_OTEL=1', async () => {
  const shop = await waitFor(async () => {
    for (const node of nodes) {
      const state = await call(node.url, 'GET', '/v1/state', { signer: admin });
      // biome-ignore lint/suspicious/noExplicitAny: see above
      const p = state.body?.processes?.find((x: any) => x.application === 'shop' && x.ready);
      if (p) return p;
    }
    return null;
  }, 'a ready shop process');
  const answer = await fetch(`http://127.0.0.1:${shop.port}/env`);
  const { env } = (await answer.json()) as { env: Record<string, string> };
  assert.equal(env.CELL_OTEL, '1');
});

test('deploys: accepted, deployed, and failed with its code, naming the deployer', async () => {
  const good = await postDeploy(nodes[0]!.url, 'shop', standinArtifact(), { signer: admin });
  assert.equal(good.status, 202, JSON.stringify(good.body));
  const bad = await postDeploy(
    nodes[1]!.url,
    'shop',
    standinArtifact({ fail: 'Could not resolve "./x.js"' }),
    {
      signer: admin,
    },
  );
  assert.equal(bad.status, 202, JSON.stringify(bad.body));
  await settledDeploy(nodes[0]!.url, good.body.id, admin);
  const failed = await settledDeploy(nodes[1]!.url, bad.body.id, admin);
  const out = await waitFor(async () => {
    const o = await tracesJson('--name', 'shop');
    // biome-ignore lint/suspicious/noExplicitAny: see above
    const deploys = o.events.filter((e: any) => e.kind.startsWith('deploy.'));
    return deploys.length >= 4 ? deploys : null;
  }, 'deploy events');
  type Shown = { deploy?: string; kind: string; actor?: string; node?: string };
  const of = (id: string) =>
    out!.filter((e: Shown) => e.deploy === id).map((e: Shown) => [e.kind, e.actor, e.node]);
  assert.deepEqual(of(good.body.id), [
    ['deploy.accepted', 'admin-key', 'obs-a'],
    ['deploy.deployed', 'admin-key', 'obs-a'],
  ]);
  assert.deepEqual(of(bad.body.id), [
    ['deploy.accepted', 'admin-key', 'obs-b'],
    ['deploy.failed', 'admin-key', 'obs-b'],
  ]);
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const failure = out!.find((e: any) => e.kind === 'deploy.failed');
  assert.equal(failure.code, failed.code);
});

test('--limit keeps the newest and says how many older ones it left out', async () => {
  const every = await tracesJson('--all', '--limit', '100000');
  const one = await tracesJson('--all', '--limit', '1');
  assert.equal(one.events.length, 1);
  assert.ok(one.beyondLimit >= every.events.length - 1);
  const newest = every.events.at(-1);
  assert.ok(Date.parse(one.events[0].at) >= Date.parse(newest.at), 'the newest event is kept');
  const table = await traces('--all', '--limit', '1');
  assert.match(table.stdout, /^1 events since \S+; \d+ older left out by --limit 1\.$/m);
});

test('--since takes durations and instants; a window after everything is empty', async () => {
  const since = new Date().toISOString();
  const empty = await traces('--since', since, '--name', 'shop');
  assert.equal(empty.code, 0, empty.stderr);
  assert.match(empty.stdout, /^No events of shop since /m);
  const long = await tracesJson('--since', '7d', '--name', 'shop');
  assert.ok(long.events.length >= 2);
  const byDay = await tracesJson('--since', since.slice(0, 10), '--name', 'shop');
  assert.ok(byDay.events.length >= 2, 'a date is its midnight UTC');
});

test('--limit and --since refusals, and a bad --name', async () => {
  for (const [args, title] of [
    [['--limit', '0'], 'Invalid --limit'],
    [['--limit', '2.5'], 'Invalid --limit'],
    [['--limit', 'all'], 'Invalid --limit'],
    [['--since', '0s'], 'Invalid --since'],
    [['--since', '1w'], 'Invalid --since'],
    [['--since', 'yesterday'], 'Invalid --since'],
    [['--since', '2026-02-30'], 'Invalid --since'],
    [['--since', '2999-01-01T00:00:00Z'], 'Invalid --since'],
  ] as const) {
    const run = await traces(...args);
    assert.equal(run.code, 1, `${args.join(' ')}: ${run.stdout}`);
    assert.match(
      run.stderr,
      new RegExp(`^svc: ${title}: .+ \\[urn:svc:invalid-input\\]$`, 'm'),
      args.join(' '),
    );
  }
  const slug = await traces('--name', 'Not_A_Name');
  assert.equal(slug.code, 1);
  assert.match(slug.stderr, /\[urn:svc:invalid-slug\]/);
});

test('--ingress-access-log without --observability is refused at start', async () => {
  await assert.rejects(
    startSail([...bucketFlags, '--ingress-access-log', `${tempDir()}/access.log`]),
    /svc: Access log needs observability: --ingress-access-log .+ \[urn:svc:invalid-input\]/,
  );
});

test('svc traces reads the bucket with no node up, draining included', async () => {
  await Promise.all(nodes.map((node) => node.stop()));
  const out = await tracesJson();
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const draining = out.events.filter((e: any) => e.kind === 'node.draining' || e.kind === 'node.drained');
  // biome-ignore lint/suspicious/noExplicitAny: see above
  assert.deepEqual([...new Set(draining.map((e: any) => e.node))].sort(), ['obs-a', 'obs-b']);
});
