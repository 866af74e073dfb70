// The supervisor's pure decisions (docs/cli.md "svc sail": `--port-range-start`,
// `--port-range-end`, `--port-quarantine-ms`): which port a runtime process gets, and how long to
// wait before restarting one that exited. Time is handed in, so both are tested without clocks.

/** One port the pool knows of: held by an application, or released by it at `releasedAtMs`. */
export interface PortAssignment {
  port: number;
  application: string;
  releasedAtMs?: number;
}

/** What a pool starts from and whom it tells of changes (port-file.ts keeps them on disk). */
export interface PortPoolMemory {
  /** Assignments of a previous run, with the time they are restored at. */
  restored?: { assignments: readonly PortAssignment[]; nowMs: number };
  /** Called with every assignment after each change. */
  onChange?: (assignments: PortAssignment[]) => void;
}

/**
 * Ports for runtime processes. An application keeps its port across restarts; a released port is
 * kept from every other application for the quarantine, so an ingress still holding the old
 * address never reaches a different application there. The same application may take it back.
 */
export class PortPool {
  readonly #start: number;
  readonly #end: number;
  readonly #quarantineMs: number;
  /** port -> application holding it. */
  readonly #held = new Map<number, string>();
  /** port -> who released it and when. */
  readonly #released = new Map<number, { application: string; atMs: number }>();
  readonly #onChange: ((assignments: PortAssignment[]) => void) | undefined;

  /**
   * `memory.restored` are the assignments a previous run left: a port held then counts as
   * released by its application at `nowMs` (its process may be gone, and an ingress may still
   * send that application's requests there), so it goes back to that application first and is
   * quarantined from the others from now. Ports outside the range are dropped.
   */
  constructor(range: readonly [number, number], quarantineMs: number, memory: PortPoolMemory = {}) {
    [this.#start, this.#end] = range;
    this.#quarantineMs = quarantineMs;
    this.#onChange = memory.onChange;
    for (const a of memory.restored?.assignments ?? []) {
      if (a.port < this.#start || a.port > this.#end) continue;
      const atMs = a.releasedAtMs ?? memory.restored!.nowMs;
      this.#released.set(a.port, { application: a.application, atMs });
    }
  }

  /** Every port held or released, lowest first. */
  assignments(): PortAssignment[] {
    const held = [...this.#held].map(([port, application]) => ({ port, application }));
    const released = [...this.#released].map(([port, r]) => ({
      port,
      application: r.application,
      releasedAtMs: r.atMs,
    }));
    return [...held, ...released].sort((a, b) => a.port - b.port);
  }

  #changed(): void {
    this.#onChange?.(this.assignments());
  }

  /**
   * The lowest port the application may take now, skipping `unusable` (found bound by something
   * else); a port it released itself comes first. Null when the range has none left.
   */
  take(application: string, nowMs: number, unusable: ReadonlySet<number> = new Set()): number | null {
    const own = [...this.#released]
      .filter(([port, r]) => r.application === application && !unusable.has(port))
      .map(([port]) => port)
      .sort((a, b) => a - b)[0];
    const port = own ?? this.#firstFree(application, nowMs, unusable);
    if (port === undefined) return null;
    this.#released.delete(port);
    this.#held.set(port, application);
    this.#changed();
    return port;
  }

  /**
   * Holds a given port for the application: one its process already listens on (a process
   * adopted from a previous run of the daemon). False when another application holds it.
   */
  claim(port: number, application: string): boolean {
    if (port < this.#start || port > this.#end) return false;
    const holder = this.#held.get(port);
    if (holder !== undefined && holder !== application) return false;
    this.#released.delete(port);
    this.#held.set(port, application);
    this.#changed();
    return true;
  }

  /** Gives the port back; it is quarantined from other applications from `nowMs`. */
  release(port: number, nowMs: number): void {
    const application = this.#held.get(port);
    if (application === undefined) return;
    this.#held.delete(port);
    this.#released.set(port, { application, atMs: nowMs });
    this.#changed();
  }

  /** Drops a hold without quarantine: the port was found bound by something not ours. */
  forget(port: number): void {
    if (this.#held.delete(port)) this.#changed();
  }

  /** True while the port is kept from `application` (held, or quarantined for someone else). */
  isKeptFrom(port: number, application: string, nowMs: number): boolean {
    if (this.#held.has(port)) return true;
    const released = this.#released.get(port);
    if (!released || released.application === application) return false;
    return nowMs - released.atMs < this.#quarantineMs;
  }

  #firstFree(application: string, nowMs: number, unusable: ReadonlySet<number>): number | undefined {
    for (let port = this.#start; port <= this.#end; port++) {
      if (unusable.has(port) || this.isKeptFrom(port, application, nowMs)) continue;
      // Quarantine over: forget who had it.
      this.#released.delete(port);
      return port;
    }
    return undefined;
  }
}

/** How the supervisor weighs exits; the defaults suit a fleet, tests shorten them. */
export interface RestartPolicy {
  /** Wait before the first restart after a fast exit. */
  baseDelayMs: number;
  /** The longest wait between restarts. */
  maxDelayMs: number;
  /** A process that ran at least this long before exiting did not crash fast: backoff starts over. */
  stableMs: number;
  /** This many fast exits in a row is a crash loop (restarts go on, at the capped delay). */
  crashloopAfter: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  baseDelayMs: 500,
  maxDelayMs: 30_000,
  stableMs: 30_000,
  crashloopAfter: 5,
};

/** The run of fast exits an application is on, and what to do about the latest exit. */
export interface CrashJudgement {
  /** Fast exits in a row, this one included (0 after a run that counted as stable). */
  fastExits: number;
  delayMs: number;
  crashloop: boolean;
}

/**
 * Judges an exit: a run shorter than `stableMs` adds to the run of fast exits, a longer one starts
 * it over. The delay doubles per fast exit from `baseDelayMs` up to `maxDelayMs`.
 */
export function judgeExit(policy: RestartPolicy, previousFastExits: number, ranMs: number): CrashJudgement {
  const fastExits = ranMs < policy.stableMs ? previousFastExits + 1 : 0;
  return {
    fastExits,
    delayMs: restartDelayMs(policy, fastExits),
    crashloop: fastExits >= policy.crashloopAfter,
  };
}

/** Exponential backoff, capped; an exit after a stable run restarts after the base delay. */
export function restartDelayMs(policy: RestartPolicy, fastExits: number): number {
  const exponent = Math.min(Math.max(fastExits - 1, 0), 30);
  return Math.min(policy.baseDelayMs * 2 ** exponent, policy.maxDelayMs);
}
