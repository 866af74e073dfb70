// `svc trust` (spec 3 "svc trust"): workload OIDC trust policies, written to the bucket.

import type { Command } from 'commander';
import { addBucketFlags, addNameFlags, notBuilt, repeatable } from './flags.ts';

export function registerTrust(program: Command): void {
  const trust = program.command('trust').description('Which workload identities may deploy an application');
  const subject = (command: Command) =>
    command
      .requiredOption('--issuer <url>', 'Issuer URL as carried in iss')
      .requiredOption('--subject <pattern>', 'Subject pattern, * matches any run; repeatable', repeatable)
      .option('--audience <aud>', 'Audience', 'svc');
  subject(
    addNameFlags(addBucketFlags(trust.command('set').description('Replace the subjects of an issuer')), true),
  ).action(notBuilt('svc trust set'));
  subject(
    addNameFlags(addBucketFlags(trust.command('add').description('Add subjects to an issuer')), true),
  ).action(notBuilt('svc trust add'));
  addNameFlags(addBucketFlags(trust.command('show').description('Print trusted issuers')), true).action(
    notBuilt('svc trust show'),
  );
  addNameFlags(addBucketFlags(trust.command('remove').description('Stop trusting an issuer')), true)
    .requiredOption('--issuer <url>', 'Issuer URL')
    .action(notBuilt('svc trust remove'));
}
