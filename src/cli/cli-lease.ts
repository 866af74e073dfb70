// `svc app delete` through the bucket (docs/cli.md "svc app") takes the coordinator lease for its
// duration; a live coordinator refuses it with `lease-lost`, saying to use `--node`. The command
// holds the same lease object the nodes elect through (`_svc/fleet/coordinator.json`), by the same rules
// (src/registry/coordinator-lease.ts): a fence above the last lease's and every placement's,
// renewed while it works and let go when done, so no node coordinates meanwhile.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Problem } from '../problem.ts';
import {
  expiredLease,
  highestPlacementFence,
  leaseToTake,
  readCoordinatorLease,
  renewedLease,
  writeCoordinatorLease,
} from '../registry/coordinator-lease.ts';
import type { Store } from '../store/store.ts';

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

/**
 * Takes the lease under a fence above the last lease's and above every placement's, as a node
 * would; refuses while a live holder has it or when a node took it at the same moment.
 */
async function acquire(store: Store, holder: string): Promise<string> {
  const current = await readCoordinatorLease(store);
  const floor = await highestPlacementFence(store);
  const lease = leaseToTake(current?.lease ?? null, holder, floor, Date.now(), CLI_LEASE_TTL_MS);
  if (!lease) {
    const { node, expiresMs } = current!.lease;
    throw leaseLost(
      `node ${node} holds the coordinator lease until ${new Date(expiresMs).toISOString()}; delete through it with --node <url>`,
    );
  }
  const etag = await writeCoordinatorLease(store, lease, current?.etag ?? null);
  if (etag === null) {
    throw leaseLost(
      'a node took the coordinator lease at the same moment; delete through it with --node <url>',
    );
  }
  return etag;
}

async function renew(store: Store, holder: string, etag: string): Promise<string> {
  const current = await readCoordinatorLease(store);
  if (!current || current.etag !== etag || current.lease.node !== holder) throw new Error('lease moved');
  const next = await writeCoordinatorLease(
    store,
    renewedLease(current.lease, Date.now(), CLI_LEASE_TTL_MS),
    etag,
  );
  if (next === null) throw new Error('lease moved');
  return next;
}

/** Lets the lease go by expiring it now; the fence stays, so the next holder's is higher still. */
async function release(store: Store, etag: string): Promise<void> {
  const current = await readCoordinatorLease(store);
  if (!current || current.etag !== etag) return;
  await writeCoordinatorLease(store, expiredLease(current.lease, Date.now()), etag);
}

function leaseLost(detail: string): Problem {
  return new Problem('lease-lost', 'A node is coordinating', detail);
}
