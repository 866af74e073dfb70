// `svc app` (docs/cli.md "svc app"): applications, their domains and runtime leases.

import type { Command } from 'commander';
import {
  type AppFlags,
  appBlock,
  appDelete,
  appLabel,
  appList,
  appReplicas,
  appRetire,
  appSelector,
  appShow,
  appUnretire,
  domainAdd,
  domainList,
  domainRemove,
} from './app-actions.ts';
import { addBucketFlags, addNameFlags, addRemoteFlags, repeatable } from './flags.ts';
import { leaseDropAction, leaseShowAction } from './runtime-data-actions.ts';
import {
  type SecretFlags,
  secretBulkAction,
  secretListAction,
  secretRemoveAction,
  secretSetAction,
} from './secret-actions.ts';

/** An app subcommand: remote flags, --name and --env; bucket flags when it has a bucket path. */
function appCommand(parent: Command, name: string, description: string, bucketPath: boolean): Command {
  const command = parent.command(name).description(description);
  addRemoteFlags(command, { config: !bucketPath });
  if (bucketPath) addBucketFlags(command);
  return addNameFlags(command, true);
}

export function registerApp(program: Command): void {
  const app = program
    .command('app')
    .description('Applications: show, block, label, retire, place, domains, secrets, delete');
  appCommand(app, 'list', 'List applications', false)
    .option('--json', 'Print JSON')
    .action((flags: AppFlags) => appList(flags));
  appCommand(app, 'show', 'Show one application', false)
    .option('--json', 'Print JSON')
    .action((flags: AppFlags) => appShow(flags));
  appCommand(app, 'block', 'Stop serving and deploying an application (admin)', false).action(
    (flags: AppFlags) => appBlock(flags, true),
  );
  appCommand(app, 'unblock', 'Lift a block (admin)', false).action((flags: AppFlags) =>
    appBlock(flags, false),
  );
  appCommand(app, 'label', 'Replace every label; no pairs clears them (admin)', false)
    .argument('[pairs...]', 'key=value labels')
    .action((pairs: string[], flags: AppFlags) => appLabel(pairs, flags));
  appCommand(app, 'retire', 'Retire an application', true).action((flags: AppFlags) => appRetire(flags));
  appCommand(app, 'unretire', 'Undo a retirement during its grace period', true).action((flags: AppFlags) =>
    appUnretire(flags),
  );
  appCommand(app, 'selector', 'Constrain placement by node labels', true)
    .option('--set <pair>', 'key=value; repeatable', repeatable)
    .option('--clear', 'Remove the constraint')
    .action((flags: Parameters<typeof appSelector>[0]) => appSelector(flags));
  appCommand(app, 'replicas', 'Set how many nodes run the application', true)
    .requiredOption('--count <n>', '`all` or a whole number >= 1')
    .action((flags: Parameters<typeof appReplicas>[0]) => appReplicas(flags));
  const domain = app.command('domain').description('Custom domains');
  appCommand(domain, 'add', 'Claim a custom domain', true)
    .argument('<host>', 'Host to claim')
    .option('--wildcard', 'Also claim every name one label under the host')
    .option('--json', 'Print JSON')
    .action((host: string, flags: Parameters<typeof domainAdd>[1]) => domainAdd(host, flags));
  appCommand(domain, 'remove', 'Release a custom domain', true)
    .argument('<host>', 'Host to release')
    .option('--json', 'Print JSON')
    .action((host: string, flags: AppFlags) => domainRemove(host, flags));
  appCommand(domain, 'list', 'List claimed domains', true)
    .option('--json', 'Print JSON')
    .action((flags: AppFlags) => domainList(flags));
  appCommand(app, 'delete', 'Delete a retired application', true)
    .option('--force', 'Skip the retirement and grace requirements')
    .action((flags: Parameters<typeof appDelete>[0]) => appDelete(flags));
  const secret = app
    .command('secret')
    .description('Encrypted secrets, bound on the worker env (sealed on this machine)');
  const secretCommand = (name: string, description: string) =>
    appCommand(secret, name, description, true).option(
      '--token <token>',
      'Bearer token to present to the node instead of signing (a workload token)',
    );
  secretCommand('set', 'Set a secret from a file or standard input')
    .argument('<NAME>', 'Binding name')
    .option('--secret-file <file>', 'Read the value from this file instead of standard input')
    .action((name: string, flags: SecretFlags) => secretSetAction(name, flags));
  secretCommand('bulk', 'Set every secret of a JSON file of NAME: "value"')
    .argument('<file>', 'JSON object of binding name to string value')
    .action((file: string, flags: SecretFlags) => secretBulkAction(file, flags));
  secretCommand('list', 'Secret names and when they changed')
    .option('--json', 'Print JSON')
    .action((flags: SecretFlags) => secretListAction(flags));
  secretCommand('remove', 'Remove a secret')
    .argument('<NAME>', 'Binding name')
    .action((name: string, flags: SecretFlags) => secretRemoveAction(name, flags));
  const lease = app.command('lease').description("The runtime's node leases (internal tooling, unstable)");
  addNameFlags(addBucketFlags(lease.command('show').description('Read node leases')), true)
    .option('--node <id>', 'One node')
    .option('--json', 'Print JSON')
    .action((flags: Parameters<typeof leaseShowAction>[0]) => leaseShowAction(flags));
  addNameFlags(addBucketFlags(lease.command('drop').description('Delete one node lease')), true)
    .requiredOption('--node <id>', 'Node whose lease to drop')
    .option('--force', 'Drop even a held lease')
    .option('--yes', 'Answer the prompt ahead')
    .option('--dry-run', 'Print the reading, delete nothing')
    .option('--json', 'Print JSON')
    .action((flags: Parameters<typeof leaseDropAction>[0]) => leaseDropAction(flags));
}
