// `svc wg init` and `svc wg peers`: the node's WireGuard interface configuration, rendered from
// its keypair (state directory) and the tunnels other nodes published in the bucket. Neither
// command brings an interface up: the operator runs the printed `wg-quick up`. docs/wireguard.md.

import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from 'commander';
import type { Settings } from '../config/settings.ts';
import { ensureNodeId } from '../node/node-id.ts';
import { Problem } from '../problem.ts';
import { ensureKeypair, requireKeypair, type WireguardKeypair } from '../wireguard/keypair.ts';
import { publishTunnel, registeredTunnels, tunnelOf } from '../wireguard/publication.ts';
import { renderInterface } from '../wireguard/render.ts';
import { addBucketFlags, addSettingFlags, settingsFromCommand, withBucketOf } from './flags.ts';
import { say, warn } from './output.ts';

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

/** The configuration file inside the state directory; wg-quick names the interface after it. */
export const INTERFACE_FILE = 'wg-svc.conf';

export function registerWg(program: Command): void {
  const wg = program.command('wg').description('WireGuard tunnel configuration');
  addSettingFlags(
    addBucketFlags(
      wg
        .command('init')
        .description('Make or reuse a keypair, publish it, render the interface configuration'),
    ),
    wgFlags,
  )
    .option('--stdout', 'Print the configuration only')
    .action((flags: Record<string, unknown>) => renderCommand(flags, 'init'));
  addSettingFlags(
    addBucketFlags(wg.command('peers').description('Re-render the configuration from the registered nodes')),
    wgFlags,
  )
    .option('--stdout', 'Print the configuration only')
    .action((flags: Record<string, unknown>) => renderCommand(flags, 'peers'));
}

async function renderCommand(flags: Record<string, unknown>, mode: 'init' | 'peers'): Promise<void> {
  const settings = settingsFromCommand(flags);
  requireWireguard(settings);
  const stateDir = settings.node.stateDir;
  // `peers` refuses before touching anything when there is no key to render with.
  const pair: WireguardKeypair =
    mode === 'init' ? await ensureKeypair(stateDir) : await requireKeypair(stateDir);
  const nodeId = await ensureNodeId(stateDir, settings.node.id);
  const text = await withBucketOf(settings, async (store) => {
    if (mode === 'init') await publishTunnel(store, nodeId, tunnelOf(settings, pair));
    const rendered = renderInterface(
      {
        nodeId,
        address: settings.network.wgAddress as string,
        listenPort: settings.network.wgPort,
        ...pair,
      },
      await registeredTunnels(store, (key) => warn(`${key} is not readable JSON; left out`)),
    );
    for (const { node, why } of rendered.skipped) warn(`node "${node}" left out of the peers: ${why}`);
    return rendered.text;
  });
  if (flags.stdout) {
    process.stdout.write(text);
    return;
  }
  const file = join(stateDir, INTERFACE_FILE);
  await writeFile(file, text, { mode: 0o600 });
  // A file kept from before may have had wider permissions; the mode above applies to new files only.
  await chmod(file, 0o600);
  say(`wrote ${file}`);
  say(`bring the tunnel up with: wg-quick up ${file}`);
  say(`apply later changes to a running tunnel with: wg syncconf wg-svc <(wg-quick strip ${file})`);
}

/** Both commands serve only a node whose transport is WireGuard. */
function requireWireguard(settings: Settings): void {
  if (settings.network.transport === 'wireguard') return;
  throw new Problem(
    'invalid-input',
    'This node runs no WireGuard tunnel',
    'its transport is none; give --transport wireguard with --wg-address (or set them in the environment or config file)',
  );
}
