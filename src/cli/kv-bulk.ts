// `svc kv bulk put <file>` (docs/cli.md "svc kv"), as `wrangler kv bulk put`: the file's JSON
// array of { key, value, expiration?, expiration_ttl?, metadata?, base64? } goes to the node as
// it is (`PUT .../kv/namespaces/:id/bulk`), which checks every pair before it writes any.

import { readFile } from 'node:fs/promises';
import { Problem } from '../problem.ts';
import { callSpace, describeSpace, type KvFlags, kvSpaceTarget } from './kv-namespace.ts';
import { say } from './output.ts';

export async function kvBulkPutAction(file: string, flags: KvFlags): Promise<void> {
  const body = await readBulkFile(file);
  const space = await kvSpaceTarget(flags);
  const { body: answer } = await callSpace(space, 'PUT', '/bulk', {
    raw: { body, contentType: 'application/json' },
  });
  const written = (answer as { written: number }).written;
  say(`wrote ${written} key${written === 1 ? '' : 's'} to ${describeSpace(space)}`);
}

/** The file's bytes, once they are known to hold a JSON array: anything else is refused before sending. */
async function readBulkFile(file: string): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    throw new Problem(
      'invalid-input',
      'Unreadable bulk file',
      `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw invalidFile(`${file} is not JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(parsed))
    throw invalidFile(
      `${file} must hold one JSON array of { "key": ..., "value": ... } (wrangler kv bulk put format)`,
    );
  return bytes;
}

function invalidFile(detail: string): Problem {
  return new Problem('invalid-input', 'Invalid bulk file', detail);
}
