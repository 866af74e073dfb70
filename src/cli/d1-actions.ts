// `svc d1 list|execute|export|time-travel` (docs/cli.md "svc d1"), as `wrangler d1` manages
// Cloudflare's databases, through a node (docs/api.md "D1 databases"). `<db>` is a binding's
// `database_name`. SQL is cut into its statements here, with the runtime's own splitter, and sent
// as one list: one result per statement (as D1's REST API answers `wrangler d1 execute`), all of
// them one transaction.

import { writeFile } from 'node:fs/promises';
import type { D1Query, D1Value } from '../../runtime/src/bindings/d1-sql.ts';
import { splitStatements } from '../../runtime/src/bindings/d1-sql.ts';
import { Problem } from '../problem.ts';
import {
  callApplication,
  type DataFlags,
  type DataTarget,
  dataTarget,
  readValueFile,
} from './binding-data.ts';
import {
  type DumpOptions,
  dumpedTable,
  dumpStatements,
  SCHEMA_QUERIES,
  type SchemaRow,
  type TableRows,
  tableQueries,
} from './d1-export.ts';
import { note, say, table } from './output.ts';

export type D1Flags = DataFlags;

/** A database as `GET .../d1/databases` lists it. */
export interface ListedDatabase {
  binding: string;
  database_name: string;
  database_id?: string;
  migrations_dir?: string;
  migrations_table?: string;
  served_by: string | null;
}

interface DatabasesAnswer {
  application: string;
  deployment: string | null;
  databases: ListedDatabase[];
}

/** One result of a D1 query as the node answers it. */
export interface D1Result {
  success: boolean;
  results?: Record<string, D1Value>[] | { columns: string[]; rows: D1Value[][] };
  meta?: { duration?: number; changes?: number };
}

type Format = 'ARRAY_OF_OBJECTS' | 'ROWS_AND_COLUMNS';

/** A file read for `execute --file` is at most this big: the node's request body limit. */
const MAX_SQL_FILE_BYTES = 64 * 1024 * 1024;
/** A whole file or a dump may take a while; a single command gets the usual minute. */
const LONG_CALL_MS = 10 * 60_000;

export async function listDatabases(base: DataTarget): Promise<DatabasesAnswer> {
  return (await callApplication(base, 'GET', '/d1/databases')).body as DatabasesAnswer;
}

/** Runs `queries` as one transaction; answers a result per query and the database's bookmark. */
export async function runQueries(
  base: DataTarget,
  database: string,
  queries: D1Query[],
  format: Format,
  timeoutMs?: number,
): Promise<{ results: D1Result[]; bookmark: string | null }> {
  const answer = await callApplication(base, 'POST', `/d1/databases/${encodeURIComponent(database)}/query`, {
    body: queries,
    query: { resultsFormat: format },
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });
  return {
    results: answer.body as D1Result[],
    bookmark: answer.headers.get('x-cf-d1-session-commit-token'),
  };
}

export function describeDatabase(base: DataTarget, database: string): string {
  return `D1 database ${database} of ${base.application}`;
}

export async function d1ListAction(flags: D1Flags): Promise<void> {
  const found = await listDatabases(await dataTarget(flags));
  if (flags.json) {
    say(JSON.stringify(found, null, 2));
    return;
  }
  if (found.databases.length === 0) {
    say(
      found.deployment === null
        ? `${found.application} has no serving deployment, so no D1 database.`
        : `The serving deployment ${found.deployment} of ${found.application} binds no D1 database.`,
    );
    return;
  }
  for (const line of table(
    ['DATABASE', 'BINDING', 'MIGRATIONS', 'SERVED BY'],
    found.databases.map((d) => [
      d.database_name,
      d.binding,
      `${d.migrations_dir ?? 'migrations'} (${d.migrations_table ?? 'd1_migrations'})`,
      d.served_by ?? '-',
    ]),
  ))
    say(line);
}

export async function d1ExecuteAction(
  database: string,
  flags: D1Flags & { command?: string; file?: string },
): Promise<void> {
  if ((flags.command === undefined) === (flags.file === undefined))
    throw new Problem(
      'invalid-input',
      'No SQL',
      flags.command === undefined
        ? 'give the SQL with --command "<SQL>" or --file <path>'
        : 'give --command or --file, not both',
    );
  const sql =
    flags.command ??
    (
      await readValueFile(flags.file!, {
        bytes: MAX_SQL_FILE_BYTES,
        what: 'a node takes at most 64 MiB of SQL in one request',
      })
    ).toString('utf8');
  if (sql.startsWith('SQLite format 3'))
    throw new Problem(
      'invalid-input',
      'Not an SQL file',
      `${flags.file} is an SQLite database file, not SQL text; export it as SQL (sqlite3 <file> .dump) first`,
    );
  const queries = splitStatements(sql).map((statement) => ({ sql: statement, params: [] }));
  const base = await dataTarget(flags);
  const format: Format = flags.json ? 'ARRAY_OF_OBJECTS' : 'ROWS_AND_COLUMNS';
  const started = performance.now();
  const { results, bookmark } = await runQueries(
    base,
    database,
    queries,
    format,
    flags.file ? LONG_CALL_MS : undefined,
  );
  if (flags.json) {
    say(JSON.stringify(results, null, 2));
    return;
  }
  let first = true;
  for (const result of results) {
    const shaped = result.results as { columns: string[]; rows: D1Value[][] } | undefined;
    if (!shaped || shaped.columns.length === 0) continue;
    if (!first) say('');
    first = false;
    for (const line of table(
      shaped.columns,
      shaped.rows.map((row) => row.map(showValue)),
    ))
      say(line);
  }
  const count = `${results.length} statement${results.length === 1 ? '' : 's'}`;
  note(
    `svc: executed ${count} on ${describeDatabase(base, database)} in ${(performance.now() - started).toFixed(0)} ms${bookmark ? ` (bookmark ${bookmark})` : ''}`,
  );
}

