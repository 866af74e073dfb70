// D1 on a node (docs/bindings.md "D1 databases"): answers workerd's D1 binding requests
// (`POST /query` and `/execute` with `{ sql, params }` or a list of them, the shape Miniflare's
// D1 object answers and workerd's `cloudflare-internal:d1-api` module reads) for every database
// of every application the node serves. A database is served by one node at a time, the holder
// of its lease (d1-lease.ts); this node takes a database whose lease is free, serves it from its
// own SQLite copy (d1-database.ts), and hands a request for one another node holds to that node
// (`forward`). A database unused for a minute is closed and its lease released, so an idle
// database costs nothing.

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Store } from '../../../src/store/store.ts';
import { DatabaseMoved, NotDurable, OwnedDatabase } from './d1-database.ts';
import { D1QueryError } from './d1-engine.ts';
import { D1_LEASE_TTL_MS, D1Lease } from './d1-lease.ts';
import { D1RequestError, parseQueries, type ResultsFormat, resultsFormat } from './d1-sql.ts';

/** The header workerd's D1 binding reads a session's bookmark from (d1-api.ts). */
export const D1_BOOKMARK_HEADER = 'x-cf-d1-session-commit-token';

export interface D1Request {
  application: string;
  database: string;
  /** `/query` or `/execute`: both run the queries; `exec()` sends the second. */
  endpoint: string;
  /** The `resultsFormat` query parameter as sent. */
  format: string | null;
  body: string;
}

export interface D1Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface D1ServiceOptions {
  store: Store;
  node: string;
  /** Where this node keeps its copies: one folder per application and database. */
  dataDir: string;
  log: (line: string) => void;
  /** Sends a request to the node holding its database; absent on a node with no peers. */
  forward?: (holder: string, request: D1Request) => Promise<D1Answer>;
  /** How long an unused database stays open (and its lease held). */
  idleMs?: number;
  /** The WAL size that starts a new generation (d1-database.ts `COMPACT_WAL_BYTES`). */
  compactWalBytes?: number;
  /** The lease's lifetime (d1-lease.ts `D1_LEASE_TTL_MS`); tests shorten it. */
  leaseTtlMs?: number;
  /** How long one query may run (d1-connection.ts `D1_QUERY_TIMEOUT_MS`); tests shorten it. */
  queryTimeoutMs?: number;
}

/** An unused database's lease is released after this long. */
export const D1_IDLE_MS = 60_000;

interface Open {
  lease: D1Lease;
  db: OwnedDatabase;
  renewal: NodeJS.Timeout;
  lastUsedMs: number;
}

/**
 * Who serves a database: this node (`bucketDown`: its lease ran out because the bucket does not
 * answer, so it may still answer reads from its copy, never a write), or another node.
 */
type Owner = { open: Open; bucketDown?: boolean } | { holder: string };

export class D1Service {
  readonly #options: D1ServiceOptions;
  readonly #open = new Map<string, Open>();
  readonly #opening = new Map<string, Promise<Owner>>();
  #closed = false;
  readonly #cleared: Promise<void>;
  /** Numbers each take's folder, so a copy being dropped never shares one with the next. */
  #takes = 0;

  constructor(options: D1ServiceOptions) {
    this.#options = options;
    // Copies a process before this one left (killed) are never reused: every take restores.
    this.#cleared = rm(options.dataDir, { recursive: true, force: true });
  }

