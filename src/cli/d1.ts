// `svc d1` (docs/cli.md "svc d1"): an application's D1 databases through a node, as `wrangler d1`
// manages Cloudflare's: the databases its serving deployment binds, SQL executed, wrangler's
// migrations listed and applied, a database exported as SQL, and time travel (docs/api.md "D1
// databases"). Also the migrations commands themselves; what they read is d1-migrations.ts.

import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { isProblem, Problem } from '../problem.ts';
import { dataCommand, dataTarget } from './binding-data.ts';
import {
  type D1Flags,
  d1ExecuteAction,
  d1ExportAction,
  d1ListAction,
  d1TimeTravelInfoAction,
  d1TimeTravelRestoreAction,
  describeDatabase,
  listDatabases,
  runQueries,
} from './d1-actions.ts';
import {
  appliedQuery,
  applyRequest,
  createTableQuery,
  DEFAULT_MIGRATIONS_TABLE,
  migrationFiles,
  migrationsFolder,
  readMigration,
  unapplied,
} from './d1-migrations.ts';
import { repeatable } from './flags.ts';
import { say, table } from './output.ts';

const DATABASE_HELP = `
The application is --name (and --env); <db> is the database_name of one of the d1_databases its
serving deployment binds (svc d1 list).`;

/** A subcommand that names one database of the application. */
function databaseCommand(parent: Command, name: string, description: string): Command {
  return dataCommand(parent, name, description)
    .argument('<db>', "The database: a binding's database_name")
    .addHelpText('after', DATABASE_HELP);
}

export function registerD1(program: Command): void {
  const d1 = program.command('d1').description("D1: an application's SQL databases, through a node");
  dataCommand(d1, 'list', "List the databases the application's serving deployment binds")
    .option('--json', 'Print JSON')
    .action((flags: D1Flags) => d1ListAction(flags));
  databaseCommand(d1, 'execute', 'Run SQL: one or more statements, as one transaction')
    .option('--command <sql>', 'The SQL to run; statements separated by ;')
    .option('--file <path>', 'A .sql file to run')
    .option('--json', 'Print the results as JSON (a list, one result per statement)')
    .action((db: string, flags: Parameters<typeof d1ExecuteAction>[1]) => d1ExecuteAction(db, flags));
  databaseCommand(d1, 'export', 'Write the database as SQL: its schema, then its rows as INSERTs')
    .requiredOption('--output <file>', 'The .sql file to write')
    .option('--table <name>', 'Only this table; repeatable', repeatable)
    .option('--no-schema', 'Only the rows, not the schema')
    .option('--no-data', 'Only the schema, not the rows')
    .action((db: string, flags: Parameters<typeof d1ExportAction>[1]) => d1ExportAction(db, flags));

  const migrations = d1.command('migrations').description("wrangler's migration files of one database");
  const migrationsCommand = (name: string, description: string) =>
    databaseCommand(migrations, name, description).option(
      '-c, --worker-config <file>',
      'The worker config whose folder holds migrations_dir (default: the working directory)',
    );
  migrationsCommand('list', 'List the migration files not yet applied').action(
    (db: string, flags: MigrationFlags) => migrationsListAction(db, flags),
  );
  migrationsCommand(
    'apply',
    'Apply every migration file not yet applied, in order, one transaction each',
  ).action((db: string, flags: MigrationFlags) => migrationsApplyAction(db, flags));

  const timeTravel = d1.command('time-travel').description('Restore a database to an earlier time');
  databaseCommand(timeTravel, 'info', 'How far back the database can be restored')
    .option('--json', 'Print JSON')
    .action((db: string, flags: D1Flags) => d1TimeTravelInfoAction(db, flags));
  databaseCommand(timeTravel, 'restore', 'Make the database as it was at a time its current state')
    .requiredOption('--timestamp <time>', 'RFC 3339 time, Unix seconds or Unix milliseconds')
    .option('--json', 'Print JSON')
    .action((db: string, flags: Parameters<typeof d1TimeTravelRestoreAction>[1]) =>
      d1TimeTravelRestoreAction(db, flags),
    );
}

interface MigrationFlags extends D1Flags {
  workerConfig?: string;
}

/** The database's migrations: its folder and table, the files there, and those not yet applied. */
async function pendingMigrations(database: string, flags: MigrationFlags) {
  const base = await dataTarget(flags);
  const found = await listDatabases(base);
  const binding = found.databases.find((d) => d.database_name === database);
  if (!binding)
    throw new Problem(
      'not-found',
      'No such D1 database',
      `${base.application} binds no database ${JSON.stringify(database)}${found.databases.length ? ` (its databases: ${found.databases.map((d) => d.database_name).join(', ')})` : ''}`,
    );
  const project = flags.workerConfig ? dirname(resolve(flags.workerConfig)) : process.cwd();
  const folder = migrationsFolder(project, binding.migrations_dir);
  const files = await migrationFiles(folder);
  const tableName = binding.migrations_table ?? DEFAULT_MIGRATIONS_TABLE;
  // Creating the table and reading it is one request, as wrangler creates it before listing.
  const { results } = await runQueries(
    base,
    database,
    [
      { sql: createTableQuery(tableName), params: [] },
      { sql: appliedQuery(tableName), params: [] },
    ],
    'ARRAY_OF_OBJECTS',
  );
  const applied = ((results[1]?.results ?? []) as { name: string }[]).map((r) => r.name);
  return { base, folder, tableName, pending: unapplied(files, applied) };
}

async function migrationsListAction(database: string, flags: MigrationFlags): Promise<void> {
  const { base, folder, pending } = await pendingMigrations(database, flags);
  if (pending.length === 0) {
    say(`No migrations to apply to ${describeDatabase(base, database)} (${folder}).`);
    return;
  }
  for (const line of table(
    ['NAME'],
    pending.map((name) => [name]),
  ))
    say(line);
}

async function migrationsApplyAction(database: string, flags: MigrationFlags): Promise<void> {
  const { base, folder, tableName, pending } = await pendingMigrations(database, flags);
  if (pending.length === 0) {
    say(`No migrations to apply to ${describeDatabase(base, database)} (${folder}).`);
    return;
  }
  for (const [i, file] of pending.entries()) {
    const request = applyRequest(file, await readMigration(folder, file), tableName);
    try {
      await runQueries(base, database, request, 'ARRAY_OF_OBJECTS');
    } catch (err) {
      if (!isProblem(err) || err.code !== 'invalid-input') throw err;
      const left = pending.length - i - 1;
      throw new Problem(
        'invalid-input',
        'Migration failed',
        `${file} was rolled back (${err.detail ?? err.title}); ${i} applied before it stay applied${left ? `, ${left} after it not tried` : ''}`,
      );
    }
    say(`applied ${file}`);
  }
  say(
    `applied ${pending.length} migration${pending.length === 1 ? '' : 's'} to ${describeDatabase(base, database)}`,
  );
}
