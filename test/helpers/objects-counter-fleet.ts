// examples/durable-objects (a counter object per name) on two or more real `svc sail` nodes, for
// the tests of Durable Objects on the fleet (test/objects-fleet.test.ts,
// test/objects-stopped-daemon.test.ts): the deploy to every node, each node's runtime process of
// the application, an increment, and the wait for exactly one node to serve the objects.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { keys } from '../../src/registry/keys.ts';
import type { Store } from '../../src/store/store.ts';
import { call, keyArg, type Signer } from './applications.ts';
import { EXAMPLES, fetchText } from './cell.ts';
import { runSvc, type SailProcess, waitFor } from './svc.ts';

/** A node's runtime process of the application, as `GET /v1/state` lists it. */
export interface CounterProcess {
  port: number;
  ready: boolean;
  pid?: number;
  detail?: string;
}

/** Deploys the counter as `app` with `--replicas all` through the first node. */
export async function deployCounter(nodes: SailProcess[], admin: Signer, app: string): Promise<void> {
  const run = await runSvc(
    [
      ...['deploy', join(EXAMPLES, 'durable-objects'), '--name', app, '--replicas', 'all'],
      ...['--node', nodes[0]!.url, '--key', keyArg(admin)],
    ],
    { timeoutMs: 120_000 },
  );
  assert.equal(run.code, 0, run.stderr);
}

/** The application's process on `node`, or undefined when it runs none. */
export async function counterProcess(
  node: SailProcess,
  admin: Signer,
  app: string,
): Promise<CounterProcess | undefined> {
  const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
    processes?: (CounterProcess & { application: string })[];
  };
  return state.processes?.find((p) => p.application === app);
}

/** One increment of the `shared` counter through the runtime port; answers the new count. */
export async function increment(port: number): Promise<number> {
  const answer = await fetchText(`http://127.0.0.1:${port}/shared`, { method: 'POST' });
  assert.equal(answer?.status, 200, answer?.body);
  return JSON.parse(answer?.body ?? '{}').count;
}

/**
 * Waits until one node serves the objects and every node runs the application's process (the
 * others standing by), failing at once if two ever serve; answers the holder and the others.
 */
export async function oneHolder(
  nodes: SailProcess[],
  admin: Signer,
  app: string,
  deadlineMs: number,
): Promise<{ holder: SailProcess; others: SailProcess[] }> {
  const index = await waitFor(
    async () => {
      const found = await Promise.all(nodes.map((node) => counterProcess(node, admin, app)));
      const ready = found.flatMap((p, i) => (p?.ready ? [i] : []));
      assert.ok(ready.length <= 1, 'two nodes serve the objects at once');
      return ready.length === 1 && found.every((p) => p) ? (ready[0] as number) + 1 : 0;
    },
    "one node serving, the others' runtimes running",
    deadlineMs,
  );
  const holder = nodes[index - 1] as SailProcess;
  return { holder, others: nodes.filter((node) => node !== holder) };
}

/**
 * Waits for two ship passes of the application's objects after now: the second began after the
 * first one's PUT, so every increment answered before this call is in the bucket.
 */
export async function twoShipPasses(store: Store, app: string): Promise<void> {
  const newest = async () =>
    (await store.list(keys.runtimeObjectsNamespacesPrefix(app), { recursive: true })).objects
      .map((o) => o.key)
      .filter((key) => key.endsWith('/snapshot') && !key.includes('/metadata/'))
      .sort()
      .at(-1);
  const first = await waitFor(newest, 'a snapshot');
  await waitFor(async () => (await newest()) !== first, 'the next pass');
  const second = await newest();
  await waitFor(async () => (await newest()) !== second, 'one more pass');
}
