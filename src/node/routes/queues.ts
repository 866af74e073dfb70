// docs/api.md "Queues": an application's queues through a node, for operators and CI jobs without
// bucket credentials (`svc queues`): the queues its serving deployment names (its manifest's
// `queues`: producers' queues, consumed queues and their dead-letter queues), each with its
// backlog as `queue.metrics()` counts it (runtime/src/bindings/queue.ts: one LIST per 1,000
// messages) and the node delivering its batches now; and the consumers' settings.
//
// Tier `operator-or-workload`, as the KV routes: the guard has authenticated the caller, checked
// `:name` and enforced scope on it before any handler runs.
//
// And the wake (docs/bindings.md "Queues", the part on a message sent on another node): a node whose
// consumer finds a queue held by another node tells that node, which wakes its consumer loops of
// the queue at once instead of at their next listing. Tier `node-or-operator`: nodes send it under
// a node token; it only makes a loop look at the bucket, so an operator may send it too.

import type { FastifyInstance } from 'fastify';
import { backlog } from '../../../runtime/src/bindings/queue.ts';
import type { QueueNudge } from '../../../runtime/src/bindings/queue-runner.ts';
import { Problem } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import { isQueueName } from '../../registry/names.ts';
import type { Manifest, QueueConsumer } from '../../runtime-tools/layout.ts';
import { getJson, type Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { servingManifest } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };
const nodeOrOperator = { config: { auth: 'node-or-operator' as const } };

type NameParams = { Params: { name: string } };

/** One queue as `GET .../queues` lists it. */
export interface QueueView {
  queue: string;
  /** The binding names that send to it. */
  producers: string[];
  /** Whether the deployment consumes it. */
  consumed: boolean;
  /** The queue whose messages past their retries come here, when this is a dead-letter queue. */
  dead_letter_of: string[];
  /** `first_due_ms`: the soonest time a waiting message may be delivered. */
  backlog: { messages: number; bytes: number; first_due_ms: number | null };
  /** The node delivering its batches now, while it holds the queue's lease. */
  delivering: { node: string; until_ms: number } | null;
}

export async function queueRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.get<NameParams>('/v1/applications/:name/queues', scoped, async (request) => {
    const { name } = request.params;
    const { deployment, manifest } = await servingManifest(ctx.store, name);
    const views = await Promise.all(
      namedQueues(manifest).map((queue) => view(ctx.store, name, manifest!, queue)),
    );
    return { application: name, deployment, queues: views };
  });

  app.get<NameParams>('/v1/applications/:name/queues/consumers', scoped, async (request) => {
    const { name } = request.params;
    const { deployment, manifest } = await servingManifest(ctx.store, name);
    const consumers: QueueConsumer[] = manifest?.queues?.consumers ?? [];
    return { application: name, deployment, consumers };
  });

  app.post<{ Params: { name: string; queue: string }; Body: unknown }>(
    '/v1/applications/:name/queues/:queue/wake',
    nodeOrOperator,
    async (request) => {
      const { name, queue } = request.params;
      if (!isQueueName(queue))
        throw new Problem(
          'invalid-input',
          'Invalid queue name',
          `${JSON.stringify(queue)} is not a queue name: 1-63 lowercase letters, digits and hyphens, not starting or ending with a hyphen`,
        );
      const given = (request.body as { visible_ms?: unknown } | null | undefined)?.visible_ms;
      if (given !== undefined && (typeof given !== 'number' || !Number.isFinite(given)))
        throw new Problem(
          'invalid-input',
          'Invalid wake',
          '"visible_ms" must be a time in Unix milliseconds',
        );
      if (!ctx.queueWakers)
        throw new Problem(
          'capability-missing',
          'Queues are not running',
          'this node runs no queue consumers yet; retry',
        );
      // The sender's clock only says how soon: a loop woken early lists and finds nothing due yet.
      const woken = ctx.queueWakers.sent(name, queue, typeof given === 'number' ? given : Date.now());
      return { application: name, queue, woken };
    },
  );
}

