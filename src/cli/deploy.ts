// `svc deploy` and `svc deployment prune|list|rollback` (docs/cli.md "svc deploy", "svc deployment";
// history and rollback in docs/deploys.md).

import type { Command } from 'commander';
import type { DeployFlags } from './deploy-flags.ts';
import type { deploymentListAction, deploymentRollbackAction } from './deployment-actions.ts';
import { addBucketFlags, addNameFlags, addRemoteFlags, repeatable } from './flags.ts';
import type { pruneAction } from './runtime-data-actions.ts';

// Each action's module is imported when the command runs (docs/decisions.md "Start-up"):
// `svc deploy` does not load what `svc deployment prune` needs, and the other way round.

export function registerDeploy(program: Command): void {
  program
    .command('deploy [dir]')
    .description('Pack a project directory and deploy it')
    .option('--name <name>', "Application (default: the config's name)")
    .option('--env <env>', "Application <name>-<env>, with the config's env.<env> section merged")
    .option('--var <pair>', 'KEY:VALUE overriding the config vars; repeatable', repeatable)
    .option('--bundle', 'Bundle the worker (default)')
    .option('--no-bundle', 'Set no_bundle: true in the artifact config')
    .option('--replicas <n>', 'Whole number or `all`')
    .option('--node-selector <pair>', 'key=value; repeatable', repeatable)
    .option('--wait', 'Wait for a queue place when the node is full (default)')
    .option('--no-wait', 'Fail at once when the node is full')
    .option('--queue-timeout <seconds>', 'Give up waiting after this long', '600')
    .option('--node <url>', 'Base URL of the node daemon')
    .option('--remote <name>', 'Remote to deploy through')
    .option('--key <key>', 'Key file, portable file, or inline base64: value')
    .option('--config <file>', 'Path to svc.config.jsonc')
    .option('-c, --worker-config <file>', "The worker config to deploy (wrangler's --config)")
    .option('--token <token>', 'Bearer token to present instead of signing')
    .action(async (dir: string | undefined, flags: DeployFlags) => {
      // esbuild's service (a process of its own, for the build that finds what to pack) starts
      // while the deploy's modules load; a failure to start is the build's to report.
      void import('esbuild').then((esbuild) => esbuild.initialize({})).catch(() => {});
      await (await import('./deploy-action.ts')).deployAction(dir, flags);
    });
}

export function registerDeployment(program: Command): void {
  const deployment = program.command('deployment').description('Runtime deployments in the bucket');
  addNameFlags(
    addBucketFlags(deployment.command('prune').description('Delete old deployments of one application')),
    true,
  )
    .option('--keep <n>', 'Newest deployments kept', '10')
    .option('--older-than <age>', '30d, 12h, 45m, whole seconds, or 0', '24h')
    .option('--yes', 'Delete without asking')
    .option('--dry-run', 'Print the plan, delete nothing')
    .action(async (flags: Parameters<typeof pruneAction>[0]) =>
      (await import('./runtime-data-actions.ts')).pruneAction(flags),
    );
  addNameFlags(
    addBucketFlags(
      deployment.command('list').description('Every deployment, newest first, and which one serves'),
    ),
    true,
  )
    .option('--json', 'Print JSON')
    .action(async (flags: Parameters<typeof deploymentListAction>[0]) =>
      (await import('./deployment-actions.ts')).deploymentListAction(flags),
    );
  const rollback = deployment
    .command('rollback')
    .description('Serve an earlier deployment again (through a node, else the bucket)');
  addRemoteFlags(rollback, { config: false });
  addNameFlags(addBucketFlags(rollback), true)
    .option('--to <deployment>', 'Deployment version or deploy id (default: the one before the serving one)')
    .action(async (flags: Parameters<typeof deploymentRollbackAction>[0]) =>
      (await import('./deployment-actions.ts')).deploymentRollbackAction(flags),
    );
}
