// Deploy records (docs/deploys.md "Deploy records", "GET /v1/deploys/:id", "Reaper"):
// every state a deploy enters is one registry record at `_svc/apps/<name>/deploys/<id>.json`
// (keys.deploy), written by the node that accepted it with conditional writes.
//
//   accepted   the artifact is staged and checked; waiting for a runner slot
//   uploading  `cell publish` is running: the deployment is being uploaded into the bucket
//   deployed   published; `deployment` names it (terminal)
//   failed     `code` and `detail` say why (terminal)
//
// While a deploy is in flight its node rewrites `updatedAt` every PROGRESS_BEAT_MS, so a record
// that has not moved for the 90 s liveness window belongs to a node that stopped working on it.
// Whether that node is answering is judged from its node record (the fleet liveness rule) and,
// when known, whether it restarted since it accepted the deploy.

import { randomBytes } from 'node:crypto';
import type { ProblemCode } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import { isNodeLive } from '../../registry/liveness.ts';
import { isApplicationName } from '../../registry/names.ts';
import type { DeploySource, NodeRecord } from '../../registry/records.ts';
import { getJson, isCasConflict, putJson, type Store } from '../../store/store.ts';

export type DeployState = 'accepted' | 'uploading' | 'deployed' | 'failed';

/** docs/deploys.md "Deploy records": a non-terminal record unmoved this long, its node silent, is dead. */
export const DEPLOY_LIVENESS_MS = 90_000;
/** docs/deploys.md "Deploy records": terminal records are deleted by the reaper after this long. */
export const DEPLOY_RETENTION_MS = 7 * 24 * 3600_000;
/** Attempts of one record write whose condition keeps being lost to writes of our own. */
const WRITE_ATTEMPTS = 4;
/** How often the accepting node rewrites an in-flight record, well inside the liveness window. */
export const PROGRESS_BEAT_MS = 30_000;

/** The wire form (docs/deploys.md "Deploy records"). */
export interface DeployStatus {
  id: string;
  application: string;
  state: DeployState;
  deployment?: string;
  code?: string;
  detail?: string;
  /**
   * What the runtime warned of while publishing (config keys it ignores, ...), one sentence each;
   * absent when it warned of nothing. An addition to the spec's DeployStatus.
   */
  warnings?: string[];
}

/** The stored record: the status plus who accepted it, when, and from what. */
export interface DeployRecord extends DeployStatus {
  v: 1;
  /** Id of the node that accepted the deploy and runs it. */
  node: string;
  /** The verified caller, as describeCaller renders it. */
  by: string;
  createdAt: string;
  updatedAt: string;
  /** Where the code came from, when the metadata said. */
  source?: DeploySource;
  /** The worker config at the artifact root, handed to the runtime. */
  config?: string;
  /** Compressed artifact bytes, and archive entries. */
  artifactBytes?: number;
  entries?: number;
  /** The script the runtime published, from its last stdout line. */
  script?: string;
}

const ID = /^([a-z0-9]+(?:-[a-z0-9]+)*)\.([0-9a-f]{16})$/;

/** A fresh deploy id: `<name>.<16 hex>`. */
export function newDeployId(application: string): string {
  return `${application}.${randomBytes(8).toString('hex')}`;
}

/** The application half of a deploy id; null when the value is no deploy id. */
export function applicationOfDeployId(id: string): string | null {
  const match = ID.exec(id);
  return match && isApplicationName(match[1]) ? match[1]! : null;
}

export function isTerminal(state: DeployState): boolean {
  return state === 'deployed' || state === 'failed';
}

/** The DeployStatus of a record: the spec's fields, and the runtime's warnings when there were any. */
export function statusOf(record: DeployRecord): DeployStatus {
  const status: DeployStatus = { id: record.id, application: record.application, state: record.state };
  if (record.deployment !== undefined) status.deployment = record.deployment;
  if (record.code !== undefined) status.code = record.code;
  if (record.detail !== undefined) status.detail = record.detail;
  if (Array.isArray(record.warnings) && record.warnings.length > 0) status.warnings = record.warnings;
  return status;
}

