// The coordinator's deploy reaping (docs/deploys.md "Reaper"): in each reaper
// pass, a non-terminal record judged dead (unmoved for the 90 s liveness window, its accepting
// node not answering) is recorded `failed` `deploy-timeout` naming that node (or `deployed`, with
// the application record brought to the selector, when its publish had moved the selector), and a terminal
// record older than 7 days is deleted. Both writes are conditional on the record as read, so a
// node still working on a deploy, or a second reaper, never has its write overwritten.
//
// Cost: one listing of the applications and one of each application's deploys per pass. A record
// is read only when its listing shows it nearly unmoved for the liveness window; a terminal record
// whose ETag is unchanged since an earlier pass is not read again.

import { isProblem } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { isCasConflict, type Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { publishedBy, publishedSteps } from './published.ts';
import {
  type AcceptorView,
  acceptorFromRecord,
  DEPLOY_LIVENESS_MS,
  DEPLOY_RETENTION_MS,
  type DeployRecord,
  DeployRecordWriter,
  isTerminal,
  judgeDeploy,
  ownView,
  readDeployRecord,
  readNodeRecord,
} from './records.ts';
import type { Published } from './runner.ts';

/**
 * How much sooner than the liveness window the listing lets a record through to be read. The
 * judgement goes by the record's `updatedAt`, written by the node's clock before the write began;
 * the listing's modified time is the bucket's clock when the write ended. Without this slack a
 * record a poll already judged dead (by `updatedAt`) could be skipped here for that difference.
 */
const LISTING_SLACK_MS = 10_000;

export interface ReapResult {
  /** Deploy ids recorded failed in this pass. */
  failed: string[];
  /** Deploy ids whose node died after their publish moved the selector, recorded deployed. */
  deployed: string[];
  /** Deploy ids whose terminal records were deleted. */
  deleted: string[];
}

export interface DeployReaperOptions {
  store: Store;
  now?: () => number;
  /**
   * What this node knows of a deploy it accepted itself (it runs it or not); undefined defers to
   * the registry like any other node.
   */
  selfView?: (record: DeployRecord) => AcceptorView | undefined;
}

/** A reaper that remembers terminal records between passes; call `reap()` once per reaper pass. */
export class DeployReaper {
  readonly #store: Store;
  readonly #now: () => number;
  readonly #selfView: DeployReaperOptions['selfView'];
  /** Terminal records by key: ETag as last read and when they became terminal. */
  readonly #terminal = new Map<string, { etag: string; updatedMs: number; id: string }>();

  constructor(options: DeployReaperOptions) {
    this.#store = options.store;
    this.#now = options.now ?? Date.now;
    this.#selfView = options.selfView;
  }

  async reap(): Promise<ReapResult> {
    const result: ReapResult = { failed: [], deployed: [], deleted: [] };
    const now = this.#now();
    const nodes = new Map<string, Promise<NodeRecord | null>>();
    const nodeRecord = (id: string) => {
      let pending = nodes.get(id);
      if (!pending) {
        pending = readNodeRecord(this.#store, id);
        nodes.set(id, pending);
      }
      return pending;
    };
    const seen = new Set<string>();
    const applications = await this.#store.list(keys.appsPrefix, { recursive: false });
    for (const prefix of applications.prefixes) {
      const application = prefix.slice(keys.appsPrefix.length, -1);
      const listing = await this.#store.list(keys.deploysPrefix(application), { recursive: false });
      for (const object of listing.objects) {
        seen.add(object.key);
        // Written well within the window: neither judgeable nor old enough to delete.
        if (now - object.modified.getTime() < DEPLOY_LIVENESS_MS - LISTING_SLACK_MS) continue;
        const known = this.#terminal.get(object.key);
        if (known && known.etag === object.etag) {
          if (now - known.updatedMs > DEPLOY_RETENTION_MS)
            await this.#delete(object.key, known.etag, known.id, result);
          continue;
        }
        const id = object.key.slice(keys.deploysPrefix(application).length).replace(/\.json$/, '');
        const found = await readDeployRecord(this.#store, application, id);
        if (!found) continue;
        const { record, etag } = found;
        if (isTerminal(record.state)) {
          const updatedMs = Date.parse(record.updatedAt);
          const age = Number.isFinite(updatedMs) ? updatedMs : object.modified.getTime();
          this.#terminal.set(object.key, { etag, updatedMs: age, id });
          if (now - age > DEPLOY_RETENTION_MS) await this.#delete(object.key, etag, id, result);
          continue;
        }
        const acceptor =
          this.#selfView?.(record) ?? acceptorFromRecord(await nodeRecord(record.node), record, now);
        const failure = judgeDeploy(record, acceptor, now);
        if (!failure) continue;
        const writer = new DeployRecordWriter(this.#store, record, etag);
        const published = await publishedBy(this.#store, record);
        if (published) {
          if (await settle(writer, published)) result.deployed.push(id);
        } else if (await writer.update({ state: 'failed', ...failure })) result.failed.push(id);
      }
    }
    for (const key of this.#terminal.keys()) if (!seen.has(key)) this.#terminal.delete(key);
    return result;
  }

  async #delete(key: string, etag: string, id: string, result: ReapResult): Promise<void> {
    try {
      if (await this.#store.delete(key, { ifMatch: etag })) result.deleted.push(id);
    } catch (err) {
      if (!isCasConflict(err)) throw err;
    }
    this.#terminal.delete(key);
  }
}

/** A dead deploy whose publish moved the selector: its records follow (a failure waits for the next pass). */
async function settle(writer: DeployRecordWriter, published: Published): Promise<boolean> {
  for (const step of publishedSteps(writer.store, writer, published)) {
    try {
      await step();
    } catch (err) {
      if (!(isProblem(err) && err.code === 'not-found')) throw err; // the application was deleted
    }
  }
  return writer.record.state === 'deployed';
}

/**
 * The reaper the coordinator keeps for its reaper passes (`await reaper.reap()` once per pass,
 * every `coordinator.reapIntervalMs`): it judges this node's own deploys by what its deploy
 * service says of them (it still works on them, or why not), every other node's by its registry
 * record.
 */
export function deployReaperFor(ctx: Pick<NodeContext, 'store' | 'nodeId' | 'deploys'>): DeployReaper {
  return new DeployReaper({
    store: ctx.store,
    selfView: (record) => (record.node !== ctx.nodeId ? undefined : ownView(ctx, record)),
  });
}
