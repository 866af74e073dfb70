// Queue consumers, kept running (docs/bindings.md "Queues"): while a front serves a deployment
// that consumes queues, the runtime host runs one loop per queue for it. A loop lists the queue
// (one LIST), and when a batch is due takes the queue's lease in the bucket, so one node at a time
// delivers a queue in the whole fleet, and runs up to `max_concurrency` batches of it at once
// (queue-consumer.ts), never one message in two of them. The lease is owner-lease.ts's, judged on
// this node's own clocks (`observed`): no node compares its clock with another's.
// An empty queue is listed again after a wait that doubles from 1 s to 60 s; a message a producer
// on this node writes wakes the loop at once (`QueueWakers`, fed by the bindings socket), and a
// loop that finds the queue held by another node nudges that node's loop through the node API
// (`QueueWakers.nudge`), so an idle queue costs one LIST a minute per replica and holds no lease.

import { keys } from '../../../src/registry/keys.ts';
import type { QueueConsumer } from '../../../src/runtime-tools/layout.ts';
import type { Store } from '../../../src/store/store.ts';
import { OwnerLease, type OwnerLeaseRecord } from './owner-lease.ts';
import { type BatchReport, deliverBatch, type Listing, postBatch, type RunBatch } from './queue-consumer.ts';

/** The first wait after an empty listing; each further empty one doubles it, up to the most. */
export const QUEUE_POLL_MIN_MS = 1_000;
export const QUEUE_POLL_MAX_MS = 60_000;
/** How long a queue's lease lasts; it is renewed every third of that while this node holds it. */
export const QUEUE_LEASE_MS = 30_000;
/** Batches of one queue run at once when its consumer sets no `max_concurrency`. */
export const QUEUE_DEFAULT_CONCURRENCY = 10;

/**
 * Tells another node that a batch of a queue is due (the node API's wake route); best effort, its
 * failures are the nudger's to swallow.
 */
export type QueueNudge = (node: string, application: string, queue: string, visibleMs: number) => void;

/** Tells each loop of a queue that a message was written to it on this node. */
export class QueueWakers {
  readonly #listeners = new Map<string, Set<(visibleMs: number) => void>>();
  /** Reaches another node's loops; absent (a runtime without a node daemon): nobody is told. */
  readonly nudge: QueueNudge;

  constructor(nudge: QueueNudge = () => {}) {
    this.nudge = nudge;
  }

