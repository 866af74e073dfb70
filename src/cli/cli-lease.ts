// Spec 3 "svc app": "Deleting through the bucket takes the coordinator lease for its duration; a
// live coordinator refuses with `lease-lost`, saying to use `--node`." The command line holds the
// same lease object the nodes elect through (`_svc/fleet/coordinator.json`), with a fence one above
// the last, renews it while it works and lets it go when done, so no node coordinates meanwhile.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import type { CoordinatorLease } from '../registry/records.ts';
import { getJson, isCasConflict, putJson, type Store } from '../store/store.ts';

/** How long the command's lease lasts between renewals. */
const CLI_LEASE_TTL_MS = 30_000;

/** Runs `work` while this command holds the coordinator lease; refuses while a live node holds it. */
export async function withCliCoordinatorLease<T>(store: Store, work: () => Promise<T>): Promise<T> {
  const holder = `cli-${hostname()
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .slice(0, 80)}-${randomBytes(3).toString('hex')}`;
  let etag = await acquire(store, holder);
  let lost: Problem | null = null;
  // Renew at a third of the lifetime, as nodes do; a renewal that loses means someone took it.
  const timer = setInterval(() => {
    renew(store, holder, etag)
      .then((next) => {
        etag = next;
      })
      .catch((err) => {
        lost = new Problem(
          'lease-lost',
          'Coordinator lease lost',
          `the lease was taken while this command held it (${String(err)}); run it again, or through a node with --node <url>`,
        );
      });
  }, CLI_LEASE_TTL_MS / 3);
  try {
    const result = await work();
    if (lost) throw lost;
    return result;
  } finally {
    clearInterval(timer);
    await release(store, etag).catch(() => {
      // It expires on its own within CLI_LEASE_TTL_MS.
    });
  }
}

async function acquire(store: Store, holder: string): Promise<string> {
  const current = await getJson<CoordinatorLease>(store, keys.coordinatorLease);
  const now = Date.now();
  if (current && current.value.expiresMs > now) {
    throw leaseLost(
      `node ${current.value.node} holds the coordinator lease until ${new Date(current.value.expiresMs).toISOString()}; delete through it with --node <url>`,
    );
  }
  const stamp = new Date(now).toISOString();
  const lease: CoordinatorLease = {
    v: 1,
    node: holder,
    fence: (current?.value.fence ?? 0) + 1,
    acquiredAt: stamp,
    renewedAt: stamp,
    expiresMs: now + CLI_LEASE_TTL_MS,
  };
  try {
    return await putJson(
      store,
      keys.coordinatorLease,
      lease,
      current ? { ifMatch: current.etag } : { ifNoneMatch: '*' },
    );
  } catch (err) {
    if (!isCasConflict(err)) throw err;
    throw leaseLost(
      'a node took the coordinator lease at the same moment; delete through it with --node <url>',
    );
  }
}

async function renew(store: Store, holder: string, etag: string): Promise<string> {
  const current = await getJson<CoordinatorLease>(store, keys.coordinatorLease);
  if (!current || current.etag !== etag || current.value.node !== holder) throw new Error('lease moved');
  const now = Date.now();
  return putJson(
    store,
    keys.coordinatorLease,
    { ...current.value, renewedAt: new Date(now).toISOString(), expiresMs: now + CLI_LEASE_TTL_MS },
    { ifMatch: etag },
  );
}

/** Lets the lease go by expiring it now; the fence stays, so the next holder's is higher still. */
async function release(store: Store, etag: string): Promise<void> {
  const current = await getJson<CoordinatorLease>(store, keys.coordinatorLease);
  if (!current || current.etag !== etag) return;
  const now = Date.now();
  await putJson(
    store,
    keys.coordinatorLease,
    { ...current.value, renewedAt: new Date(now).toISOString(), expiresMs: now },
    { ifMatch: etag },
  );
}

function leaseLost(detail: string): Problem {
  return new Problem('lease-lost', 'A node is coordinating', detail);
}
