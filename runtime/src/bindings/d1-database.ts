// One D1 database on the node that owns it (docs/bindings.md "D1 databases", "Durability"):
// SQLite in WAL mode with automatic checkpoints off, so every committed transaction is new bytes
// at the end of the WAL file. A query that changed the database is answered only once those
// bytes are a segment in the bucket (d1-log.ts); the transactions that commit while one segment
// is being written go together in the next (group commit). When the WAL passes a size, it is
// checkpointed into the database file, which becomes the snapshot of a new generation.

import { closeSync, openSync, readSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { logKeys } from '../../../src/registry/keys.ts';
import { isCasConflict } from '../../../src/store/store.ts';
import { QueryTimedOut, type RunResult, SqliteConnection } from './d1-connection.ts';
import { D1QueryError, type D1Success } from './d1-engine.ts';
import {
  D1_RETENTION_MS,
  type DatabaseRef,
  decodeObject,
  listSegments,
  logBase,
  pruneGenerations,
  restore,
  writeSegment,
  writeSnapshot,
} from './d1-log.ts';
import type { D1Query, ResultsFormat } from './d1-sql.ts';

/** The WAL size at which the database starts a new generation. */
export const COMPACT_WAL_BYTES = 16 * 1024 * 1024;

export interface OwnedDatabaseOptions {
  ref: DatabaseRef;
  /** This node, named in the seal of the log it takes over. */
  node: string;
  /** A folder only this database uses. */
  dir: string;
  /** Whether this node still holds the database's lease (d1-lease.ts). */
  mayServe: () => boolean;
  compactWalBytes?: number;
  /** With a time: the database as it was then (time travel), not its last state. */
  untilMs?: number;
  /** How long one query may run (d1-connection.ts `D1_QUERY_TIMEOUT_MS`). */
  queryTimeoutMs?: number;
}

/** This node lost the database: another node wrote its log on, or its lease ran out. */
export class DatabaseMoved extends Error {}

/** A write ran but is not known to be in the bucket (bucket failed, or the database moved). */
export class NotDurable extends Error {}

export class OwnedDatabase {
  readonly #options: OwnedDatabaseOptions;
  readonly #connection: SqliteConnection;
  readonly #file: string;
  #generation: number;
  #nextSegment = 1;
  /** WAL bytes already in the bucket. */
  #shipped = 0;
  /** Where the WAL ended after the last transaction the thread committed: shipping stops there. */
  #committedEnd = 0;
  #index: number;
  #closed = false;
  #moved = false;
  #flushing: Promise<void> | null = null;
  /** The requests running on this copy now. */
  readonly #running = new Set<Promise<unknown>>();
  #waiters: { resolve: () => void; reject: (err: Error) => void }[] = [];

  private constructor(
    options: OwnedDatabaseOptions,
    connection: SqliteConnection,
    file: string,
    generation: number,
    index: number,
  ) {
    this.#options = options;
    this.#connection = connection;
    this.#file = file;
    this.#generation = generation;
    this.#index = index;
  }

  /**
   * Restores the database from the bucket, seals the log it came from so its former owner can
   * write no more, and starts a new generation with a snapshot: from then on this node serves it.
   * Throws DatabaseMoved when another node wrote the log meanwhile.
   */
  static async take(options: OwnedDatabaseOptions): Promise<OwnedDatabase> {
    await mkdir(options.dir, { recursive: true, mode: 0o700 });
    const file = join(options.dir, 'db.sqlite');
    for (const suffix of ['', '-wal', '-shm', '-journal']) await rm(file + suffix, { force: true });
    const restored = await restore(options.ref, file, options.untilMs);
    const connection = new SqliteConnection(file, options.queryTimeoutMs);
    try {
      await connection.checkpoint();
      const now = Date.now();
      if (restored.latest > 0) {
        // A restore to a past time starts the new generation from that past state on top of the
        // history as it is: the seal goes after the newest log's last segment.
        const next =
          options.untilMs === undefined
            ? restored.nextSegment
            : ((await listSegments(options.ref, restored.latest)).at(-1) ?? 0) + 1;
        await writeSegment(options.ref, restored.latest, next, {
          time_ms: now,
          index: restored.index,
          sealed_by: options.node,
        }).catch(moved);
      }
      const generation = restored.latest + 1;
      await writeSnapshot(
        options.ref,
        generation,
        { time_ms: now, index: restored.index },
        await readFile(file),
      ).catch(moved);
      return new OwnedDatabase(options, connection, file, generation, restored.index);
    } catch (err) {
      await connection.close();
      throw err;
    }
  }

  /** D1's bookmark of the state the database is in: its commit count, fixed-width so it sorts. */
  get bookmark(): string {
    return this.#index.toString(16).padStart(16, '0');
  }

  /**
   * Runs one request's queries in one transaction; when they changed the database, answers once
   * the change is in the bucket. Throws D1QueryError (SQLite refused), NotDurable (the bucket did
   * not take it) or DatabaseMoved. `readsWithoutLease`: the lease ran out while the bucket is down;
   * a read is answered from this copy, a write fails as the bucket fails it.
   */
  async execute(queries: D1Query[], format: ResultsFormat, readsWithoutLease = false): Promise<D1Success[]> {
    this.#checkServing(readsWithoutLease);
    const work = this.#execute(queries, format);
    this.#running.add(work);
    try {
      return await work;
    } finally {
      this.#running.delete(work);
    }
  }

  async #execute(queries: D1Query[], format: ResultsFormat): Promise<D1Success[]> {
    let ran: RunResult;
    try {
      ran = await this.#connection.run(queries, format);
    } catch (err) {
      if (err instanceof D1QueryError) throw err;
      // The thread is gone, and with it this copy: the next request restores from the bucket.
      this.#moved = true;
      if (err instanceof QueryTimedOut)
        throw new D1QueryError(`${err.message}, D1's limit for one query: SQLITE_INTERRUPT`);
      throw new NotDurable(`the database's thread failed: ${(err as Error).message}`);
    }
    const { results } = ran;
    this.#committedEnd = Math.max(this.#committedEnd, ran.walEnd);
    // A read ships nothing, even while an earlier failed write waits unshipped in the WAL.
    if (!ran.wrote) return results;
    await this.#durable();
    // Past this point the queries ran: losing the database now leaves their fate unknown to the
    // caller, which must not run them again blindly.
    if (this.#moved || !this.#options.mayServe()) {
      this.#moved = true;
      throw new NotDurable('this node lost the database while answering');
    }
    return results;
  }

  /**
   * Closes the database and removes this copy: the bucket already holds every acknowledged write,
   * and taking the database again restores it from there.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // A request already running finishes first (its queries, then its shipping): its copy and
    // its connection are still there for it.
    await Promise.allSettled([...this.#running]);
    await this.#connection.close();
    await rm(this.#options.dir, { recursive: true, force: true });
  }

  get moved(): boolean {
    return this.#moved;
  }

  #checkServing(readsWithoutLease: boolean): void {
    if (this.#closed) throw new DatabaseMoved('the database was closed on this node');
    if (this.#moved || (!readsWithoutLease && !this.#options.mayServe())) {
      this.#moved = true;
      throw new DatabaseMoved('this node no longer holds the database');
    }
  }

  /** Resolves once every transaction committed so far is in the bucket. */
  #durable(): Promise<void> {
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    if (!this.#flushing)
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = null;
      });
    return done;
  }

  async #flush(): Promise<void> {
    while (this.#waiters.length > 0) {
      const waiters = this.#waiters;
      this.#waiters = [];
      try {
        await this.#shipOnce();
        for (const w of waiters) w.resolve();
      } catch (err) {
        for (const w of waiters) w.reject(err as Error);
      }
    }
  }

  /** Writes the WAL bytes not yet in the bucket as the next segment; compacts past the limit. */
  async #shipOnce(): Promise<void> {
    const end = this.#committedEnd;
    if (end > this.#shipped) {
      let bytes: Uint8Array;
      try {
        bytes = readRange(`${this.#file}-wal`, this.#shipped, end);
      } catch (err) {
        throw new NotDurable(`the database's WAL could not be read: ${(err as Error).message}`);
      }
      const index = this.#index + 1;
      try {
        await writeSegment(
          this.#options.ref,
          this.#generation,
          this.#nextSegment,
          {
            time_ms: Date.now(),
            index,
            offset: this.#shipped,
          },
          bytes,
        );
      } catch (err) {
        // The segment is there already: this node's own earlier write, which the bucket took
        // although it answered a failure (its deadline passed), or another node's seal.
        if (isCasConflict(err) && (await this.#adoptLanded(bytes))) return this.#shipOnce();
        if (isCasConflict(err)) {
          this.#moved = true;
          throw new NotDurable('another node took the database over');
        }
        throw new NotDurable(`the bucket did not take the write: ${(err as Error).message}`);
      }
      this.#nextSegment++;
      this.#shipped = end;
      this.#index = index;
    }
    if (this.#shipped >= (this.#options.compactWalBytes ?? COMPACT_WAL_BYTES)) await this.#compact();
  }

  /**
   * Whether the segment in the way of the next write is one this node wrote and took for failed:
   * no seal, starting where shipping stands, its bytes the start of `unshipped` (the WAL from
   * there). It is then counted as shipped, as it is in the bucket; a new owner only ever writes a
   * seal in this generation.
   */
  async #adoptLanded(unshipped: Uint8Array): Promise<boolean> {
    const { ref } = this.#options;
    const object = await ref.store
      .get(logKeys.segment(logBase(ref), this.#generation, this.#nextSegment))
      .catch(() => null);
    if (!object) return false;
    const { header, bytes } = decodeObject(object.body);
    if (header.sealed_by !== undefined || header.offset !== this.#shipped) return false;
    if (bytes.byteLength === 0 || bytes.byteLength > unshipped.byteLength) return false;
    if (!Buffer.from(unshipped.subarray(0, bytes.byteLength)).equals(bytes)) return false;
    this.#nextSegment++;
    this.#shipped += bytes.byteLength;
    this.#index = header.index;
    return true;
  }

  /** Folds the WAL into the database file and starts the next generation with it. */
  async #compact(): Promise<void> {
    await this.#connection.checkpoint();
    // The WAL is empty now; what commits from here on is counted in it afresh.
    this.#committedEnd = 0;
    const generation = this.#generation + 1;
    try {
      await writeSnapshot(
        this.#options.ref,
        generation,
        { time_ms: Date.now(), index: this.#index },
        await readFile(this.#file),
      );
    } catch (err) {
      if (isCasConflict(err)) {
        this.#moved = true;
        throw new NotDurable('another node took the database over');
      }
      // Not fatal: the old generation goes on (its log restarts at offset 0 only in a new one).
      throw new NotDurable(`the bucket did not take the snapshot: ${(err as Error).message}`);
    }
    this.#generation = generation;
    this.#nextSegment = 1;
    this.#shipped = 0;
    // What no restore within the retention needs goes now; a failure leaves it for the next time.
    await pruneGenerations(this.#options.ref, D1_RETENTION_MS, Date.now()).catch(() => 0);
  }
}

function moved(err: unknown): never {
  if (isCasConflict(err)) throw new DatabaseMoved('another node wrote the database log meanwhile');
  throw err;
}

function readRange(path: string, from: number, to: number): Uint8Array {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(to - from);
    let read = 0;
    while (read < buffer.length) {
      const n = readSync(fd, buffer, read, buffer.length - read, from + read);
      if (n === 0) throw new Error('the WAL file ended early');
      read += n;
    }
    return buffer;
  } finally {
    closeSync(fd);
  }
}
