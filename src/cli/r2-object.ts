// `svc r2 object put|get|delete|list` (docs/cli.md "svc r2"), as `wrangler r2 object`: one object
// of one bucket through `.../r2/buckets/:bucket/objects/:key` and `.../objects` (docs/api.md "R2
// buckets"). `get` writes the object's bytes to stdout unchanged, or to --file; `put` reads them
// from --file or, with --pipe, from stdin; `list` pages through every object the node answers.

import { writeFile } from 'node:fs/promises';
import { R2_LIMITS } from '../../runtime/src/bindings/r2.ts';
import { Problem } from '../problem.ts';
import { readValueFile } from './binding-data.ts';
import { say, table } from './output.ts';
import { callBucket, describeBucket, type R2Flags, r2BucketTarget } from './r2-bucket.ts';

interface PutFlags extends R2Flags {
  file?: string;
  pipe?: boolean;
  contentType?: string;
  metadata?: string;
}

/** One object of a listing as the node answers it. */
interface ListedObject {
  key: string;
  size: number;
  etag: string;
  uploaded: string;
  content_type?: string;
  custom_metadata: Record<string, string>;
}

const VALUE_LIMIT = {
  bytes: R2_LIMITS.maxValueBytes,
  what: `an R2 object put through a node is at most ${R2_LIMITS.maxValueBytes} bytes (100 MiB)`,
};

export async function r2ObjectPutAction(key: string, flags: PutFlags): Promise<void> {
  const path = objectPath(checkKey(key));
  if ((flags.file === undefined) === (flags.pipe !== true))
    throw new Problem(
      'invalid-input',
      'No value',
      flags.file === undefined
        ? 'give --file <path>, or --pipe to read the object from stdin'
        : 'give --file <path> or --pipe, not both',
    );
  const bytes = flags.file !== undefined ? await readValueFile(flags.file, VALUE_LIMIT) : await readStdin();
  const space = await r2BucketTarget(flags);
  await callBucket(space, 'PUT', path, {
    raw: { body: bytes, ...(flags.contentType !== undefined ? { contentType: flags.contentType } : {}) },
    query: { custom_metadata: flags.metadata },
  });
  say(`wrote "${key}" (${bytes.length} bytes) to ${describeBucket(space)}`);
}

export async function r2ObjectGetAction(key: string, flags: R2Flags & { file?: string }): Promise<void> {
  const path = objectPath(checkKey(key));
  const space = await r2BucketTarget(flags);
  const { body } = await callBucket(space, 'GET', path, { binary: true });
  const bytes = body as Buffer;
  if (flags.file === undefined) {
    process.stdout.write(bytes);
    return;
  }
  try {
    await writeFile(flags.file, bytes);
  } catch (err) {
    throw new Problem(
      'invalid-input',
      'Unwritable file',
      `${flags.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  say(`wrote "${key}" (${bytes.length} bytes) from ${describeBucket(space)} to ${flags.file}`);
}

export async function r2ObjectDeleteAction(key: string, flags: R2Flags): Promise<void> {
  const path = objectPath(checkKey(key));
  const space = await r2BucketTarget(flags);
  await callBucket(space, 'DELETE', path);
  say(`deleted "${key}" from ${describeBucket(space)}`);
}

export async function r2ObjectListAction(flags: R2Flags & { prefix?: string }): Promise<void> {
  const space = await r2BucketTarget(flags);
  const objects: ListedObject[] = [];
  let cursor: string | undefined;
  do {
    const { body } = await callBucket(space, 'GET', '/objects', { query: { prefix: flags.prefix, cursor } });
    const page = body as { objects: ListedObject[]; truncated: boolean; cursor?: string };
    objects.push(...page.objects);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  if (flags.json) {
    say(JSON.stringify({ application: space.application, bucket: space.bucket.name, objects }, null, 2));
    return;
  }
  if (objects.length === 0) {
    say(
      `No objects${flags.prefix ? ` beginning ${JSON.stringify(flags.prefix)}` : ''} in ${describeBucket(space)}.`,
    );
    return;
  }
  const rows = objects.map((o) => [o.key, String(o.size), o.uploaded, o.content_type ?? '-']);
  for (const line of table(['KEY', 'SIZE', 'UPLOADED', 'CONTENT-TYPE'], rows)) say(line);
}

/** `.` and `..` no URL can carry (it resolves them away however encoded): refused here. */
function checkKey(key: string): string {
  if (key === '.' || key === '..')
    throw new Problem(
      'invalid-input',
      'Invalid key',
      `"${key}" cannot travel in a URL path; R2 allows it, svc r2 does not`,
    );
  return key;
}

function objectPath(key: string): string {
  return `/objects/${encodeURIComponent(key)}`;
}

/** All of stdin; more than the value limit is refused once it is read past. */
async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > VALUE_LIMIT.bytes)
      throw new Problem(
        'resource-limit',
        'Value too large',
        `stdin is over ${VALUE_LIMIT.bytes} bytes; ${VALUE_LIMIT.what}`,
      );
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
