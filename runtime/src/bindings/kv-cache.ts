// The node-local KV read cache (docs/bindings.md "KV namespaces", its consistency paragraph): a key read
// again within its cache TTL (the worker's `cacheTtl`, 60 s by default, as on Cloudflare) is
// answered from memory, with no bucket request; a key this node wrote or deleted is answered as
// written at once. A write on another node is seen here once the cached copy is older than its
// TTL, which is Cloudflare's own bound for a write to reach every location.

/** What is cached for one bucket key: the object as read (null: there was none), and when. */
export interface CachedRead<T> {
  value: T | null;
  /** Bytes the entry holds, for the cache's budget. */
  bytes: number;
  /** When it was read from the bucket or written by this node (ms since the epoch). */
  atMs: number;
}

/** Cloudflare's default cacheTtl, in seconds. */
export const DEFAULT_CACHE_TTL_SECONDS = 60;
/** What the cache holds at most, all entries together. */
const DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024;
/** A value larger than this is never cached: one large value would push out many small ones. */
const LARGEST_CACHED_BYTES = 1024 * 1024;
/** What a cached absence or an entry's bookkeeping counts for. */
const ENTRY_OVERHEAD_BYTES = 200;

/** A least-recently-used map of bucket keys to what was last read or written there. */
export class KvCache<T> {
  readonly #entries = new Map<string, CachedRead<T>>();
  readonly #budget: number;
  #bytes = 0;

  constructor(budgetBytes = DEFAULT_BUDGET_BYTES) {
    this.#budget = budgetBytes;
  }

  /** The cached read of `key` if it is younger than `ttlSeconds` at `nowMs`. */
  fresh(key: string, ttlSeconds: number, nowMs: number): CachedRead<T> | undefined {
    const cached = this.#entries.get(key);
    if (cached === undefined) return undefined;
    if (nowMs - cached.atMs >= ttlSeconds * 1000) return undefined;
    // Most recently used goes last.
    this.#entries.delete(key);
    this.#entries.set(key, cached);
    return cached;
  }

  /** Notes what `key` holds now (null: nothing); a value over the size bound is forgotten instead. */
  remember(key: string, value: T | null, valueBytes: number, nowMs: number): void {
    this.forget(key);
    if (valueBytes > LARGEST_CACHED_BYTES) return;
    const bytes = valueBytes + key.length + ENTRY_OVERHEAD_BYTES;
    this.#entries.set(key, { value, bytes, atMs: nowMs });
    this.#bytes += bytes;
    for (const [oldest, entry] of this.#entries) {
      if (this.#bytes <= this.#budget) break;
      this.#entries.delete(oldest);
      this.#bytes -= entry.bytes;
    }
  }

  forget(key: string): void {
    const cached = this.#entries.get(key);
    if (cached === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= cached.bytes;
  }

  /** How many bytes the cache holds now. */
  get bytes(): number {
    return this.#bytes;
  }
}
