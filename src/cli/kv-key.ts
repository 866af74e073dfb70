// `svc kv key put|get|list|delete` (docs/cli.md "svc kv"), as `wrangler kv key`: one key of one
// namespace through `.../kv/namespaces/:id/values/:key` and `.../keys` (docs/api.md "Workers KV").
// `get` writes the value's bytes to stdout unchanged, as wrangler does; `list` pages through
// every key the node answers.

import { KV_LIMITS } from '../../runtime/src/bindings/kv.ts';
import { Problem } from '../problem.ts';
import { readValueFile } from './binding-data.ts';
import type { CallOptions } from './client.ts';
import { callSpace, describeSpace, type KvFlags, kvSpaceTarget } from './kv-namespace.ts';
import { say, table } from './output.ts';

interface PutFlags extends KvFlags {
  path?: string;
  ttl?: string;
  expiration?: string;
  metadata?: string;
}

/** One key of a listing as the node answers it. */
interface ListedKey {
  name: string;
  expiration?: number;
  metadata?: unknown;
}

export async function kvKeyPutAction(key: string, value: string | undefined, flags: PutFlags): Promise<void> {
  const path = valuePath(checkKey(key));
  if ((value === undefined) === (flags.path === undefined))
    throw new Problem(
      'invalid-input',
      'No value',
      value === undefined
        ? 'give the value as an argument after the key, or --path <file>'
        : 'give the value as an argument or --path <file>, not both',
    );
  const bytes =
    value !== undefined
      ? Buffer.from(value, 'utf8')
      : await readValueFile(flags.path!, {
          bytes: KV_LIMITS.maxValueBytes,
          what: `a KV value is at most ${KV_LIMITS.maxValueBytes} bytes (25 MiB)`,
        });
  const space = await kvSpaceTarget(flags);
  const query: CallOptions['query'] = {
    expiration_ttl: flags.ttl,
    expiration: flags.expiration,
    metadata: flags.metadata,
  };
  await callSpace(space, 'PUT', path, { raw: { body: bytes }, query });
  say(`wrote ${JSON.stringify(key)} (${bytes.length} bytes) to ${describeSpace(space)}`);
}

export async function kvKeyGetAction(key: string, flags: KvFlags & { text?: boolean }): Promise<void> {
  const path = valuePath(checkKey(key));
  const space = await kvSpaceTarget(flags);
  const { body } = await callSpace(space, 'GET', path, { binary: true });
  const bytes = body as Buffer;
  if (flags.text) say(bytes.toString('utf8'));
  else process.stdout.write(bytes);
}

export async function kvKeyListAction(flags: KvFlags & { prefix?: string }): Promise<void> {
  const space = await kvSpaceTarget(flags);
  const keys: ListedKey[] = [];
  let cursor: string | undefined;
  do {
    const { body } = await callSpace(space, 'GET', '/keys', { query: { prefix: flags.prefix, cursor } });
    const page = body as { keys: ListedKey[]; list_complete: boolean; cursor?: string };
    keys.push(...page.keys);
    cursor = page.list_complete ? undefined : page.cursor;
  } while (cursor !== undefined);
  if (flags.json) {
    say(JSON.stringify({ application: space.application, namespace: space.namespace.id, keys }, null, 2));
    return;
  }
  if (keys.length === 0) {
    say(
      `No keys${flags.prefix ? ` beginning ${JSON.stringify(flags.prefix)}` : ''} in ${describeSpace(space)}.`,
    );
    return;
  }
  const rows = keys.map((k) => [
    k.name,
    k.expiration === undefined ? '-' : new Date(k.expiration * 1000).toISOString(),
    k.metadata === undefined ? '-' : JSON.stringify(k.metadata),
  ]);
  for (const line of table(['KEY', 'EXPIRES', 'METADATA'], rows)) say(line);
}

export async function kvKeyDeleteAction(key: string, flags: KvFlags): Promise<void> {
  const path = valuePath(checkKey(key));
  const space = await kvSpaceTarget(flags);
  await callSpace(space, 'DELETE', path);
  say(`deleted ${JSON.stringify(key)} from ${describeSpace(space)}`);
}

/**
 * The keys no URL can carry are refused here, in the binding's words: an empty key, and `.` and
 * `..`, which a URL resolves away however they are encoded. The node checks everything else.
 */
function checkKey(key: string): string {
  if (key === '') throw new Problem('invalid-input', 'Invalid key', 'Key names must not be empty');
  if (key === '.' || key === '..')
    throw new Problem(
      'invalid-input',
      'Invalid key',
      `Illegal key name "${key}". Please use a different name.`,
    );
  return key;
}

function valuePath(key: string): string {
  return `/values/${encodeURIComponent(key)}`;
}
