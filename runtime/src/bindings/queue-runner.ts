// Queue consumers, kept running (docs/bindings.md "Queues"): while a front serves a deployment
// that consumes queues, the runtime host runs one loop per queue for it. A loop lists the queue
// (one LIST), and when a batch is due takes the queue's lease in the bucket, so one consumer
// invocation at a time runs per queue in the whole fleet, and delivers it (queue-consumer.ts).
// An empty queue is listed again after a wait that doubles from 1 s to 60 s, and a message a
// producer on this node writes wakes the loop at once (`QueueWakers`, fed by the bindings socket),
// so an idle queue costs one LIST a minute per replica consuming it and holds no lease.

import { keys } from '../../../src/registry/keys.ts';
import type { QueueConsumer } from '../../../src/runtime-tools/layout.ts';
import { isCasConflict, type Store } from '../../../src/store/store.ts';
import { type BatchReport, deliverBatch, type Listing, postBatch } from './queue-consumer.ts';

/** The first wait after an empty listing; each further empty one doubles it, up to the most. */
export const QUEUE_POLL_MIN_MS = 1_000;
export const QUEUE_POLL_MAX_MS = 60_000;
/** How long a queue's lease lasts; it is renewed every third of that while batches run. */
export const QUEUE_LEASE_MS = 30_000;

/** Tells each loop of a queue that a message was written to it on this node. */
export class QueueWakers {
  readonly #listeners = new Map<string, Set<(visibleMs: number) => void>>();

  /** The bindings socket's `QueueSent` (kv-socket.ts). */
  readonly sent = (application: string, queue: string, visibleMs: number): void => {
    for (const listener of this.#listeners.get(`${application}/${queue}`) ?? []) listener(visibleMs);
  };

  on(application: string, queue: string, listener: (visibleMs: number) => void): () => void {
    const key = `${application}/${queue}`;
    const set = this.#listeners.get(key) ?? new Set();
    set.add(listener);
    this.#listeners.set(key, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.#listeners.delete(key);
    };
  }
}

export interface QueueRunnerOptions {
  store: Store;
  application: string;
  node: string;
  log: (line: string) => void;
  wakers: QueueWakers;
}

/**
 * The consumer loops of one front: `prepared` remembers what a started deployment consumes and
 * where its queue trigger listens; `serving` runs the loops of the deployment the front says is
 * active (and stops those of the one before); `stop` ends them all.
 */
export class FrontQueues {
  readonly #options: QueueRunnerOptions;
  readonly #prepared = new Map<string, { consumers: QueueConsumer[]; socket: string }>();
  #serving: { deployment: string; loops: QueueLoop[] } | null = null;

  constructor(options: QueueRunnerOptions) {
    this.#options = options;
  }

  prepared(deployment: string, consumers: QueueConsumer[], socket: string | null): void {
    if (consumers.length > 0 && socket) this.#prepared.set(deployment, { consumers, socket });
  }

  serving(deployment: string | null): void {
    if (this.#serving?.deployment === deployment) return;
    const before = this.#serving;
    this.#serving = null;
    for (const loop of before?.loops ?? []) void loop.stop();
    const next = deployment === null ? undefined : this.#prepared.get(deployment);
    if (deployment === null || !next) return;
    this.#prepared.clear();
    this.#prepared.set(deployment, next);
    this.#serving = {
      deployment,
      loops: next.consumers.map((c) => new QueueLoop(this.#options, c, next.socket)),
    };
  }

  async stop(): Promise<void> {
    const loops = this.#serving?.loops ?? [];
    this.#serving = null;
    await Promise.all(loops.map((l) => l.stop()));
  }
}

/** One queue's loop for one deployment. */
class QueueLoop {
  readonly #o: QueueRunnerOptions;
  readonly #consumer: QueueConsumer;
  readonly #socket: string;
  #stopped = false;
  #wake: (() => void) | null = null;
  /** The soonest a message written on this node may be delivered, since the last listing. */
  #wokenFor: number | null = null;
  readonly #unsubscribe: () => void;
  readonly #done: Promise<void>;
  #lease: { etag: string; renewAtMs: number } | null = null;
  /** When another node's lease on the queue runs out, as last read; null: no other holder seen. */
  #heldElsewhereUntilMs: number | null = null;
  /** The last listing's keys not yet taken (queue-consumer.ts `Listing`). */
  readonly #listing: Listing = { keys: [], listedMs: 0, settling: new Set(), pipeline: true };
  /** Settlements of delivered batches still under way (the next batch does not wait for them). */
  readonly #settling = new Set<Promise<void>>();

  constructor(options: QueueRunnerOptions, consumer: QueueConsumer, socket: string) {
    this.#o = options;
    this.#consumer = consumer;
    this.#socket = socket;
    this.#unsubscribe = options.wakers.on(options.application, consumer.queue, (visibleMs) => {
      this.#wokenFor = Math.min(this.#wokenFor ?? visibleMs, visibleMs);
      this.#wake?.();
    });
    this.#done = this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe();
    this.#wake?.();
    await this.#done;
  }

