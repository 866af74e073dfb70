// Queues on two real nodes (docs/bindings.md "Queues", the part on a message sent on another node): a worker
// deployed with `--replicas all` to two `svc sail` daemons on one bucket. A message whose handler
// runs for 45 s keeps the queue's lease on the node delivering it; once that node's consumer loop is
// deep in its listing backoff (its next listing more than 15 s away), a message sent on the other
// node is delivered by the holder within 10 s, well before the 60 s backoff: the sending node's
// loop finds the queue held and wakes the holder's through the node API, under a node token.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Bucket, call, keyArg, openBucket, readyAppUrl, type Signer } from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { CELL_BIN, fetchText } from './helpers/cell.ts';
import { runSvc, type SailProcess, waitFor } from './helpers/svc.ts';

const APP = 'queue-wake';
/** The listing backoff's first steps (runtime/src/bindings/queue-runner.ts): 1+2+4+8 s, then 16. */
const DEEP_IN_BACKOFF_MS = 16_500;
/** Shorter than the gap to the holder's next listing then (16 s), and than the 60 s most. */
const WAKE_DEADLINE_MS = 10_000;

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/release') {
      await env.SEEN.put('release', String(Date.now()));
      return new Response('released');
    }
    if (url.pathname === '/send') {
      await env.SLOW.send({ key: url.searchParams.get('key') });
      return new Response('sent');
    }
    const seen = {};
    for (const k of (await env.SEEN.list()).keys) seen[k.name] = Number(await env.SEEN.get(k.name));
    return Response.json(seen);
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.SEEN.put(m.body.key, String(Date.now()));
      // Holds its batch, and so the queue's lease, until the test releases it (45 s at most).
      const until = Date.now() + 45000;
      if (m.body.key === 'hold')
        while (!(await env.SEEN.get('release')) && Date.now() < until) await scheduler.wait(100);
    }
  },
};
`;

describe('Queues on two nodes', () => {
  let bucket: Bucket;
  let admin: Signer;
  let nodes: SailProcess[];
  before(async () => {
    bucket = await openBucket();
    admin = await bucket.operator('op-queues', 'admin', ['*']);
    nodes = await Promise.all([bucket.sail(['--cell-bin', CELL_BIN]), bucket.sail(['--cell-bin', CELL_BIN])]);
  });
  after(async () => {
    await bucket.close();
  });

  it("a message sent on a node whose queue another node holds wakes the holder's consumer", async () => {
    const dir = projectDir({
      'cell.jsonc': JSON.stringify({
        name: APP,
        main: 'index.js',
        compatibility_date: '2025-06-01',
        kv_namespaces: [{ binding: 'SEEN', id: 'seen' }],
        queues: {
          producers: [{ binding: 'SLOW', queue: 'slow' }],
          consumers: [{ queue: 'slow', max_batch_size: 1, max_batch_timeout: 0, max_concurrency: 2 }],
        },
      }),
      'index.js': WORKER,
    });
    const deployed = await runSvc(
      ['deploy', dir, '--replicas', 'all', '--node', nodes[0]!.url, '--key', keyArg(admin)],
      { timeoutMs: 120_000 },
    );
    assert.equal(deployed.code, 0, deployed.stderr);
    const urls = await Promise.all(nodes.map((node) => readyAppUrl(node, admin, APP)));
    const seen = async (url: string) => {
      const answer = await fetchText(`${url}/seen`);
      return answer?.status === 200 ? (JSON.parse(answer.body) as Record<string, number>) : {};
    };
    const send = async (url: string, key: string) => {
      const answer = await fetchText(`${url}/send?key=${key}`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(answer?.status, 200, answer?.body);
    };

    await send(urls[0]!, 'hold');
    const holdStarted = (await waitFor(
      async () => (await seen(urls[0]!)).hold,
      'the holding batch to start',
      60_000,
    ))!;
    const listed = await call(nodes[0]!.url, 'GET', `/v1/applications/${APP}/queues`, { signer: admin });
    const holder = listed.body.queues.find((q: { queue: string }) => q.queue === 'slow').delivering?.node;
    const holderIndex = nodes.findIndex((n) => n.nodeId === holder);
    assert.ok(holderIndex >= 0, `a node delivers the queue (${JSON.stringify(listed.body)})`);
    const sender = urls[1 - holderIndex]!;

    // The holder's loop lists the queue 1, 2, 4 and 8 s after each empty look since the take;
    // only time says when it is past those.
    await waitFor(
      () => Date.now() >= holdStarted + DEEP_IN_BACKOFF_MS,
      'the holder deep in its backoff',
      30_000,
    );
    const sentMs = Date.now();
    await send(sender, 'wake');
    const delivered = await waitFor(
      async () => (await seen(sender)).wake,
      'the message sent on the other node delivered',
      WAKE_DEADLINE_MS,
    );
    assert.ok(delivered! - sentMs < WAKE_DEADLINE_MS);
    assert.ok((await seen(sender)).hold === holdStarted, 'the holding batch was delivered once');
    assert.equal((await fetchText(`${urls[holderIndex]}/release`))?.status, 200);
  });
});
