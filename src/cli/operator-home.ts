// The operator home (docs/cli.md "svc remote"; docs/identity.md): a local directory holding the
// remotes an operator acts on and the keys they sign with.
//   $SVC_HOME, else $XDG_CONFIG_HOME/svc, else ~/.config/svc      (0700)
//     remotes.json          { v: 1, remotes: { <name>: { endpoints: [url...], key: <operator id> } } }
//     keys/<id>.json        key files (0600), shared by every remote naming the id

import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { keyFileDocument, type OperatorKey, parseOperatorKey } from '../auth/key-file.ts';
import { Problem } from '../problem.ts';
import { isOperatorId } from '../registry/names.ts';

export interface RemoteEntry {
  /** Node base URLs, first one asked first. */
  endpoints: string[];
  /** Operator id of the key in `keys/` this remote signs with. */
  key: string;
}

export interface RemotesIndex {
  v: 1;
  remotes: Record<string, RemoteEntry>;
}

export function operatorHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_HOME) return env.SVC_HOME;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'svc');
}

const REMOTE_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/** Remote names: 1-63 lowercase letters and digits with single hyphens. */
export function checkRemoteName(name: unknown): string {
  if (typeof name === 'string' && name.length <= 63 && REMOTE_NAME.test(name)) return name;
  throw new Problem(
    'invalid-slug',
    'Invalid remote name',
    `${JSON.stringify(name)} must be 1-63 lowercase letters or digits, optionally separated by single hyphens`,
  );
}

/** The operator home's remotes; empty when it has none. */
export async function loadRemotes(home: string): Promise<RemotesIndex> {
  const file = join(home, 'remotes.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { v: 1, remotes: {} };
    throw err;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const remotes = (value as { remotes?: unknown } | undefined)?.remotes;
  if (!remotes || typeof remotes !== 'object' || Array.isArray(remotes)) {
    throw new Problem('invalid-input', 'Unreadable operator home', `${file} holds no remotes object`);
  }
  const index: RemotesIndex = { v: 1, remotes: {} };
  for (const [name, entry] of Object.entries(remotes as Record<string, unknown>)) {
    const { endpoints, key } = (entry ?? {}) as Partial<RemoteEntry>;
    if (!Array.isArray(endpoints) || !endpoints.every((e) => typeof e === 'string') || !isOperatorId(key)) {
      throw new Problem(
        'invalid-input',
        'Unreadable operator home',
        `${file}: remote ${JSON.stringify(name)} is malformed`,
      );
    }
    index.remotes[name] = { endpoints, key };
  }
  return index;
}

async function ensureHome(home: string): Promise<void> {
  await mkdir(join(home, 'keys'), { recursive: true, mode: 0o700 });
}

/** Writes the index aside and renames it over, so a crash never leaves half a file. */
export async function saveRemotes(home: string, index: RemotesIndex): Promise<void> {
  await ensureHome(home);
  const file = join(home, 'remotes.json');
  const aside = `${file}.${process.pid}.tmp`;
  const sorted = Object.fromEntries(Object.entries(index.remotes).sort(([a], [b]) => (a < b ? -1 : 1)));
  await writeFile(aside, `${JSON.stringify({ v: 1, remotes: sorted }, null, 2)}\n`, { mode: 0o600 });
  await rename(aside, file);
}

export function homeKeyPath(home: string, id: string): string {
  return join(home, 'keys', `${id}.json`);
}

/** A key kept in the home; not-found when there is none under the id. */
export async function loadHomeKey(home: string, id: string): Promise<OperatorKey> {
  const file = homeKeyPath(home, id);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Problem('not-found', 'No such key in this home', `${file} does not exist`);
    }
    throw err;
  }
  return parseOperatorKey(text, file);
}

/**
 * Keeps a key in the home (0600). The same key already kept is fine; another key under the
 * same id is refused rather than overwritten.
 */
export async function saveHomeKey(home: string, key: OperatorKey): Promise<void> {
  await ensureHome(home);
  const file = homeKeyPath(home, key.id);
  try {
    const existing = await loadHomeKey(home, key.id);
    if (existing.pair.publicJwk.x === key.pair.publicJwk.x) return;
    throw new Problem(
      'reference-held',
      'Key id taken in this home',
      `${file} holds another key with the id ${key.id}`,
    );
  } catch (err) {
    if (!(err instanceof Problem && err.code === 'not-found')) throw err;
  }
  await writeFile(file, `${JSON.stringify(keyFileDocument(key), null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
}

export async function removeHomeKey(home: string, id: string): Promise<void> {
  await rm(homeKeyPath(home, id), { force: true });
}
