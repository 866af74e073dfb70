// The secrets `cell serve` gives the worker (docs/runtime.md "The environment contract"): `CELL_SECRETS_FILE`
// names an owner-only JSON file `{ "NAME": "value" }` the node keeps up to date (it opens the
// copies sealed to its key). The file is looked at on every selector poll (one stat; read only
// when it changed); a changed set of secrets restarts the serving deployment the way a publish
// switches deployments, so no request fails. No value is ever logged.

import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { CellError } from './errors.ts';
import { NO_SECRETS, type Secrets } from './instance.ts';

export class SecretsFile {
  private readonly path: string | null;
  private stamp = '';
  private current: Secrets = NO_SECRETS;

  constructor(path: string | undefined) {
    this.path = path || null;
  }

  /** The secrets as the file says now; the previous ones when it cannot be read. */
  read(): Secrets {
    if (!this.path) return NO_SECRETS;
    let stamp: string;
    try {
      const info = statSync(this.path);
      stamp = `${info.ino}:${info.size}:${info.mtimeMs}`;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      this.stamp = '';
      this.current = NO_SECRETS;
      return this.current;
    }
    if (stamp === this.stamp) return this.current;
    const values = parseSecrets(readFileSync(this.path, 'utf8'), this.path);
    this.current = { values, digest: digestOf(values) };
    this.stamp = stamp;
    return this.current;
  }
}

export function parseSecrets(text: string, where: string): Record<string, string> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new CellError(`${where} is not JSON; the node rewrites it on its next pass`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new CellError(`${where} is not a JSON object`);
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(doc)) {
    if (typeof value !== 'string') throw new CellError(`${where}: secret ${name} is not a string`);
    values[name] = value;
  }
  return values;
}

function digestOf(values: Record<string, string>): string {
  const names = Object.keys(values).sort();
  if (names.length === 0) return '';
  return createHash('sha256')
    .update(JSON.stringify(names.map((name) => [name, values[name]])))
    .digest('hex');
}
