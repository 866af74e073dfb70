// Durable Objects' storage kept in the bucket (docs/bindings.md "Durable Objects on the fleet"):
// workerd keeps each object in `<storage dir>/<namespace>/<id>.sqlite` (WAL mode) and a
// namespace's alarms in `<namespace>/metadata.sqlite`. Each file has a history in D1's layout
// (d1-log.ts) under `fleets/<app>/objects/namespaces/<namespace>/<file>/`: every pass, each file
// whose WAL index moved since the last pass is copied consistently from a read connection of its
// own (`VACUUM INTO`: SQLite's locks and shared memory make workerd's writes and this read safe
// together) and written as the file's next generation, only where none is (`If-None-Match: *`).
// Taking the objects over restores the newest generation of every file into a fresh folder and
// writes it again as the next generation with `taken_by`: that is the number the previous holder
// would write next, so a former holder that wakes up finds its next write refused. A take's
// generation is never removed while newer ones exist, only emptied to its header, so the fence
// outlives the snapshots.

import { closeSync, openSync, readSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { keys, logKeys } from '../../../src/registry/keys.ts';
import { isCasConflict, type Store } from '../../../src/store/store.ts';
import {
  type DatabaseRef,
  decodeObject,
  encodeObject,
  listGenerations,
  restore,
  writeSnapshot,
} from './d1-log.ts';

export interface ObjectsRef {
  store: Store;
  application: string;
}

/** One SQLite file of a namespace: `file` is its name without `.sqlite` (`metadata` for alarms). */
export interface ObjectFile {
  namespace: string;
  file: string;
}

/** The file of a namespace that holds its alarms rather than an object. */
export const METADATA_FILE = keys.runtimeObjectsAlarmsFile;
const SQLITE = '.sqlite';
/** How many files a pass or a take copies at once. */
const PARALLEL = 32;

/** Another node took the objects over: this node must not serve them again. */
export class ObjectsMoved extends Error {}

export function fileLog(ref: ObjectsRef, f: ObjectFile): DatabaseRef {
  return {
    store: ref.store,
    application: ref.application,
    database: `${f.namespace}/${f.file}`,
    base: keys.runtimeObjectLog(ref.application, f.namespace, f.file),
  };
}

const fileKey = (f: ObjectFile) => `${f.namespace}/${f.file}`;

/** The files with a history in the bucket, by namespace. */
export async function listStoredFiles(ref: ObjectsRef): Promise<ObjectFile[]> {
  const root = keys.runtimeObjectsNamespacesPrefix(ref.application);
  const namespaces = (await ref.store.list(root, { recursive: false })).prefixes;
  const files: ObjectFile[] = [];
  for (const prefix of namespaces) {
    const namespace = prefix.slice(root.length, -1);
    const listed = await ref.store.list(prefix, { recursive: false });
    for (const p of listed.prefixes) files.push({ namespace, file: p.slice(prefix.length, -1) });
  }
  return files;
}

/** The SQLite files workerd keeps in a storage folder. */
export async function listLocalFiles(dir: string): Promise<ObjectFile[]> {
  const files: ObjectFile[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (!entry.isDirectory()) continue;
    for (const name of await readdir(join(dir, entry.name))) {
      if (name.endsWith(SQLITE)) files.push({ namespace: entry.name, file: name.slice(0, -SQLITE.length) });
    }
  }
  return files;
}

/** Runs `work` over `items`, at most `PARALLEL` at once. */
async function eachLimited<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
}

/** What a take or a pass knows of each file: its newest generation and the take's own. */
export interface FileState {
  generation: number;
  takeGeneration: number;
  /** The WAL index header (or file size and time) when it was last copied. */
  stamp: string;
}

/**
 * Writes every file's last shipped state into `dir` (a fresh folder) and seals each history for
 * this node. Answers the state the shipper goes on from.
 */
export async function restoreObjects(
  ref: ObjectsRef,
  dir: string,
  node: string,
): Promise<Map<string, FileState>> {
  const states = new Map<string, FileState>();
  await eachLimited(await listStoredFiles(ref), async (f) => {
    await mkdir(join(dir, f.namespace), { recursive: true });
    const path = join(dir, f.namespace, `${f.file}${SQLITE}`);
    for (;;) {
      const restored = await restore(fileLog(ref, f), path);
      if (restored.generation === 0) return;
      const take = restored.generation + 1;
      try {
        await writeSnapshot(
          fileLog(ref, f),
          take,
          { time_ms: Date.now(), index: 0, taken_by: node },
          await readFile(path),
        );
      } catch (err) {
        if (isCasConflict(err)) continue; // the previous holder's last write landed: restore it
        throw err;
      }
      await rm(`${path}-wal`, { force: true });
      await dropGeneration(fileLog(ref, f), restored.generation, true);
      states.set(fileKey(f), { generation: take, takeGeneration: take, stamp: await walStamp(path) });
      return;
    }
  });
  return states;
}

/**
 * The state to ship on from when this node resumes the objects with its own folder (the lease
 * still named it: nobody wrote since): each stored file's newest generation, kept as a fence.
 */
export async function resumeStates(ref: ObjectsRef): Promise<Map<string, FileState>> {
  const states = new Map<string, FileState>();
  await eachLimited(await listStoredFiles(ref), async (f) => {
    const newest = (await listGenerations(fileLog(ref, f))).at(-1);
    if (newest !== undefined)
      states.set(fileKey(f), { generation: newest, takeGeneration: newest, stamp: '' });
  });
  return states;
}