/** A stored record as read; null when absent. */
export async function readDeployRecord(
  store: Store,
  application: string,
  id: string,
): Promise<{ record: DeployRecord; etag: string } | null> {
  const found = await getJson<DeployRecord>(store, keys.deploy(application, id)).catch((err) => {
    // A body that is not JSON is no record of ours.
    if (err instanceof SyntaxError) return null;
    throw err;
  });
  if (!found || !isDeployRecord(found.value)) return null;
  return { record: found.value, etag: found.etag };
}

function isDeployRecord(value: unknown): value is DeployRecord {
  const record = value as Partial<DeployRecord> | null;
  return (
    !!record &&
    typeof record === 'object' &&
    typeof record.id === 'string' &&
    typeof record.application === 'string' &&
    typeof record.node === 'string' &&
    typeof record.updatedAt === 'string' &&
    ['accepted', 'uploading', 'deployed', 'failed'].includes(record.state as string)
  );
}

/**
 * The record's writer on the accepting node. Every write is conditional on the last one. Only
 * the accepting node writes a record in flight; anyone else only ends it (the reaper, a restart's
 * clean-up). So a lost condition with the record still in flight is a write of ours whose answer
 * was lost (the bucket acted, then did not answer): the writer goes on from it. A lost condition
 * with the record ended means someone else decided the deploy's fate, and the writer stops.
 */
export class DeployRecordWriter {
  readonly store: Store;
  #etag: string | null = null;
  /** Writes go one at a time: each is conditional on the ETag the one before produced. */
  #chain: Promise<unknown> = Promise.resolve();
  /** Told each record this writer writes or finds written (a long poll waits on them). */
  readonly #watchers = new Set<(record: DeployRecord) => void>();
  #record: DeployRecord;

  /** A writer for a new record, or (with `etag`) for one as read: its first write is conditional on it. */
  constructor(store: Store, record: DeployRecord, etag: string | null = null) {
    this.store = store;
    this.#record = record;
    this.#etag = etag;
  }

  get record(): DeployRecord {
    return this.#record;
  }

  set record(record: DeployRecord) {
    this.#record = record;
    for (const watcher of this.#watchers) watcher(record);
  }

  /** Calls `watcher` with every record set from now on; answers how to stop. */
  watch(watcher: (record: DeployRecord) => void): () => void {
    this.#watchers.add(watcher);
    return () => this.#watchers.delete(watcher);
  }

  /** Writes the first record; the id is fresh, so it must not exist. */
  async create(): Promise<void> {
    await this.#serial(async () => {
      this.#etag = await putJson(this.store, this.#key(), this.record, { ifNoneMatch: '*' });
    });
  }

  /**
   * Moves the record on (or, with no change, just refreshes `updatedAt`). Answers false when the
   * record is terminal or was changed by someone else meanwhile (the reaper judged it): then it
   * is left as they wrote it, and `record` shows what they wrote.
   */
  update(change: Partial<DeployRecord> = {}): Promise<boolean> {
    return this.#write(change, () => false);
  }

  /**
   * Records that the deploy's publish moved the selector (`change` is the `deployed` state): as
   * `update`, but a `deploy-timeout` judgement written meanwhile is replaced, since the deployment
   * serves; it was made while this node could not write (the bucket did not answer). Answers
   * whether the record now says `deployed`.
   */
  async settle(change: Partial<DeployRecord> & { state: 'deployed' }): Promise<boolean> {
    await this.#write(change, (current) => current.state === 'failed' && current.code === 'deploy-timeout');
    return this.record.state === 'deployed';
  }

  /** Writes `change` over the record unless it ended, or ended in a way `replaceable` allows. */
  #write(change: Partial<DeployRecord>, replaceable: (ended: DeployRecord) => boolean): Promise<boolean> {
    return this.#serial(async () => {
      for (let attempt = 1; ; attempt++) {
        if (isTerminal(this.record.state) && !replaceable(this.record)) return false;
        const next: DeployRecord = { ...this.record, ...change, updatedAt: new Date().toISOString() };
        if (next.state !== 'failed') {
          delete next.code;
          delete next.detail;
        }
        try {
          this.#etag = await putJson(
            this.store,
            this.#key(),
            next,
            this.#etag ? { ifMatch: this.#etag } : { ifNoneMatch: '*' },
          );
          this.record = next;
          return true;
        } catch (err) {
          if (!isCasConflict(err)) throw err;
          const current = await readDeployRecord(this.store, this.record.application, this.record.id);
          if (!current) {
            this.record = {
              ...this.record,
              state: 'failed',
              code: 'internal',
              detail: 'the record was removed',
            };
            return false;
          }
          this.record = current.record;
          this.#etag = current.etag;
          if (attempt >= WRITE_ATTEMPTS) return false;
        }
      }
    });
  }

  /** Records a failure with its code and detail. */
  fail(code: ProblemCode | string, detail: string): Promise<boolean> {
    return this.update({ state: 'failed', code, detail });
  }

  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(work, work);
    this.#chain = run.catch(() => {});
    return run;
  }

  #key(): string {
    return keys.deploy(this.record.application, this.record.id);
  }
}