  /** The bindings socket's `QueueSent` (kv-socket.ts), and the node API's wake route. */
  readonly sent = (application: string, queue: string, visibleMs: number): number => {
    const listeners = this.#listeners.get(`${application}/${queue}`) ?? new Set();
    for (const listener of listeners) listener(visibleMs);
    return listeners.size;
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
  /** How many batches may run at once: `max_concurrency`, else `QUEUE_DEFAULT_CONCURRENCY`. */
  readonly #limit: number;
  #stopped = false;
  #wake: (() => void) | null = null;
  /** The soonest a message written on this node may be delivered, since the last listing. */
  #wokenFor: number | null = null;
  readonly #unsubscribe: () => void;
  readonly #done: Promise<void>;
  /** The queue's lease (owner-lease.ts), judged on this node's clocks only. */
  readonly #lease: OwnerLease;
  /** Lease operations one at a time: each write is conditional on the one before. */
  #leaseChain: Promise<unknown> = Promise.resolve();
  /** Renews the lease every third of its lifetime while this loop holds it. */
  #renewing: NodeJS.Timeout | null = null;
  /** Who holds the lease, as the last failed take found; null: no other holder seen. */
  #heldBy: OwnerLeaseRecord | null = null;
  /** The last listing's keys not yet taken (queue-consumer.ts `Listing`). */
  readonly #listing: Listing = { keys: [], listedMs: 0, settling: new Set(), pipeline: true };
  /** Batches whose handler has not answered yet: at most `#limit`. */
  readonly #running = new Set<Promise<void>>();
  /** Settlements of answered batches still under way (the next batch does not wait for them). */
  readonly #settling = new Set<Promise<void>>();

  constructor(options: QueueRunnerOptions, consumer: QueueConsumer, socket: string) {
    this.#o = options;
    this.#consumer = consumer;
    this.#socket = socket;
    this.#limit = consumer.max_concurrency ?? QUEUE_DEFAULT_CONCURRENCY;
    this.#lease = new OwnerLease(
      options.store,
      keys.runtimeQueueLease(options.application, consumer.queue),
      options.node,
      QUEUE_LEASE_MS,
      'observed',
    );
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
    const post = postBatch(this.#socket);
    let idleMs = QUEUE_POLL_MIN_MS;
    while (!this.#stopped) {
      if (this.#running.size >= this.#limit) {
        // Every invocation allowed is under way: the next batch waits for one to answer.
        await Promise.race(this.#running);
        continue;
      }
      const pending: { nextMs: number | null } = { nextMs: null };
      this.#wokenFor = null;
      this.#heldBy = null;
      let started = false;
      try {
        started = await this.#startBatch(post, pending);
      } catch (err) {
        this.#o.log(`cell: queue ${this.#consumer.queue}: ${(err as Error).message}`);
      }
      if (started) {
        idleMs = QUEUE_POLL_MIN_MS;
        continue;
      }
      if (this.#running.size === 0) await this.#releaseLease();
      const holder = this.#heldBy as OwnerLeaseRecord | null;
      // Held by another node: tell it a batch is due here (best effort: a node that sleeps in its
      // backoff takes it at once), and look again once the lease may be taken if left unrenewed.
      if (holder) this.#o.wakers.nudge(holder.node, this.#o.application, this.#consumer.queue, Date.now());
      const takeoverMs = holder ? this.#lease.takeoverInMs() : null;
      const untilMs = Math.min(
        Date.now() + idleMs,
        pending.nextMs ?? Number.POSITIVE_INFINITY,
        takeoverMs === null
          ? Number.POSITIVE_INFINITY
          : Date.now() + Math.max(takeoverMs + 100, QUEUE_POLL_MIN_MS),
      );
      await this.#sleepUntil(untilMs);
      if (!holder) idleMs = Math.min(idleMs * 2, QUEUE_POLL_MAX_MS);
    }
    await Promise.all(this.#running);
    await this.#releaseLease();
  }

  /**
   * Starts the next batch if one is due and this node holds the queue: true once its messages
   * are set aside (its handler then runs while the loop goes on), false when none was started.
   */
  async #startBatch(post: RunBatch, pending: { nextMs: number | null }): Promise<boolean> {
    const { store, application, log } = this.#o;
    let taken = false;
    let onTaken!: () => void;
    const takenSignal = new Promise<void>((resolve) => {
      onTaken = () => {
        taken = true;
        resolve();
      };
    });
    const batch = deliverBatch(
      store,
      application,
      this.#consumer,
      post,
      Date.now,
      pending,
      () => this.#holdLease(),
      this.#listing,
      onTaken,
    );
    await Promise.race([takenSignal, batch]);
    if (!taken) return false;
    const running: Promise<void> = batch
      .then(
        (report) => {
          if (report) this.#answered(report);
        },
        (err: unknown) => log(`cell: queue ${this.#consumer.queue}: ${(err as Error).message}`),
      )
      .finally(() => {
        this.#running.delete(running);
        // A loop asleep looks again: the lease is given up once nothing runs and nothing is due.
        this.#wake?.();
      });
    this.#running.add(running);
    return true;
  }

  /** A batch's handler answered: its settlement goes on, tracked; what became of it is logged. */
  #answered(report: BatchReport): void {
    const { log, wakers, application } = this.#o;
    const { queue, dead_letter_queue } = this.#consumer;
    const settled = report.settled;
    if (settled) {
      const tracked: Promise<void> = settled
        .then(() => {
          // A message moved to the dead-letter queue wakes its consumer on this node.
          if (report.deadLettered > 0 && dead_letter_queue)
            wakers.sent(application, dead_letter_queue, Date.now());
        })
        .catch((err: unknown) =>
          log(
            `cell: queue ${queue}: a message not settled (it will be delivered again): ${(err as Error).message}`,
          ),
        )
        .finally(() => this.#settling.delete(tracked));
      this.#settling.add(tracked);
    }
    this.#logReport(report);
  }

  /** Waits until `untilMs`, or earlier when a message written here is due sooner, or the loop stops. */
  async #sleepUntil(untilMs: number): Promise<void> {
    while (!this.#stopped) {
      const target = Math.min(untilMs, this.#wokenFor ?? Number.POSITIVE_INFINITY);
      const waitMs = target - Date.now();
      if (waitMs <= 0) return;
      const woken = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), waitMs);
        this.#wake = () => {
          clearTimeout(timer);
          resolve(true);
        };
      });
      this.#wake = null;
      // A batch that answered ends the wait: the loop decides whether to keep the lease.
      if (woken && this.#wokenFor === null) return;
    }
  }

  /**
   * Whether this node may start a batch: it holds the queue's lease, valid on its monotonic clock,
   * or takes it now (free, released, or seen unrenewed for a whole lifetime). False when another
   * node holds it (`#heldBy` says which).
   */
  #holdLease(): Promise<boolean> {
    const run = this.#leaseChain.then(async () => {
      if (this.#renewing && this.#lease.valid()) return true;
      const got = await this.#lease.acquire();
      if (!got.held) {
        this.#stopRenewing();
        this.#heldBy = got.holder;
        return false;
      }
      this.#stopRenewing();
      this.#renewing = setInterval(() => this.#renew(), QUEUE_LEASE_MS / 3);
      return true;
    });
    this.#leaseChain = run.catch(() => {});
    return run;
  }

  #renew(): void {
    this.#leaseChain = this.#leaseChain
      .then(async () => {
        if (!this.#renewing) return;
        // Changed by someone else: no batch starts here until the lease is taken again.
        if (!(await this.#lease.renew())) this.#stopRenewing();
      })
      .catch(() => {}); // the bucket did not answer: the next renewal tries again, validity runs down
  }

  #stopRenewing(): void {
    if (this.#renewing) clearInterval(this.#renewing);
    this.#renewing = null;
  }

  async #releaseLease(): Promise<void> {
    // What was delivered is settled before another node may take the queue.
    await Promise.all(this.#settling);
    if (!this.#renewing) return;
    const run = this.#leaseChain.then(async () => {
      if (this.#running.size > 0 || !this.#renewing) return;
      this.#stopRenewing();
      await this.#lease.release();
    });
    this.#leaseChain = run.catch(() => {}); // left to expire: no longer ours either way
    await this.#leaseChain;
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
