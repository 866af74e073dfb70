// The node's event recorder: events are appended in memory and written as one object per batch
// (`_svc/events/<hour>/<node>/<ms>-<seq>.json`), on the observability loop's flush (every
// `observability.flushMs`, 60 s by default) or sooner when a batch grows large. A reconcile pass
// every 5 s is thus 12 lines of a batch a minute, not 12 bucket writes.

import type { Logger } from 'pino';
import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import type { EventInput, EventSink, FleetEvent } from './events.ts';
import { hourOf } from './hours.ts';

/** A batch this large is written at once rather than at the next flush. */
export const MAX_BATCH_EVENTS = 1_000;
/** While the bucket refuses writes, at most this many events wait; the oldest go first. */
export const MAX_HELD_EVENTS = 20_000;

/** The stored body of one batch. */
export interface EventBatch {
  v: 1;
  node: string;
  events: FleetEvent[];
}

export interface RecorderOptions {
  store: Store;
  nodeId: string;
  now?: () => number;
  log?: Pick<Logger, 'warn'>;
}

export class EventRecorder implements EventSink {
  readonly #o: RecorderOptions;
  readonly #now: () => number;
  #pending: FleetEvent[] = [];
  #seq = 0;
  #dropped = 0;
  #flushing: Promise<void> = Promise.resolve();

  constructor(options: RecorderOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  emit(event: EventInput): void {
    const recorded: FleetEvent = { ...event, at: new Date(this.#now()).toISOString(), node: this.#o.nodeId };
    this.#pending.push(recorded);
    if (this.#pending.length === MAX_BATCH_EVENTS) void this.flush();
  }

  /** Events emitted but not yet written. */
  pending(): number {
    return this.#pending.length;
  }

  /** Writes what is pending as one batch; a failed write keeps the events for the next flush. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(() => this.#flush());
    return this.#flushing;
  }

  async #flush(): Promise<void> {
    if (this.#pending.length === 0) return;
    const events = this.#pending;
    this.#pending = [];
    const ms = this.#now();
    const batch: EventBatch = { v: 1, node: this.#o.nodeId, events };
    try {
      await this.#o.store.put(
        keys.eventBatch(hourOf(ms), this.#o.nodeId, ms, this.#seq++),
        JSON.stringify(batch),
      );
    } catch (err) {
      this.#pending = [...events, ...this.#pending];
      const over = this.#pending.length - MAX_HELD_EVENTS;
      if (over > 0) {
        this.#pending.splice(0, over);
        this.#dropped += over;
      }
      this.#o.log?.warn(
        { err, held: this.#pending.length, dropped: this.#dropped },
        'could not write events',
      );
    }
  }
}
