// `svc wg` (spec 3 "svc wg"): WireGuard configuration for the node transport.

import type { Command } from 'commander';
import { addBucketFlags, addSettingFlags, notBuilt } from './flags.ts';

const wgFlags = [
  'node-id',
  'state-dir',
  'transport',
  'listen',
  'advertise',
  'wg-address',
  'wg-endpoint',
  'wg-port',
];

export function registerWg(program: Command): void {
  const wg = program.command('wg').description('WireGuard tunnel configuration');
  for (const [name, description] of [
    ['init', 'Make or reuse a keypair, publish it, render the interface configuration'],
    ['peers', 'Re-render the configuration from the registered nodes'],
  ] as const) {
    addSettingFlags(addBucketFlags(wg.command(name).description(description)), wgFlags)
      .option('--stdout', 'Print the configuration only')
      .action(notBuilt(`svc wg ${name}`));
  }
}
