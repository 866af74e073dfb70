// The process one D1 database's SQLite runs in (docs/bindings.md "D1 databases"): node:sqlite is
// synchronous, and a query in the node daemon would stop everything else the daemon does
// (health, leases, other databases) until it ends. In a process of its own it stops only this
// database, and the holder can end it with SIGKILL when a query runs past D1's 30 s (SQLite cannot
// be interrupted from JavaScript, not even in a worker thread). The wire is d1-connection.ts's,
// over the IPC channel `fork` opens; the process ends when that channel closes, so it never
// outlives the daemon that started it.

import { statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { D1QueryError, runQueries } from './d1-engine.ts';
import { D1_LIMITS, type D1Query, type ResultsFormat } from './d1-sql.ts';

/** One request to the process. */
export type ProcessRequest =
  | { id: number; op: 'run'; queries: D1Query[]; format: ResultsFormat }
  | { id: number; op: 'checkpoint' }
  | { id: number; op: 'close' };

/** Its answer: a value, or a failure (`query`: SQLite refused the queries, in D1's words). */
export type ProcessAnswer =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; message: string; query: boolean };

function walSize(file: string): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/** Serves the database file `argv[0]` until the IPC channel closes. */
export async function main(argv: string[]): Promise<number> {
  const file = argv[0];
  const send = process.send?.bind(process);
  if (!file || !send) {
    process.stderr.write('d1-process: started by the D1 host only (a database file and an IPC channel)\n');
    return 2;
  }
  const db = new DatabaseSync(file);
  db.exec('PRAGMA journal_mode = WAL');
  // The holder ships the WAL and checkpoints it itself (d1-database.ts).
  db.exec('PRAGMA wal_autocheckpoint = 0');
  // The bucket, not the disk, keeps what was acknowledged: a node that restarts restores.
  db.exec('PRAGMA synchronous = OFF');
  setD1Limits(db);
  process.on('message', (request: ProcessRequest) => {
    let answer: ProcessAnswer;
    try {
      answer = { id: request.id, ok: true, value: handle(db, file, request) };
    } catch (err) {
      answer = {
        id: request.id,
        ok: false,
        message: (err as Error).message,
        query: err instanceof D1QueryError,
      };
    }
    send(answer);
    if (request.op === 'close') process.disconnect();
  });
  await new Promise<void>((resolve) => process.once('disconnect', resolve));
  if (db.isOpen) db.close();
  return 0;
}

/**
 * D1's limits in SQLite itself, as D1's SQLite has them: a string or BLOB a statement makes
 * (`zeroblob(n)`, `||`, `replace()`) or a row past 2,000,000 bytes is refused as a bound one is,
 * and so is a statement with more than 100 parameters whatever was bound. d1-sql.ts checks each
 * request before it gets here; `limits` is in newer Node.js releases only, and without it those
 * checks are all there is.
 */
export function setD1Limits(db: DatabaseSync): void {
  const limits = (db as { limits?: DatabaseSync['limits'] }).limits;
  if (!limits) return;
  limits.length = D1_LIMITS.maxValueBytes;
  limits.sqlLength = D1_LIMITS.maxStatementBytes;
  limits.variableNumber = D1_LIMITS.maxParams;
}

function handle(db: DatabaseSync, file: string, request: ProcessRequest): unknown {
  switch (request.op) {
    case 'run': {
      const walBefore = walSize(file);
      const results = runQueries(db, request.queries, request.format);
      // Read at once after the commit: a transaction boundary, where shipping may stop.
      const walEnd = walSize(file);
      return { results, wrote: walEnd !== walBefore, walEnd };
    }
    case 'checkpoint': {
      const row = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number } | undefined;
      if (row && Number(row.busy) !== 0) throw new Error('the WAL checkpoint did not complete');
      return null;
    }
    case 'close':
      db.close();
      return null;
  }
}

// Run as the checkout's file; bundled (dist/d1-process.mjs), the bundle's entry calls `main`.
if (import.meta.main && import.meta.url.endsWith('.ts')) process.exitCode = await main(process.argv.slice(2));
