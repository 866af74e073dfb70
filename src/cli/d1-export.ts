// The SQL dump of `svc d1 export` (docs/cli.md "svc d1"), laid out as D1's export and Miniflare's
// `dumpSql` lay it out (itself SQLite shell's `.dump`): `PRAGMA defer_foreign_keys=TRUE;`, each
// table's CREATE followed by one INSERT per row, then the indexes, triggers and views. The
// command reads the schema and the rows through D1 queries (`ROWS_AND_COLUMNS`); this module only
// asks for them and lays them out. No network here.

import type { D1Query, D1Value } from '../../runtime/src/bindings/d1-sql.ts';
import { Problem } from '../problem.ts';
import { quoteIdentifier } from './d1-migrations.ts';

export interface DumpOptions {
  noSchema?: boolean;
  noData?: boolean;
  /** Only these tables (and the indexes, triggers and views on them); empty: every table. */
  tables?: string[];
}

/** A row of `sqlite_schema` as the schema queries ask for it. */
export interface SchemaRow {
  name: string;
  tbl_name: string;
  type: string;
  sql: string;
}

/** One table's rows as `SELECT *` answered them, with the columns `PRAGMA table_info` lists. */
export interface TableRows {
  /** The columns of `SELECT *`, in order. */
  columns: string[];
  rows: D1Value[][];
  /** The table's stored columns (`PRAGMA table_info`: no generated or hidden columns). */
  stored: string[];
}

/** The schema: the tables first (sqlite_sequence last), then indexes, triggers and views. */
export const SCHEMA_QUERIES: D1Query[] = [
  {
    sql: "SELECT name, tbl_name, type, sql FROM sqlite_schema AS o WHERE (true) AND type=='table' AND sql NOT NULL ORDER BY tbl_name='sqlite_sequence', rowid",
    params: [],
  },
  {
    sql: "SELECT name, tbl_name, type, sql FROM sqlite_schema AS o WHERE (true) AND sql NOT NULL AND type IN ('index', 'trigger', 'view') ORDER BY type COLLATE NOCASE",
    params: [],
  },
];

/** Whether a table's rows are dumped: SQLite's own and D1's internal tables are not, but for sqlite_sequence and sqlite_stat*. */
export function dumpedTable(table: SchemaRow, options: DumpOptions): boolean {
  if (options.tables?.length && !options.tables.includes(table.name)) return false;
  if (table.name === 'sqlite_sequence' || /^sqlite_stat./.test(table.name)) return true;
  if (table.sql.startsWith('CREATE VIRTUAL TABLE'))
    throw new Problem(
      'invalid-input',
      'Cannot export',
      `table ${table.name} is a virtual table; D1 exports no databases with virtual tables (fts5)`,
    );
  return !table.name.startsWith('_cf_') && !table.name.startsWith('sqlite_');
}

/** The two queries that read one table's rows: its stored columns, then every row. */
export function tableQueries(table: string): D1Query[] {
  return [
    { sql: `PRAGMA table_info(${quoteIdentifier(table)})`, params: [] },
    { sql: `SELECT * FROM ${quoteIdentifier(table)}`, params: [] },
  ];
}

/** The dump's statements, one a line, in `.dump` order. */
export function dumpStatements(
  tables: SchemaRow[],
  rest: SchemaRow[],
  data: Map<string, TableRows>,
  options: DumpOptions,
): string[] {
  const lines = ['PRAGMA defer_foreign_keys=TRUE;'];
  for (const table of tables) {
    if (!dumpedTable(table, options)) continue;
    if (!options.noSchema) {
      if (table.name === 'sqlite_sequence') lines.push('DELETE FROM sqlite_sequence;');
      else if (/^sqlite_stat./.test(table.name)) lines.push('ANALYZE sqlite_schema;');
      // `.dump` adds IF NOT EXISTS to a table whose name was quoted in its CREATE.
      else if (/^CREATE TABLE ['"]/.test(table.sql))
        lines.push(`CREATE TABLE IF NOT EXISTS ${table.sql.substring(13)};`);
      else lines.push(`${table.sql};`);
    }
    if (options.noData) continue;
    const rows = data.get(table.name);
    if (rows) lines.push(...insertStatements(table.name, rows));
  }
  if (!options.noSchema)
    for (const entry of rest) {
      if (options.tables?.length && !options.tables.includes(entry.tbl_name)) continue;
      lines.push(`${entry.sql};`);
    }
  return lines;
}

function insertStatements(table: string, { columns, rows, stored }: TableRows): string[] {
  const kept = columns.map((name, i) => ({ name, i })).filter((c) => stored.includes(c.name));
  const names = kept.map((c) => quoteIdentifier(c.name)).join(',');
  return rows.map(
    (row) =>
      `INSERT INTO ${quoteIdentifier(table)} (${names}) VALUES(${kept.map((c) => sqlLiteral(row[c.i] ?? null)).join(',')});`,
  );
}

/** A value as an SQL literal, as `.dump` writes it: text quoted with newlines spelled out, BLOBs in hex. */
export function sqlLiteral(value: D1Value): string {
  if (value === null) return 'NULL';
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return `X'${Buffer.from(value).toString('hex')}'`;
  let lf = false;
  let cr = false;
  const escaped = value.replace(/'|(\n)|(\r)/g, (_m, n?: string, r?: string) => {
    if (n) {
      lf = true;
      return '\\n';
    }
    if (r) {
      cr = true;
      return '\\r';
    }
    return "''";
  });
  let literal = `'${escaped}'`;
  if (cr) literal = `replace(${literal},'\\r',char(13))`;
  if (lf) literal = `replace(${literal},'\\n',char(10))`;
  return literal;
}
