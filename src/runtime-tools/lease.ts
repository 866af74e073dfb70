// `svc app lease show|drop` (docs/cli.md "svc app", its leases): reads
// and deletes the runtime's node lease `fleets/<name>/nodes/<node>.json` directly in the
// bucket. A lease is judged from three reads (listing, HEAD, GET); a failing read is part of
// the reading, never the end of it.

import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isNodeId } from '../registry/names.ts';
import type { Store } from '../store/store.ts';
import { type Answerer, consent } from './consent.ts';
import { parseNodeLease } from './layout.ts';

export type Verdict = 'held' | 'expired' | 'unreadable' | 'absent';
export type ReadOutcome = 'present' | 'absent' | 'failed';

/** One lease as read; the JSON form of `show`'s `leases[]` and `drop`'s `before`/`after`. */
export interface LeaseReading {
  node: string;
  key: string;
  /** Whether the listing of `nodes/` named the key (false also when the listing failed). */
  listed: boolean;
  head: ReadOutcome;
  get: ReadOutcome;
  verdict: Verdict;
  why: string;
  expiresAt?: string;
  recordNode?: string;
}

/** `--node`: 1-128 ASCII letters, digits, underscores, hyphens or dots. */
export function checkLeaseNode(node: string): string {
  if (!isNodeId(node)) {
    throw new Problem(
      'invalid-slug',
      'Invalid node id',
      `--node ${JSON.stringify(node)} must be 1-128 ASCII letters, digits, underscores, hyphens or dots`,
    );
  }
  return node;
}

/** The facts of the three reads, before judgement. */
export interface LeaseReads {
  listed: boolean;
  listingError?: string;
  head: ReadOutcome;
  headError?: string;
  get: ReadOutcome;
  getError?: string;
  body?: Uint8Array;
}

/** The verdict table of docs/cli.md, pure. */
export function judgeLease(node: string, key: string, reads: LeaseReads, nowMs: number): LeaseReading {
  const base = { node, key, listed: reads.listed, head: reads.head, get: reads.get };
  const notes: string[] = [];
  if (reads.listingError) notes.push(`the listing failed (${reads.listingError})`);
  if (reads.headError) notes.push(`HEAD failed (${reads.headError})`);
  const noted = (why: string) => [why, ...notes].join('; ');

  if (reads.get === 'present' && reads.body) {
    const lease = parseNodeLease(reads.body);
    if (!lease.ok)
      return { ...base, verdict: 'unreadable', why: noted(`the body is no node lease: ${lease.why}`) };
    const { node: recordNode, expires_ms: expiresMs } = lease.value;
    const reading: LeaseReading = {
      ...base,
      verdict: expiresMs > nowMs ? 'held' : 'expired',
      why: '',
      expiresAt: new Date(expiresMs).toISOString(),
      recordNode,
    };
    const when = describeDelta(expiresMs - nowMs);
    const whys = [expiresMs > nowMs ? `expires in ${when}` : `expired ${when} ago`];
    if (recordNode !== node) whys.push(`its body names node ${recordNode}, not ${node}`);
    if (!reads.listed && !reads.listingError) whys.push('the listing does not name it yet');
    if (reads.head === 'absent') whys.push('HEAD says absent');
    reading.why = noted(whys.join('; '));
    return reading;
  }
  if (reads.get === 'failed') {
    return {
      ...base,
      verdict: 'unreadable',
      why: noted(`GET failed (${reads.getError ?? 'unknown error'})`),
    };
  }
  // GET says absent.
  if (reads.listed || reads.head === 'present') {
    const who = [reads.listed ? 'the listing' : '', reads.head === 'present' ? 'HEAD' : '']
      .filter(Boolean)
      .join(' and ');
    return { ...base, verdict: 'unreadable', why: noted(`${who} name it, but GET says absent`) };
  }
  if (reads.listingError || reads.head === 'failed') {
    return { ...base, verdict: 'unreadable', why: noted('GET says absent, but not every read could say so') };
  }
  return { ...base, verdict: 'absent', why: 'listing, HEAD and GET all say nothing is there' };
}

