// D1's request and value rules without a database (docs/bindings.md "D1 databases"): what
// workerd's D1 binding sends (`{ sql, params }` or a list of them, params as D1 encodes them),
// splitting one `sql` into statements, D1's types both ways, D1's limits, and SQLite's failure
// words as D1 gives them (`<message>: SQLITE_<CODE>`).

/** D1's limits (developers.cloudflare.com/d1/platform/limits/) that svc enforces per query. */
export const D1_LIMITS = {
  /** The longest SQL statement, in bytes. */
  maxStatementBytes: 100_000,
  /** Bound parameters per query. */
  maxParams: 100,
  /** The largest string or BLOB bound or stored in a row, in bytes. */
  maxValueBytes: 2_000_000,
  /** Queries in one batch: D1 documents none; this keeps a request's body bounded. */
  maxBatch: 10_000,
};

/** A value as D1's wire carries it: a BLOB is a list of byte values. */
export type D1Value = number | string | null | number[];

/** One query of a request: its SQL and its positional parameters. */
export interface D1Query {
  sql: string;
  params: D1Value[];
}

/** How the caller wants rows: objects (`all()`), columns and rows (`raw()`), or none (`run()`). */
export type ResultsFormat = 'ARRAY_OF_OBJECTS' | 'ROWS_AND_COLUMNS' | 'NONE';

/** A refusal of the request itself, answered as D1's failure result. */
export class D1RequestError extends Error {}

/** The `resultsFormat` query parameter; anything else reads as objects, as Miniflare does. */
export function resultsFormat(value: string | null): ResultsFormat {
  return value === 'ROWS_AND_COLUMNS' || value === 'NONE' ? value : 'ARRAY_OF_OBJECTS';
}

/** The JSON body workerd sends: one query or a list; `batch` is whether it was a list. */
export function parseQueries(body: string): { queries: D1Query[]; batch: boolean } {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    throw new D1RequestError('the request is not JSON');
  }
  const batch = Array.isArray(doc);
  const list = batch ? (doc as unknown[]) : [doc];
  if (list.length > D1_LIMITS.maxBatch)
    throw new D1RequestError(`too many queries in one batch (${list.length}, at most ${D1_LIMITS.maxBatch})`);
  return { queries: list.map(parseQuery), batch };
}

function parseQuery(entry: unknown): D1Query {
  if (typeof entry !== 'object' || entry === null)
    throw new D1RequestError('a query must be { sql, params }');
  const { sql, params } = entry as { sql?: unknown; params?: unknown };
  if (typeof sql !== 'string') throw new D1RequestError('a query needs "sql" as a string');
  if (Buffer.byteLength(sql) > D1_LIMITS.maxStatementBytes)
    throw new D1RequestError(
      `statement too long: ${Buffer.byteLength(sql)} bytes, D1 allows ${D1_LIMITS.maxStatementBytes}: SQLITE_TOOBIG`,
    );
  const list = params === undefined || params === null ? [] : params;
  if (!Array.isArray(list)) throw new D1RequestError('"params" must be a list');
  if (list.length > D1_LIMITS.maxParams)
    throw new D1RequestError(
      `too many SQL variables: ${list.length}, D1 allows ${D1_LIMITS.maxParams}: SQLITE_ERROR`,
    );
  for (const value of list) checkValue(value);
  return { sql, params: list as D1Value[] };
}

function checkValue(value: unknown): void {
  if (value === null || typeof value === 'number') return;
  if (typeof value === 'string') {
    if (Buffer.byteLength(value) > D1_LIMITS.maxValueBytes)
      throw new D1RequestError(`string or blob too big: SQLITE_TOOBIG`);
    return;
  }
  if (Array.isArray(value) && value.every((b) => Number.isInteger(b) && b >= 0 && b < 256)) {
    if (value.length > D1_LIMITS.maxValueBytes)
      throw new D1RequestError(`string or blob too big: SQLITE_TOOBIG`);
    return;
  }
  throw new D1RequestError(`Type '${typeof value}' not supported for value '${String(value)}'`);
}

