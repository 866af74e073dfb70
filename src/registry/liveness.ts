// How one node judges whether another is alive (docs/fleet.md "Liveness"): nodes report liveness
// by heartbeat, the routing document drops nodes that stopped beating (docs/ingress.md "The
// routing document"), and the coordinator places nothing on them.
//
// Two rules, for two kinds of reader:
// - A daemon watches the fleet continuously, so it judges from what it saw happen: a
//   LivenessTracker fed with every listing of the node records. A node is dead (out of routing)
//   or lost (its placements go elsewhere) only once the reader has watched it, through prompt
//   reads, for a whole window without seeing a beat. A read that failed or answered slowly is no
//   evidence, and after one every node the reader still held live gets a whole window again: an
//   outage of the bucket stops every node's beats, and is never taken for their death.
// - A reader without history (the command line, a tool, a judgement made once) has only the
//   record's own `beatMs`: `isNodeLive` compares it with the reader's clock, with a window wide
//   enough for the clocks and the schedules it cannot see.

import type { NodeRecord } from './records.ts';

/** The heartbeat and the two windows (settings `liveness.*`; every node of a fleet runs the same). */
export interface LivenessWindows {
  /** How often a node rewrites its record. */
  heartbeatMs: number;
  /** Watched this long without a beat, a node leaves routing. */
  deadAfterMs: number;
  /** Watched this long without a beat, a node's placements go to other nodes. */
  lostAfterMs: number;
}

/** The defaults of the settings (docs/fleet.md "Liveness" says why these). */
export const DEFAULT_LIVENESS: LivenessWindows = {
  heartbeatMs: 5_000,
  deadAfterMs: 9_000,
  lostAfterMs: 60_000,
};

/**
 * A listing counts as evidence only when it answered within this. A bucket slower than that
 * delays beats too, so silence seen through it proves nothing.
 */
export const PROMPT_READ_MS = 2_000;

/** The rule for readers without history: a node is dead once its last beat is older than this. */
export const NODE_DEAD_AFTER_MS = 60_000;

/** True while the node's last heartbeat is recent enough by the reader's clock; draining nodes are still live. */
export function isNodeLive(record: Pick<NodeRecord, 'beatMs'>, nowMs: number): boolean {
  return nowMs - record.beatMs <= NODE_DEAD_AFTER_MS;
}

/** True when the node is live and not draining: it may serve and be placed on. */
export function isNodeServing(record: Pick<NodeRecord, 'beatMs' | 'state'>, nowMs: number): boolean {
  return record.state !== 'draining' && isNodeLive(record, nowMs);
}

/** What one listing showed of a node's record. */
export interface ListedRecord {
  id: string;
  etag: string;
  /** When the bucket last stored the record (the beat's landing, on the bucket's clock). */
  modified: Date;
}

/** When a listing was made: sent and answered on the reader's monotonic clock, sent on its wall clock. */
export interface ReadTiming {
  sentMono: number;
  doneMono: number;
  sentWall: number;
  /**
   * The reader's own record in the same listing, and the monotonic time by which that write had
   * landed: other records' times are then read against it on the bucket's one clock.
   */
  own?: { modified: Date; landedByMono: number };
}

/** What a listing changed in the judgements: nodes newly dead, newly lost, and beating again. */
export interface LivenessChange {
  dead: string[];
  lost: string[];
  back: string[];
}

const DEAD = 0;
const LOST = 1;

interface Watched {
  etag: string;
  /** Per judgement (DEAD, LOST): the monotonic time from which silence is counted. */
  since: [number, number];
  /** Per judgement: reached, and held until the node beats again. */
  reached: [boolean, boolean];
}

/**
 * A daemon's judgement of the other nodes, from its own listings of their records (one per
 * reconcile pass). A changed ETag is a beat; it is dated by the record's `modified` time mapped
 * onto the reader's clock, clamped between the previous listing and this one, so clocks that
 * disagree cost precision, never a wrong judgement beyond one listing interval.
 */
export class LivenessTracker {
  readonly #windows: [number, number];
  readonly #promptMs: number;
  readonly #nodes = new Map<string, Watched>();
  /** When the previous listing was sent; a beat seen now landed after it. */
  #previousSent: number | null = null;
  /** A read failed or was slow since the last prompt listing; a reader that just started counts. */
  #troubled = true;
  /** Monotonic time of the last trouble, so a listing in flight during it is not evidence. */
  #troubleAt = Number.NEGATIVE_INFINITY;

