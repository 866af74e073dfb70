// The deploy artifact (docs/deploys.md "The artifact"): a gzip-compressed tar,
// received into a file bounded by `deploy.artifactBytes`, then unpacked bounded by the same number
// of expanded bytes and by `deploy.archiveEntries`. Only regular files and directories are
// unpacked; links, devices, absolute paths and `..` are refused. The worker config
// (`cell.jsonc`, else `cell.json`) must sit at the archive root; it is never read here.
//
// Both readers face the network: every failure is a Problem (`invalid-input`, `resource-limit`,
// `deploy-timeout`, or whatever the byte observer throws), except the disk refusing a write
// (full, over quota, read-only: `diskRefusal`), passed on as the error itself for the caller to
// answer naming its disk (docs/deploys.md "A full disk"): the sender is not at fault.

import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { lstat, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { ReadEntry } from 'tar';
import { diskRefusal } from '../../config/state-file.ts';
import { isProblem, Problem } from '../../problem.ts';

/** The worker config names, in the order the runtime looks for them. */
export const WORKER_CONFIGS = ['cell.jsonc', 'cell.json'] as const;
export type WorkerConfigName = (typeof WORKER_CONFIGS)[number];

/** Paths longer than this, or with a component longer than 255 bytes, are refused. */
export const MAX_PATH_CHARS = 1024;

export interface ArchiveLimits {
  /** Max compressed bytes, and max expanded bytes (the tar stream after gunzip). */
  artifactBytes: number;
  /** Max entries, directories included. */
  archiveEntries: number;
}

/** What unpacking produced. */
export interface UnpackedArchive {
  /** The directory the archive was unpacked into. */
  root: string;
  /** The worker config at the root, handed to the runtime untouched. */
  config: WorkerConfigName;
  entries: number;
  /** Bytes of the tar stream after gunzip. */
  expandedBytes: number;
}

/** Called with every chunk's size as bytes land on disk; may throw to stop (staged-byte limits). */
export type ByteObserver = (bytes: number) => void;

export function artifactTooLarge(limit: number, what: 'compressed' | 'expanded'): Problem {
  return new Problem(
    'resource-limit',
    'Artifact too large',
    `the artifact is over ${limit} bytes ${what} (deploy.artifactBytes, --artifact-bytes)`,
  );
}

function badArchive(detail: string): Problem {
  return new Problem('invalid-input', 'Malformed artifact', detail);
}

/**
 * Streams a request body into `file`, refusing past `limit` bytes and after `deadlineMs`.
 * Answers the number of bytes received. An empty body is `invalid-input`. On a refusal the body
 * is unpiped but not destroyed: the caller still answers on its connection.
 */
export async function receiveArtifact(
  body: Readable,
  file: string,
  options: { limit: number; deadlineMs: number; onBytes?: ByteObserver; signal?: AbortSignal },
): Promise<number> {
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      received += chunk.length;
      if (received > options.limit) return done(artifactTooLarge(options.limit, 'compressed'));
      try {
        options.onBytes?.(chunk.length);
      } catch (err) {
        return done(err as Error);
      }
      done(null, chunk);
    },
  });
  const deadline = AbortSignal.timeout(options.deadlineMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  let ended = false;
  const onEnd = () => {
    ended = true;
  };
  // A client that goes away mid-body never ends the stream: stop at once rather than at the deadline.
  const onClose = () => {
    if (!ended) counter.destroy(new Error('the request body ended before the artifact was complete'));
  };
  const onError = (err: Error) => counter.destroy(err);
  body.once('end', onEnd);
  body.once('close', onClose);
  body.once('error', onError);
  body.pipe(counter);
  try {
    await pipeline(counter, createWriteStream(file, { flags: 'wx', mode: 0o600 }), { signal });
  } catch (err) {
    body.unpipe(counter);
    if (deadline.aborted) {
      throw new Problem(
        'deploy-timeout',
        'Deploy timed out',
        `the artifact did not arrive within ${options.deadlineMs} ms (deploy.receiveTimeoutMs)`,
      );
    }
    if (isProblem(err)) throw err;
    if (isProblem((err as Error).cause)) throw (err as Error).cause;
    if (diskRefusal(err)) throw err;
    if (options.signal?.aborted) {
      throw new Problem(
        'capability-missing',
        'Node is stopping',
        'the node stopped while receiving the artifact',
      );
    }
    throw badArchive('the request body ended before the artifact was complete');
  } finally {
    body.off('end', onEnd);
    body.off('close', onClose);
    body.off('error', onError);
  }
  if (received === 0) {
    throw new Problem(
      'invalid-input',
      'Malformed request',
      'the request has no body: send the artifact (a .tar.gz)',
    );
  }
  return received;
}

/**
 * Unpacks the gzip-compressed tar in `file` into `root` (created; must not exist). On failure
 * whatever was written stays under `root`: the caller removes the whole staging directory.
 */