/** A D1 parameter as SQLite takes it: whole numbers as INTEGER (D1 binds them so), bytes as a BLOB. */
export function toSqlite(value: D1Value): null | number | bigint | string | Uint8Array {
  if (Array.isArray(value)) return Uint8Array.from(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  return value;
}

/** A value SQLite answered, as D1 returns it: integers as numbers, a BLOB as its bytes. */
export function fromSqlite(value: unknown): D1Value {
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Uint8Array) return Array.from(value);
  return value as D1Value;
}

/** SQLite's primary result codes by number, for D1's `: SQLITE_<CODE>` suffix. */
const RESULT_CODES: Record<number, string> = {
  1: 'ERROR',
  2: 'INTERNAL',
  3: 'PERM',
  4: 'ABORT',
  5: 'BUSY',
  6: 'LOCKED',
  7: 'NOMEM',
  8: 'READONLY',
  9: 'INTERRUPT',
  10: 'IOERR',
  11: 'CORRUPT',
  13: 'FULL',
  17: 'SCHEMA',
  18: 'TOOBIG',
  19: 'CONSTRAINT',
  20: 'MISMATCH',
  21: 'MISUSE',
  23: 'AUTH',
  25: 'RANGE',
  26: 'NOTADB',
};

/** SQLite's failure as D1 words it: `UNIQUE constraint failed: t.a: SQLITE_CONSTRAINT`. */
export function sqliteFailure(err: unknown): string {
  const e = err as { message?: string; errcode?: number };
  const message = e.message ?? String(err);
  if (typeof e.errcode !== 'number') return message;
  return `${message}: SQLITE_${RESULT_CODES[e.errcode & 0xff] ?? 'ERROR'}`;
}

/**
 * One SQL text cut into its statements, each without its final `;`; comments and blank
 * statements are dropped. Quotes ('', "", ``, []) and comments (--, /* *\/) hide semicolons, and
 * so does a trigger's body up to its `END`.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let i = 0;
  const push = (end: number) => {
    const text = sql.slice(start, end);
    if (stripComments(text).trim() !== '') statements.push(text.trim());
    start = end + 1;
  };
  while (i < sql.length) {
    const c = sql[i];
    if (c === "'" || c === '"' || c === '`') i = skipQuoted(sql, i, c);
    else if (c === '[') i = skipQuoted(sql, i, ']');
    else if (c === '-' && sql[i + 1] === '-') i = skipTo(sql, i, '\n');
    else if (c === '/' && sql[i + 1] === '*') i = skipTo(sql, i + 2, '*/') + 1;
    else if (c === ';') {
      if (!insideTriggerBody(sql.slice(start, i))) push(i);
      i++;
    } else i++;
  }
  push(sql.length);
  return statements;
}

function skipQuoted(sql: string, at: number, close: string): number {
  let i = at + 1;
  while (i < sql.length) {
    if (sql[i] === close) {
      // A doubled quote is an escaped quote ('it''s'), except for [...].
      if (close !== ']' && sql[i + 1] === close) i += 2;
      else return i + 1;
    } else i++;
  }
  return i;
}

function skipTo(sql: string, at: number, end: string): number {
  const found = sql.indexOf(end, at);
  return found < 0 ? sql.length : found + 1;
}

function stripComments(text: string): string {
  return text.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
}

/** Whether `text` (a statement so far) is a CREATE TRIGGER whose body has not reached its END. */
function insideTriggerBody(text: string): boolean {
  const words: string[] =
    stripComments(text)
      .toUpperCase()
      .match(/[A-Z_]+/g) ?? [];
  if (words[0] !== 'CREATE') return false;
  const trigger = words.indexOf('TRIGGER');
  if (trigger < 0 || trigger > 3) return false;
  if (!words.includes('BEGIN')) return true;
  return words[words.length - 1] !== 'END';
}
