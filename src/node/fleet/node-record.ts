// This node's registry record and heartbeat (docs/fleet.md "Node record"; docs/ingress.md
// "The routing document": only what is running is routed, as live nodes say they serve it). The record
// at `_svc/fleet/nodes/<id>.json` is written at start (`starting`), on every heartbeat, whenever
// what it says changes (state, processes), and last as `draining` with no processes. Only this
// node writes its key, so the writes are unconditional. Liveness: src/registry/liveness.ts.

import { performance } from 'node:perf_hooks';
import { keys } from '../../registry/keys.ts';
import type { NodeRecord, ProcessStatus } from '../../registry/records.ts';
import { putJson, type Store } from '../../store/store.ts';

export interface NodeIdentity {
  id: string;
  advertise: string;
  listen: string;
  labels: Record<string, string>;
  versions: NodeRecord['versions'];
  platformDomains?: string[];
  sealKey?: string;
  wireguard?: NodeRecord['wireguard'];
}

/** How many recent writes are remembered for `landedBy` (a listing may show one a few beats old). */
const REMEMBERED_WRITES = 4;

export class NodeRegistration {
  readonly #store: Store;
  readonly #now: () => number;
  readonly #mono: () => number;
  /** ETag of each recent write -> monotonic time its answer came (the write had landed by then). */
  readonly #landed = new Map<string, number>();
  #record: NodeRecord;
  /** The ETag of the last write, so the cache need not read this node's own record back. */
  #etag: string | null = null;
  #written = false;
  /** Writes run one at a time, in order, so an older body never lands after a newer one. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(
    store: Store,
    identity: NodeIdentity,
    now: () => number = Date.now,
    mono: () => number = () => performance.now(),
  ) {
    this.#store = store;
    this.#now = now;
    this.#mono = mono;
    const nowMs = now();
    this.#record = {
      v: 1,
      ...identity,
      state: 'starting',
      beatMs: nowMs,
      startedAt: new Date(nowMs).toISOString(),
      processes: [],
    };
  }

  /** The record as last written (or about to be); null until the first write landed. */
  current(): NodeRecord | null {
    return this.#written ? this.#record : null;
  }

  /** The record as this node means it now, written or not (for its own routing). */
  intended(): NodeRecord {
    return this.#record;
  }

  isOwnWrite(key: string, etag: string): boolean {
    return key === keys.nodeRecord(this.#record.id) && etag === this.#etag;
  }

  /**
   * The monotonic time by which the write that produced `etag` had landed, when it is a recent
   * one; null otherwise. The liveness tracker dates other nodes' beats against it.
   */
  landedBy(etag: string): number | null {
    return this.#landed.get(etag) ?? null;
  }

  /**
   * Writes the record with a fresh beat. `change` updates state or processes first; the write is
   * skipped when `onlyIfChanged` and nothing but the beat would differ.
   */
  beat(
    change: { state?: NodeRecord['state']; processes?: ProcessStatus[]; cell?: string } = {},
    onlyIfChanged = false,
  ): Promise<boolean> {
    const run = this.#queue.then(() => this.#beat(change, onlyIfChanged));
    this.#queue = run.catch(() => {});
    return run;
  }

  async #beat(
    change: { state?: NodeRecord['state']; processes?: ProcessStatus[]; cell?: string },
    onlyIfChanged: boolean,
  ): Promise<boolean> {
    const before = this.#record;
    const versions = change.cell ? { ...before.versions, cell: change.cell } : before.versions;
    const next: NodeRecord = {
      ...before,
      versions,
      state: change.state ?? before.state,
      processes: change.processes ?? before.processes,
      beatMs: this.#now(),
    };
    if (onlyIfChanged && this.#written && sameExceptBeat(before, next)) return false;
    // The in-memory record moves at once: this node's own routing reads it before the write lands.
    this.#record = next;
    this.#etag = await putJson(this.#store, keys.nodeRecord(next.id), next);
    this.#landed.set(this.#etag, this.#mono());
    if (this.#landed.size > REMEMBERED_WRITES) this.#landed.delete(this.#landed.keys().next().value!);
    this.#written = true;
    return true;
  }
}

function sameExceptBeat(a: NodeRecord, b: NodeRecord): boolean {
  return JSON.stringify({ ...a, beatMs: 0 }) === JSON.stringify({ ...b, beatMs: 0 });
}