/**
 * Removes a generation a newer one replaced. A generation that may be the number some former
 * holder writes next (a take's, or the one a take restored) keeps its header as that holder's
 * fence: one small object per file per take.
 */
async function dropGeneration(log: DatabaseRef, generation: number, keepHeader: boolean): Promise<void> {
  const key = logKeys.snapshot(log.base as string, generation);
  if (!keepHeader) {
    await log.store.delete(key);
    return;
  }
  const object = await log.store.get(key);
  if (!object) return;
  const { header, bytes } = decodeObject(object.body);
  if (bytes.byteLength > 0) await log.store.put(key, encodeObject(header));
}

/**
 * What changes with every transaction workerd commits to a file: the first 48 bytes of its WAL
 * index (the change counter, the last frame, the salts), else its size and time.
 */
async function walStamp(path: string): Promise<string> {
  try {
    const fd = openSync(`${path}-shm`, 'r');
    try {
      const header = Buffer.alloc(48);
      const read = readSync(fd, header, 0, 48, 0);
      if (read === 48) return header.toString('hex');
    } finally {
      closeSync(fd);
    }
  } catch {}
  const s = await stat(path, { bigint: true }).catch(() => null);
  return s ? `${s.size}:${s.mtimeNs}` : '';
}

/** Copies one SQLite file as it is after its last committed transaction. */
function copyConsistently(path: string, to: string): void {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    db.exec(`VACUUM INTO '${to.replaceAll("'", "''")}'`);
  } finally {
    db.close();
  }
}

export interface ShipperOptions {
  ref: ObjectsRef;
  /** The storage folder workerd writes. */
  dir: string;
  /** A folder of this node's own for the copies. */
  scratchDir: string;
  /** Whether this node still holds the objects' lease: checked before every write. */
  mayShip: () => boolean;
  /** What the take restored (restoreObjects). */
  states: Map<string, FileState>;
}

export interface PassResult {
  /** Files written to the bucket. */
  shipped: number;
  /** Wall time at which the oldest copy of the pass started: every write acknowledged before it is in the bucket. */
  startedMs: number;
}

/** Ships a storage folder's changed files to the bucket, one pass at a time. */
export class ObjectsShipper {
  readonly #options: ShipperOptions;
  #moved = false;
  #copies = 0;
  /** Namespaces of deleted classes: removed from the bucket at the next pass, never shipped again. */
  readonly #dropped = new Set<string>();
  #toDelete = new Set<string>();

  constructor(options: ShipperOptions) {
    this.#options = options;
  }

  /**
   * A `deleted_classes` migration removed these namespaces: their stored objects go at the next
   * pass (each deployment that starts with the migration asks again: one LIST per class).
   */
  drop(namespaces: string[]): void {
    for (const namespace of namespaces) {
      this.#dropped.add(namespace);
      this.#toDelete.add(namespace);
    }
  }

  /** One pass over every file; throws ObjectsMoved once another node wrote a history on. */
  async pass(): Promise<PassResult> {
    if (this.#moved) throw new ObjectsMoved('the objects moved to another node');
    const { dir, scratchDir } = this.#options;
    await mkdir(scratchDir, { recursive: true });
    const startedMs = Date.now();
    await this.#deleteDropped();
    let shipped = 0;
    const files = (await listLocalFiles(dir)).filter((f) => !this.#dropped.has(f.namespace));
    await eachLimited(files, async (f) => {
      if (await this.#shipFile(f)) shipped++;
    });
    return { shipped, startedMs };
  }

  async #deleteDropped(): Promise<void> {
    const { ref, mayShip } = this.#options;
    for (const namespace of this.#toDelete) {
      if (!mayShip()) throw new ObjectsMoved('the objects lease ran out');
      const prefix = keys.runtimeObjectsNamespacePrefix(ref.application, namespace);
      for (const o of (await ref.store.list(prefix, { recursive: true })).objects)
        await ref.store.delete(o.key);
      this.#toDelete.delete(namespace);
    }
  }

  async #shipFile(f: ObjectFile): Promise<boolean> {
    const { ref, dir, scratchDir, mayShip, states } = this.#options;
    const path = join(dir, f.namespace, `${f.file}${SQLITE}`);
    const state = states.get(fileKey(f)) ?? { generation: 0, takeGeneration: 0, stamp: '' };
    const stamp = await walStamp(path);
    if (stamp === state.stamp) return false;
    const copy = join(scratchDir, `copy-${this.#copies++}${SQLITE}`);
    try {
      copyConsistently(path, copy);
      const bytes = await readFile(copy);
      if (this.#moved || !mayShip()) throw new ObjectsMoved('the objects lease ran out');
      const next = state.generation + 1;
      try {
        await writeSnapshot(fileLog(ref, f), next, { time_ms: Date.now(), index: 0 }, bytes);
      } catch (err) {
        if (!isCasConflict(err)) throw err;
        this.#moved = true;
        throw new ObjectsMoved(`another node wrote ${fileKey(f)} on`);
      }
      states.set(fileKey(f), { ...state, generation: next, stamp });
      if (state.generation > 0)
        await dropGeneration(fileLog(ref, f), state.generation, state.generation === state.takeGeneration);
      return true;
    } finally {
      await rm(copy, { force: true });
    }
  }
}
