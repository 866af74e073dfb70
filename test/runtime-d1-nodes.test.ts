// D1 on two real nodes (docs/bindings.md "D1 databases", "One writer"): examples/d1 deployed with
// `--replicas all` to two `svc sail` daemons on one bucket. One node takes the database's lease;
// the worker on the other node reaches the same database through it (its daemon forwards the
// query under a node token), so both see every write at once. Another application binding a
// database of the same name reaches none of it. A daemon stopping releases its databases, and the
// other node takes them over with every row.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Bucket, call, keyArg, openBucket, readyAppUrl, type Signer } from './helpers/applications.ts';
import { EXAMPLES, fetchText } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { runSvc, type SailProcess, waitFor } from './helpers/svc.ts';

const READY_DEADLINE_MS = 90_000;

describe('D1 on two nodes', () => {
  let bucket: Bucket;
  let admin: Signer;
  let nodes: SailProcess[];
  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-d1', 'admin', ['*']);
    nodes = [await bucket.sail(['--cell-bin', CELL_REAL]), await bucket.sail(['--cell-bin', CELL_REAL])];
  });
  after(async () => {
    await bucket.close();
  });

  async function deploy(name: string): Promise<void> {
    const run = await runSvc(
      [
        'deploy',
        join(EXAMPLES, 'd1'),
        '--name',
        name,
        '--replicas',
        'all',
        '--node',
        nodes[0]!.url,
        '--key',
        keyArg(admin),
      ],
      { timeoutMs: 120_000 },
    );
    assert.equal(run.code, 0, run.stderr);
  }

  const appOn = (node: SailProcess, application: string) =>
    readyAppUrl(node, admin, application, READY_DEADLINE_MS);

  /**
   * One request's JSON answer. A connection that fails outright (the process being replaced by
   * the node right after it turned ready, as seen once under load) is tried again; any HTTP
   * answer is the answer.
   */
  async function json(url: string): Promise<Record<string, unknown>> {
    const answer = await waitFor(() => fetchText(url), `${url} to answer`, 30_000);
    return JSON.parse(answer!.body);
  }

  it("both nodes' workers reach the one database, through the node holding its lease", async () => {
    await deploy('d1-two');
    const [a, b] = await Promise.all(nodes.map((node) => appOn(node, 'd1-two')));
    assert.ok((await json(`${a}/insert?v=from-a`)).id);
    const listed = await call(nodes[1]!.url, 'GET', '/v1/applications/d1-two/d1/databases', {
      signer: admin,
    });
    assert.equal(listed.status, 200);
    const holder = listed.body.databases[0].served_by;
    assert.equal(holder, nodes[0]!.nodeId, 'the node whose worker wrote first holds the database');
    assert.deepEqual(
      await json(`${b}/count`),
      { count: 1, values: ['from-a'] },
      'node b reads through node a',
    );
    assert.ok((await json(`${b}/insert?v=from-b`)).id, 'node b writes through node a');
    assert.deepEqual(await json(`${a}/count`), { count: 2, values: ['from-a', 'from-b'] });

    // Another application with a database of the same name starts empty.
    await deploy('d1-other');
    const other = await appOn(nodes[1]!, 'd1-other');
    assert.deepEqual(await json(`${other}/count`), { count: 0, values: [] });

    // The holder stops: it releases the lease, and node b takes the database with every row.
    await nodes[0]!.stop();
    assert.deepEqual(await json(`${b}/count`), { count: 2, values: ['from-a', 'from-b'] });
    const after = await call(nodes[1]!.url, 'GET', '/v1/applications/d1-two/d1/databases', { signer: admin });
    assert.equal(after.body.databases[0].served_by, nodes[1]!.nodeId);
  });
});
