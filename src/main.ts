// Entry point of the `svc` executable: builds the command tree (docs/cli.md, help order) and
// maps every failure to the exit behaviour of docs/cli.md "Output and exit status".

import { Command, CommanderError } from 'commander';
import { registerApp } from './cli/app.ts';
import { registerCompletion } from './cli/completion.ts';
import { registerConsole } from './cli/console.ts';
import { registerD1 } from './cli/d1.ts';
import { registerDeploy, registerDeployment } from './cli/deploy.ts';
import { registerFleet } from './cli/fleet.ts';
import { registerHealth } from './cli/health.ts';
import { registerKv } from './cli/kv.ts';
import { registerObjects } from './cli/objects.ts';
import { registerMetrics, registerTraces } from './cli/observe.ts';
import { registerOperator } from './cli/operator.ts';
import { registerQueues } from './cli/queues.ts';
import { registerR2 } from './cli/r2.ts';
import { registerRemote } from './cli/remote.ts';
import { registerSail } from './cli/sail.ts';
import { registerTail } from './cli/tail.ts';
import { registerTrust } from './cli/trust.ts';
import { registerWg } from './cli/wg.ts';
import { Problem, renderFailureLine } from './problem.ts';
import { SVC_VERSION } from './version.ts';

/** The whole command tree, top-level commands in docs/cli.md's help order. */
export function buildProgram(): Command {
  const program = new Command('svc')
    .description('Run Workers-style applications on a fleet that shares one S3-compatible bucket')
    .version(`svc ${SVC_VERSION}`, '-V, --version')
    .exitOverride()
    .configureOutput({ outputError: () => {} });
  for (const register of [
    registerSail,
    registerHealth,
    registerRemote,
    registerOperator,
    registerFleet,
    registerApp,
    registerDeploy,
    registerDeployment,
    registerTrust,
    registerMetrics,
    registerTraces,
    registerWg,
    // The bindings' data, after the commands of the contract.
    registerKv,
    registerR2,
    registerD1,
    registerQueues,
    registerObjects,
    // The live tail, after the commands of the contract too.
    registerTail,
    // The web console, which acts as the commands above do.
    registerConsole,
  ]) {
    register(program);
  }
  // Hidden: shell completion is no command of the help order.
  registerCompletion(program);
  for (const command of allCommands(program))
    command.exitOverride().configureOutput({ outputError: () => {} });
  return program;
}

function* allCommands(command: Command): Generator<Command> {
  for (const child of command.commands) {
    yield child;
    yield* allCommands(child);
  }
}

/** Hidden aliases kept until launch (docs/cli.md): each prints a deprecation line, then runs. */
const deprecatedAliases: Record<string, string[]> = { up: ['sail'], keygen: ['operator', 'keygen'] };

export function rewriteAliases(args: string[]): string[] {
  const replacement = deprecatedAliases[args[0] ?? ''];
  if (!replacement) return args;
  process.stderr.write(
    `svc: \`svc ${args[0]}\` is deprecated and will be removed at launch; use \`svc ${replacement.join(' ')}\`\n`,
  );
  return [...replacement, ...args.slice(1)];
}

/**
 * A reader that closed our stdout (`svc app show shop | head -1`) ends the command quietly, as
 * it ends any Unix tool: nothing more can be said to it, and it asked for no more.
 */
function endQuietlyOnClosedStdout(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

/** Runs the CLI and answers the process exit code. */
export async function main(argv: string[]): Promise<number> {
  endQuietlyOnClosedStdout();
  const program = buildProgram();
  try {
    await program.parseAsync(rewriteAliases(argv), { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) return 0;
      const message = err.message.replace(/^error: /, '');
      process.stderr.write(
        `${renderFailureLine(new Problem('invalid-input', 'Invalid command line', message))}\n`,
      );
      return 1;
    }
    process.stderr.write(`${renderFailureLine(err)}\n`);
    return 1;
  }
}
