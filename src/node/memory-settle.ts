// Gives back the memory a burst of work left resident (bench/RESULTS.md "1,000 idle applications
// on one node"; docs/decisions.md "Daemon memory: start-up garbage, not registry data"). A node
// starting its applications makes tens of MB of short-lived objects a second; V8's old generation
// grows to hold them and, once they are garbage, its ordinary full collections free the objects
// but keep most of the pages: the heap ends fragmented (at 300 applications 76 MB committed for
// 27 MB live) and the freed pages stay in V8's pool. V8 compacts and returns them only in a
// collection that reduces memory, which its memory reducer starts only while the program
// allocates less than about 1 MB a second, and an idle daemon running hundreds of applications
// comes near that or above (its reconcile passes, the limits sampler, probes).
//
// So the daemon asks for that collection itself, V8's last-resort one (compacting, the page pool
// released), when its resident set grew by SETTLE_GROWTH_BYTES since the last one, and not twice
// within SETTLE_GAP_MS. It is synchronous: 97 ms at 300 applications (two full collections of a
// 26-30 MB heap), about 0.15-0.2 s for the 50 MB of 1,000, at most twice a minute and only after
// growth, so an idle node pays nothing once settled.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How often the resident set is looked at. */
export const SETTLE_CHECK_MS = 10_000;
/** Growth of the resident set since the last settling that asks for another. */
export const SETTLE_GROWTH_BYTES = 12 * 1024 * 1024;
/** The least time between two settlings. */
export const SETTLE_GAP_MS = 30_000;

type Collect = () => void;

/**
 * V8's last-resort collection (compacting, memory-reducing), or null where it cannot be had. The
 * `gc` function V8 gives a context created while `--expose-gc` is set; the flag is set for that
 * one context only, so no `gc` appears on the daemon's own global.
 */
export function lastResortCollection(): Collect | null {
  const exposed = typeof (globalThis as { gc?: unknown }).gc === 'function';
  try {
    if (!exposed) setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    if (typeof gc !== 'function') return null;
    return () =>
      (gc as (options: object) => void)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } catch {
    return null;
  } finally {
    if (!exposed) setFlagsFromString('--no-expose-gc');
  }
}

export interface MemorySettler {
  /** Looks now (the timer's work; tests). Answers whether it collected. */
  check(): boolean;
  stop(): void;
}

/** Starts watching the resident set; `collect` and `rss` are the process's own unless given (tests). */
export function settleMemory(
  options: {
    collect?: Collect | null;
    rss?: () => number;
    now?: () => number;
    checkMs?: number;
    growthBytes?: number;
    gapMs?: number;
  } = {},
): MemorySettler {
  const collect = options.collect === undefined ? lastResortCollection() : options.collect;
  const rss = options.rss ?? (() => process.memoryUsage.rss());
  const now = options.now ?? (() => performance.now());
  const growth = options.growthBytes ?? SETTLE_GROWTH_BYTES;
  const gap = options.gapMs ?? SETTLE_GAP_MS;
  let floor = rss();
  let lastAt = Number.NEGATIVE_INFINITY;
  const check = (): boolean => {
    if (collect === null) return false;
    const resident = rss();
    // What it settles back to can be less than where it started.
    floor = Math.min(floor, resident);
    if (resident - floor < growth || now() - lastAt < gap) return false;
    collect();
    lastAt = now();
    floor = rss();
    return true;
  };
  const timer = setInterval(check, options.checkMs ?? SETTLE_CHECK_MS);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}