export async function unpackArtifact(
  file: string,
  root: string,
  limits: ArchiveLimits,
  onBytes?: ByteObserver,
): Promise<UnpackedArchive> {
  await mkdir(root, { mode: 0o700 });
  const source = createReadStream(file);
  return unpackStream(source, root, limits, onBytes);
}

/** Unpacks a gzip-compressed tar stream into `root`, which must exist and be empty. */
export async function unpackStream(
  source: Readable,
  root: string,
  limits: ArchiveLimits,
  onBytes?: ByteObserver,
): Promise<UnpackedArchive> {
  // tar is loaded with the first deploy this node receives: an idle daemon keeps every module it
  // loaded, and most nodes take few deploys.
  const { Parser } = await import('tar');
  let expanded = 0;
  let entries = 0;
  let failure: unknown;
  const fail = (err: unknown) => {
    failure ??= err;
  };

  let sniffed = false;
  const sniff = new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      if (!sniffed && chunk.length > 0) {
        sniffed = true;
        if (chunk[0] !== 0x1f || (chunk.length > 1 && chunk[1] !== 0x8b)) {
          return done(badArchive('the artifact is not gzip-compressed: send a .tar.gz'));
        }
      }
      done(null, chunk);
    },
  });
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      expanded += chunk.length;
      if (expanded > limits.artifactBytes) return done(artifactTooLarge(limits.artifactBytes, 'expanded'));
      try {
        onBytes?.(chunk.length);
      } catch (err) {
        return done(err as Error);
      }
      done(null, chunk);
    },
  });

  // Entries are written one at a time, in archive order: each waits for the one before, and the
  // parser waits for each entry's body to be consumed before it reads on.
  const parser = new Parser({ strict: true, maxMetaEntrySize: 64 * 1024 });
  let chain: Promise<void> = Promise.resolve();
  // The file being written now: destroyed when unpacking stops mid-entry, so nothing waits on it.
  const inflight: Inflight = { stopped: false, streams: new Set() };
  const refuse = (err: unknown) => {
    fail(err);
    parser.abort(err as Error);
  };
  parser.on('entry', (entry: ReadEntry) => {
    if (failure) return entry.resume();
    entries += 1;
    let path: string[];
    try {
      if (entries > limits.archiveEntries) {
        throw new Problem(
          'resource-limit',
          'Archive has too many entries',
          `the archive holds more than ${limits.archiveEntries} entries (deploy.archiveEntries, --archive-entries)`,
        );
      }
      if (!isDirectory(entry) && !isFile(entry)) throw refusedType(entry);
      // `./`, as tar writes the root of `tar -C dir .`: nothing to make.
      if (isDirectory(entry) && isRootPath(entry.path)) {
        entry.resume();
        return;
      }
      path = entryPath(entry.path);
    } catch (err) {
      entry.resume();
      return refuse(err);
    }
    const rawPath = entry.path;
    chain = chain.then(async () => {
      if (failure) return void entry.resume();
      try {
        if (isDirectory(entry)) {
          entry.resume();
          await makeDirectory(root, path);
        } else {
          await writeEntry(root, path, entry, inflight);
        }
      } catch (err) {
        entry.resume();
        refuse(conflict(rawPath, err));
      }
    });
  });
  // A tar ends with two zero blocks; without them the stream was cut (at an entry boundary,
  // which the parser alone would accept).
  let sawEnd = false;
  parser.on('eof', () => {
    sawEnd = true;
  });
  parser.on('ignoredEntry', (entry: ReadEntry) => {
    // Unknown entry types are skipped by the parser; here they are refused like links.
    if (!entry.meta) refuse(refusedType(entry));
  });

  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (failure) return done(failure as Error);
      const more = parser.write(chunk);
      if (more) return done();
      parser.once('drain', () => done());
    },
    final(done) {
      parser.end(() => done());
    },
  });
  parser.on('error', (err: Error) => {
    fail(failure ?? badArchive(`the artifact is not a readable tar archive (${tarReason(err)})`));
    sink.destroy(failure as Error);
  });

  try {
    await pipeline(source, sniff, createGunzip(), counter, sink);
  } catch (err) {
    fail(err);
  }
  if (failure) {
    parser.abort(failure as Error);
    inflight.stopped = true;
    for (const out of inflight.streams) out.destroy();
  }
  await chain;
  if (failure) throw diskRefusal(failure) ? failure : asArchiveProblem(failure);
  if (!sniffed) throw new Problem('invalid-input', 'Malformed request', 'the artifact is empty');
  if (!sawEnd) throw badArchive('the tar archive ends early: it has no end-of-archive marker');
  const config = await findWorkerConfig(root);
  return { root, config, entries, expandedBytes: expanded };
}

/** The worker config at the archive root: `cell.jsonc`, else `cell.json`; else `invalid-input`. */
async function findWorkerConfig(root: string): Promise<WorkerConfigName> {
  for (const name of WORKER_CONFIGS) {
    const info = await lstat(join(root, name)).catch(() => null);
    if (info?.isFile()) return name;
  }
  throw new Problem(
    'invalid-input',
    'No worker config',
    'the artifact has no cell.jsonc or cell.json at its root; pack the project directory that holds it',
  );
}

