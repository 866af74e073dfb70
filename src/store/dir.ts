// The local-directory bucket, the embedded default (docs/architecture.md "How a request flows"): one machine runs a fleet with no other service, and several
// processes on that machine may share one directory, so every condition is decided
// atomically across processes, not just within one.
//
// Layout. A key's segments become directories and its last segment a file, each segment
// percent-escaped for `%` and `~` only, and object files end in `~`. So `a/b.json` is
// `a/b.json~`. The mark keeps S3's namespace: key `a` (file `a~`) and key `a/b`
// (directory `a`) can both exist, which plain names could not hold. Anything with a `~`
// that is not its last character is ours (locks, temporary files) and is never listed.
// Foreign files (no mark, or names that do not decode back to themselves) are ignored.
//
// ETags. The quoted hex MD5 of the body, the form S3 answers for a single-part upload,
// so the same body has the same ETag on both backends. `ifMatch` accepts it with or
// without the quotes. Content ETags mean a rewrite of identical bytes keeps the ETag,
// as on S3.
//
// Atomicity. Every write and delete of a key holds that key's lock: a file
// `<segment>~lock` beside the object, created with O_EXCL. Under the lock the condition
// is checked and the new body, already written and synced to a temporary file, is
// renamed over the object; readers take no lock because rename is atomic. A lock is
// stale when its holder (pid and host written in it) is gone, or when it is older than
// `staleLockMs`; the critical section is a stat and a rename, so a live holder never
// comes near that bound unless it is paused (then, and only then, atomicity can be
// lost; the bound is ten seconds by default). A stale lock is moved aside under a
// unique name, and if what moved turns out to be a fresh lock it is linked back.

import { createHash, randomBytes } from 'node:crypto';
import type { BigIntStats, Dirent } from 'node:fs';
import { constants } from 'node:fs';
import {
  access,
  type FileHandle,
  link,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  stat,
  unlink,
} from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Problem } from '../problem.ts';
import {
  CasConflict,
  checkCondition,
  checkKey,
  compareKeys,
  isValidKey,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type Store,
  type StoredObject,
  type WriteCondition,
} from './store.ts';

export interface DirStoreOptions {
  /** A lock older than this is taken over even if its holder still runs. Default 10 s. */
  staleLockMs?: number;
  /** How long a write waits for a key's lock before answering store-unavailable. Default 30 s. */
  lockWaitMs?: number;
  /** Sync each body to disk before it replaces the object. Default true. */
  durable?: boolean;
}

/** The longest escaped segment; the rest of a file name (255 bytes) holds our suffixes. */
const MAX_SEGMENT_BYTES = 240;
const MARK = '~';
const LOCK_SUFFIX = '~lock';
const LIST_CONCURRENCY = 32;
/** Bounds the ETag cache; past it the cache starts over (it only saves re-hashing). */
const MAX_CACHED_ETAGS = 100_000;
/** Objects larger than this are hashed in a stream rather than read whole. */
const HASH_STREAM_ABOVE = 64 * 1024;

/** Opens (creating if needed) a directory bucket at an absolute or relative path. */
export async function openDirStore(root: string, options: DirStoreOptions = {}): Promise<DirStore> {
  const store = new DirStore(root, options);
  await makeBucketDirectory(store.root, store.description);
  return store;
}

/**
 * Creates the bucket directory one level at a time from its nearest existing ancestor, refusing
 * at once and by name what cannot hold a bucket. (A recursive mkdir loops forever on some paths,
 * such as one under /proc, and answers a bare EEXIST when the path is a file.)
 */
async function makeBucketDirectory(root: string, description: string): Promise<void> {
  const refuse = (why: string, cause?: unknown) =>
    new Problem('invalid-input', 'Unusable directory bucket', `${description}: ${why}`, { cause });
  const missing: string[] = [];
  let at = root;
  for (;;) {
    try {
      const info = await stat(at);
      if (!info.isDirectory()) {
        throw refuse(at === root ? 'it is a file, not a directory' : `${at} is a file, not a directory`);
      }
      break;
    } catch (err) {
      if (err instanceof Problem) throw err;
      if ((err as NodeJS.ErrnoException).code === 'ENOTDIR')
        throw refuse('a part of the path is a file', err);
      if (!isMissing(err)) throw refuse(`cannot look at ${at}: ${(err as NodeJS.ErrnoException).code}`, err);
      missing.unshift(at);
      const parent = dirname(at);
      if (parent === at) throw refuse('no part of the path exists');
      at = parent;
    }
  }
  for (const dir of missing) {
    try {
      await mkdir(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && (await stat(dir).catch(() => null))?.isDirectory()) continue;
      throw refuse(`cannot create ${dir}: ${code ?? (err as Error).message}`, err);
    }
  }
  try {
    await access(root, constants.R_OK | constants.W_OK | constants.X_OK);
  } catch (err) {
    throw refuse(`this process may not read and write it (${(err as NodeJS.ErrnoException).code})`, err);
  }
}

