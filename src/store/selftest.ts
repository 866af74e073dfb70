// The bucket self-test run at start (docs/architecture.md "How a request flows"): every guarantee of the fleet rests on conditional writes, and some
// S3-compatible servers and proxies silently drop If-Match and If-None-Match. Such a
// bucket is refused with `store-nonconforming` naming what it did wrong.

import { randomBytes } from 'node:crypto';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isCasConflict, type Store } from './store.ts';

/** Proves the bucket honours conditional writes; throws `store-nonconforming` if not. */
export async function selfTestStore(store: Store): Promise<void> {
  const nonce = randomBytes(8).toString('hex');
  const scratch = keys.selfTest(nonce);
  const missing = keys.selfTest(`${nonce}-absent`);
  try {
    const first = await expectAccepted(store, scratch, 'first', { ifNoneMatch: '*' }, 'a new key');
    await expectAccepted(store, scratch, 'second', { ifMatch: first }, 'the ETag it had just answered');
    await expectRefused(
      store,
      scratch,
      'third',
      { ifMatch: first },
      'accepted a write with a stale If-Match ETag',
    );
    await expectRefused(
      store,
      scratch,
      'again',
      { ifNoneMatch: '*' },
      'accepted If-None-Match: * on a key that exists',
    );
    await expectRefused(
      store,
      missing,
      'ghost',
      { ifMatch: first },
      'accepted If-Match on a key that does not exist',
    );
  } finally {
    await store.delete(scratch).catch(() => {});
    await store.delete(missing).catch(() => {});
  }
}

// A conforming bucket accepts these; a bucket that refuses them (an ETag it does not
// recognise as its own, say) would refuse every registry write, so it is named at start.
async function expectAccepted(
  store: Store,
  key: string,
  body: string,
  condition: { ifMatch?: string; ifNoneMatch?: '*' },
  what: string,
): Promise<string> {
  try {
    return await store.put(key, body, condition);
  } catch (err) {
    if (!isCasConflict(err)) throw err;
    const header = condition.ifMatch !== undefined ? 'If-Match' : 'If-None-Match: *';
    throw nonconforming(store, `refused a write with ${header} on ${what}`);
  }
}

async function expectRefused(
  store: Store,
  key: string,
  body: string,
  condition: { ifMatch?: string; ifNoneMatch?: '*' },
  what: string,
): Promise<void> {
  try {
    await store.put(key, body, condition);
  } catch (err) {
    if (isCasConflict(err)) return;
    throw err;
  }
  throw nonconforming(store, `${what}; it, or a proxy in front of it, drops conditional headers`);
}

function nonconforming(store: Store, what: string): Problem {
  return new Problem(
    'store-nonconforming',
    'Bucket ignores conditional writes',
    `${store.description} ${what}, and svc cannot run on it`,
  );
}
