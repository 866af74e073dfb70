// Following the selector (docs/runtime.md "cell serve"): which deployment this replica serves.
// When the fleet-wide selector moves (or this node's secrets change), the new deployment starts in
// its own workerd beside the serving one and takes over only once it answers; the previous one
// then drains and stops, so a switch fails no request. The node's daemon sends SIGHUP when it
// learns of a move; the selector poll is a slow safety net.

import { keys } from '../../src/registry/keys.ts';
import {
  KNOWN_FEATURES,
  type Manifest,
  parseManifest,
  parsePointer,
} from '../../src/runtime-tools/layout.ts';
import type { Store } from '../../src/store/store.ts';
import { CellError } from './errors.ts';
import { Instance, type InstanceContext } from './instance.ts';
import type { SecretsFile } from './secrets.ts';

/** The longest wait before a deployment that failed to start is tried again. */
const MAX_RETRY_MS = 300_000;

/** Features `cell serve` can run; `containers` is understood by prune but not run here. */
const SERVABLE_FEATURES = KNOWN_FEATURES.filter((f) => f !== 'containers');

/** Where a replica stands: nothing published, its first deployment starting, serving, or failed. */
export type ServingStatus = 'no-deployment' | 'starting' | 'ready' | 'failed';

export interface FollowerOptions {
  application: string;
  store: Store;
  context: InstanceContext;
  secretsFile: SecretsFile;
  tuning: { pollMs: number; drainMs: number; retryMs: number };
  log: (line: string) => void;
  /** A deployment took over: the lease and the cron schedules follow it. */
  onServing: (manifest: Manifest) => void;
}

/** The serving deployment of one replica, and the switch to the next. */
export class SelectorFollower {
  private readonly options: FollowerOptions;
  /** The instance new requests go to; null before the first deployment is ready. */
  active: Instance | null = null;
  /** Instances that served before a switch, finishing their requests. */
  readonly draining = new Set<Instance>();
  status: ServingStatus = 'no-deployment';
  /** Why the selected deployment is not serving, while it is not. */
  lastError: string | undefined;
  stopping = false;
  /** The selector's ETag once acted on; a different one means the selector moved. */
  private seenEtag: string | null = null;
  private retryAtMs = 0;
  /** The selection (selector ETag and secrets) that failed to start, and how many times in a row. */
  private failedSelection: string | null = null;
  private failures = 0;
  private lastLogged = '';
  private pollTimer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** A look was asked for while one was under way: it may have read the selector too early. */
  private lookAgain = false;

  constructor(options: FollowerOptions) {
    this.options = options;
  }

  /** No more looks or switches: the process is stopping. Answers every instance still running. */
  stop(): Instance[] {
    this.stopping = true;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    return [...(this.active ? [this.active] : []), ...this.draining];
  }

  async poll(): Promise<void> {
    await this.check();
    if (!this.stopping) this.pollTimer = setTimeout(() => void this.poll(), this.options.tuning.pollMs);
  }

  /** One look at the selector; concurrent calls share it. */
  private check(): Promise<void> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  /**
   * SIGHUP: the node's daemon learned that the selector moved. Looked at now; if a look is under
   * way it may have read the selector before the move, so one more follows it.
   */
  selectorMoved(): void {
    if (this.stopping) return;
    if (!this.checking) {
      void this.check();
      return;
    }
    if (this.lookAgain) return;
    this.lookAgain = true;
    void this.checking.then(() => {
      this.lookAgain = false;
      return this.check();
    });
  }