/** Whether the node that accepted a deploy still works on it, and if not, why. */
export interface AcceptorView {
  answering: boolean;
  /** Why it is not answering, for the detail. */
  why?: string;
}

/**
 * The fleet's view of the accepting node, from its registry record (null when it has none): it
 * answers for the deploy while it is live by the liveness rule and has not restarted since it
 * accepted the deploy.
 */
export function acceptorFromRecord(
  node: NodeRecord | null,
  record: DeployRecord,
  nowMs: number,
): AcceptorView {
  if (!node) return { answering: false, why: 'it has no node record' };
  if (!isNodeLive(node, nowMs)) {
    return { answering: false, why: `its last heartbeat was at ${new Date(node.beatMs).toISOString()}` };
  }
  const started = Date.parse(node.startedAt);
  const accepted = Date.parse(record.createdAt);
  if (Number.isFinite(started) && Number.isFinite(accepted) && started > accepted) {
    return { answering: false, why: `it restarted at ${node.startedAt}, after accepting the deploy` };
  }
  return { answering: true };
}

/** What the accepting node says of its own deploy: its deploy service knows. */
export function ownView(
  ctx: { deploys?: { view(record: DeployRecord): AcceptorView } | undefined },
  record: DeployRecord,
): AcceptorView {
  return ctx.deploys?.view(record) ?? { answering: false, why: 'its deploy service is not running' };
}

/** Whether a record has stood still for the liveness window, so its node must be asked about. */
export function isUnmoved(record: DeployRecord, nowMs: number): boolean {
  if (isTerminal(record.state)) return false;
  const movedMs = Date.parse(record.updatedAt);
  return !Number.isFinite(movedMs) || nowMs - movedMs >= DEPLOY_LIVENESS_MS;
}

/**
 * The read-time judgement (docs/deploys.md "GET /v1/deploys/:id"): a non-terminal record that
 * has not moved for the liveness window, whose accepting node is not answering, is failed
 * `deploy-timeout` naming that node. Answers the failure, or null when the record stands.
 */
export function judgeDeploy(
  record: DeployRecord,
  acceptor: AcceptorView,
  nowMs: number,
): { code: 'deploy-timeout'; detail: string } | null {
  if (!isUnmoved(record, nowMs) || acceptor.answering) return null;
  return {
    code: 'deploy-timeout',
    detail: `node ${record.node}, which accepted this deploy, is not answering (${acceptor.why ?? 'unknown'}); the deploy was last seen ${record.state} at ${record.updatedAt}; deploy again`,
  };
}

/** A node's registry record; null when absent or unreadable. */
export async function readNodeRecord(store: Store, id: string): Promise<NodeRecord | null> {
  const found = await getJson<NodeRecord>(store, keys.nodeRecord(id)).catch((err) => {
    if (err instanceof SyntaxError) return null;
    throw err;
  });
  const record = found?.value;
  return record && typeof record === 'object' && typeof record.beatMs === 'number' ? record : null;
}
