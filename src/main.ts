// Entry point of the `svc` executable: builds the command tree (docs/cli.md, help order) and
// maps every failure to the exit behaviour of docs/cli.md "Output and exit status".

import { Command, CommanderError } from 'commander';
import { Problem, renderFailureLine } from './problem.ts';
import { SVC_VERSION } from './version.ts';

type Register = (program: Command) => void;

/**
 * The top-level commands in docs/cli.md's help order, each with the module that declares it.
 * Modules are imported on demand: a command loads only its own module and what that imports
 * (docs/decisions.md "Start-up"), so `svc deploy` does not load the daemon, the console or the
 * bucket clients.
 */
const COMMANDS: readonly { names: readonly string[]; load: () => Promise<readonly Register[]> }[] = [
  { names: ['sail'], load: async () => [(await import('./cli/sail.ts')).registerSail] },
  { names: ['health'], load: async () => [(await import('./cli/health.ts')).registerHealth] },
  { names: ['remote'], load: async () => [(await import('./cli/remote.ts')).registerRemote] },
  { names: ['operator'], load: async () => [(await import('./cli/operator.ts')).registerOperator] },
  { names: ['fleet'], load: async () => [(await import('./cli/fleet.ts')).registerFleet] },
  { names: ['app'], load: async () => [(await import('./cli/app.ts')).registerApp] },
  {
    names: ['deploy', 'deployment'],
    load: async () => {
      const { registerDeploy, registerDeployment } = await import('./cli/deploy.ts');
      return [registerDeploy, registerDeployment];
    },
  },
  { names: ['trust'], load: async () => [(await import('./cli/trust.ts')).registerTrust] },
  {
    names: ['metrics', 'traces'],
    load: async () => {
      const { registerMetrics, registerTraces } = await import('./cli/observe.ts');
      return [registerMetrics, registerTraces];
    },
  },
  { names: ['wg'], load: async () => [(await import('./cli/wg.ts')).registerWg] },
  // The bindings' data, after the commands of the contract.
  { names: ['kv'], load: async () => [(await import('./cli/kv.ts')).registerKv] },
  { names: ['r2'], load: async () => [(await import('./cli/r2.ts')).registerR2] },
  { names: ['d1'], load: async () => [(await import('./cli/d1.ts')).registerD1] },
  { names: ['queues'], load: async () => [(await import('./cli/queues.ts')).registerQueues] },
  { names: ['objects'], load: async () => [(await import('./cli/objects.ts')).registerObjects] },
  // The live tail, after the commands of the contract too.
  { names: ['tail'], load: async () => [(await import('./cli/tail.ts')).registerTail] },
  // The web console, which acts as the commands above do.
  { names: ['console'], load: async () => [(await import('./cli/console.ts')).registerConsole] },
];

/**
 * The command tree, top-level commands in docs/cli.md's help order. With `only`, the tree holds
 * just the top-level command(s) of that module: what running that command needs. Without it,
 * the whole tree (help, shell completion, an unknown command's suggestions).
 */
export async function buildProgram(only?: string): Promise<Command> {
  const program = new Command('svc')
    .description('Run Workers-style applications on a fleet that shares one S3-compatible bucket')
    .version(`svc ${SVC_VERSION}`, '-V, --version')
    .exitOverride()
    .configureOutput({ outputError: () => {} });
  const wanted = only === undefined ? COMMANDS : COMMANDS.filter((c) => c.names.includes(only));
  for (const registers of await Promise.all(wanted.map((c) => c.load()))) {
    for (const register of registers) register(program);
  }
  if (only === undefined) {
    // Hidden: shell completion is no command of the help order; it prints the whole tree.
    const { registerCompletion } = await import('./cli/completion.ts');
    registerCompletion(program);
  }
  for (const command of allCommands(program))
    command.exitOverride().configureOutput({ outputError: () => {} });
  return program;
}

/**
 * What a command line needs of the tree: `--version` alone none of it, a known top-level command
 * its own module, anything else (help, completion, a typo to suggest against) all of it.
 */
export function commandToLoad(args: readonly string[]): string | undefined {
  const first = args[0];
  if (first === undefined) return undefined;
  if ((first === '-V' || first === '--version') && args.length === 1) return '';
  return COMMANDS.some((c) => c.names.includes(first)) ? first : undefined;
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
  const args = rewriteAliases(argv);
  try {
    const program = await buildProgram(commandToLoad(args));
    await program.parseAsync(args, { from: 'user' });
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
