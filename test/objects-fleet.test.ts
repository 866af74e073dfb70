// Durable Objects on two real nodes (docs/bindings.md "Durable Objects on the fleet"):
// examples/durable-objects deployed with `--replicas all` to two `svc sail` daemons on one
// bucket. One node holds the application's objects and serves it; the other's runtime stands by,
// not ready, so both nodes' routing documents send the application's host to the holder alone. A
// counter incremented there; the holder's node lost whole (its daemon and every process under it
// killed with SIGKILL): the other node takes the objects over and serves every acknowledged
// increment, and the routing sends the host to it.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Bucket, openBucket, type Signer } from './helpers/applications.ts';
import { fetchText, processTree } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import {
  counterProcess,
  deployCounter,
  increment,
  oneHolder,
  twoShipPasses,
} from './helpers/objects-counter-fleet.ts';
import { type SailProcess, waitFor } from './helpers/svc.ts';

const APP = 'counter';
const TOKEN = 'objects-fleet-ingress-0123456789';
const DEADLINE_MS = 90_000;

describe('Durable Objects on two nodes', () => {
  let bucket: Bucket;
  let admin: Signer;
  let nodes: SailProcess[];
  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-objects', 'admin', ['*']);
    const flags = ['--cell-bin', CELL_REAL, '--ingress-token', TOKEN, '--platform-domains', 'svc.test'];
    nodes = [await bucket.sail(flags), await bucket.sail(flags)];
    await deployCounter(nodes, admin, APP);
  });
  after(async () => {
    await bucket.close();
  });

  const processes = (node: SailProcess) => counterProcess(node, admin, APP);

  /** The nodes the routing document of `node` sends the application's host to. */
  async function routedTo(node: SailProcess): Promise<string[]> {
    const answer = await fetch(`${node.url}/v1/ingress/routes`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    if (answer.status !== 200) return [];
    const doc = (await answer.json()) as { routes: { host: string; upstreams: { node: string }[] }[] };
    return (doc.routes.find((r) => r.host === `${APP}.svc.test`)?.upstreams ?? []).map((u) => u.node);
  }

  it('one node serves the objects and the routing names it alone; the node lost, the other serves every acknowledged increment', async () => {
    const { holder, others } = await oneHolder(nodes, admin, APP, DEADLINE_MS);
    const other = others[0] as SailProcess;
    for (const node of nodes)
      await waitFor(
        async () => JSON.stringify(await routedTo(node)) === JSON.stringify([holder.nodeId]),
        `${node.nodeId}'s routing to name ${holder.nodeId} alone`,
        DEADLINE_MS,
      );
    const standby = await processes(other);
    assert.equal(standby?.ready, false, 'the standby is not ready');
    // Its front answers once it listens (it may have just been started).
    const statuses = new Set<number | undefined>();
    await waitFor(async () => {
      const status = (await fetchText(`http://127.0.0.1:${standby?.port}/shared`))?.status;
      statuses.add(status);
      return status === 503;
    }, "the standby's port to answer 503");
    assert.ok(!statuses.has(200), 'the standby never served the application');

    const port = (await processes(holder))?.port as number;
    let acknowledged = 0;
    for (let i = 0; i < 20; i++) acknowledged = await increment(port);
    await twoShipPasses(bucket.store, APP);

    for (const pid of processTree(holder.child.pid as number)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    const takenPort = await waitFor(
      async () => {
        const p = await processes(other);
        return p?.ready ? p.port : undefined;
      },
      () => `${other.nodeId} to take the objects over\n${other.log()}`,
      DEADLINE_MS,
    );
    const read = await fetchText(`http://127.0.0.1:${takenPort}/shared`);
    assert.equal(JSON.parse(read?.body ?? '{}').count, acknowledged, 'every acknowledged increment');
    assert.equal(await increment(takenPort as number), acknowledged + 1);
    await waitFor(
      async () => JSON.stringify(await routedTo(other)) === JSON.stringify([other.nodeId]),
      `the routing to name ${other.nodeId}`,
      DEADLINE_MS,
    );
  });
});