  async #run(): Promise<void> {
    const { store, application, log } = this.#o;
    const post = postBatch(this.#socket);
    // A handler may run for minutes: the lease is renewed while it does.
    const run: typeof post = async (queue, messages) => {
      const renew = setInterval(() => void this.#holdLease().catch(() => {}), QUEUE_LEASE_MS / 3);
      try {
        return await post(queue, messages);
      } finally {
        clearInterval(renew);
      }
    };
    let idleMs = QUEUE_POLL_MIN_MS;
    while (!this.#stopped) {
      const pending: { nextMs: number | null } = { nextMs: null };
      let report: BatchReport | null = null;
      this.#wokenFor = null;
      this.#heldElsewhereUntilMs = null;
      try {
        report = await deliverBatch(
          store,
          application,
          this.#consumer,
          run,
          Date.now,
          pending,
          () => this.#holdLease(),
          this.#listing,
        );
      } catch (err) {
        log(`cell: queue ${this.#consumer.queue}: ${(err as Error).message}`);
      }
      if (report) {
        const settled = report.settled;
        if (settled) {
          const tracked = settled
            .catch((err: unknown) =>
              log(
                `cell: queue ${this.#consumer.queue}: a message not settled (it will be delivered again): ${(err as Error).message}`,
              ),
            )
            .finally(() => this.#settling.delete(tracked));
          this.#settling.add(tracked);
        }
        idleMs = QUEUE_POLL_MIN_MS;
        this.#logReport(report);
        continue;
      }
      await this.#releaseLease();
      // Held by another node: look again once its lease may have run out (it renews well before).
      const blockedMs = this.#heldElsewhereUntilMs;
      const untilMs = Math.min(
        Date.now() + idleMs,
        pending.nextMs ?? Number.POSITIVE_INFINITY,
        blockedMs === null
          ? Number.POSITIVE_INFINITY
          : Math.max(blockedMs + 100, Date.now() + QUEUE_POLL_MIN_MS),
      );
      await this.#sleepUntil(untilMs);
      if (blockedMs === null) idleMs = Math.min(idleMs * 2, QUEUE_POLL_MAX_MS);
    }
    await this.#releaseLease();
  }

  /** Waits until `untilMs`, or earlier when a message written here is due sooner, or the loop stops. */
  async #sleepUntil(untilMs: number): Promise<void> {
    while (!this.#stopped) {
      const target = Math.min(untilMs, this.#wokenFor ?? Number.POSITIVE_INFINITY);
      const waitMs = target - Date.now();
      if (waitMs <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = null;
    }
  }

  /**
   * Takes or renews the queue's lease; false when another node holds it. The lease is judged on
   * the expiry its holder wrote; a holder renews well before it, and renews while a batch runs.
   */
  async #holdLease(): Promise<boolean> {
    const { store, application, node } = this.#o;
    const now = Date.now();
    if (this.#lease && now < this.#lease.renewAtMs) return true;
    const key = keys.runtimeQueueLease(application, this.#consumer.queue);
    const body = JSON.stringify({ node, expires_ms: now + QUEUE_LEASE_MS });
    try {
      if (this.#lease) {
        this.#lease = {
          etag: await store.put(key, body, { ifMatch: this.#lease.etag }),
          renewAtMs: now + QUEUE_LEASE_MS / 3,
        };
        return true;
      }
      const current = await store.get(key);
      if (current) {
        const held = JSON.parse(Buffer.from(current.body).toString('utf8')) as {
          node?: string;
          expires_ms?: number;
        };
        if (held.node !== node && (held.expires_ms ?? 0) > now) {
          this.#heldElsewhereUntilMs = held.expires_ms ?? now;
          return false;
        }
      }
      const etag = await store.put(key, body, current ? { ifMatch: current.etag } : { ifNoneMatch: '*' });
      this.#lease = { etag, renewAtMs: now + QUEUE_LEASE_MS / 3 };
      return true;
    } catch (err) {
      this.#lease = null;
      if (isCasConflict(err)) return false;
      throw err;
    }
  }

  async #releaseLease(): Promise<void> {
    // What was delivered is settled before another node may take the queue.
    await Promise.all(this.#settling);
    if (!this.#lease) return;
    const { etag } = this.#lease;
    this.#lease = null;
    await this.#o.store
      .delete(keys.runtimeQueueLease(this.#o.application, this.#consumer.queue), { ifMatch: etag })
      .catch(() => {}); // taken over already, or left to expire: either way no longer ours
  }

  #logReport(report: BatchReport): void {
    const { queue } = this.#consumer;
    if (report.outcome !== 'ok')
      this.#o.log(
        `cell: queue ${queue}: the handler ended ${report.outcome}${report.error ? `: ${report.error}` : ''}; ${report.retried} retried`,
      );
    for (const id of report.dropped)
      this.#o.log(
        `cell: queue ${queue}: dropped message ${id} after ${this.#consumer.max_retries + 1} deliveries (no dead_letter_queue)`,
      );
    if (report.deadLettered > 0)
      this.#o.log(
        `cell: queue ${queue}: moved ${report.deadLettered} message(s) to ${this.#consumer.dead_letter_queue} after ${this.#consumer.max_retries + 1} deliveries`,
      );
  }
}