/**
 * The components of an entry path, after dropping empty and `.` components. Refused: absolute
 * paths (also `C:` drive forms), `..` anywhere, NUL, backslashes, over-long paths, and a path
 * that names the root itself.
 */
export function entryPath(raw: string): string[] {
  if (typeof raw !== 'string' || raw.length === 0) throw badArchive('an archive entry has no path');
  const shown = JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}...` : raw);
  if (raw.length > MAX_PATH_CHARS)
    throw badArchive(`the entry path ${shown} is over ${MAX_PATH_CHARS} characters`);
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) {
    throw badArchive(
      `the entry ${shown} has an absolute path; archive paths are relative to the project root`,
    );
  }
  if (raw.includes('\0') || raw.includes('\\')) {
    throw badArchive(`the entry path ${shown} holds a NUL or a backslash`);
  }
  const parts = raw.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw badArchive(`the entry ${shown} climbs out of the archive with ".."`);
  if (parts.length === 0) {
    throw badArchive(`the entry ${shown} names the archive root itself`);
  }
  if (parts.some((part) => Buffer.byteLength(part) > 255)) {
    throw badArchive(`the entry path ${shown} has a component over 255 bytes`);
  }
  return parts;
}

function isRootPath(raw: string): boolean {
  return (
    typeof raw === 'string' &&
    raw !== '' &&
    !raw.startsWith('/') &&
    raw.split('/').every((p) => p === '' || p === '.')
  );
}

function refusedType(entry: ReadEntry): Problem {
  const what =
    entry.type === 'SymbolicLink' || entry.type === 'Link'
      ? 'a link'
      : `a ${String(entry.type)
          .replace(/([a-z])([A-Z])/g, '$1 $2')
          .toLowerCase()}`;
  const shown = JSON.stringify(String(entry.path).slice(0, 80));
  return badArchive(`the entry ${shown} is ${what}; an artifact carries only regular files and directories`);
}

/**
 * Creates each missing directory on the way, checking every existing component is a real
 * directory (never a link: nothing here makes links, but the check costs little).
 */
async function makeDirectory(root: string, parts: string[]): Promise<void> {
  let current = root;
  for (const part of parts) {
    current = join(current, part);
    const info = await lstat(current).catch(() => null);
    if (info) {
      if (!info.isDirectory()) throw new Error(`${part} exists and is not a directory`);
      continue;
    }
    await mkdir(current, { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

async function writeEntry(
  root: string,
  parts: string[],
  entry: ReadEntry,
  inflight: Inflight,
): Promise<void> {
  await makeDirectory(root, parts.slice(0, -1));
  const target = join(root, ...parts);
  const existing = await lstat(target).catch(() => null);
  if (existing && !existing.isFile()) throw new Error('a directory of that name exists');
  // A later entry of the same path replaces the earlier one, as tar itself does.
  const out = createWriteStream(target, { mode: 0o644 });
  inflight.streams.add(out);
  // Unpacking stopped while this entry waited its turn: its body will never come.
  if (inflight.stopped) out.destroy();
  try {
    await new Promise<void>((resolve, reject) => {
      out.on('error', reject);
      out.once('close', () => resolve());
      entry.pipe(out);
    });
  } finally {
    inflight.streams.delete(out);
  }
}

/** Files being written; destroyed (and refused from now on) once unpacking has stopped. */
interface Inflight {
  stopped: boolean;
  streams: Set<WriteStream>;
}

function isFile(entry: ReadEntry): boolean {
  return entry.type === 'File' || entry.type === 'OldFile' || entry.type === 'ContiguousFile';
}

function isDirectory(entry: ReadEntry): boolean {
  return entry.type === 'Directory' || entry.type === 'GNUDumpDir';
}

/** Why an entry could not be written: the disk's refusal as it is, else a clash of entries. */
function conflict(path: string, err: unknown): unknown {
  if (isProblem(err) || diskRefusal(err)) return err;
  const shown = JSON.stringify(String(path).slice(0, 80));
  return badArchive(`the entry ${shown} could not be unpacked: it clashes with another entry`);
}

function tarReason(err: Error): string {
  const code = (err as { tarCode?: string; code?: string }).tarCode ?? (err as { code?: string }).code;
  const message = String(err.message ?? '').slice(0, 120);
  return code && !message.startsWith(code) ? `${code}: ${message}` : message;
}

/** Anything that stopped unpacking, as the Problem it answers with. */
function asArchiveProblem(err: unknown): Problem {
  if (isProblem(err)) return err;
  if (isProblem((err as Error)?.cause)) return (err as Error).cause as Problem;
  const code = (err as NodeJS.ErrnoException)?.code;
  if (typeof code === 'string' && code.startsWith('Z_')) {
    return badArchive('the artifact is not valid gzip data (it may be truncated)');
  }
  if (code === 'ERR_STREAM_PREMATURE_CLOSE') return badArchive('the artifact ended early');
  return badArchive(`the artifact could not be unpacked (${tarReason(err as Error)})`);
}
