// A D1 database's history in the bucket (docs/bindings.md "D1 databases", "Bucket layout"):
// generations, each a snapshot of the database file followed by the WAL segments its owner
// shipped after it. A segment is written only where none is (`If-None-Match: *`), so one
// generation's log has one writer: a new owner seals the log it took over by writing the next
// segment itself, and a former owner that wakes up finds its next write refused. Restoring is
// the snapshot, then the segments' bytes appended in order as the database's WAL file, which
// SQLite replays when it opens the database. A Durable Object's SQLite file keeps its history in
// the same layout under its own folder (objects-storage.ts).

import { writeFile } from 'node:fs/promises';
import { keys, logKeys } from '../../../src/registry/keys.ts';
import type { Store } from '../../../src/store/store.ts';

/** How far back time travel reaches: the history kept (Cloudflare keeps 30 days on paid plans). */
export const D1_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** What every snapshot and segment object starts with: one JSON line. */
export interface LogHeader {
  /** Wall time of the write (a segment: when its last transaction committed). */
  time_ms: number;
  /** The database's commit count once this object's contents are applied (D1's bookmark). */
  index: number;
  /** A segment: the WAL byte offset its bytes start at. */
  offset?: number;
  /** A seal: the node that took the database over; no bytes follow. */
  sealed_by?: string;
  /**
   * A Durable Object file's snapshot written by the node that took the objects over: the next
   * generation number its previous holder would write, so it stays (as this header alone once
   * newer snapshots exist) as that holder's fence (objects-storage.ts).
   */
  taken_by?: string;
}

export interface DatabaseRef {
  store: Store;
  application: string;
  database: string;
  /** The folder of the history when it is not a D1 database's (a Durable Object's file). */
  base?: string;
}

/** The folder holding a history's generations. */
export function logBase(ref: DatabaseRef): string {
  return ref.base ?? keys.runtimeD1Prefix(ref.application, ref.database);
}

/** Where a restore left the database: what the next write of its log goes to. */
export interface Restored {
  /** The generation restored, 0 when the database has no history yet. */
  generation: number;
  /** The newest generation in the bucket (the one restored, unless restoring to a past time). */
  latest: number;
  /** The segment number the next write of that generation would take. */
  nextSegment: number;
  index: number;
  /** Bytes written to the WAL file. */
  walBytes: number;
  /** Wall time of the last transaction restored (the snapshot's when no segment followed). */
  timeMs: number;
}

export function encodeObject(header: LogHeader, bytes: Uint8Array = new Uint8Array()): Uint8Array {
  const line = Buffer.from(`${JSON.stringify(header)}\n`);
  return Buffer.concat([line, bytes]);
}

export function decodeObject(body: Uint8Array): { header: LogHeader; bytes: Uint8Array } {
  const newline = body.indexOf(10);
  if (newline < 0) throw new Error('a D1 log object has no header line');
  const header = JSON.parse(Buffer.from(body.subarray(0, newline)).toString()) as LogHeader;
  return { header, bytes: body.subarray(newline + 1) };
}

/** The generations in the bucket, oldest first. */
export async function listGenerations(ref: DatabaseRef): Promise<number[]> {
  const prefix = logKeys.generationsPrefix(logBase(ref));
  const listed = await ref.store.list(prefix, { recursive: false });
  return listed.prefixes
    .map((p) => Number(p.slice(prefix.length).replace(/\/$/, '')))
    .filter((n) => Number.isSafeInteger(n) && n > 0)
    .sort((a, b) => a - b);
}

/** The segment numbers of one generation, in order. */
export async function listSegments(ref: DatabaseRef, generation: number): Promise<number[]> {
  const prefix = logKeys.segmentsPrefix(logBase(ref), generation);
  const listed = await ref.store.list(prefix, { recursive: true });
  return listed.objects
    .map((o) => Number(o.key.slice(prefix.length)))
    .filter((n) => Number.isSafeInteger(n) && n > 0)
    .sort((a, b) => a - b);
}

export async function readSnapshotHeader(ref: DatabaseRef, generation: number): Promise<LogHeader | null> {
  const object = await ref.store.get(logKeys.snapshot(logBase(ref), generation));
  return object ? decodeObject(object.body).header : null;
}

