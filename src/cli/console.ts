// `svc console` (docs/console.md): a web console on loopback that acts with the operator's key,
// resolved as every command resolves it (remote flags), and reads the bucket where the commands
// it mirrors do (bucket flags, optional). It opens nothing itself: it prints the URL to open.

import type { Command } from 'commander';
import { startConsole } from '../console/server.ts';
import { Problem } from '../problem.ts';
import type { Store } from '../store/store.ts';
import { resolveTarget } from './client.ts';
import { dnsLookups } from './domain-dns.ts';
import { addBucketFlags, addRemoteFlags, openCommandBucket, settingsFromCommand } from './flags.ts';
import { note, say } from './output.ts';

interface ConsoleFlags extends Record<string, unknown> {
  listen: string;
  remote?: string;
  node?: string;
  key?: string;
  config?: string;
}

export function registerConsole(program: Command): void {
  addRemoteFlags(
    addBucketFlags(
      program.command('console').description('Serve a web console on loopback and print its URL'),
    ),
    { config: false },
  )
    .option('--listen <host:port>', 'Loopback address to serve on (port 0: any free port)', '127.0.0.1:0')
    .action((flags: ConsoleFlags) => consoleCommand(flags));
}

export function parseListen(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || port > 65535) {
    throw new Problem(
      'invalid-input',
      'Invalid --listen',
      `${JSON.stringify(value)} is not <host>:<port>, such as 127.0.0.1:7380`,
    );
  }
  return { host: match[1] ?? match[2]!, port };
}

async function consoleCommand(flags: ConsoleFlags): Promise<void> {
  const listen = parseListen(flags.listen);
  const target = await resolveTarget(flags);
  if (target.endpoints.length === 0 || !target.key) {
    throw new Problem(
      'invalid-input',
      target.key ? 'No node to ask' : 'No operator key',
      'pass --node <url> and --key, set SVC_OPERATOR_KEY, or add a remote with svc remote add',
    );
  }
  const settings = settingsFromCommand(flags);
  // The bucket only when one is named: the console never falls back to an embedded bucket.
  const store: Store | null = settings.bucket.endpoint?.trim() ? await openCommandBucket(settings) : null;
  const server = await startConsole({ source: { target, store, dns: dnsLookups() }, ...listen }).catch(
    async (err) => {
      await store?.close();
      throw err;
    },
  );
  say(server.url);
  note(
    `svc console: acting as ${target.key.id} through ${target.endpoints[0]}${store ? ` and ${store.description}` : ' (no bucket: nodes, deployments, events and charts need the bucket flags)'}; Ctrl-C stops it`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  await store?.close();
}
