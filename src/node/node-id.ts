// The node's id (docs/cli.md "svc sail" `--node-id`): given, or generated once and kept in the
// state directory so a restart registers as the same node.

import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createStateFile } from '../config/state-file.ts';
import { checkNodeId } from '../registry/names.ts';

/** Answers the configured id, else the one kept in `<stateDir>/node-id`, else a new `node-<hex>` kept there. */
export async function ensureNodeId(stateDir: string, configured: string | undefined): Promise<string> {
  if (configured !== undefined) return checkNodeId(configured, 'node.id');
  const file = join(stateDir, 'node-id');
  try {
    return checkNodeId((await readFile(file, 'utf8')).trim(), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const id = `node-${randomBytes(4).toString('hex')}`;
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  // Created whole or not at all (a full disk leaves no empty id), and never over another start's.
  if (await createStateFile(file, `${id}\n`)) return id;
  return checkNodeId((await readFile(file, 'utf8')).trim(), file);
}
