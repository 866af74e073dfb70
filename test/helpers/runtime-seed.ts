// Seeds the runtime's storage layout (docs/runtime.md "Storage layout") into a real store, for
// the prune and lease tests: deployments with or without record, manifest and assets, blobs,
// container images, pointers, and the node records the capability guard reads.

import { createHash } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { keys } from '../../src/registry/keys.ts';
import type { NodeRecord } from '../../src/registry/records.ts';
import { SCHEMA_VERSION } from '../../src/runtime-tools/layout.ts';
import type { Store } from '../../src/store/store.ts';

export const DAY_MS = 86_400_000;

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Writes a blob under `deploy-blobs/` and answers its content key. */
export async function seedBlob(store: Store, app: string, content: string): Promise<string> {
  const hash = sha256(content);
  await store.put(keys.runtimeBlob(app, hash), content);
  return hash;
}

export interface SeedDeployment {
  script: string;
  version: string;
  /** Record time; null writes no record. */
  createdMs: number | null;
  /** false leaves the folder without a manifest: a deploy in flight. */
  manifest?: boolean;
  /** Blob content keys the deployment's assets.json names; undefined writes no assets. */
  blobs?: string[];
  /** Manifest fields to add or override (containers, fence_image, required_features...). */
  manifestExtra?: Record<string, unknown>;
  /** Raw assets.json body instead of a generated one. */
  assetsBody?: string;
}

/** Writes one deployment in publish order: module, assets.json, record, manifest. */
export async function seedDeployment(store: Store, app: string, d: SeedDeployment): Promise<void> {
  const code = `export default { fetch() { return new Response(${JSON.stringify(d.version)}); } };`;
  await store.put(keys.runtimeModule(app, d.script, d.version, 'index.js'), code);
  const withAssets = d.blobs !== undefined || d.assetsBody !== undefined;
  if (withAssets) {
    const files = Object.fromEntries(
      (d.blobs ?? []).map((blob, i) => [`/f${i}.txt`, { blob, size: 1, content_type: 'text/plain' }]),
    );
    await store.put(
      keys.runtimeAssetsIndex(app, d.script, d.version),
      d.assetsBody ?? JSON.stringify({ schema_version: SCHEMA_VERSION, required_features: [], files }),
    );
  }
  if (d.createdMs !== null) {
    await store.put(
      keys.runtimeRecord(app, d.script, d.version),
      JSON.stringify({
        schema_version: SCHEMA_VERSION,
        application: app,
        script: d.script,
        deployment: d.version,
        created_ms: d.createdMs,
        runtime: 'cell 0.6.2',
        modules: 1,
        assets: d.blobs?.length ?? 0,
        bytes: code.length,
      }),
    );
  }
  if (d.manifest === false) return;
  const manifest = {
    schema_version: SCHEMA_VERSION,
    required_features: withAssets ? ['modules', 'assets'] : ['modules'],
    application: app,
    script: d.script,
    deployment: d.version,
    created_ms: d.createdMs ?? 0,
    runtime: 'cell 0.6.2',
    main_module: 'index.js',
    modules: [{ name: 'index.js', type: 'esm', size: code.length, sha256: sha256(code) }],
    compatibility_date: '2025-06-01',
    compatibility_flags: [],
    vars: {},
    assets: withAssets
      ? { binding: null, html_handling: 'auto-trailing-slash', not_found_handling: 'none' }
      : null,
    ...d.manifestExtra,
  };
  await store.put(keys.runtimeManifest(app, d.script, d.version), JSON.stringify(manifest));
}

export async function seedPointer(
  store: Store,
  key: string,
  script: string,
  deployment: string,
): Promise<void> {
  await store.put(
    key,
    JSON.stringify({ schema_version: SCHEMA_VERSION, script, deployment, moved_ms: Date.now() }),
  );
}

export const seedSelector = (store: Store, app: string, script: string, deployment: string) =>
  seedPointer(store, keys.runtimeSelector(app), script, deployment);

export const seedScriptPointer = (store: Store, app: string, script: string, deployment: string) =>
  seedPointer(store, keys.runtimeScriptPointer(app, script), script, deployment);

/** A node record as the daemon writes it; `cell` undefined reports no runtime release. */
export async function seedNode(
  store: Store,
  id: string,
  options: { cell?: string; beatMs?: number } = {},
): Promise<void> {
  const record: NodeRecord = {
    v: 1,
    id,
    advertise: '127.0.0.1:7311',
    listen: '127.0.0.1:7311',
    labels: {},
    versions: options.cell === undefined ? { svc: '0.1.0' } : { svc: '0.1.0', cell: options.cell },
    state: 'ready',
    beatMs: options.beatMs ?? Date.now(),
    startedAt: new Date().toISOString(),
    processes: [],
  };
  await store.put(keys.nodeRecord(id), JSON.stringify(record));
}

/**
 * Ages an object of the local-directory bucket: that store reports a file's mtime as the
 * object's modified time (src/store/dir.ts), and `<root>/<key>~` is the file for plain keys.
 */
export async function ageObject(root: string, key: string, modifiedMs: number): Promise<void> {
  const when = new Date(modifiedMs);
  await utimes(`${join(root, ...key.split('/'))}~`, when, when);
}
