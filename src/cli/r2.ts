// `svc r2` (docs/cli.md "svc r2"): an application's R2 objects through a node, as `wrangler r2
// object` manages Cloudflare's: the buckets its serving deployment binds, and objects put, read,
// listed and deleted (docs/api.md "R2 buckets").

import type { Command } from 'commander';
import { dataCommand } from './binding-data.ts';
import { type R2Flags, r2BucketListAction } from './r2-bucket.ts';
import {
  r2ObjectDeleteAction,
  r2ObjectGetAction,
  r2ObjectListAction,
  r2ObjectPutAction,
} from './r2-object.ts';

const BUCKET_HELP = `
The application is --name (and --env); the bucket is one of the r2_buckets its serving deployment
binds: --binding <NAME> (its binding on env) or --bucket <bucket_name>, needed
only when it binds more than one. Workers see a write at once (R2 bindings keep no cache).`;

/** A subcommand that also names one bucket of the application. */
function bucketCommand(parent: Command, name: string, description: string): Command {
  return dataCommand(parent, name, description)
    .option('--binding <NAME>', 'The bucket by its binding name on the worker env')
    .option('--bucket <bucket_name>', 'The bucket by its bucket_name')
    .addHelpText('after', BUCKET_HELP);
}

export function registerR2(program: Command): void {
  const r2 = program
    .command('r2')
    .description("R2: an application's buckets and their objects, through a node");
  const bucket = r2.command('bucket').description('The R2 buckets an application binds');
  dataCommand(
    bucket,
    'list',
    "List the buckets (binding, bucket_name) of the application's serving deployment",
  )
    .option('--json', 'Print JSON')
    .action((flags: R2Flags) => r2BucketListAction(flags));

  const object = r2.command('object').description('Objects of one R2 bucket');
  bucketCommand(object, 'put', 'Write one object, from --file or from stdin with --pipe')
    .argument('<key>', 'The key (up to 512 bytes of UTF-8)')
    .option('--file <path>', "Read the object's bytes from this file")
    .option('--pipe', "Read the object's bytes from stdin")
    .option('--content-type <type>', "The object's content type (default application/octet-stream)")
    .option('--metadata <json>', 'Custom metadata: a JSON object of strings (at most 2048 bytes)')
    .action((key: string, flags: Parameters<typeof r2ObjectPutAction>[1]) => r2ObjectPutAction(key, flags));
  bucketCommand(object, 'get', "Write one object's bytes to stdout, or to --file")
    .argument('<key>', 'The key')
    .option('--file <path>', 'Write the bytes to this file instead')
    .action((key: string, flags: R2Flags & { file?: string }) => r2ObjectGetAction(key, flags));
  bucketCommand(object, 'list', 'List objects in byte order, with size, upload time and content type')
    .option('--prefix <prefix>', 'Only keys that begin with this')
    .option('--json', 'Print JSON')
    .action((flags: R2Flags & { prefix?: string }) => r2ObjectListAction(flags));
  bucketCommand(object, 'delete', 'Delete one object (a missing object is no error)')
    .argument('<key>', 'The key')
    .action((key: string, flags: R2Flags) => r2ObjectDeleteAction(key, flags));
}
