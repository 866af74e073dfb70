// Private files of a node's state directory (its keys): read when present, created once.

import { readFile, writeFile } from 'node:fs/promises';

/** The file's text; null when there is no such file. */
export async function readStateFile(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Writes a new owner-only (0600) file. Answers false when the file already exists: `wx` keeps
 * two daemons started on one state directory from overwriting each other's key, and the loser
 * reads the winner's.
 */
export async function createStateFile(file: string, text: string): Promise<boolean> {
  try {
    await writeFile(file, text, { mode: 0o600, flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}