  get #leaseTtlMs(): number {
    return this.#options.leaseTtlMs ?? D1_LEASE_TTL_MS;
  }

  /**
   * Answers one binding request. `forwarded`: it came from another node, which found this one
   * holding the lease; it is served here or refused, never sent on again.
   */
  async handle(request: D1Request, forwarded = false): Promise<D1Answer> {
    let parsed: ReturnType<typeof parseQueries>;
    try {
      parsed = parseQueries(request.body);
    } catch (err) {
      if (err instanceof D1RequestError) return failure(err.message);
      throw err;
    }
    const format: ResultsFormat = resultsFormat(request.format);
    for (let attempt = 0; attempt < 3; attempt++) {
      const owner = await this.#owner(request.application, request.database);
      if ('holder' in owner) {
        if (forwarded) return failure(`the database moved to node ${owner.holder} meanwhile; retry`);
        if (!this.#options.forward)
          return failure(
            `the database is served by node ${owner.holder}, which this node cannot reach; retry`,
          );
        return this.#options.forward(owner.holder, request);
      }
      const { open } = owner;
      open.lastUsedMs = Date.now();
      try {
        const results = await open.db.execute(parsed.queries, format, owner.bucketDown === true);
        return {
          status: 200,
          headers: { 'content-type': 'application/json', [D1_BOOKMARK_HEADER]: open.db.bookmark },
          body: JSON.stringify(parsed.batch ? results : results[0]),
        };
      } catch (err) {
        if (err instanceof D1QueryError) return failure(err.message);
        if (err instanceof NotDurable)
          return failure(`${err.message}; the write may not have been applied: SQLITE_IOERR`);
        if (!(err instanceof DatabaseMoved)) throw err;
        this.#options.log(
          `D1 database ${request.application}/${request.database} moved off this node: ${err.message}`,
        );
        await this.#drop(request.application, request.database);
      }
    }
    return failure('the database kept moving between nodes; retry');
  }

  /**
   * Time travel: the database as it was at `untilMs` becomes its current state (as a new
   * generation, so the restore itself can be undone). Only on the node that may own it.
   */
  async restore(
    application: string,
    database: string,
    untilMs: number,
  ): Promise<{ bookmark: string } | { holder: string }> {
    await this.#drop(application, database);
    const owner = await this.#take(application, database, untilMs);
    return 'holder' in owner ? owner : { bookmark: owner.open.db.bookmark };
  }

  /** Closes every database and releases its lease. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#opening.values()]);
    for (const name of [...this.#open.keys()]) {
      const [application, database] = name.split('\n') as [string, string];
      await this.#drop(application, database);
    }
  }

  async #owner(application: string, database: string): Promise<Owner> {
    const name = `${application}\n${database}`;
    const open = this.#open.get(name);
    if (open && !open.db.moved) {
      if (open.lease.valid()) return { open };
      // Past the lease: renew now. Refused means another node has it; no answer means the bucket
      // is down, when nobody can take the database over and reads of this copy stay right.
      try {
        if (await open.lease.renew()) return { open };
      } catch {
        return { open, bucketDown: true };
      }
    }
    if (open) await this.#drop(application, database);
    let opening = this.#opening.get(name);
    if (!opening) {
      opening = this.#take(application, database).finally(() => this.#opening.delete(name));
      this.#opening.set(name, opening);
    }
    return opening;
  }

  /** Takes the lease and restores the database (as it was at `untilMs`, when given). */
  async #take(application: string, database: string, untilMs?: number): Promise<Owner> {
    if (this.#closed) throw new DatabaseMoved('the node is stopping');
    await this.#cleared;
    const lease = new D1Lease(
      { store: this.#options.store, application, database },
      this.#options.node,
      this.#leaseTtlMs,
    );
    const acquired = await lease.acquire();
    if (!acquired.held) return { holder: acquired.holder.node };
    try {
      const db = await OwnedDatabase.take({ ...this.#ownedOptions(application, database, lease), untilMs });
      return { open: this.#keep(application, database, lease, db) };
    } catch (err) {
      await lease.release().catch(() => {});
      throw err;
    }
  }

  #ownedOptions(application: string, database: string, lease: D1Lease) {
    return {
      ref: { store: this.#options.store, application, database },
      node: this.#options.node,
      dir: join(this.#options.dataDir, application, database, String(++this.#takes)),
      mayServe: () => lease.valid(),
      compactWalBytes: this.#options.compactWalBytes,
      queryTimeoutMs: this.#options.queryTimeoutMs,
    };
  }

  #keep(application: string, database: string, lease: D1Lease, db: OwnedDatabase): Open {
    const idleMs = this.#options.idleMs ?? D1_IDLE_MS;
    const open: Open = { lease, db, lastUsedMs: Date.now(), renewal: undefined as unknown as NodeJS.Timeout };
    open.renewal = setInterval(() => {
      if (Date.now() - open.lastUsedMs > idleMs) {
        void this.#drop(application, database);
        return;
      }
      lease.renew().then(
        (kept) => {
          if (!kept) void this.#drop(application, database);
        },
        (err: Error) =>
          this.#options.log(
            `renewing the lease of D1 database ${application}/${database} failed: ${err.message}`,
          ),
      );
    }, this.#leaseTtlMs / 3);
    open.renewal.unref();
    this.#open.set(`${application}\n${database}`, open);
    return open;
  }

  async #drop(application: string, database: string): Promise<void> {
    const name = `${application}\n${database}`;
    const open = this.#open.get(name);
    if (!open) return;
    this.#open.delete(name);
    clearInterval(open.renewal);
    await open.db.close();
    await open.lease
      .release()
      .catch((err: Error) =>
        this.#options.log(
          `releasing the lease of D1 database ${application}/${database} failed: ${err.message}`,
        ),
      );
  }
}

/** D1's failure result: the worker sees `D1_ERROR: <error>`. */
function failure(error: string): D1Answer {
  return {
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ success: false, error }),
  };
}