/** The longest a wake waits for the other node's answer; it is never waited for by a send. */
const WAKE_TIMEOUT_MS = 5_000;
/** One wake per node and queue at most this often; the one after comes at the end of the window. */
export const WAKE_INTERVAL_MS = 1_000;

/**
 * The runtime host's `QueueNudge` for this node: a wake sent to another node over the node API
 * under a fresh node token, to the address the fleet state of the last reconcile pass gives it.
 * Best effort: a node not found, down or refusing is left to its next listing.
 */
export function nudgeQueueHolder(ctx: NodeContext): QueueNudge {
  const windows = new Map<string, { lastMs: number; trailing: number | null }>();
  const send = async (node: string, application: string, queue: string, visibleMs: number) => {
    const address = ctx.routing?.current()?.nodes.find((n) => n.id === node)?.address;
    if (!address || !ctx.mintNodeToken || node === ctx.nodeId) return;
    try {
      const response = await fetch(
        `http://${address}/v1/applications/${encodeURIComponent(application)}/queues/${encodeURIComponent(queue)}/wake`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${await ctx.mintNodeToken()}`,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ visible_ms: visibleMs }),
          signal: AbortSignal.timeout(WAKE_TIMEOUT_MS),
        },
      );
      await response.arrayBuffer();
    } catch (err) {
      ctx.log.debug({ node, application, queue, err: (err as Error).message }, 'queue wake not delivered');
    }
  };
  return (node, application, queue, visibleMs) => {
    const key = `${node}\n${application}\n${queue}`;
    const window = windows.get(key);
    const now = Date.now();
    if (!window || now - window.lastMs >= WAKE_INTERVAL_MS) {
      windows.set(key, { lastMs: now, trailing: null });
      void send(node, application, queue, visibleMs);
      return;
    }
    if (window.trailing !== null) {
      window.trailing = Math.min(window.trailing, visibleMs);
      return;
    }
    window.trailing = visibleMs;
    setTimeout(
      () => {
        const soonest = window.trailing ?? visibleMs;
        windows.set(key, { lastMs: Date.now(), trailing: null });
        void send(node, application, queue, soonest);
      },
      window.lastMs + WAKE_INTERVAL_MS - now,
    ).unref();
  };
}

/** Every queue the manifest names, in name order. */
function namedQueues(manifest: Manifest | null): string[] {
  const q = manifest?.queues;
  if (!q) return [];
  const names = new Set<string>([
    ...q.producers.map((p) => p.queue),
    ...q.consumers.map((c) => c.queue),
    ...q.consumers.flatMap((c) => (c.dead_letter_queue ? [c.dead_letter_queue] : [])),
  ]);
  return [...names].sort();
}

async function view(
  store: Store,
  application: string,
  manifest: Manifest,
  queue: string,
): Promise<QueueView> {
  const q = manifest.queues!;
  const [waiting, lease] = await Promise.all([
    backlog(store, application, queue),
    getJson<{ node?: unknown; expires_ms?: unknown }>(store, keys.runtimeQueueLease(application, queue)),
  ]);
  const held = lease?.value;
  const delivering =
    held &&
    typeof held.node === 'string' &&
    typeof held.expires_ms === 'number' &&
    held.expires_ms > Date.now()
      ? { node: held.node, until_ms: held.expires_ms }
      : null;
  return {
    queue,
    producers: q.producers.filter((p) => p.queue === queue).map((p) => p.binding),
    consumed: q.consumers.some((c) => c.queue === queue),
    dead_letter_of: q.consumers.filter((c) => c.dead_letter_queue === queue).map((c) => c.queue),
    backlog: {
      messages: waiting.backlogCount,
      bytes: waiting.backlogBytes,
      first_due_ms: waiting.oldestMessageTimestamp === 0 ? null : waiting.oldestMessageTimestamp,
    },
    delivering,
  };
}
