// Entry point of the `cell` executable (docs/runtime.md):
// `cell --version`, `cell publish --config <file>`, `cell serve` and `cell host` (the bucket side of
// serve's fronts, when no node daemon hosts them). Failures print one line
// (`cell: <what went wrong and what to do>`) and exit 1. The commands load their modules on
// demand, so `cell --version` (which svc runs per node and per process) stays fast.

import { Command, CommanderError } from 'commander';
import { CellError, renderError } from './errors.ts';
import { CELL_VERSION_LINE } from './version.ts';

const log = (line: string) => process.stderr.write(`${line}\n`);

export function buildProgram(): Command {
  const program = new Command('cell')
    .description(
      'The svc application runtime: publishes a worker into the bucket and serves it through workerd',
    )
    .version(CELL_VERSION_LINE, '-V, --version', 'Print `cell <version>`')
    .exitOverride()
    .configureOutput({ outputError: () => {} });
  program
    .command('publish')
    .description(
      'Build the worker in the current directory and publish it as a new deployment (env CELL_APP, SVC_S3_*)',
    )
    .option('--config <file>', 'Worker config (default: cell.jsonc, else cell.json)')
    .option(
      '--standby',
      'Load first, print {"standby":"ready"}, then run the one job read from stdin, {"cwd","config","env"}, as a publish (how a node keeps a publisher waiting)',
    )
    .action(async (flags: { config?: string; standby?: boolean }) => {
      if (flags.standby) {
        const { publishStandby } = await import('./publish-standby.ts');
        const published = await publishStandby(log);
        if (published) process.stdout.write(`${JSON.stringify(published)}\n`);
        return;
      }
      // esbuild's service (a process of its own) starts while the publish's modules load; the
      // build then finds it running (docs/decisions.md "Start-up"). A failure to start is the
      // build's to report.
      void import('esbuild').then((esbuild) => esbuild.initialize({})).catch(() => {});
      const { publish } = await import('./publish.ts');
      const published = await publish({
        cwd: process.cwd(),
        configPath: flags.config,
        env: process.env,
        log,
      });
      // The last stdout line names the deployment; svc reads it.
      process.stdout.write(`${JSON.stringify(published)}\n`);
    });
  program
    .command('serve')
    .description(
      'Serve the selected deployment (env CELL_APP, CELL_NODE, CELL_PORT, CELL_BIND_HOST, SVC_S3_*; optional CELL_OTEL=1)',
    )
    .action(async () => {
      const { serve } = await import('./serve.ts');
      process.exitCode = await serve(process.env, log);
    });
  program
    .command('host')
    .description(
      "Serve the bucket side of cell serve's fronts (env SVC_S3_*): on a Unix socket, as a node daemon does, or on stdin/stdout for the one front that started it",
    )
    .option('--socket <path>', 'Listen on this Unix socket (owner-only) until SIGTERM or SIGINT')
    .option(
      '--stdio',
      'Serve one front on stdin and stdout until stdin ends (how cell serve starts its private host)',
    )
    .action(async (flags: { socket?: string; stdio?: boolean }) => {
      if (Boolean(flags.socket) === Boolean(flags.stdio))
        throw new CellError('cell host needs exactly one of --socket <path> and --stdio');
      if (flags.stdio) {
        const { hostOnStdio } = await import('./host/command.ts');
        process.exitCode = await hostOnStdio(process.env, log);
        return;
      }
      const { hostOnSocket } = await import('./host/command.ts');
      process.exitCode = await hostOnSocket(flags.socket!, process.env, log);
    });
  for (const command of program.commands) command.exitOverride().configureOutput({ outputError: () => {} });
  return program;
}

/** Runs the CLI; answers the exit code. */
export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version were printed already; commander reports them as errors to stop.
      if (err.exitCode === 0 || err.code === 'commander.help' || err.code === 'commander.helpDisplayed') {
        return err.exitCode;
      }
      log(renderError(new CellError(`${err.message.replace(/^error: /, '')} (run cell --help)`)));
      return 1;
    }
    log(renderError(err));
    return 1;
  }
}
