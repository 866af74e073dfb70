// `svc deployment prune` (docs/cli.md "svc deployment", its nine rules): deletes old runtime
// deployments of one application directly in the bucket. Reading the layout and deleting are
// I/O; deciding (`planPrune`) is pure. The layout is docs/runtime.md "Storage layout".

import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { isScriptName } from '../registry/names.ts';
import type { ObjectInfo, Store } from '../store/store.ts';
import { type Answerer, consent } from './consent.ts';
import {
  BLOB_PATTERN,
  imageReferences,
  parseAssetsIndex,
  parseManifest,
  parsePointer,
  parseRecord,
  VERSION_PATTERN,
} from './layout.ts';

// ---- flags ----

/** `--keep`: a whole number >= 0. */
export function parseKeep(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value)) {
    throw new Problem(
      'invalid-input',
      'Invalid --keep',
      `${JSON.stringify(text)} is not a whole number >= 0`,
    );
  }
  return value;
}

const UNIT_MS: Record<string, number> = { d: 86_400_000, h: 3_600_000, m: 60_000, '': 1000 };

/** `--older-than`: `30d`, `12h`, `45m`, whole seconds, or `0`; answers milliseconds. */
export function parseOlderThan(text: string): number {
  const match = /^(\d+)([dhm]?)$/.exec(text.trim());
  const ms = match ? Number(match[1]) * UNIT_MS[match[2]!]! : Number.NaN;
  if (!match || !Number.isSafeInteger(ms)) {
    throw new Problem(
      'invalid-input',
      'Invalid --older-than',
      `${JSON.stringify(text)} is none of 30d, 12h, 45m, whole seconds, or 0`,
    );
  }
  return ms;
}

