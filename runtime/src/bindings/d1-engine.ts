// Running D1 queries on one SQLite database (docs/bindings.md "D1 databases"): a request's
// queries run in one transaction, all or nothing, as D1's `batch()` promises; each answers D1's
// result shape (`results`, `success`, `meta`). No I/O but the database handle.

import { performance } from 'node:perf_hooks';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { rewriteLimitedWrite } from './d1-limit.ts';
import {
  type D1Query,
  type D1Value,
  fromSqlite,
  type ResultsFormat,
  splitStatements,
  sqliteFailure,
  toSqlite,
} from './d1-sql.ts';

/** D1's `meta` of one query's result. */
export interface D1Meta {
  served_by: string;
  /** Every query reaches the one holder of the database: its primary, in D1's words. */
  served_by_primary: true;
  duration: number;
  changes: number;
  last_row_id: number;
  changed_db: boolean;
  size_after: number;
  rows_read: number;
  rows_written: number;
}

export interface D1Success {
  success: true;
  results: Record<string, D1Value>[] | { columns: string[]; rows: D1Value[][] } | undefined;
  meta: D1Meta;
}

export interface D1Failure {
  success: false;
  error: string;
}

/** What identifies the answering database in `meta.served_by`. */
export const SERVED_BY = 'svc-d1';

/**
 * Runs `queries` in one transaction. Answers each query's result, or throws the first failure's
 * words (SQLite's message with D1's `: SQLITE_<CODE>`) after rolling every query back.
 */
export function runQueries(db: DatabaseSync, queries: D1Query[], format: ResultsFormat): D1Success[] {
  const runnable = queries.filter((q) => splitStatements(q.sql).length > 0);
  if (runnable.length === 0) throw new D1QueryError('No SQL statements detected.');
  db.exec('SAVEPOINT d1_request');
  try {
    const results = runnable.map((q) => runQuery(db, q, format));
    db.exec('RELEASE d1_request');
    return results;
  } catch (err) {
    db.exec('ROLLBACK TO d1_request');
    db.exec('RELEASE d1_request');
    throw err instanceof D1QueryError ? err : new D1QueryError(sqliteFailure(err));
  }
}

/** A query SQLite refused, in D1's words. */
export class D1QueryError extends Error {}

interface Counters {
  totalChanges: number;
  lastRowId: number;
  size: number;
}

function counters(db: DatabaseSync): Counters {
  const row = db
    .prepare(
      'SELECT total_changes() AS c, last_insert_rowid() AS r, (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()) AS s',
    )
    .get() as { c: number; r: number; s: number };
  return { totalChanges: Number(row.c), lastRowId: Number(row.r), size: Number(row.s) };
}

/**
 * One query: every statement of its SQL runs in order, the parameters bound to the last, whose
 * rows are the result (as workerd's SQL API answers a multi-statement text).
 */
function runQuery(db: DatabaseSync, query: D1Query, format: ResultsFormat): D1Success {
  const started = performance.now();
  const before = counters(db);
  const statements = splitStatements(query.sql);
  let columns: string[] = [];
  let rows: D1Value[][] = [];
  for (const [i, text] of statements.entries()) {
    const last = i === statements.length - 1;
    const statement = prepare(db, text);
    const answer = execute(statement, last ? query.params : []);
    if (last) ({ columns, rows } = answer);
  }
  const after = counters(db);
  const changes = after.totalChanges - before.totalChanges;
  return {
    success: true,
    results: shape(format, columns, rows),
    meta: {
      served_by: SERVED_BY,
      served_by_primary: true,
      duration: performance.now() - started,
      changes,
      last_row_id: after.lastRowId,
      changed_db: changes !== 0 || after.lastRowId !== before.lastRowId || after.size !== before.size,
      size_after: after.size,
      // SQLite does not count rows scanned per statement through node:sqlite: rows returned and
      // rows changed stand in for D1's counts (docs/bindings.md "D1 databases").
      rows_read: rows.length,
      rows_written: changes,
    },
  };
}

/** The statement prepared; one SQLite refuses for its `LIMIT` is tried again as d1-limit.ts rewrites it. */
function prepare(db: DatabaseSync, text: string): StatementSync {
  try {
    return db.prepare(text);
  } catch (err) {
    const rewritten = rewriteLimitedWrite(text);
    if (rewritten === text) throw err;
    try {
      return db.prepare(rewritten);
    } catch {
      throw err;
    }
  }
}

function execute(statement: StatementSync, params: D1Value[]): { columns: string[]; rows: D1Value[][] } {
  statement.setReadBigInts(true);
  statement.setReturnArrays(true);
  const bound = params.map(toSqlite);
  const columns = statement.columns().map((c) => c.name);
  if (columns.length === 0) {
    statement.run(...bound);
    return { columns, rows: [] };
  }
  const rows = (statement.all(...bound) as unknown as unknown[][]).map((row) => row.map(fromSqlite));
  return { columns, rows };
}

function shape(format: ResultsFormat, columns: string[], rows: D1Value[][]): D1Success['results'] {
  if (format === 'ROWS_AND_COLUMNS') return { columns, rows };
  // `run()` asks for NONE; Miniflare answers objects then too, and workerd drops them.
  return rows.map((row) => Object.fromEntries(columns.map((name, i) => [name, row[i] ?? null])));
}