/** A value in a table cell: NULL, a BLOB as X'hex', else its text. */
function showValue(value: D1Value): string {
  if (value === null) return 'NULL';
  if (Array.isArray(value)) return `X'${Buffer.from(value).toString('hex')}'`;
  return String(value);
}

export async function d1ExportAction(
  database: string,
  flags: D1Flags & { output: string; schema?: boolean; data?: boolean; table?: string[] },
): Promise<void> {
  const options: DumpOptions = {
    noSchema: flags.schema === false,
    noData: flags.data === false,
    tables: flags.table,
  };
  if (options.noSchema && options.noData)
    throw new Problem('invalid-input', 'Nothing to export', 'give --no-schema or --no-data, not both');
  const base = await dataTarget(flags);
  const schema = await runQueries(base, database, SCHEMA_QUERIES, 'ROWS_AND_COLUMNS');
  const [tables, rest] = schema.results.map(schemaRows) as [SchemaRow[], SchemaRow[]];
  const dumped = tables.filter((t) => dumpedTable(t, options));
  const data = new Map<string, TableRows>();
  if (!options.noData && dumped.length > 0) {
    // Every table's rows in one request, so the dump is one moment of the database.
    const read = await runQueries(
      base,
      database,
      dumped.flatMap((t) => tableQueries(t.name)),
      'ROWS_AND_COLUMNS',
      LONG_CALL_MS,
    );
    dumped.forEach((t, i) => {
      const info = rowsOf(read.results[2 * i]!);
      const rows = rowsOf(read.results[2 * i + 1]!);
      const nameAt = info.columns.indexOf('name');
      data.set(t.name, { ...rows, stored: info.rows.map((r) => String(r[nameAt])) });
    });
  }
  const lines = dumpStatements(tables, rest, data, options);
  await writeFile(flags.output, `${lines.join('\n')}\n`);
  const rowCount = [...data.values()].reduce((n, t) => n + t.rows.length, 0);
  say(
    `exported ${describeDatabase(base, database)} to ${flags.output} (${dumped.length} table${dumped.length === 1 ? '' : 's'}, ${rowCount} row${rowCount === 1 ? '' : 's'})`,
  );
}

function rowsOf(result: D1Result): { columns: string[]; rows: D1Value[][] } {
  return result.results as { columns: string[]; rows: D1Value[][] };
}

function schemaRows(result: D1Result): SchemaRow[] {
  const { columns, rows } = rowsOf(result);
  return rows.map((row) => Object.fromEntries(columns.map((c, i) => [c, row[i]])) as unknown as SchemaRow);
}

interface TimeTravelInfo {
  application: string;
  database: string;
  generations: number;
  segments_in_newest: number;
  earliest_ms: number | null;
  retention_days: number;
}

export async function d1TimeTravelInfoAction(database: string, flags: D1Flags): Promise<void> {
  const base = await dataTarget(flags);
  const info = (
    await callApplication(base, 'GET', `/d1/databases/${encodeURIComponent(database)}/time-travel`)
  ).body as TimeTravelInfo;
  if (flags.json) {
    say(JSON.stringify(info, null, 2));
    return;
  }
  const earliest = info.earliest_ms === null ? '-' : new Date(info.earliest_ms).toISOString();
  for (const line of table(
    ['DATABASE', 'EARLIEST', 'RETENTION', 'GENERATIONS', 'SEGMENTS'],
    [
      [
        database,
        earliest,
        `${info.retention_days} days`,
        String(info.generations),
        String(info.segments_in_newest),
      ],
    ],
  ))
    say(line);
}

/**
 * wrangler's `--timestamp`: an RFC 3339 time, Unix seconds (ten digits) or Unix milliseconds.
 * Anything else goes to the node as given, which refuses it in its words.
 */
export function restoreTimestamp(value: string): string | number {
  if (/^\d{10}$/.test(value)) return Number(value) * 1000;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

export async function d1TimeTravelRestoreAction(
  database: string,
  flags: D1Flags & { timestamp: string },
): Promise<void> {
  const base = await dataTarget(flags);
  const restored = (
    await callApplication(base, 'POST', `/d1/databases/${encodeURIComponent(database)}/time-travel/restore`, {
      body: { timestamp: restoreTimestamp(flags.timestamp) },
      timeoutMs: LONG_CALL_MS,
    })
  ).body as { restored_to_ms: number; bookmark: string };
  if (flags.json) {
    say(JSON.stringify(restored, null, 2));
    return;
  }
  say(
    `restored ${describeDatabase(base, database)} to ${new Date(restored.restored_to_ms).toISOString()} (bookmark ${restored.bookmark})`,
  );
}