  constructor(windows: Pick<LivenessWindows, 'deadAfterMs' | 'lostAfterMs'>, promptMs = PROMPT_READ_MS) {
    this.#windows = [windows.deadAfterMs, windows.lostAfterMs];
    this.#promptMs = promptMs;
  }

  /** A bucket request of this node failed or answered slowly, at monotonic time `atMono`. */
  trouble(atMono: number): void {
    this.#troubled = true;
    this.#troubleAt = Math.max(this.#troubleAt, atMono);
  }

  /** True once the node was watched a whole `deadAfterMs` without a beat: routing drops it. */
  isDead(id: string): boolean {
    return this.#nodes.get(id)?.reached[DEAD] ?? false;
  }

  /** True once the node was watched a whole `lostAfterMs` without a beat: placement leaves it out. */
  isLost(id: string): boolean {
    return this.#nodes.get(id)?.reached[LOST] ?? false;
  }

  /** Takes in one listing of the other nodes' records (all of them: a node not listed is forgotten). */
  observe(listed: readonly ListedRecord[], timing: ReadTiming): LivenessChange {
    const change: LivenessChange = { dead: [], lost: [], back: [] };
    const present = new Set<string>();
    const floor = this.#previousSent ?? timing.sentMono;
    const staleAtFirstSight: string[] = [];
    for (const record of listed) {
      present.add(record.id);
      const watched = this.#nodes.get(record.id);
      if (!watched) {
        // First sight: nothing watched yet, so the windows start now; only a record older than
        // the fixed window of readers without history leaves routing at once.
        if (timing.sentMono - beatOnReaderClock(record.modified, timing) > NODE_DEAD_AFTER_MS)
          staleAtFirstSight.push(record.id);
        this.#nodes.set(record.id, {
          etag: record.etag,
          since: [timing.sentMono, timing.sentMono],
          reached: [false, false],
        });
        continue;
      }
      if (watched.etag === record.etag) continue;
      const beat = clamp(beatOnReaderClock(record.modified, timing), floor, timing.doneMono);
      if (watched.reached[DEAD] || watched.reached[LOST]) change.back.push(record.id);
      watched.etag = record.etag;
      watched.since = [Math.max(watched.since[DEAD], beat), Math.max(watched.since[LOST], beat)];
      watched.reached = [false, false];
    }
    for (const id of this.#nodes.keys()) if (!present.has(id)) this.#nodes.delete(id);
    this.#previousSent = timing.sentMono;

    const prompt = timing.doneMono - timing.sentMono <= this.#promptMs && this.#troubleAt < timing.sentMono;
    if (!prompt) {
      this.trouble(timing.doneMono);
      return change;
    }
    if (this.#troubled) {
      // The first prompt read after trouble: every judgement not already reached waits a whole
      // window from here, since nobody's beats could land while the bucket failed.
      for (const watched of this.#nodes.values())
        for (const k of [DEAD, LOST])
          if (!watched.reached[k]) watched.since[k] = Math.max(watched.since[k], timing.sentMono);
      this.#troubled = false;
    }
    for (const id of staleAtFirstSight) {
      this.#nodes.get(id)!.reached[DEAD] = true;
      change.dead.push(id);
    }
    for (const [id, watched] of this.#nodes) {
      for (const k of [DEAD, LOST]) {
        if (watched.reached[k] || timing.sentMono - watched.since[k] <= this.#windows[k]) continue;
        watched.reached[k] = true;
        (k === DEAD ? change.dead : change.lost).push(id);
      }
    }
    return change;
  }
}

/**
 * The record's landing time on the reader's monotonic clock, never earlier than it can have been.
 * Against the reader's own record when the listing holds it (both times are the bucket's, so
 * no clock of another machine enters); else by way of the wall clocks. A time given to the whole
 * second (S3 listings) is taken at the end of its second.
 */
function beatOnReaderClock(modified: Date, timing: ReadTiming): number {
  const ms = modified.getTime();
  const landed = ms % 1000 === 0 ? ms + 999 : ms;
  if (timing.own) return timing.own.landedByMono - (timing.own.modified.getTime() - landed);
  return timing.sentMono + (landed - timing.sentWall);
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(Math.max(value, low), Math.max(low, high));
}
