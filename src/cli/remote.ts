// `svc remote` (spec 3 "svc remote"): the operator home's remotes.

import type { Command } from 'commander';
import { notBuilt, repeatable } from './flags.ts';

export function registerRemote(program: Command): void {
  const remote = program.command('remote').description("Manage remotes in the operator's home");
  remote
    .command('add [name]')
    .description('Add a remote: node endpoints and the key to sign with')
    .option('--endpoint <url>', 'Node base URL; repeatable', repeatable)
    .option('--key <name>', 'Reuse a key in this home')
    .option('--from <file>', 'Import a portable file: path or inline base64:')
    .option('--register', 'Record the public half in the registry (admins only)')
    .option('--role <role>', 'Only `admin`')
    .option('--config <file>', 'Path to svc.config.jsonc (for --register)')
    .action(notBuilt('svc remote add'));
  remote.command('list').description('List remotes').action(notBuilt('svc remote list'));
  remote
    .command('remove <name>')
    .description('Remove a remote and its key if unshared')
    .action(notBuilt('svc remote remove'));
  remote
    .command('export <name>')
    .description('Write a portable self-contained file readable by its owner alone')
    .option('--out <file>', 'File to write')
    .action(notBuilt('svc remote export'));
}