/** The window as the user wrote it, for reasons such as "younger than 24h". */
export function describeWindow(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms / 1000}s`;
}

// ---- reading the layout ----

/** One `deploy/<script>/<version>/` folder as the listing shows it. */
export interface DeploymentEntry {
  script: string;
  version: string;
  objects: ObjectInfo[];
  hasManifest: boolean;
  hasAssetsIndex: boolean;
  /** From the record; null when there is none. */
  createdMs: number | null;
  hasRecord: boolean;
  /** The record's `bytes`; null when there is no record or it says none. */
  bytes: number | null;
}

export interface Layout {
  application: string;
  selector: { script: string; deployment: string } | null;
  /** Script name → the deployment its own pointer names. */
  scriptPointers: Map<string, string>;
  deployments: DeploymentEntry[];
  blobs: ObjectInfo[];
  images: ObjectInfo[];
}

const nonconforming = (key: string, why: string) =>
  new Problem('store-nonconforming', 'Unreadable runtime document', `${key}: ${why}`);
const unknownSchema = (key: string, why: string) =>
  new Problem(
    'capability-missing',
    'Runtime document not understood',
    `${key} has ${why}, which this svc release does not know; prune nothing with it and use the svc release that ships with that runtime`,
  );

/** Reads a document through a strict parser: absent is null; malformed or unknown is refused. */
async function readDocument<T>(
  store: Store,
  key: string,
  parse: (body: Uint8Array) => { ok: true; value: T } | { ok: false; why: string; unknown?: boolean },
): Promise<T | null> {
  const object = await store.get(key);
  if (!object) return null;
  const parsed = parse(object.body);
  if (parsed.ok) return parsed.value;
  if (parsed.unknown) throw unknownSchema(key, parsed.why);
  throw nonconforming(key, parsed.why);
}

export async function readLayout(store: Store, application: string): Promise<Layout> {
  const deployPrefix = keys.runtimeDeployPrefix(application);
  const deployListing = await store.list(deployPrefix, { recursive: true });
  const byFolder = new Map<string, DeploymentEntry>();
  for (const object of deployListing.objects) {
    const rest = object.key.slice(deployPrefix.length);
    // Rule 5: images and queues are skipped by prefix; only `<script>/<hex version>/` is weighed.
    if (rest.startsWith('images/') || rest.startsWith('queues/')) continue;
    const [script, version, ...inside] = rest.split('/');
    if (inside.length === 0 || !isScriptName(script) || !VERSION_PATTERN.test(version!)) continue;
    const folder = `${script}/${version}`;
    let entry = byFolder.get(folder);
    if (!entry) {
      entry = {
        script: script!,
        version: version!,
        objects: [],
        hasManifest: false,
        hasAssetsIndex: false,
        createdMs: null,
        hasRecord: false,
        bytes: null,
      };
      byFolder.set(folder, entry);
    }
    entry.objects.push(object);
    const file = inside.join('/');
    if (file === 'manifest.json') entry.hasManifest = true;
    if (file === 'assets.json') entry.hasAssetsIndex = true;
  }

  const selectorKey = keys.runtimeSelector(application);
  const selector = await readDocument(store, selectorKey, parsePointer);
  if (!selector && byFolder.size > 0) {
    throw nonconforming(selectorKey, "the fleet's selector is missing while deployments exist");
  }

  const scriptPointers = new Map<string, string>();
  const pointersPrefix = keys.runtimeScriptPointersPrefix(application);
  for (const info of (await store.list(pointersPrefix, { recursive: true })).objects) {
    const pointer = await readDocument(store, info.key, parsePointer);
    if (pointer) scriptPointers.set(pointer.script, pointer.deployment);
  }

  const recordsPrefix = keys.runtimeRecordsPrefix(application);
  const recordKeys = new Set(
    (await store.list(recordsPrefix, { recursive: true })).objects.map((o) => o.key),
  );
  for (const entry of byFolder.values()) {
    const key = keys.runtimeRecord(application, entry.script, entry.version);
    if (!recordKeys.has(key)) continue;
    const record = await readDocument(store, key, parseRecord);
    if (!record) continue;
    if (record.script !== entry.script || record.deployment !== entry.version) {
      throw nonconforming(
        key,
        `names ${record.script}/${record.deployment}, not the deployment it is stored for`,
      );
    }
    entry.hasRecord = true;
    entry.createdMs = record.created_ms;
    entry.bytes = Number.isSafeInteger(record.bytes) && record.bytes >= 0 ? record.bytes : null;
  }

  return {
    application,
    selector: selector ? { script: selector.script, deployment: selector.deployment } : null,
    scriptPointers,
    deployments: [...byFolder.values()],
    blobs: (await store.list(keys.runtimeBlobsPrefix(application), { recursive: true })).objects,
    images: (await store.list(keys.runtimeImagesPrefix(application), { recursive: true })).objects,
  };
}

// ---- deciding ----

export interface Verdict {
  entry: DeploymentEntry;
  remove: boolean;
  /** Why it stays (every reason that applies), or why it goes. */
  reasons: string[];
}

export interface Plan {
  verdicts: Verdict[];
  /** Deployments to delete, in deletion order (oldest first). */
  doomed: DeploymentEntry[];
  kept: DeploymentEntry[];
}

export interface PruneOptions {
  keep: number;
  windowMs: number;
  nowMs: number;
}

/** Deployments newest first by record time; no record counts as the oldest (rule 1). */
export function newestFirst(deployments: readonly DeploymentEntry[]): DeploymentEntry[] {
  return [...deployments].sort((a, b) => {
    if (a.hasRecord !== b.hasRecord) return a.hasRecord ? -1 : 1;
    if (a.hasRecord && b.hasRecord && a.createdMs !== b.createdMs) return b.createdMs! - a.createdMs!;
    return a.version < b.version ? 1 : a.version > b.version ? -1 : 0;
  });
}

/**
 * Orders deployments newest first (by record time; no record counts as the oldest) and weighs
 * each against the pointers (absolute), the count gate and the age gate (rules 1, 2, 5).
 */
export function planDeployments(layout: Layout, options: PruneOptions): Plan {
  const { keep, windowMs, nowMs } = options;
  const window = describeWindow(windowMs);
  const ordered = newestFirst(layout.deployments);
  const verdicts = ordered.map((entry, index): Verdict => {
    const reasons: string[] = [];
    if (layout.selector?.script === entry.script && layout.selector.deployment === entry.version) {
      reasons.push("the fleet's selector points at it");
    }
    if (layout.scriptPointers.get(entry.script) === entry.version)
      reasons.push(`the ${entry.script} pointer points at it`);
    if (index < keep) reasons.push(`within the newest ${keep} deployments`);
    const age = ageOf(entry, nowMs);
    if (windowMs > 0 && (age === null || age < windowMs)) reasons.push(`younger than ${window}`);
    if (reasons.length > 0) return { entry, remove: false, reasons };
    const why = !entry.hasManifest
      ? `a deploy in flight older than ${window}`
      : !entry.hasRecord
        ? 'no record: weighed as the oldest'
        : `past the newest ${keep} and older than ${window}`;
    return { entry, remove: true, reasons: [why] };
  });
  return {
    verdicts,
    doomed: verdicts
      .filter((v) => v.remove)
      .map((v) => v.entry)
      .reverse(),
    kept: verdicts.filter((v) => !v.remove).map((v) => v.entry),
  };
}

/**
 * A deployment's age. A complete deployment without a record is the oldest there is (rule 1);
 * a folder without a manifest is a deploy in flight, aged by its record or else its newest
 * object (rule 9). Null when nothing tells.
 */
function ageOf(entry: DeploymentEntry, nowMs: number): number | null {
  if (entry.hasRecord) return nowMs - entry.createdMs!;
  if (entry.hasManifest) return Number.POSITIVE_INFINITY;
  const newest = Math.max(...entry.objects.map((o) => o.modified.getTime()).filter(Number.isFinite));
  return Number.isFinite(newest) ? nowMs - newest : null;
}

/** What the kept deployments reference: blob content keys and image content keys (rules 3, 4). */
export interface References {
  blobs: Set<string>;
  images: Set<string>;
}

/** Reads the manifest and `assets.json` of each given deployment and collects what they name. */
export async function readReferences(
  store: Store,
  application: string,
  deployments: DeploymentEntry[],
  into: References = { blobs: new Set(), images: new Set() },
): Promise<References> {
  for (const entry of deployments) {
    let assetsExpected = entry.hasAssetsIndex;
    if (entry.hasManifest) {
      const key = keys.runtimeManifest(application, entry.script, entry.version);
      const object = await store.get(key);
      if (object) {
        const manifest = parseManifest(object.body);
        if (!manifest.ok) {
          if (manifest.unknown) throw unknownSchema(key, manifest.why);
          throw nonconforming(key, manifest.why);
        }
        const images = imageReferences(manifest.value as unknown as Record<string, unknown>);
        if (!images.ok) throw nonconforming(key, images.why);
        for (const image of images.value) into.images.add(image);
        if (manifest.value.assets !== null) {
          assetsExpected = true;
          if (!entry.hasAssetsIndex) {
            throw nonconforming(
              keys.runtimeAssetsIndex(application, entry.script, entry.version),
              'missing while its manifest names assets',
            );
          }
        }
      }
    }
    if (!assetsExpected) continue;
    const index = await readDocument(
      store,
      keys.runtimeAssetsIndex(application, entry.script, entry.version),
      parseAssetsIndex,
    );
    for (const file of Object.values(index?.files ?? {})) into.blobs.add(file.blob);
  }
  return into;
}

/** Old enough to collect: known age at or past the window; `0` lifts the gate (rule 6). */
function collectable(info: ObjectInfo, windowMs: number, nowMs: number): boolean {
  if (windowMs === 0) return true;
  const modified = info.modified.getTime();
  return Number.isFinite(modified) && nowMs - modified >= windowMs;
}

export function planBlobs(layout: Layout, references: References, options: PruneOptions): ObjectInfo[] {
  const prefix = keys.runtimeBlobsPrefix(layout.application);
  return layout.blobs.filter((info) => {
    const hash = info.key.slice(prefix.length);
    return (
      BLOB_PATTERN.test(hash) &&
      !references.blobs.has(hash) &&
      collectable(info, options.windowMs, options.nowMs)
    );
  });
}

export function planImages(layout: Layout, references: References, options: PruneOptions): ObjectInfo[] {
  const prefix = keys.runtimeImagesPrefix(layout.application);
  return layout.images.filter((info) => {
    const match = /^([0-9a-f]+)\.tar$/.exec(info.key.slice(prefix.length));
    return (
      match !== null &&
      !references.images.has(match[1]!) &&
      collectable(info, options.windowMs, options.nowMs)
    );
  });
}

// ---- the command ----

export interface PruneRun {
  store: Store;
  application: string;
  keep: number;
  windowMs: number;
  yes: boolean;
  dryRun: boolean;
  answerer: Answerer;
  nowMs: number;
  out: (line: string) => void;
  warn: (line: string) => void;
}

export interface PruneOutcome {
  deployments: string[];
  blobs: string[];
  images: string[];
  deleted: boolean;
}

/** Plans, prints, asks, deletes (rules 7 and 8). The capability guard runs before this. */
export async function prune(run: PruneRun): Promise<PruneOutcome> {
  const { store, application, out } = run;
  const options: PruneOptions = { keep: run.keep, windowMs: run.windowMs, nowMs: run.nowMs };
  if (run.windowMs === 0) {
    run.warn('--older-than 0 also lifts the age gate on blobs and images: a deploy in flight can be damaged');
  }
  const layout = await readLayout(store, application);
  const plan = planDeployments(layout, options);
  const references = await readReferences(store, application, plan.kept);
  const blobs = planBlobs(layout, references, options);
  const images = planImages(layout, references, options);

  out(`Deployments of ${application}: ${layout.deployments.length}, ${plan.doomed.length} to delete`);
  for (const verdict of plan.verdicts) {
    const { script, version } = verdict.entry;
    out(`  ${verdict.remove ? 'delete' : 'keep  '}  ${script}/${version}  ${verdict.reasons.join('; ')}`);
  }
  out(`Blobs: ${layout.blobs.length}, ${blobs.length} unreferenced and old enough to delete`);
  out(`Container images: ${layout.images.length}, ${images.length} unreferenced and old enough to delete`);
  const outcome: PruneOutcome = {
    deployments: plan.doomed.map((d) => `${d.script}/${d.version}`),
    blobs: blobs.map((b) => b.key),
    images: images.map((i) => i.key),
    deleted: false,
  };
  if (plan.doomed.length + blobs.length + images.length === 0) {
    out('Nothing to delete.');
    return outcome;
  }
  if (run.dryRun) {
    out('Dry run: nothing deleted.');
    return outcome;
  }
  const question = `Delete ${plan.doomed.length} deployment(s), ${blobs.length} blob(s) and ${images.length} image(s) of ${application}?`;
  if (!(await consent(question, { yes: run.yes, answerer: run.answerer }))) {
    out('Nothing deleted.');
    return outcome;
  }

  for (const entry of plan.doomed) {
    await deleteDeployment(store, application, entry);
    out(`deleted ${entry.script}/${entry.version}`);
  }
  // A publish that finished since the plan may reference a blob or image judged unreferenced.
  const known = new Set(layout.deployments.map((d) => `${d.script}/${d.version}`));
  const fresh = (await readLayout(store, application)).deployments.filter(
    (d) => !known.has(`${d.script}/${d.version}`),
  );
  await readReferences(store, application, fresh, references);
  let blobCount = 0;
  for (const blob of blobs) {
    if (references.blobs.has(blob.key.slice(keys.runtimeBlobsPrefix(application).length))) continue;
    await store.delete(blob.key);
    blobCount++;
  }
  let imageCount = 0;
  for (const image of images) {
    const key = image.key.slice(keys.runtimeImagesPrefix(application).length).replace(/\.tar$/, '');
    if (references.images.has(key)) continue;
    await store.delete(image.key);
    imageCount++;
  }
  out(
    `Deleted ${plan.doomed.length} deployment(s), ${blobCount} blob(s) and ${imageCount} image(s) of ${application}.`,
  );
  outcome.deleted = true;
  return outcome;
}

/**
 * Rule 8: both pointers are read again first and a pointer that moved onto this deployment
 * stops the run with nothing of it deleted; then the record, then its objects (manifest first,
 * so a half-deleted folder reads as a deploy in flight).
 */
async function deleteDeployment(store: Store, application: string, entry: DeploymentEntry): Promise<void> {
  const name = `${entry.script}/${entry.version}`;
  const selectorKey = keys.runtimeSelector(application);
  const selector = await readDocument(store, selectorKey, parsePointer);
  if (!selector) throw nonconforming(selectorKey, "the fleet's selector is missing");
  const inUse = (by: string) =>
    new Problem(
      'cas-conflict',
      'Deployment is in use again',
      `${by} now points at ${name}; nothing of it was deleted`,
    );
  if (selector.script === entry.script && selector.deployment === entry.version)
    throw inUse("the fleet's selector");
  const pointer = await readDocument(
    store,
    keys.runtimeScriptPointer(application, entry.script),
    parsePointer,
  );
  if (pointer && pointer.deployment === entry.version) throw inUse(`the ${entry.script} pointer`);

  await store.delete(keys.runtimeRecord(application, entry.script, entry.version));
  const folder = keys.runtimeDeployment(application, entry.script, entry.version);
  const objects = (await store.list(folder, { recursive: true })).objects.map((o) => o.key);
  const manifest = keys.runtimeManifest(application, entry.script, entry.version);
  for (const key of [...objects.filter((k) => k === manifest), ...objects.filter((k) => k !== manifest)]) {
    await store.delete(key);
  }
}
