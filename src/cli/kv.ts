// `svc kv` (docs/cli.md "svc kv"): an application's Workers KV data through a node, as `wrangler
// kv` manages Cloudflare's: the namespaces its serving deployment binds, and keys put, read,
// listed, deleted and bulk-written (docs/api.md "Workers KV").

import type { Command } from 'commander';
import { dataCommand } from './binding-data.ts';
import { kvBulkPutAction } from './kv-bulk.ts';
import { kvKeyDeleteAction, kvKeyGetAction, kvKeyListAction, kvKeyPutAction } from './kv-key.ts';
import { type KvFlags, kvNamespaceListAction } from './kv-namespace.ts';

const NAMESPACE_HELP = `
The application is --name (and --env); the namespace is one of the kv_namespaces its serving
deployment binds: --binding <NAME> (its binding on env) or --namespace-id <id>, needed only when
it binds more than one. Workers see a write within their read cache's TTL (60 s by default).`;

/** A subcommand that also names one namespace of the application. */
function namespacedCommand(parent: Command, name: string, description: string): Command {
  return dataCommand(parent, name, description)
    .option('--binding <NAME>', 'The namespace by its binding name on the worker env')
    .option('--namespace-id <id>', 'The namespace by its id')
    .addHelpText('after', NAMESPACE_HELP);
}

export function registerKv(program: Command): void {
  const kv = program
    .command('kv')
    .description("Workers KV: an application's namespaces and their keys, through a node");
  const namespace = kv.command('namespace').description('The KV namespaces an application binds');
  dataCommand(namespace, 'list', "List the namespaces (binding, id) of the application's serving deployment")
    .option('--json', 'Print JSON')
    .action((flags: KvFlags) => kvNamespaceListAction(flags));

  const key = kv.command('key').description('Keys of one KV namespace');
  namespacedCommand(key, 'put', 'Write one value, from the argument or --path')
    .argument('<key>', 'The key (1-512 bytes of UTF-8)')
    .argument('[value]', 'The value as text; or give --path')
    .option('--path <file>', "Read the value's bytes from this file")
    .option('--ttl <seconds>', 'Expire the key this many seconds from now (at least 60)')
    .option('--expiration <seconds>', 'Expire the key at this time, in seconds since the epoch')
    .option('--metadata <json>', 'JSON metadata to keep with the key (at most 1024 bytes)')
    .action((name: string, value: string | undefined, flags: Parameters<typeof kvKeyPutAction>[2]) =>
      kvKeyPutAction(name, value, flags),
    );
  namespacedCommand(key, 'get', "Print one value's bytes on stdout")
    .argument('<key>', 'The key')
    .option('--text', 'Decode the value as UTF-8 text and end it with a newline')
    .action((name: string, flags: KvFlags & { text?: boolean }) => kvKeyGetAction(name, flags));
  namespacedCommand(key, 'list', 'List keys in byte order, with expiration and metadata')
    .option('--prefix <prefix>', 'Only keys that begin with this')
    .option('--json', 'Print JSON')
    .action((flags: KvFlags & { prefix?: string }) => kvKeyListAction(flags));
  namespacedCommand(key, 'delete', 'Delete one key (a missing key is no error)')
    .argument('<key>', 'The key')
    .action((name: string, flags: KvFlags) => kvKeyDeleteAction(name, flags));

  const bulk = kv.command('bulk').description('Many keys of one KV namespace at once');
  namespacedCommand(bulk, 'put', 'Write every pair of a JSON file (wrangler kv bulk put format)')
    .argument('<file>', 'JSON array of { key, value, expiration?, expiration_ttl?, metadata?, base64? }')
    .action((file: string, flags: KvFlags) => kvBulkPutAction(file, flags));
}
