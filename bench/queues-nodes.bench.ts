// Queues across nodes (docs/bindings.md "Queues", the part on a message sent on another node): how long a
// message takes from `send()` to the consumer's handler when it is sent on one node and the queue
// is delivered by another. Two `svc sail` daemons on one bucket serve a worker with
// `--replicas all`; a first message's handler runs for the whole run on one node, so that node
// holds the queue's lease (with `max_concurrency` 4 it still runs other batches). Then messages
// are sent one every 1.5 s on the other node (each wakes the holder through the node API) and on
// the holder, alternately; latency is from the client's send to the handler's start, p50/p99.
// Run: scripts/with-node node bench/queues-nodes.bench.ts [messages per node]   (default 40)
// Real parts: two svc daemons, workerd, the runtime hosts, the node API, a directory bucket.

import { call, keyArg, openBucket, readyAppUrl } from '../test/helpers/applications.ts';
import { projectDir } from '../test/helpers/artifacts.ts';
import { CELL_BIN, fetchText } from '../test/helpers/cell.ts';
import { runSvc, waitFor } from '../test/helpers/svc.ts';

const perNode = Number(process.argv[2] ?? 40);
const APP = 'queue-bench';

const WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/send') {
      await env.JOBS.send({ key: url.searchParams.get('key') });
      return new Response('sent');
    }
    const seen = {};
    for (const k of (await env.SEEN.list()).keys) seen[k.name] = Number(await env.SEEN.get(k.name));
    return Response.json(seen);
  },
  async queue(batch, env) {
    for (const m of batch.messages) {
      await env.SEEN.put(m.body.key, String(Date.now()));
      if (m.body.key === 'hold') await new Promise((resolve) => setTimeout(resolve, 600000));
    }
  },
};
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const bucket = await openBucket();
  try {
    const admin = await bucket.operator('op-bench', 'admin', ['*']);
    const nodes = await Promise.all([
      bucket.sail(['--cell-bin', CELL_BIN]),
      bucket.sail(['--cell-bin', CELL_BIN]),
    ]);
    const dir = projectDir({
      'cell.jsonc': JSON.stringify({
        name: APP,
        main: 'index.js',
        compatibility_date: '2025-06-01',
        kv_namespaces: [{ binding: 'SEEN', id: 'seen' }],
        queues: {
          producers: [{ binding: 'JOBS', queue: 'jobs' }],
          consumers: [{ queue: 'jobs', max_batch_size: 1, max_batch_timeout: 0, max_concurrency: 4 }],
        },
      }),
      'index.js': WORKER,
    });
    const deployed = await runSvc(
      ['deploy', dir, '--replicas', 'all', '--node', nodes[0]!.url, '--key', keyArg(admin)],
      { timeoutMs: 120_000 },
    );
    if (deployed.code !== 0) throw new Error(deployed.stderr);
    const urls = await Promise.all(nodes.map((node) => readyAppUrl(node, admin, APP)));
    const seen = async () => {
      const answer = await fetchText(`${urls[0]}/seen`);
      return answer?.status === 200 ? (JSON.parse(answer.body) as Record<string, number>) : {};
    };
    const send = async (url: string, key: string) => {
      const answer = await fetchText(`${url}/send?key=${key}`, { signal: AbortSignal.timeout(10_000) });
      if (answer?.status !== 200) throw new Error(`send answered ${answer?.status}`);
    };
    await send(urls[0]!, 'hold');
    await waitFor(async () => (await seen()).hold, 'the holding batch', 60_000);
    const listed = await call(nodes[0]!.url, 'GET', `/v1/applications/${APP}/queues`, { signer: admin });
    const holder = listed.body.queues[0].delivering.node as string;
    const holderIndex = nodes.findIndex((n) => n.nodeId === holder);
    const sentAt = new Map<string, number>();
    for (let i = 0; i < perNode * 2; i++) {
      const other = i % 2 === 0;
      const key = `${other ? 'other' : 'holder'}-${i}`;
      sentAt.set(key, Date.now());
      await send(urls[other ? 1 - holderIndex : holderIndex]!, key);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    }
    let delivered: Record<string, number> = {};
    await waitFor(
      async () => {
        delivered = await seen();
        return [...sentAt.keys()].every((k) => delivered[k] !== undefined);
      },
      'every delivery',
      120_000,
    );
    const latencies = (prefix: string) =>
      [...sentAt]
        .filter(([k]) => k.startsWith(prefix))
        .map(([k, at]) => delivered[k]! - at)
        .sort((a, b) => a - b);
    console.log(`Queues across nodes: ${perNode} messages sent on each node, one every 1.5 s in turns`);
    for (const [label, prefix] of [
      ['sent on the other node (woken through the node API)', 'other-'],
      ['sent on the node holding the queue', 'holder-'],
    ] as const) {
      const l = latencies(prefix);
      console.log(`${label}: p50 ${percentile(l, 50)} ms  p99 ${percentile(l, 99)} ms  max ${l.at(-1)} ms`);
    }
  } finally {
    await bucket.close();
  }
}

await main();
