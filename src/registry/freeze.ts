// The fleet freeze (docs/api.md "Fleet freeze"): one record at
// `_svc/fleet/freeze.json`. While it exists every node refuses deploy intake with `deploys-frozen`;
// serving, reconciliation, retirement and deletion carry on.

import { invalidInput, Problem } from '../problem.ts';
import { getJson, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { markFleetChanged } from './changes.ts';
import { keys } from './keys.ts';
import type { FreezeRecord } from './records.ts';

/** The longest freeze reason, in characters (docs/api.md "Fleet freeze"). */
export const MAX_FREEZE_REASON = 200;

// Newlines and every other C0/C1 control character, plus the Unicode line and paragraph separators.
const NOT_ONE_LINE = /[\p{Cc}\u2028\u2029]/u;

/**
 * The reason rules: trimmed (empty reads as none), at most 200 characters, one line, no control
 * character. Answers the reason or undefined; anything else is `invalid-input` naming the rule.
 */
export function checkFreezeReason(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalidInput('Invalid freeze reason', '`reason` must be a string');
  const reason = value.trim();
  if (reason === '') return undefined;
  if (NOT_ONE_LINE.test(reason)) {
    throw invalidInput('Invalid freeze reason', 'the reason is one line: no newline or control character');
  }
  const length = [...reason].length;
  if (length > MAX_FREEZE_REASON) {
    throw invalidInput(
      'Invalid freeze reason',
      `the reason is at most ${MAX_FREEZE_REASON} characters, got ${length}`,
    );
  }
  return reason;
}

/** The optional body of `POST /v1/fleet/freeze`: absent, or a JSON object `{ reason?: string }`. */
export function parseFreezeBody(body: unknown): string | undefined {
  if (body === undefined) return undefined;
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidInput('Invalid freeze request', 'the body, when sent, is a JSON object {"reason": "..."}');
  }
  const extra = Object.keys(body).filter((member) => member !== 'reason');
  if (extra.length > 0) {
    throw invalidInput(
      'Invalid freeze request',
      `unknown member ${JSON.stringify(extra[0])}; only "reason" is accepted`,
    );
  }
  return checkFreezeReason((body as { reason?: unknown }).reason);
}

/** The freeze now in force, or null. */
export async function readFreeze(store: Store): Promise<FreezeRecord | null> {
  return (await getJson<FreezeRecord>(store, keys.freeze))?.value ?? null;
}

/** Freezes deploys fleet-wide. A second freeze changes nothing: the first stamp and reason stand. */
export async function freezeDeploys(
  store: Store,
  by: string,
  reason: string | undefined,
  now: () => Date = () => new Date(),
): Promise<{ freeze: FreezeRecord; created: boolean }> {
  const updated = await updateJson<FreezeRecord>(store, keys.freeze, (standing) => {
    if (standing) return null;
    const freeze: FreezeRecord = { v: 1, frozenAt: now().toISOString(), by };
    if (reason !== undefined) freeze.reason = reason;
    return { put: freeze };
  });
  if (updated.created) await markFleetChanged(store, 'freeze');
  return { freeze: updated.value!, created: updated.created };
}

/** Lifts the freeze; answers whether there was one. */
export async function unfreezeDeploys(store: Store): Promise<{ lifted: boolean }> {
  const lifted = await store.delete(keys.freeze);
  if (lifted) await markFleetChanged(store, 'freeze');
  return { lifted };
}

/** The deploy intake's first check: `deploys-frozen` while a freeze stands. */
export async function assertDeploysOpen(store: Store): Promise<void> {
  const freeze = await readFreeze(store);
  if (freeze) throw deploysFrozen(freeze);
}

/** The refusal every node answers deploy intake with while frozen. */
export function deploysFrozen(freeze: FreezeRecord): Problem {
  const why = freeze.reason ? `: ${freeze.reason}` : '';
  return new Problem(
    'deploys-frozen',
    'Deploys are frozen',
    `frozen fleet-wide since ${freeze.frozenAt} by ${freeze.by}${why}; an admin lifts it with svc fleet unfreeze`,
  );
}

/** `GET /v1/fleet/freeze` with no freeze standing. */
export function notFrozen(): Problem {
  return new Problem('not-found', 'Deploys are not frozen', 'no fleet freeze stands');
}
