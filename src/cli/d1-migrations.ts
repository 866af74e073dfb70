// What `svc d1 migrations list|apply` reads and sends (docs/cli.md "svc d1"), as wrangler's `d1
// migrations` does, so a project's `migrations/` folder applies unchanged: the binding's
// `migrations_dir` (default `migrations`) relative to the folder of the worker config, its
// `*.sql` files in wrangler's order (by the number before the first `_`, then by name), and the
// binding's `migrations_table` (default `d1_migrations`) with wrangler's columns. Applying one
// file is one request: its statements and the INSERT of its row, one transaction, so a file that
// fails leaves neither its changes nor its row. No network here.

import { readdir, readFile } from 'node:fs/promises';
import { posix, resolve } from 'node:path';
import type { D1Query } from '../../runtime/src/bindings/d1-sql.ts';
import { splitStatements } from '../../runtime/src/bindings/d1-sql.ts';
import { Problem } from '../problem.ts';

/** wrangler's defaults (packages/wrangler/src/d1/constants.ts). */
export const DEFAULT_MIGRATIONS_DIR = 'migrations';
export const DEFAULT_MIGRATIONS_TABLE = 'd1_migrations';

/** A name quoted as an SQL identifier. */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** wrangler's migrations table, created when missing. */
export function createTableQuery(table: string): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table)}(
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT UNIQUE,
		applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
);`;
}

export function appliedQuery(table: string): string {
  return `SELECT name FROM ${quoteIdentifier(table)} ORDER BY id`;
}

/** The migrations folder: `migrations_dir` (normalised as wrangler does) under the project. */
export function migrationsFolder(project: string, migrationsDir: string | undefined): string {
  const relative = posix.normalize((migrationsDir ?? DEFAULT_MIGRATIONS_DIR).replace(/\\/g, '/'));
  return resolve(project, relative.endsWith('/') ? relative.slice(0, -1) : relative);
}

/**
 * The migration files of `folder` (wrangler's pattern `<migrations_dir>/*.sql`: regular files,
 * not hidden), in apply order. A missing folder is refused as wrangler refuses it.
 */
export async function migrationFiles(folder: string): Promise<string[]> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(folder, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw new Problem(
        'not-found',
        'No migrations folder',
        `no migrations present at ${folder}; set migrations_dir on the binding, or give the project with -c <worker config>`,
      );
    throw err;
  }
  return entries
    .filter((e) => e.isFile() && !e.name.startsWith('.') && e.name.endsWith('.sql'))
    .map((e) => e.name)
    .sort(compareMigrations);
}

/** wrangler's order: numbered files by their number, before unnumbered ones; ties by name. */
export function compareMigrations(a: string, b: string): number {
  const na = leadingNumber(a);
  const nb = leadingNumber(b);
  if (na !== nb) {
    if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
    if (Number.isFinite(na)) return -1;
    if (Number.isFinite(nb)) return 1;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

function leadingNumber(name: string): number {
  return Number.parseInt(name.split('_')[0]!, 10);
}

/** The files not yet in the table, in apply order. */
export function unapplied(files: string[], applied: string[]): string[] {
  const done = new Set(applied);
  return files.filter((f) => !done.has(f));
}

/**
 * The one request that applies a migration: each statement of the file, then the INSERT of its
 * row into the table. A file with no statement still records its row, as wrangler does.
 */
export function applyRequest(file: string, sql: string, table: string): D1Query[] {
  return [
    ...splitStatements(sql).map((statement) => ({ sql: statement, params: [] })),
    { sql: `INSERT INTO ${quoteIdentifier(table)} (name) VALUES (?)`, params: [file] },
  ];
}

/** Reads one migration file's SQL. */
export async function readMigration(folder: string, file: string): Promise<string> {
  return readFile(resolve(folder, file), 'utf8');
}