  private async checkOnce(): Promise<void> {
    if (this.stopping) return;
    const key = keys.runtimeSelector(this.options.application);
    let selection: string | null = null;
    try {
      // One stat of the secrets file and a HEAD per poll; bodies are read only when they moved.
      const secrets = this.options.secretsFile.read();
      const info = await this.options.store.stat(key);
      if (!info) return;
      const current = this.active?.secretsDigest === secrets.digest;
      if (info.etag === this.seenEtag && current) return;
      // A selection that failed to start is tried again after a growing wait, or as soon as it moves.
      if (`${info.etag}|${secrets.digest}` === this.failedSelection && Date.now() < this.retryAtMs) return;
      const object = await this.options.store.get(key);
      if (!object) return;
      selection = `${object.etag}|${secrets.digest}`;
      const pointer = parsePointer(object.body);
      if (!pointer.ok) throw new CellError(`${key} cannot be read: ${pointer.why}`);
      const { script, deployment } = pointer.value;
      const same = this.active?.manifest.script === script && this.active.manifest.deployment === deployment;
      if (same && current) {
        this.seenEtag = object.etag;
        return;
      }
      // Only the secrets changed: the serving deployment starts again beside itself and takes over.
      const manifest =
        same && this.active ? this.active.manifest : await this.readManifest(script, deployment);
      if (this.stopping) return;
      if (!this.active) this.status = 'starting';
      this.options.log(`cell: starting ${script}/${deployment}${same ? ' (its secrets changed)' : ''}`);
      const next = await Instance.start(this.options.context, manifest, secrets, (gone) => this.lost(gone));
      if (this.stopping) {
        await next.stop();
        return;
      }
      this.seenEtag = object.etag;
      this.failedSelection = null;
      this.failures = 0;
      this.lastLogged = '';
      this.promote(next);
    } catch (err) {
      const message = err instanceof CellError ? err.message : (err as Error).message;
      if (selection !== null) {
        this.lastError = message;
        if (!this.active) this.status = 'failed';
        this.failures = selection === this.failedSelection ? this.failures + 1 : 1;
        this.failedSelection = selection;
        this.retryAtMs =
          Date.now() + Math.min(this.options.tuning.retryMs * 2 ** (this.failures - 1), MAX_RETRY_MS);
      }
      // The same failure once, not once a poll.
      if (message !== this.lastLogged) {
        this.lastLogged = message;
        this.options.log(`cell: ${message}${this.active ? ` (still serving ${this.active.label})` : ''}`);
      }
    }
  }

  private async readManifest(script: string, deployment: string): Promise<Manifest> {
    const key = keys.runtimeManifest(this.options.application, script, deployment);
    const object = await this.options.store.get(key);
    if (!object) throw new CellError(`the selector points at ${script}/${deployment}, but ${key} is missing`);
    const parsed = parseManifest(object.body);
    if (!parsed.ok) {
      if (parsed.unknown)
        throw new CellError(`${key} needs a newer runtime (${parsed.why}); upgrade cell on this node`);
      throw new CellError(`${key} cannot be read: ${parsed.why}`);
    }
    const missing = parsed.value.required_features.filter((f) => !SERVABLE_FEATURES.includes(f));
    if (missing.length > 0)
      throw new CellError(`${key} requires ${missing.join(', ')}, which cell serve cannot run`);
    return parsed.value;
  }

  /** Makes `next` the instance new requests go to; the previous one drains, then stops. */
  private promote(next: Instance): void {
    const previous = this.active;
    this.active = next;
    this.status = 'ready';
    this.lastError = undefined;
    this.options.log(`cell: serving ${next.label}${previous ? ` (was ${previous.label})` : ''}`);
    this.options.onServing(next.manifest);
    if (previous) {
      this.draining.add(previous);
      void previous
        .drain(this.options.tuning.drainMs)
        .then(() => previous.stop())
        .finally(() => this.draining.delete(previous));
    }
  }

  /** workerd of an instance exited on its own: forget it and start the selected deployment again. */
  private lost(instance: Instance): void {
    if (this.draining.has(instance) || this.stopping) return;
    if (this.active === instance) {
      this.active = null;
      this.status = 'starting';
      this.seenEtag = null;
      this.failedSelection = null;
      this.retryAtMs = 0;
      void instance.stop();
      void this.check();
    }
  }
}
