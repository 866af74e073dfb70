// `svc fleet` (spec 3 "svc fleet").

import type { Command } from 'commander';
import { addBucketFlags, addRemoteFlags, notBuilt } from './flags.ts';
import { fleetFreeze, fleetUnfreeze } from './freeze.ts';

export function registerFleet(program: Command): void {
  const fleet = program.command('fleet').description('The fleet: nodes and the deploy freeze');
  addBucketFlags(fleet.command('nodes').description('List the nodes of the fleet (reads the bucket)'))
    .option('--json', 'Print records as JSON')
    .action(notBuilt('svc fleet nodes'));
  addRemoteFlags(fleet.command('freeze').description('Refuse deploys fleet-wide (admin)'))
    .option('--reason <line>', 'Why, at most 200 characters on one line')
    .action((flags: Parameters<typeof fleetFreeze>[0]) => fleetFreeze(flags));
  addRemoteFlags(fleet.command('unfreeze').description('Accept deploys again (admin)')).action(
    (flags: Parameters<typeof fleetUnfreeze>[0]) => fleetUnfreeze(flags),
  );
}
