// The token verifier (docs/identity.md "Tokens"): public keys from
// `_svc/operators/<kid>.json`, else `_svc/nodes/<kid>.json`, cached 60 s (the revocation
// bound); 30 s skew at both ends; single-use `jti`. Every rejection is the one
// `auth-invalid` problem; the reason goes to the node's log only.
//
// Signatures are checked with node:crypto directly rather than jose's compactVerify: the
// token profile is fixed (EdDSA, one key per kid), and jose's general path halves the
// verification rate (bench/identity.bench.ts; docs/identity.md).

import { type KeyObject, verify as verifySignature } from 'node:crypto';
import { isProblem, Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import { publicKeyObject } from './ed25519.ts';
import { asNodeKeyRecord, asTrustedOperator, type NodeKeyRecord, type TrustedOperator } from './records.ts';
import { authInvalid, CLOCK_SKEW_S, parseToken, TokenRejected } from './token.ts';

/** Key cache lifetime: a removed key keeps verifying on a node for at most this long. */
export const KEY_CACHE_MS = 60_000;
/**
 * An unknown kid is remembered briefly so a flood of tokens naming it costs one bucket read
 * per interval, yet a key enrolled through another node is usable within seconds.
 */
export const UNKNOWN_KEY_CACHE_MS = 5_000;
/** Bounds on memory: keys cached, and single-use ids remembered until they expire. */
export const MAX_CACHED_KEYS = 10_000;
export const MAX_REPLAY_ENTRIES = 500_000;

/** Who a verified token was signed by. */
export type VerifiedSigner = (
  | { kind: 'node'; id: string; record: NodeKeyRecord }
  | { kind: 'operator'; id: string; record: TrustedOperator }
) & {
  /** The token's single-use id and expiry, for recording it fleet-wide (token-uses.ts). */
  token: { jti: string; exp: number };
};

type KeyEntry =
  | { kind: 'node'; key: KeyObject; record: NodeKeyRecord }
  | { kind: 'operator'; key: KeyObject; record: TrustedOperator };

export interface VerifierOptions {
  store: Store;
  /** Wall clock in ms; tests move it. */
  now?: () => number;
  keyCacheMs?: number;
  unknownKeyCacheMs?: number;
  maxReplayEntries?: number;
  /** Called with the private reason of each rejection (for the node's debug log). */
  onReject?: (reason: string) => void;
}

export class TokenVerifier {
  readonly #store: Store;
  readonly #now: () => number;
  readonly #keyCacheMs: number;
  readonly #unknownKeyCacheMs: number;
  readonly #onReject: (reason: string) => void;
  readonly #cache = new Map<string, { until: number; entry: KeyEntry | null }>();
  readonly #pending = new Map<string, Promise<KeyEntry | null>>();
  readonly #replay: ReplaySet;

  constructor(options: VerifierOptions) {
    this.#store = options.store;
    this.#now = options.now ?? Date.now;
    this.#keyCacheMs = options.keyCacheMs ?? KEY_CACHE_MS;
    this.#unknownKeyCacheMs = options.unknownKeyCacheMs ?? UNKNOWN_KEY_CACHE_MS;
    this.#onReject = options.onReject ?? (() => {});
    this.#replay = new ReplaySet(options.maxReplayEntries ?? MAX_REPLAY_ENTRIES);
  }

  /** Verifies one bearer token and records its `jti`; throws `auth-invalid` for any failure. */
  async verify(token: string): Promise<VerifiedSigner> {
    try {
      const nowMs = this.#now();
      const parsed = parseToken(token, nowMs);
      if (this.#replay.has(parsed.jti)) throw new TokenRejected('jti replayed');
      // A warm cache answers without a turn of the event loop.
      const entry = this.#cached(parsed.kid, nowMs) ?? (await this.#keyFor(parsed.kid));
      if (!entry) throw new TokenRejected('unknown kid');
      if (!verifySignature(null, parsed.signingInput, entry.key, parsed.signature)) {
        throw new TokenRejected('bad signature');
      }
      // Checked again after the await: two copies of one token may race through the lookup.
      if (this.#replay.has(parsed.jti)) throw new TokenRejected('jti replayed');
      if (!this.#replay.add(parsed.jti, parsed.exp + CLOCK_SKEW_S, nowMs / 1000)) {
        throw new TokenRejected('replay set full');
      }
      const used = { jti: parsed.jti, exp: parsed.exp };
      return entry.kind === 'node'
        ? { kind: 'node', id: parsed.kid, record: entry.record, token: used }
        : { kind: 'operator', id: parsed.kid, record: entry.record, token: used };
    } catch (err) {
      if (err instanceof TokenRejected) {
        this.#onReject(err.message);
        throw authInvalid();
      }
      throw err;
    }
  }

  /** Drops a kid from the cache: this node just wrote or removed its record. */
  forget(kid: string): void {
    this.#cache.delete(kid);
  }

  /** Drops every cached key: the registry changed somewhere (src/registry/changes.ts). */
  forgetAll(): void {
    this.#cache.clear();
  }

  /** The number of single-use ids currently remembered (for tests and metrics). */
  get replayEntries(): number {
    return this.#replay.size;
  }

  #cached(kid: string, now: number): KeyEntry | null | undefined {
    const cached = this.#cache.get(kid);
    return cached && cached.until > now ? cached.entry : undefined;
  }

  async #keyFor(kid: string): Promise<KeyEntry | null> {
    const now = this.#now();
    const cached = this.#cache.get(kid);
    if (cached && cached.until > now) return cached.entry;
    const pending = this.#pending.get(kid);
    if (pending) return pending;
    const lookup = this.#lookup(kid).finally(() => this.#pending.delete(kid));
    this.#pending.set(kid, lookup);
    const entry = await lookup;
    if (this.#cache.size >= MAX_CACHED_KEYS) this.#evictOne(now);
    this.#cache.delete(kid);
    this.#cache.set(kid, { until: now + (entry ? this.#keyCacheMs : this.#unknownKeyCacheMs), entry });
    return entry;
  }

  #evictOne(now: number): void {
    for (const [kid, cached] of this.#cache) {
      if (cached.until <= now) this.#cache.delete(kid);
    }
    if (this.#cache.size < MAX_CACHED_KEYS) return;
    const oldest = this.#cache.keys().next();
    if (!oldest.done) this.#cache.delete(oldest.value);
  }

  async #lookup(kid: string): Promise<KeyEntry | null> {
    const operator = asTrustedOperator(await readJson(this.#store, keys.operator(kid)), kid);
    if (operator) {
      const key = publicKeyObject(operator.publicKey);
      return key ? { kind: 'operator', key, record: operator } : null;
    }
    const node = asNodeKeyRecord(await readJson(this.#store, keys.nodeKey(kid)), kid);
    if (node) {
      const key = publicKeyObject(node.publicKey);
      return key ? { kind: 'node', key, record: node } : null;
    }
    return null;
  }
}

/**
 * Reads a JSON record; undefined when absent or not JSON. A bucket that cannot answer is not
 * the token's fault: that is `store-unavailable`, never `auth-invalid`.
 */
export async function readJson(store: Store, key: string): Promise<unknown> {
  let object: Awaited<ReturnType<Store['get']>>;
  try {
    object = await store.get(key);
  } catch (err) {
    if (isProblem(err)) throw err;
    throw new Problem('store-unavailable', 'Bucket unavailable', 'the registry could not be read', {
      cause: err,
    });
  }
  if (!object) return undefined;
  try {
    return JSON.parse(Buffer.from(object.body).toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Single-use token ids remembered until their token could no longer be accepted anyway
 * (`exp` + skew). Entries are bucketed by the second they may be forgotten, so expiry costs
 * nothing per request beyond the entries it drops.
 */
export class ReplaySet {
  readonly #limit: number;
  readonly #seen = new Set<string>();
  readonly #bySecond = new Map<number, string[]>();
  #oldest = Number.POSITIVE_INFINITY;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get size(): number {
    return this.#seen.size;
  }

  has(jti: string): boolean {
    return this.#seen.has(jti);
  }

  /** Remembers a jti until `forgetAfter` (seconds); false when full of live entries. */
  add(jti: string, forgetAfter: number, nowSec: number): boolean {
    this.#sweep(nowSec);
    // Fail closed: forgetting a live id would let its token be replayed.
    if (this.#seen.size >= this.#limit) return false;
    this.#seen.add(jti);
    const second = Math.ceil(forgetAfter);
    const bucket = this.#bySecond.get(second);
    if (bucket) bucket.push(jti);
    else this.#bySecond.set(second, [jti]);
    if (second < this.#oldest) this.#oldest = second;
    return true;
  }

  #sweep(nowSec: number): void {
    if (this.#oldest >= nowSec) return;
    let oldest = Number.POSITIVE_INFINITY;
    for (const [second, bucket] of this.#bySecond) {
      if (second < nowSec) {
        for (const jti of bucket) this.#seen.delete(jti);
        this.#bySecond.delete(second);
      } else if (second < oldest) {
        oldest = second;
      }
    }
    this.#oldest = oldest;
  }
}