function describeDelta(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The listing of `nodes/`: node ids by key; null with the error when it failed. */
async function listLeases(
  store: Store,
  application: string,
): Promise<{ nodes: Map<string, string> } | { error: string }> {
  const prefix = keys.runtimeNodeLeasesPrefix(application);
  try {
    const listing = await store.list(prefix, { recursive: true });
    const nodes = new Map<string, string>();
    for (const object of listing.objects) {
      const name = object.key.slice(prefix.length);
      nodes.set(object.key, name.endsWith('.json') ? name.slice(0, -'.json'.length) : name);
    }
    return { nodes };
  } catch (err) {
    return { error: errorText(err) };
  }
}

async function readOne(
  store: Store,
  key: string,
  listed: boolean,
  listingError: string | undefined,
): Promise<LeaseReads> {
  const reads: LeaseReads = { listed, listingError, head: 'failed', get: 'failed' };
  try {
    reads.head = (await store.stat(key)) ? 'present' : 'absent';
  } catch (err) {
    reads.headError = errorText(err);
  }
  try {
    const object = await store.get(key);
    reads.get = object ? 'present' : 'absent';
    if (object) reads.body = object.body;
  } catch (err) {
    reads.getError = errorText(err);
  }
  return reads;
}

/** Reads one named lease, or every listed lease when `node` is undefined. */
export async function readLeases(
  store: Store,
  application: string,
  node: string | undefined,
  nowMs: () => number,
): Promise<LeaseReading[]> {
  const listing = await listLeases(store, application);
  const listingError = 'error' in listing ? listing.error : undefined;
  const listed = 'nodes' in listing ? listing.nodes : new Map<string, string>();
  if (node !== undefined) {
    const key = keys.runtimeNodeLease(application, node);
    const reads = await readOne(store, key, listed.has(key), listingError);
    return [judgeLease(node, key, reads, nowMs())];
  }
  if (listingError) {
    throw new Problem(
      'store-unavailable',
      'Cannot list the leases',
      `listing ${keys.runtimeNodeLeasesPrefix(application)} failed (${listingError}); name one with --node to read it anyway`,
    );
  }
  const readings: LeaseReading[] = [];
  for (const [key, id] of [...listed.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    readings.push(judgeLease(id, key, await readOne(store, key, true, undefined), nowMs()));
  }
  return readings;
}

/** One line per lease for the terminal. */
export function renderReading(reading: LeaseReading): string {
  return `${reading.node}  ${reading.verdict}  ${reading.key}  (${reading.why})`;
}

export interface DropRun {
  store: Store;
  application: string;
  node: string;
  force: boolean;
  yes: boolean;
  dryRun: boolean;
  answerer: Answerer;
  now: () => number;
  out: (line: string) => void;
}

export interface DropOutcome {
  application: string;
  node: string;
  key: string;
  dryRun: boolean;
  force: boolean;
  deleted: boolean;
  before: LeaseReading;
  after?: LeaseReading;
  stillThere?: boolean;
}

/** Prints the reading, asks, deletes exactly that key, reads it back (docs/cli.md "svc app"). */
export async function dropLease(run: DropRun): Promise<DropOutcome> {
  const { store, application, node, out } = run;
  const key = keys.runtimeNodeLease(application, node);
  const [before] = await readLeases(store, application, node, run.now);
  const outcome: DropOutcome = {
    application,
    node,
    key,
    dryRun: run.dryRun,
    force: run.force,
    deleted: false,
    before: before!,
  };
  out(renderReading(before!));
  if (before!.verdict === 'absent') {
    out(`Nothing to drop: no lease at ${key}.`);
    return outcome;
  }
  if (before!.verdict === 'held' && !run.force) {
    throw new Problem(
      'reference-held',
      'Lease is held',
      `node ${before!.recordNode ?? node} holds ${key} until ${before!.expiresAt}; pass --force to drop it anyway`,
    );
  }
  if (run.dryRun) {
    out(`Dry run: ${key} would be deleted; nothing deleted.`);
    return outcome;
  }
  if (!(await consent(`Drop the lease ${key}?`, { yes: run.yes, answerer: run.answerer }))) {
    out('Nothing deleted.');
    return outcome;
  }
  await store.delete(key);
  outcome.deleted = true;
  const [after] = await readLeases(store, application, node, run.now);
  outcome.after = after!;
  outcome.stillThere = after!.verdict !== 'absent';
  out(
    outcome.stillThere
      ? `Deleted ${key}, but the store still answers for it: ${after!.verdict} (${after!.why}).`
      : `Deleted ${key}: it is gone.`,
  );
  return outcome;
}
