// The command-line actions of `svc deployment prune` and `svc app lease show|drop` (docs/cli.md
// "svc deployment", "svc app" Leases): flags in, warning first, capability guard, then
// the tools of runtime-tools/prune.ts and runtime-tools/lease.ts against the bucket the bucket
// flags name.

import { resolveApplicationName } from '../registry/names.ts';
import { requireVerifiedRuntimes } from '../runtime-tools/capability.ts';
import { terminalAnswerer } from '../runtime-tools/consent.ts';
import { checkLeaseNode, dropLease, readLeases, renderReading } from '../runtime-tools/lease.ts';
import { parseKeep, parseOlderThan, prune } from '../runtime-tools/prune.ts';
import { withBucket } from './flags.ts';
import { note, say, warn } from './output.ts';

interface PruneFlags extends Record<string, unknown> {
  name?: string;
  env?: string;
  keep: string;
  olderThan: string;
  yes?: boolean;
  dryRun?: boolean;
}

export async function pruneAction(flags: PruneFlags): Promise<void> {
  warn(
    'deployment prune deletes runtime deployments directly in the bucket; a deployment it deletes cannot be rolled back to',
  );
  const application = resolveApplicationName(flags.name, flags.env);
  const keep = parseKeep(flags.keep);
  const windowMs = parseOlderThan(flags.olderThan);
  await withBucket(flags, async (store) => {
    await requireVerifiedRuntimes(store, Date.now(), 'svc deployment prune');
    await prune({
      store,
      application,
      keep,
      windowMs,
      yes: flags.yes === true,
      dryRun: flags.dryRun === true,
      answerer: terminalAnswerer(),
      nowMs: Date.now(),
      out: say,
      warn,
    });
  });
}

const LEASE_WARNING =
  "app lease is internal tooling and unstable: it reads and deletes the runtime's node leases directly in the bucket";

interface LeaseFlags extends Record<string, unknown> {
  name?: string;
  env?: string;
  node?: string;
  json?: boolean;
}

export async function leaseShowAction(flags: LeaseFlags): Promise<void> {
  warn(LEASE_WARNING);
  const application = resolveApplicationName(flags.name, flags.env);
  const node = flags.node === undefined ? undefined : checkLeaseNode(flags.node);
  await withBucket(flags, async (store) => {
    await requireVerifiedRuntimes(store, Date.now(), 'svc app lease');
    const leases = await readLeases(store, application, node, Date.now);
    if (flags.json) {
      say(
        JSON.stringify(node === undefined ? { application, leases } : { application, node, leases }, null, 2),
      );
      return;
    }
    if (leases.length === 0) say(`No node leases for ${application}.`);
    for (const lease of leases) say(renderReading(lease));
  });
}

interface DropFlags extends LeaseFlags {
  force?: boolean;
  yes?: boolean;
  dryRun?: boolean;
}

export async function leaseDropAction(flags: DropFlags): Promise<void> {
  warn(LEASE_WARNING);
  const application = resolveApplicationName(flags.name, flags.env);
  const node = checkLeaseNode(flags.node ?? '');
  await withBucket(flags, async (store) => {
    await requireVerifiedRuntimes(store, Date.now(), 'svc app lease');
    const outcome = await dropLease({
      store,
      application,
      node,
      force: flags.force === true,
      yes: flags.yes === true,
      dryRun: flags.dryRun === true,
      answerer: terminalAnswerer(),
      now: Date.now,
      // With --json the reading and the closing line go to stderr, so stdout is the document.
      out: flags.json ? note : say,
    });
    if (flags.json) say(JSON.stringify(outcome, null, 2));
  });
}