/**
 * Writes the database at its last acknowledged state (or as it was at `untilMs`) to `file` and
 * its WAL to `file-wal`. With no history, the file is empty: a new database.
 */
export async function restore(ref: DatabaseRef, file: string, untilMs?: number): Promise<Restored> {
  const generations = await listGenerations(ref);
  const generation = await generationToRestore(ref, generations, untilMs);
  if (generation === 0) {
    await writeFile(file, new Uint8Array());
    await writeFile(`${file}-wal`, new Uint8Array());
    return { generation: 0, latest: 0, nextSegment: 1, index: 0, walBytes: 0, timeMs: 0 };
  }
  const snapshot = await ref.store.get(logKeys.snapshot(logBase(ref), generation));
  if (!snapshot) throw new Error(`generation ${generation} of D1 database ${ref.database} has no snapshot`);
  const base = decodeObject(snapshot.body);
  await writeFile(file, base.bytes);
  const wal: Uint8Array[] = [];
  let walBytes = 0;
  let index = base.header.index;
  let timeMs = base.header.time_ms;
  let nextSegment = 1;
  for (const segment of await listSegments(ref, generation)) {
    if (segment !== nextSegment) break;
    const object = await ref.store.get(logKeys.segment(logBase(ref), generation, segment));
    if (!object) break;
    const { header, bytes } = decodeObject(object.body);
    nextSegment = segment + 1;
    if (header.sealed_by !== undefined) break;
    if (untilMs !== undefined && header.time_ms > untilMs) break;
    if (header.offset !== walBytes)
      throw new Error(`segment ${segment} of ${ref.database} does not follow the one before`);
    wal.push(bytes);
    walBytes += bytes.byteLength;
    index = header.index;
    timeMs = header.time_ms;
  }
  await writeFile(`${file}-wal`, Buffer.concat(wal));
  return { generation, latest: generations.at(-1) ?? generation, nextSegment, index, walBytes, timeMs };
}

/** The newest generation, or with `untilMs` the newest whose snapshot was taken by then. */
async function generationToRestore(
  ref: DatabaseRef,
  generations: number[],
  untilMs?: number,
): Promise<number> {
  for (let i = generations.length - 1; i >= 0; i--) {
    const generation = generations[i] as number;
    if (untilMs === undefined) return generation;
    const header = await readSnapshotHeader(ref, generation);
    if (header && header.time_ms <= untilMs) return generation;
  }
  if (untilMs !== undefined && generations.length > 0)
    throw new RestorePointError(`the database's history starts after ${new Date(untilMs).toISOString()}`);
  return 0;
}

/** A time-travel point the history does not reach. */
export class RestorePointError extends Error {}

/** Writes one segment where none is; a CasConflict means another node wrote the log on. */
export async function writeSegment(
  ref: DatabaseRef,
  generation: number,
  segment: number,
  header: LogHeader,
  bytes?: Uint8Array,
): Promise<void> {
  await ref.store.put(logKeys.segment(logBase(ref), generation, segment), encodeObject(header, bytes), {
    ifNoneMatch: '*',
  });
}

/** Starts a generation with the database file; a CasConflict means another node started it. */
export async function writeSnapshot(
  ref: DatabaseRef,
  generation: number,
  header: LogHeader,
  bytes: Uint8Array,
): Promise<void> {
  await ref.store.put(logKeys.snapshot(logBase(ref), generation), encodeObject(header, bytes), {
    ifNoneMatch: '*',
  });
}

/**
 * Deletes the generations no restore within `retentionMs` needs: every one whose successor's
 * snapshot is older than that. The newest generation always stays. Answers how many went.
 */
export async function pruneGenerations(
  ref: DatabaseRef,
  retentionMs: number,
  nowMs: number,
): Promise<number> {
  const generations = await listGenerations(ref);
  let pruned = 0;
  for (let i = 0; i < generations.length - 1; i++) {
    const successor = await readSnapshotHeader(ref, generations[i + 1] as number);
    if (!successor || successor.time_ms >= nowMs - retentionMs) break;
    const generation = generations[i] as number;
    for (const segment of await listSegments(ref, generation))
      await ref.store.delete(logKeys.segment(logBase(ref), generation, segment));
    await ref.store.delete(logKeys.snapshot(logBase(ref), generation));
    pruned++;
  }
  return pruned;
}
