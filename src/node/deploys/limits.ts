// Deploy capacity on one node (docs/cli.md "svc sail" deploy limits; docs/api.md "Deploys": 429 `deploy-overloaded` with `retry-after: 1`). Counted per
// node and per application:
//
//   pending  deploys receiving their artifact or queued for a runner  (queuedTasks)
//   active   deploys whose `cell publish` runs                          (activeTasks)
//   staged   bytes on disk: the received artifact and what it unpacked (stagedBytes)
//
// A deploy is admitted before its body is read when a pending place is free and the bytes its
// content-length announces fit; its bytes are counted as they land, and one that would overflow
// the staged bytes is refused then. A deploy that could never fit, even alone, is `resource-limit`
// rather than an endless `deploy-overloaded`. Pure bookkeeping: no I/O, no timers.

import { Problem } from '../../problem.ts';

export interface DeployLimitSettings {
  activeTasks: number;
  applicationActiveTasks: number;
  queuedTasks: number;
  applicationQueuedTasks: number;
  stagedBytes: number;
  applicationStagedBytes: number;
}

/** docs/deploys.md "Capacity": deploy intake `retry-after`. */
export const RETRY_AFTER_S = 1;

export function overloaded(detail: string): Problem {
  return new Problem('deploy-overloaded', 'Deploy capacity full', detail, {
    headers: { 'retry-after': String(RETRY_AFTER_S) },
  });
}

interface Counts {
  pending: number;
  active: number;
  staged: number;
}

/** One deploy's hold on capacity, from admission to release. */
export class DeployTicket {
  readonly application: string;
  #limits: DeployLimits;
  #phase: 'pending' | 'active' | 'released' = 'pending';
  #staged = 0;

  constructor(limits: DeployLimits, application: string) {
    this.#limits = limits;
    this.application = application;
  }

  get phase(): 'pending' | 'active' | 'released' {
    return this.#phase;
  }

  get staged(): number {
    return this.#staged;
  }

  /** Counts bytes landing on disk; throws `deploy-overloaded` (or `resource-limit`) past a limit. */
  stage(bytes: number): void {
    if (this.#phase === 'released') return;
    this.#limits.stageFor(this, this.#staged, bytes);
    this.#staged += bytes;
  }

  /** Bytes removed from disk (the compressed artifact once unpacked). */
  unstage(bytes: number): void {
    const freed = Math.min(bytes, this.#staged);
    this.#staged -= freed;
    this.#limits.adjust(this.application, { staged: -freed });
  }

  /** Moves from pending to active; the caller checked `canActivate`. */
  activate(): void {
    if (this.#phase !== 'pending') return;
    this.#phase = 'active';
    this.#limits.adjust(this.application, { pending: -1, active: 1 });
  }

  /** Gives everything back; safe to call more than once. */
  release(): void {
    if (this.#phase === 'released') return;
    const was = this.#phase;
    this.#phase = 'released';
    this.#limits.adjust(this.application, {
      pending: was === 'pending' ? -1 : 0,
      active: was === 'active' ? -1 : 0,
      staged: -this.#staged,
    });
    this.#staged = 0;
  }
}

export class DeployLimits {
  readonly settings: DeployLimitSettings;
  readonly #node: Counts = { pending: 0, active: 0, staged: 0 };
  readonly #applications = new Map<string, Counts>();

  constructor(settings: DeployLimitSettings) {
    this.settings = settings;
  }

  /** What is counted now, for the node and for one application. */
  counts(application?: string): { node: Counts; application?: Counts } {
    const node = { ...this.#node };
    if (application === undefined) return { node };
    return { node, application: { ...(this.#applications.get(application) ?? zero()) } };
  }

  /**
   * Admits a deploy before its body is read: a pending place must be free for the node and the
   * application, and `announcedBytes` (the content-length, when sent) must fit the staged limits.
   */
  admit(application: string, announcedBytes = 0): DeployTicket {
    const s = this.settings;
    const app = this.#applications.get(application) ?? zero();
    if (this.#node.pending >= s.queuedTasks) {
      throw overloaded(
        `this node is receiving or queueing ${this.#node.pending} deploys, its limit (deploy.queuedTasks); retry`,
      );
    }
    if (app.pending >= s.applicationQueuedTasks) {
      throw overloaded(
        `"${application}" has ${app.pending} deploys receiving or queued on this node, its limit (deploy.applicationQueuedTasks); retry`,
      );
    }
    if (announcedBytes > 0) this.#checkStaged(application, 0, announcedBytes);
    this.adjust(application, { pending: 1 });
    return new DeployTicket(this, application);
  }

  /** Whether a pending deploy of this application may start now. */
  canActivate(application: string): boolean {
    const app = this.#applications.get(application) ?? zero();
    return this.#node.active < this.settings.activeTasks && app.active < this.settings.applicationActiveTasks;
  }

  /** @internal: DeployTicket.stage */
  stageFor(ticket: DeployTicket, alreadyStaged: number, bytes: number): void {
    this.#checkStaged(ticket.application, alreadyStaged, bytes);
    this.adjust(ticket.application, { staged: bytes });
  }

  #checkStaged(application: string, alreadyStaged: number, bytes: number): void {
    const s = this.settings;
    const app = this.#applications.get(application) ?? zero();
    const own = alreadyStaged + bytes;
    if (own > s.applicationStagedBytes || own > s.stagedBytes) {
      const limit = Math.min(s.applicationStagedBytes, s.stagedBytes);
      throw new Problem(
        'resource-limit',
        'Artifact too large to stage',
        `this deploy needs more than ${limit} staged bytes (artifact plus what it unpacks), over deploy.stagedBytes or deploy.applicationStagedBytes`,
      );
    }
    if (this.#node.staged + bytes > s.stagedBytes) {
      throw overloaded(
        `this node's staged deploy bytes would pass ${s.stagedBytes} (deploy.stagedBytes); retry`,
      );
    }
    if (app.staged + bytes > s.applicationStagedBytes) {
      throw overloaded(
        `staged bytes of "${application}" on this node would pass ${s.applicationStagedBytes} (deploy.applicationStagedBytes); retry`,
      );
    }
  }

  /** @internal: moves the counters of the node and of one application together. */
  adjust(application: string, delta: Partial<Counts>): void {
    const app = this.#applications.get(application) ?? zero();
    for (const field of ['pending', 'active', 'staged'] as const) {
      const change = delta[field] ?? 0;
      this.#node[field] += change;
      app[field] += change;
    }
    if (app.pending === 0 && app.active === 0 && app.staged === 0) this.#applications.delete(application);
    else this.#applications.set(application, app);
  }
}

function zero(): Counts {
  return { pending: 0, active: 0, staged: 0 };
}
