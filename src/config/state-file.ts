// Private files of a node's state directory (docs/supervisor.md "A full disk"): read when
// present, created once (its keys), or replaced whole (the runtime processes it runs). Every
// write goes to a temporary file beside the target first, so a full disk or a crash leaves the
// old file or the new one, never a cut one; the temporary file goes when the write fails.

import { randomBytes } from 'node:crypto';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { link, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { Problem } from '../problem.ts';

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
 * Writes a new owner-only (0600) file. Answers false when the file already exists: two daemons
 * started on one state directory do not overwrite each other's key, and the loser reads the
 * winner's. The text is written aside and linked into place, so the file never exists cut short.
 */
export async function createStateFile(file: string, text: string): Promise<boolean> {
  const temporary = temporaryName(file);
  try {
    await writeFile(temporary, text, { mode: 0o600, flag: 'wx' });
    await link(temporary, file).catch(async (err: NodeJS.ErrnoException) => {
      // A filesystem without hard links: create in place, as exclusive, if not as whole.
      if (!NO_LINKS.has(err.code ?? '')) throw err;
      await writeFile(file, text, { mode: 0o600, flag: 'wx' });
    });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    await rm(temporary, { force: true }).catch(() => {});
  }
}

/** What `link` answers on a filesystem that has no hard links. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/** Replaces the file (0600) with `text` whole: written aside, then renamed over it. */
export async function replaceStateFile(file: string, text: string): Promise<void> {
  const temporary = temporaryName(file);
  try {
    await writeFile(temporary, text, { mode: 0o600, flag: 'wx' });
    await rename(temporary, file);
  } catch (err) {
    await rm(temporary, { force: true }).catch(() => {});
    throw err;
  }
}

/** `replaceStateFile` for callers that cannot wait (a process exit handler). */
export function replaceStateFileSync(file: string, text: string): void {
  const temporary = temporaryName(file);
  try {
    writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' });
    renameSync(temporary, file);
  } catch (err) {
    try {
      rmSync(temporary, { force: true });
    } catch {
      // Nothing more to do: the next write takes another name.
    }
    throw err;
  }
}

/** Where a state file's failures are told. */
export interface StateFileLog {
  error(fields: object, message: string): void;
  info?(fields: object, message: string): void;
}

/**
 * A state file rewritten whole after each change of what it records. A write the disk refused
 * is kept, logged once, and tried again by `retry` (called on every reconcile pass) until one
 * lands, so the file catches up within a pass of space returning rather than at the next change.
 */
export class RetriedStateFile {
  readonly file: string;
  readonly #log: StateFileLog;
  readonly #what: string;
  /** The text of the last write, while it has not landed. */
  #pending: string | null = null;

  /** `what` names the content in log lines: `cannot note <what>`, `<what> noted again`. */
  constructor(file: string, log: StateFileLog, what: string) {
    this.file = file;
    this.#log = log;
    this.#what = what;
  }

  /** Writes `text` now; answers whether it landed (else it is tried again by `retry`). */
  write(text: string): boolean {
    try {
      replaceStateFileSync(this.file, text);
    } catch (err) {
      if (this.#pending === null) {
        this.#log.error(
          { file: this.file, err: (err as Error).message },
          `cannot note ${this.#what}; trying again every pass`,
        );
      }
      this.#pending = text;
      return false;
    }
    if (this.#pending !== null) this.#log.info?.({ file: this.file }, `${this.#what} noted again`);
    this.#pending = null;
    return true;
  }

  /** Writes the last text again when it has not landed yet. */
  retry(): void {
    if (this.#pending !== null) this.write(this.#pending);
  }

  /** Whether the file lags what was last written to it. */
  get stale(): boolean {
    return this.#pending !== null;
  }
}

/** A name beside `file` no other writer takes (two daemons on one directory, two writes at once). */
function temporaryName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
}

/** The errors that say the disk takes no more writes: full, over quota, or mounted read-only. */
const DISK_REFUSALS = new Set(['ENOSPC', 'EDQUOT', 'EROFS']);

/** The errno code when `err` is the disk refusing a write (see DISK_REFUSALS); else null. */
export function diskRefusal(err: unknown): string | null {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && DISK_REFUSALS.has(code) ? code : null;
}

/**
 * The refusal for a write the node's disk would not take (`store-unavailable`: the node's own
 * storage, not the request, is at fault), naming the state directory so an operator knows which
 * disk to free.
 */
export function diskUnavailable(stateDir: string, code: string, what: string): Problem {
  const why = code === 'EROFS' ? 'is mounted read-only' : code === 'EDQUOT' ? 'is over its quota' : 'is full';
  return new Problem(
    'store-unavailable',
    code === 'EROFS' ? 'Node disk is read-only' : 'Node disk is full',
    `the disk holding the node's state directory ${stateDir} ${why} (${code}): ${what}; free space there and try again`,
  );
}
