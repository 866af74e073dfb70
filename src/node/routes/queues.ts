// docs/api.md "Queues": an application's queues through a node, for operators and CI jobs without
// bucket credentials (`svc queues`): the queues its serving deployment names (its manifest's
// `queues`: producers' queues, consumed queues and their dead-letter queues), each with its
// backlog as `queue.metrics()` counts it (runtime/src/bindings/queue.ts: one LIST per 1,000
// messages) and the node delivering its batches now; and the consumers' settings.
//
// Tier `operator-or-workload`, as the KV routes: the guard has authenticated the caller, checked
// `:name` and enforced scope on it before any handler runs.

import type { FastifyInstance } from 'fastify';
import { backlog } from '../../../runtime/src/bindings/queue.ts';
import { keys } from '../../registry/keys.ts';
import type { Manifest, QueueConsumer } from '../../runtime-tools/layout.ts';
import { getJson, type Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { servingManifest } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };

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
