// `svc operator` (spec 3 "svc operator"): operator keys.

import type { Command } from 'commander';
import { addBucketFlags, addRemoteFlags, notBuilt, repeatable } from './flags.ts';

export function registerOperator(program: Command): void {
  const operator = program
    .command('operator')
    .description('Operator keys: create, enroll, rotate, revoke, list');
  addBucketFlags(
    operator
      .command('keygen')
      .description('Write an operator key pair')
      .option('--out <file>', 'Key file to write', 'svc-operator.json')
      .option('--id <id>', 'Operator id (default op-<hex>)')
      .option('--register', 'Write the public half straight to the bucket (bootstrap)')
      .option('--role <tier>', 'Only `admin` with --register'),
  ).action(notBuilt('svc operator keygen'));
  addRemoteFlags(operator.command('show').description('Print this operator key (local only)'), {}).action(
    notBuilt('svc operator show'),
  );
  addBucketFlags(
    operator
      .command('enroll <pubkey>')
      .description('Trust another operator key')
      .option('--remote <name>', 'Remote to act through')
      .option('--role <tier>', '`admin` or `operator`')
      .option('--apps <pattern>', 'Exact name, prefix glob such as shop-*, or *; repeatable', repeatable)
      .option('--node <url>', 'Node to reach'),
  ).action(notBuilt('svc operator enroll'));
  addRemoteFlags(operator.command('rotate').description('Replace the signing key'))
    .option('--keep-old', 'Stop after the flip, leaving both keys trusted')
    .option('--purge-old', 'Delete the old key file once untrusted')
    .action(notBuilt('svc operator rotate'));
  addRemoteFlags(operator.command('revoke').description('Stop trusting a key'))
    .requiredOption('--id <id>', 'Key to revoke (not your own)')
    .action(notBuilt('svc operator revoke'));
  addRemoteFlags(operator.command('list').description('List trusted operator keys')).action(
    notBuilt('svc operator list'),
  );
}
