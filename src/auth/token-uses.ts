// Single-use tokens across the fleet (docs/identity.md "Single use across the fleet"). Each node
// remembers the `jti`s it accepted (verifier.ts, the replay set); that alone lets a token used on
// one node be used once more on every other. So every accepted node or operator token is also
// recorded in the bucket with a conditional create (`If-None-Match: *`) of a small key: whoever
// creates it first accepted the token, and any node that finds it already there refuses.
//
// Writes wait for the record: a state-changing request is accepted only once its jti is recorded
// fleet-wide, and a bucket that cannot record it refuses the request (`store-unavailable`).
// Reads wait at most READ_RECORD_WAIT_MS: a conflict refuses them too, but a slow or unreachable
// bucket does not stop reads from being served (the local replay set still holds), and the record
// lands when it lands.

import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isCasConflict, type Store } from '../store/store.ts';
import { CLOCK_SKEW_S } from './token.ts';

/** How long a read waits for its jti to be recorded before it is served anyway. */
export const READ_RECORD_WAIT_MS = 1_000;

/** The minute after which a token of this `exp` can no longer be accepted by any node. */
export function deadMinute(exp: number): number {
  return Math.ceil((exp + CLOCK_SKEW_S) / 60);
}

/** Methods that change nothing (docs/api.md: every other method is a write). */
export function isReadMethod(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

export type TokenUseOutcome = 'recorded' | 'replayed' | 'unrecorded';

/**
 * Records one accepted token fleet-wide. Answers `replayed` when another request (on any node)
 * recorded it first. A write whose record cannot be made throws `store-unavailable`; a read
 * answers `unrecorded` instead and is served.
 */
export async function recordTokenUse(
  store: Store,
  token: { jti: string; exp: number },
  write: boolean,
): Promise<TokenUseOutcome> {
  const key = keys.tokenUse(deadMinute(token.exp), token.jti);
  const recording = store.put(key, '', { ifNoneMatch: '*' }).then(
    (): TokenUseOutcome => 'recorded',
    (err: unknown): TokenUseOutcome => {
      if (isCasConflict(err)) return 'replayed';
      if (write) throw err;
      return 'unrecorded';
    },
  );
  if (write) {
    try {
      return await recording;
    } catch (err) {
      throw new Problem(
        'store-unavailable',
        'Bucket unavailable',
        'the token could not be recorded as used in the bucket, so this change was not accepted; retry',
        { cause: err },
      );
    }
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<TokenUseOutcome>((resolve) => {
    timer = setTimeout(() => resolve('unrecorded'), READ_RECORD_WAIT_MS);
  });
  try {
    return await Promise.race([recording, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Deletes the records of tokens that no node can accept any more (their minute is past). One
 * listing of the minutes, then one listing and one delete per record of each dead minute.
 */
export async function reapTokenUses(store: Store, nowMs: number): Promise<number> {
  const nowMinute = Math.floor(nowMs / 60_000);
  const minutes = await store.list(keys.tokenUsesPrefix, { recursive: false });
  let removed = 0;
  for (const prefix of minutes.prefixes) {
    const minute = Number(prefix.slice(keys.tokenUsesPrefix.length, -1));
    if (!Number.isInteger(minute) || minute >= nowMinute) continue;
    const records = await store.list(keys.tokenUseMinute(minute), { recursive: true });
    for (const object of records.objects) if (await store.delete(object.key)) removed++;
  }
  return removed;
}
