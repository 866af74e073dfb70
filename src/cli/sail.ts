// `svc sail` (docs/cli.md "svc sail"): joins this machine to the fleet and serves the node API.

import type { Command } from 'commander';
import { settingSpecs } from '../config/settings.ts';
import { runDaemon } from '../node/daemon.ts';
import { addSettingFlag, settingsFromCommand } from './flags.ts';

export function registerSail(program: Command): void {
  const sail = program
    .command('sail')
    .description('Join this machine to the fleet and serve the node API')
    .option('--config <file>', 'Path to svc.config.jsonc [env SVC_CONFIG]');
  for (const spec of settingSpecs) addSettingFlag(sail, spec);
  sail.action(async (flags: Record<string, unknown>) => {
    await runDaemon(settingsFromCommand(flags));
  });
}
