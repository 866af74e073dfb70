// A former holder whose node daemon alone is stopped (docs/bindings.md "Durable Objects on the
// fleet", what is guaranteed): examples/durable-objects deployed with `--replicas
// all` to two `svc sail` daemons on one bucket, the objects' lease shortened to 4 s. The holder's
// daemon is stopped with SIGSTOP, and only it: its `cell serve` front and the objects' workerd run
// on. The front's own deadline (runtime/front/objects.go) passes with no renewal heard, so by the
// time the other node has taken the objects over and serves them, the former holder's port answers
// 503 and its objects' workerd is gone: never two live instances of one object. The daemon
// continued, the former holder stands by and never serves the objects again. Then the new
// holder's daemon restarted (SIGUSR2, started again on its state directory) finds the lease still
// its own and serves on from the same folder, with every increment.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { type Bucket, openBucket, type Signer } from './helpers/applications.ts';
import { fetchText, isRunning, processTree } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import {
  type CounterProcess,
  counterProcess,
  deployCounter,
  increment,
  oneHolder,
  twoShipPasses,
} from './helpers/objects-counter-fleet.ts';
import { type SailProcess, startSail, waitFor } from './helpers/svc.ts';

const APP = 'counter';
const TTL_MS = 4_000;
const DEADLINE_MS = 90_000;

describe('Durable Objects when the holder daemon alone is stopped', () => {
  let bucket: Bucket;
  let admin: Signer;
  let nodes: SailProcess[];
  let flags: string[];
  /** What the first test leaves: the node that took the objects over, its port, the count. */
  let taker: SailProcess | undefined;
  let takerPort = 0;
  let count = 0;
  /** Daemons stopped by the test (continued at the end whatever happens) and the fronts seen. */
  const stopped = new Set<number>();
  const fronts = new Set<number>();
  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-objects-stop', 'admin', ['*']);
    flags = ['--cell-bin', CELL_REAL, '--cell-env', `CELL_OBJECTS_LEASE_TTL_MS=${TTL_MS}`];
    nodes = [await bucket.sail(flags), await bucket.sail(flags)];
    await deployCounter(nodes, admin, APP);
  });
  const restarted: SailProcess[] = [];
  after(async () => {
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {}
    }
    await Promise.all(restarted.map((node) => node.stop()));
    await bucket.close();
    // A front its daemon did not stop (the daemon died first) is not left behind.
    for (const front of fronts)
      for (const pid of processTree(front)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
  });

  const processes = (node: SailProcess) => counterProcess(node, admin, APP);

  it('the former holder answers 503 and its workerd is gone once the other node serves; continued, it stands by', async () => {
    const { holder, others } = await oneHolder(nodes, admin, APP, DEADLINE_MS);
    const other = others[0] as SailProcess;
    const serving = (await processes(holder)) as CounterProcess;
    const front = serving.pid as number;
    assert.ok(front > 0, 'the holder names its runtime process');
    fronts.add(front);
    const workerds = processTree(front).filter((pid) => pid !== front);
    assert.ok(workerds.length > 0, 'the holder runs the objects in a workerd under its front');

    let acknowledged = 0;
    for (let i = 0; i < 10; i++) acknowledged = await increment(serving.port);
    await twoShipPasses(bucket.store, APP);

    // The daemon alone: its front and workerd run on, and nothing will kill them for it.
    const daemon = holder.child.pid as number;
    stopped.add(daemon);
    process.kill(daemon, 'SIGSTOP');
    assert.ok(isRunning(front) && workerds.every(isRunning), 'the front and workerd still run');

    const takenPort = await waitFor<number | undefined>(
      async () => {
        const p = await processes(other);
        return p?.ready ? p.port : undefined;
      },
      () => `${other.nodeId} to take the objects over\n${other.log()}`,
      DEADLINE_MS,
    ).then(Number);
    // From here two instances of an object would run, were the former holder serving: it is not.
    const former = await fetchText(`http://127.0.0.1:${serving.port}/shared`, { method: 'POST' });
    assert.equal(former?.status, 503, `the former holder answered ${former?.status}: ${former?.body}`);
    assert.match(former?.body ?? '', /^The deployment is starting\n$/);
    const health = await fetchText(`http://127.0.0.1:${serving.port}/.well-known/cell/health`);
    assert.equal(health?.status, 503);
    assert.match(JSON.parse(health?.body ?? '{}').detail ?? '', /Durable Objects/);
    assert.deepEqual(
      workerds.filter(isRunning),
      [],
      "the former holder's workerd was stopped before the other node took over",
    );
    assert.ok(isRunning(front), 'the front itself serves on (it answers 503)');

    const read = await fetchText(`http://127.0.0.1:${takenPort}/shared`);
    assert.equal(JSON.parse(read?.body ?? '{}').count, acknowledged, 'every acknowledged increment');
    assert.equal(await increment(takenPort), acknowledged + 1);

    // Continued, the daemon finds the lease gone and says so to its front: it stands by.
    process.kill(daemon, 'SIGCONT');
    stopped.delete(daemon);
    await waitFor(
      async () => /does not hold the Durable Objects/.test((await processes(holder))?.detail ?? ''),
      () => `the former holder's host to say it stands by\n${holder.log()}`,
      DEADLINE_MS,
    );
    // It stays so while the other node renews the lease three times (its looks go on meanwhile).
    const leaseTag = async () => (await bucket.store.stat(keys.runtimeObjectsLease(APP)))?.etag;
    const tags = new Set([await leaseTag()]);
    const seen: string[] = [];
    await waitFor(
      async () => {
        const standby = (await processes(holder)) as CounterProcess;
        const again = await fetchText(`http://127.0.0.1:${standby.port}/shared`, { method: 'POST' });
        const children = processTree(front).filter((pid) => pid !== front);
        if (standby.ready || standby.pid !== front || children.length > 0 || again?.status !== 503)
          seen.push(`ready ${standby.ready}, pid ${standby.pid}, workerd ${children}, ${again?.status}`);
        tags.add(await leaseTag());
        return tags.size > 3;
      },
      'three renewals of the lease by the node that took it',
      DEADLINE_MS,
    );
    assert.deepEqual(seen, [], 'the former holder served the objects again');
    // The objects stay with the node that took them.
    assert.equal(await increment(takenPort), acknowledged + 2);
    assert.equal((await processes(other))?.ready, true);
    taker = other;
    takerPort = takenPort;
    count = acknowledged + 2;
  });

  it('a holder whose daemon restarts (SIGUSR2, started again) finds the lease its own and serves on from the same folder', async () => {
    assert.ok(taker, 'the first test left a holder');
    // Alone on the fleet, so that nobody takes the objects over while the daemon is away.
    for (const node of nodes) if (node !== taker) await node.stop();
    const front = (await processes(taker))?.pid as number;
    fronts.add(front);
    assert.equal(await taker.stop('SIGUSR2'), 0, 'SIGUSR2 restarts keeping the applications');
    const again = await startSail(['--endpoint', bucket.endpoint, ...flags], {
      stateDir: taker.stateDir,
      listen: taker.listen,
    });
    restarted.push(again);
    await waitFor(
      async () => {
        const p = await processes(again);
        return p?.ready && p.pid === front;
      },
      () => `the same runtime, adopted and serving\n${again.log()}`,
      DEADLINE_MS,
    );
    assert.equal(await increment(takerPort), count + 1, 'every increment, from the same folder');
  });
});
