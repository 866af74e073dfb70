// This node's registry record and heartbeat (docs/fleet.md "Node record"; docs/ingress.md
// "The routing document": only what is running is routed, as live nodes say they serve it). The record
// at `_svc/fleet/nodes/<id>.json` is written at start (`starting`), on every heartbeat, whenever
// what it says changes (state, processes), and last as `draining` with no processes. Only this
// node writes its key, so the writes are unconditional. Liveness: src/registry/liveness.ts.

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

export class NodeRegistration {
  readonly #store: Store;
  readonly #now: () => number;
  #record: NodeRecord;
  /** The ETag of the last write, so the cache need not read this node's own record back. */
  #etag: string | null = null;
  #written = false;
  /** Writes run one at a time, in order, so an older body never lands after a newer one. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(store: Store, identity: NodeIdentity, now: () => number = Date.now) {
    this.#store = store;
    this.#now = now;
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
    this.#written = true;
    return true;
  }
}

function sameExceptBeat(a: NodeRecord, b: NodeRecord): boolean {
  return JSON.stringify({ ...a, beatMs: 0 }) === JSON.stringify({ ...b, beatMs: 0 });
}