export class DirStore implements Store {
  readonly root: string;
  readonly description: string;
  readonly #staleLockMs: number;
  readonly #lockWaitMs: number;
  readonly #durable: boolean;
  readonly #host = hostname();
  // Objects are only ever replaced by rename, so an inode's bytes never change while its
  // size and times stay put: the signature below names the content it was hashed from.
  readonly #etags = new Map<string, { signature: string; etag: string }>();

  constructor(root: string, options: DirStoreOptions = {}) {
    this.root = resolve(root);
    this.description = pathToFileURL(this.root).href;
    this.#staleLockMs = options.staleLockMs ?? 10_000;
    this.#lockWaitMs = options.lockWaitMs ?? 30_000;
    this.#durable = options.durable ?? true;
  }

  async get(key: string): Promise<StoredObject | null> {
    const { file } = this.#locate(key);
    const handle = await openIfPresent(file);
    if (!handle) return null;
    try {
      const info = await handle.stat({ bigint: true });
      const body = await handle.readFile();
      const etag = etagOf(body);
      this.#remember(file, info, etag);
      return {
        key,
        etag,
        size: body.byteLength,
        modified: new Date(Number(info.mtimeMs)),
        body: bytes(body),
      };
    } finally {
      await handle.close();
    }
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    const { file } = this.#locate(key);
    return this.#info(key, file);
  }

  async put(key: string, body: Uint8Array | string, condition?: WriteCondition): Promise<string> {
    checkCondition(key, condition);
    const place = this.#locate(key);
    const data = typeof body === 'string' ? Buffer.from(body) : body;
    const etag = etagOf(data);
    const temp = await this.#writeTemp(place, data);
    let renamed = false;
    try {
      const lock = await this.#lock(place, true);
      try {
        if (condition) await this.#enforceCondition(key, place.file, condition);
        await rename(temp, place.file);
        renamed = true;
      } finally {
        await this.#unlock(lock!);
      }
    } finally {
      if (!renamed) await unlink(temp).catch(() => {});
    }
    return etag;
  }

  async delete(key: string, condition?: Pick<WriteCondition, 'ifMatch'>): Promise<boolean> {
    checkCondition(key, condition);
    const place = this.#locate(key);
    const lock = await this.#lock(place, false);
    // No directory means no object, at the moment the lock could not be created.
    if (!lock) {
      if (condition?.ifMatch !== undefined) throw new CasConflict(key);
      return false;
    }
    let removed = false;
    try {
      if (condition?.ifMatch !== undefined) await this.#enforceCondition(key, place.file, condition);
      removed = await unlink(place.file).then(
        () => true,
        (err) => (isMissing(err) ? false : Promise.reject(err)),
      );
    } finally {
      await this.#unlock(lock);
    }
    if (removed) await this.#pruneEmpty(place.dir);
    return removed;
  }

  async list(prefix: string, options: ListOptions): Promise<ListResult> {
    const cut = prefix.lastIndexOf('/') + 1;
    const base = prefix.slice(0, cut);
    const partial = prefix.slice(cut);
    const segments = base === '' ? [] : base.slice(0, -1).split('/');
    // No key has such a segment, so nothing can match; never resolve it as a path.
    if (segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('\0'))) {
      return { objects: [], prefixes: [] };
    }
    const files: { key: string; file: string }[] = [];
    const prefixes: string[] = [];
    const visit = async (dir: string, keyBase: string, filter: string) => {
      for (const entry of await readEntries(dir)) {
        const kind = entryKind(entry);
        if (!kind?.segment.startsWith(filter)) continue;
        const path = join(dir, entry.name);
        if (kind.type === 'object') {
          files.push({ key: keyBase + kind.segment, file: path });
        } else if (options.recursive) {
          await visit(path, `${keyBase}${kind.segment}/`, '');
        } else if (await holdsObject(path)) {
          prefixes.push(`${keyBase}${kind.segment}/`);
        }
      }
    };
    await visit(join(this.root, ...segments.map(escapeSegment)), base, partial);
    const infos = await mapLimit(files, LIST_CONCURRENCY, ({ key, file }) => this.#info(key, file));
    const objects = infos.filter((info): info is ObjectInfo => info !== null && isValidKey(info.key));
    objects.sort((a, b) => compareKeys(a.key, b.key));
    prefixes.sort(compareKeys);
    return { objects, prefixes: prefixes.filter((p) => isValidKey(p.slice(0, -1))) };
  }

  async close(): Promise<void> {
    this.#etags.clear();
  }

  /** Where a key lives; refuses keys the interface refuses and segments too long to name a file. */
  #locate(key: string): Place {
    checkKey(key);
    const escaped = key.split('/').map(escapeSegment);
    for (const segment of escaped) {
      if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) {
        throw new Problem(
          'invalid-input',
          'Invalid bucket key',
          `a directory bucket holds key segments of at most ${MAX_SEGMENT_BYTES} bytes: ${JSON.stringify(key)}`,
        );
      }
    }
    const name = escaped.pop()!;
    const dir = join(this.root, ...escaped);
    return { dir, name, file: join(dir, name + MARK), lock: join(dir, name + LOCK_SUFFIX) };
  }

  async #info(key: string, file: string): Promise<ObjectInfo | null> {
    let info: BigIntStats;
    try {
      info = await stat(file, { bigint: true });
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    const cached = this.#etags.get(file);
    if (cached && cached.signature === signature(info)) {
      return { key, etag: cached.etag, size: Number(info.size), modified: new Date(Number(info.mtimeMs)) };
    }
    // Hash through one descriptor so the size, time and ETag all describe the same inode.
    const handle = await openIfPresent(file);
    if (!handle) return null;
    try {
      const current = await handle.stat({ bigint: true });
      // A small object (every registry record) is read whole, as get() reads it: a stream with its
      // 64 KiB buffer for each of the thousands of records a first listing hashes was most of
      // what that listing allocated.
      const etag =
        Number(current.size) <= HASH_STREAM_ABOVE
          ? etagOf(await handle.readFile())
          : await streamedEtag(handle);
      this.#remember(file, current, etag);
      return { key, etag, size: Number(current.size), modified: new Date(Number(current.mtimeMs)) };
    } finally {
      await handle.close();
    }
  }

  #remember(file: string, info: BigIntStats, etag: string): void {
    if (this.#etags.size >= MAX_CACHED_ETAGS) this.#etags.clear();
    this.#etags.set(file, { signature: signature(info), etag });
  }

  async #enforceCondition(key: string, file: string, condition: WriteCondition): Promise<void> {
    if (condition.ifNoneMatch === '*') {
      if (await this.#info(key, file)) throw new CasConflict(key);
      return;
    }
    const current = await this.#info(key, file);
    if (!current || unquote(current.etag) !== unquote(condition.ifMatch!)) throw new CasConflict(key);
  }

  /** Writes the body beside its object, so the rename that publishes it stays in one filesystem. */
  async #writeTemp(place: Place, data: Uint8Array): Promise<string> {
    const temp = join(place.dir, `${place.name}~tmp-${randomBytes(4).toString('hex')}`);
    for (let attempt = 0; ; attempt++) {
      await mkdir(place.dir, { recursive: true });
      try {
        const handle = await open(temp, 'wx');
        try {
          await handle.writeFile(data);
          if (this.#durable) await handle.datasync();
        } finally {
          await handle.close();
        }
        return temp;
      } catch (err) {
        // A concurrent delete pruned the directory between mkdir and open: make it again.
        if (!isMissing(err) || attempt >= 10) throw err;
      }
    }
  }

  /**
   * Takes the key's lock, waiting for a live holder. With `create` false, answers null when
   * the key's directory does not exist (so neither does the object).
   */
  async #lock(place: Place, create: boolean): Promise<Lock | null> {
    const deadline = Date.now() + this.#lockWaitMs;
    let wait = 1;
    for (;;) {
      try {
        const handle = await open(place.lock, 'wx');
        try {
          await handle.writeFile(JSON.stringify({ pid: process.pid, host: this.#host, at: Date.now() }));
          const info = await handle.stat({ bigint: true });
          return { path: place.lock, ino: info.ino };
        } finally {
          await handle.close();
        }
      } catch (err) {
        if (isMissing(err)) {
          if (!create) return null;
          await mkdir(place.dir, { recursive: true });
          continue;
        }
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      if (await this.#breakIfStale(place)) continue;
      if (Date.now() > deadline) {
        throw new Problem(
          'store-unavailable',
          'Bucket is unavailable',
          `the lock ${place.lock} stayed held for ${this.#lockWaitMs} ms`,
        );
      }
      await delay(wait + Math.random() * wait);
      wait = Math.min(wait * 2, 25);
    }
  }

  /** Removes the lock if it is stale; answers true when the caller should try again at once. */
  async #breakIfStale(place: Place): Promise<boolean> {
    const handle = await openIfPresent(place.lock);
    if (!handle) return true;
    let judged: BigIntStats;
    let holder: { pid?: unknown; host?: unknown } | null = null;
    try {
      judged = await handle.stat({ bigint: true });
      try {
        holder = JSON.parse(await handle.readFile('utf8'));
      } catch {
        // Created but not yet written: only its age can judge it.
      }
    } finally {
      await handle.close();
    }
    const age = Date.now() - Number(judged.mtimeMs);
    const holderGone =
      holder !== null &&
      holder.host === this.#host &&
      typeof holder.pid === 'number' &&
      !processRuns(holder.pid);
    if (!holderGone && age <= this.#staleLockMs) return false;
    const aside = join(place.dir, `${place.name}~stale-${randomBytes(4).toString('hex')}`);
    try {
      await rename(place.lock, aside);
    } catch (err) {
      if (isMissing(err)) return true;
      throw err;
    }
    try {
      const moved = await stat(aside, { bigint: true });
      // Between judging and moving, the stale lock was replaced by a live one: put it back,
      // unless yet another lock was taken meanwhile (then both holders run: the one race
      // this scheme cannot close, and it needs a stale lock to begin with).
      if (moved.ino !== judged.ino) await link(aside, place.lock).catch(() => {});
    } finally {
      await unlink(aside).catch(() => {});
    }
    return true;
  }

  async #unlock(lock: Lock): Promise<void> {
    try {
      const info = await stat(lock.path, { bigint: true });
      // Our lock may have been judged stale and taken over; never remove another holder's.
      if (info.ino === lock.ino) await unlink(lock.path);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  }

  /** Removes directories a delete left empty, up to (never including) the root. */
  async #pruneEmpty(dir: string): Promise<void> {
    let current = dir;
    while (current !== this.root && current.startsWith(this.root)) {
      try {
        await rmdir(current);
      } catch {
        return;
      }
      current = resolve(current, '..');
    }
  }
}

interface Place {
  /** The directory holding the object's file, its lock and its temporary files. */
  dir: string;
  /** The escaped last segment. */
  name: string;
  file: string;
  lock: string;
}

interface Lock {
  path: string;
  ino: bigint;
}

function escapeSegment(segment: string): string {
  return segment.replaceAll('%', '%25').replaceAll('~', '%7E');
}

function unescapeSegment(name: string): string {
  return name.replace(/%25|%7E/g, (match) => (match === '%25' ? '%' : '~'));
}

/** What a directory entry holds for the bucket, or null for our own and foreign files. */
function entryKind(entry: Dirent): { type: 'object' | 'dir'; segment: string } | null {
  const mark = entry.name.indexOf(MARK);
  let type: 'object' | 'dir';
  let escaped: string;
  if (mark === -1 && entry.isDirectory()) {
    type = 'dir';
    escaped = entry.name;
  } else if (mark === entry.name.length - 1 && entry.isFile()) {
    type = 'object';
    escaped = entry.name.slice(0, -1);
  } else {
    return null;
  }
  const segment = unescapeSegment(escaped);
  return escapeSegment(segment) === escaped ? { type, segment } : null;
}

/** Whether any object lives under a directory (a delete may leave empty ones behind). */
async function holdsObject(dir: string): Promise<boolean> {
  const entries = await readEntries(dir);
  const subdirs: string[] = [];
  for (const entry of entries) {
    const kind = entryKind(entry);
    if (kind?.type === 'object') return true;
    if (kind?.type === 'dir') subdirs.push(join(dir, entry.name));
  }
  for (const sub of subdirs) if (await holdsObject(sub)) return true;
  return false;
}

async function readEntries(dir: string): Promise<Dirent[]> {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
}

async function openIfPresent(file: string) {
  try {
    return await open(file, 'r');
  } catch (err) {
    if (isMissing(err)) return null;
    throw err;
  }
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

async function streamedEtag(handle: FileHandle): Promise<string> {
  const hash = createHash('md5');
  for await (const chunk of handle.createReadStream({ autoClose: false, start: 0 })) hash.update(chunk);
  return `"${hash.digest('hex')}"`;
}

function etagOf(data: Uint8Array): string {
  return `"${createHash('md5').update(data).digest('hex')}"`;
}

function unquote(etag: string): string {
  return etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"') ? etag.slice(1, -1) : etag;
}

/** Joined rather than templated: one flat string per cached object, not a chain of ten pieces. */
function signature(info: BigIntStats): string {
  return [info.dev, info.ino, info.size, info.mtimeNs, info.ctimeNs].join(':');
}

function bytes(buffer: Buffer): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
