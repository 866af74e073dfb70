// `cell publish --config <file>` (docs/runtime.md): run inside the
// staged, unpacked artifact; builds the worker, writes the deployment under
// `fleets/<name>/deploy/<script>/<version>/`, then moves the pointers. The write order is the
// layout's consistency rule (docs/runtime.md "Write order"): modules and blobs, `assets.json`,
// the record, the manifest (whose presence marks the deployment complete), the script's
// pointer, and last the fleet-wide selector, each pointer with a conditional write.

import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { keys } from '../../src/registry/keys.ts';
import { isApplicationName } from '../../src/registry/names.ts';
import { readPublishRequest } from '../../src/runtime-contract/environment.ts';
import {
  type AssetsIndex,
  type DeploymentRecord,
  durableObjectStorageKey,
  type Manifest,
  type ModuleEntry,
  type Pointer,
  parsePointer,
  SCHEMA_VERSION,
  type ServiceBinding,
} from '../../src/runtime-tools/layout.ts';
import { isCasConflict, type Store, type StoredObject } from '../../src/store/store.ts';
import { collectAssets } from './assets.ts';
import { openBucketFromEnv } from './bucket.ts';
import { buildWorker, bundleOptionsOf, isInside, sha256 } from './bundle.ts';
import { findConfig, readWorkerConfig } from './config.ts';
import { CellError } from './errors.ts';
import { proveLoads } from './load-check.ts';
import { ASSETS_ONLY_MODULE } from './router-worker.ts';
import { CELL_VERSION_LINE } from './version.ts';
import { maxCompatibilityDate } from './workerd.ts';

/** What the last stdout line names. */
export interface Published {
  application: string;
  script: string;
  deployment: string;
}

/**
 * A blob already in the bucket is re-written when older than this, so that a prune running
 * with a window longer than it cannot collect a blob this deployment is about to reference.
 */
const BLOB_REFRESH_MS = 3600_000;
const UPLOAD_CONCURRENCY = 8;
const POINTER_ATTEMPTS = 8;

export async function publish(options: {
  cwd: string;
  configPath: string | undefined;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}): Promise<Published> {
  const request = readPublishRequest(options.env);
  const application = request.application;
  if (!application) throw new CellError('CELL_APP is not set: name the application to publish to');
  if (!isApplicationName(application)) {
    throw new CellError(
      `CELL_APP ${JSON.stringify(application)} is no application name (1-63 lowercase letters, digits, single hyphens)`,
    );
  }
  const configPath = findConfig(options.cwd, options.configPath);
  const root = realpathSync(dirname(configPath));
  // Named as the user knows it (`cell.jsonc`), not by where the node staged it.
  const shownAs = isInside(options.cwd, configPath) ? relative(options.cwd, configPath) : configPath;
  const config = readWorkerConfig(configPath, { maxCompatibilityDate: maxCompatibilityDate(), shownAs });
  // One line each, `cell: warning: ` first: svc carries them to the user on the deploy record.
  for (const warning of config.warnings) options.log(`cell: warning: ${warning}`);
  const script = config.name ?? application;
  // svc names the application's secrets (never their values): a var may not shadow one.
  const secretNames = request.secretNames;
  const clash = Object.keys(config.vars).filter((name) => secretNames.includes(name));
  if (clash.length > 0) {
    throw new CellError(
      `${clash.join(', ')} is both a var in ${configPath} and a secret of ${application}; drop the var, or remove the secret with svc app secret remove`,
    );
  }

  const assetsDir = config.assets ? resolve(root, config.assets.directory) : null;
  let mainPath: string | null = null;
  if (config.main !== null) {
    mainPath = resolve(root, config.main);
    if (!isInside(root, mainPath))
      throw new CellError(`"main" must name a file inside the project, not ${config.main}`);
    try {
      mainPath = realpathSync(mainPath);
    } catch {
      throw new CellError(`"main" names ${config.main}, which does not exist in the project`);
    }
    if (!isInside(root, mainPath))
      throw new CellError(`"main" must name a file inside the project, not ${config.main}`);
  }

  const worker = mainPath
    ? await buildWorker(bundleOptionsOf(root, mainPath, config, assetsDir ? [assetsDir] : []))
    : assetsOnlyWorker();
  const assets = assetsDir
    ? collectAssets(root, assetsDir, { htmlHandling: config.assets?.html_handling })
    : null;
  for (const warning of assets?.warnings ?? []) options.log(`cell: warning: ${warning}`);

  const version = newVersion();
  const createdMs = Date.now();
  const modules: ModuleEntry[] = worker.modules.map((m) => ({
    name: m.name,
    type: m.type,
    size: m.bytes.byteLength,
    sha256: sha256(m.bytes),
  }));
  // A runtime that cannot apply run_worker_first or the rules must not serve the assets without them.
  const assetRules =
    (config.assets?.run_worker_first ?? false) !== false ||
    (assets !== null && (assets.headers.length > 0 || assets.redirects.length > 0));
  const hasQueues = config.queues.producers.length > 0 || config.queues.consumers.length > 0;
  const objects = config.durable_objects;
  const hasObjects = objects.classes.length > 0 || objects.deleted.length > 0;
  const features = [
    'modules',
    ...(assets ? ['assets'] : []),
    ...(assetRules ? ['asset-rules'] : []),
    ...(config.kv_namespaces.length > 0 ? ['kv'] : []),
    ...(config.r2_buckets.length > 0 ? ['r2'] : []),
    ...(config.services.length > 0 ? ['services'] : []),
    ...(config.services.some(
      (s) =>
        s.service !== application &&
        s.service !== script &&
        (s.entrypoint !== undefined || s.props !== undefined),
    )
      ? ['service-entrypoints']
      : []),
    ...(config.d1_databases.length > 0 ? ['d1'] : []),
    ...(hasQueues ? ['queues'] : []),
    ...(hasObjects ? ['durable-objects'] : []),
  ];
  const manifest: Manifest = {
    schema_version: SCHEMA_VERSION,
    required_features: features,
    application,
    script,
    deployment: version,
    created_ms: createdMs,
    runtime: CELL_VERSION_LINE,
    main_module: worker.mainModule,
    modules,
    compatibility_date: config.compatibility_date,
    compatibility_flags: config.compatibility_flags,
    vars: config.vars,
    assets: config.assets
      ? {
          binding: config.assets.binding,
          html_handling: config.assets.html_handling,
          not_found_handling: config.assets.not_found_handling,
          run_worker_first: config.assets.run_worker_first ?? false,
        }
      : null,
    ...(config.crons.length > 0 ? { crons: config.crons } : {}),
    ...(config.kv_namespaces.length > 0 ? { kv_namespaces: config.kv_namespaces } : {}),
    ...(config.r2_buckets.length > 0 ? { r2_buckets: config.r2_buckets } : {}),
    ...(config.services.length > 0 ? { services: config.services } : {}),
    ...(config.d1_databases.length > 0 ? { d1_databases: config.d1_databases } : {}),
    ...(hasQueues ? { queues: config.queues } : {}),
    ...(hasObjects
      ? {
          durable_objects: {
            bindings: objects.bindings,
            classes: objects.classes.map((c) => ({
              class_name: c.class_name,
              storage_key: durableObjectStorageKey(application, c.first_name),
              sql: c.sql,
            })),
            deleted: objects.deleted.map((c) => ({
              class_name: c.class_name,
              storage_key: durableObjectStorageKey(application, c.first_name),
            })),
          },
        }
      : {}),
  };

  // The load check runs while the code and the assets go up under the new deployment's own keys,
  // which nothing names until its record, its manifest and the pointers are written: those wait
  // for the check. A worker that fails it is published nowhere (docs/runtime.md "The worker
  // config", its load check): the modules written meanwhile are deleted, new blobs left to prune.
  options.log(`cell: checking that ${script} loads in workerd`);
  const codeBytes = worker.modules.reduce((sum, m) => sum + m.bytes.byteLength, 0);
  const opened = openBucketFromEnv(options.env);
  const [checked, uploaded] = await Promise.allSettled([
    proveLoads({
      manifest,
      code: new Map(worker.modules.map((m) => [m.name, m.bytes])),
      env: options.env,
    }),
    opened.then(async (store) => {
      await warnUnknownServices(store, config.services, application, script, options.log);
      options.log(`cell: publishing ${application}/${script} deployment ${version} to ${store.description}`);
      await uploadContent(store, { application, script, version }, worker.modules, assets, options.log);
    }),
  ]);
  const store = await opened.catch(() => null);
  try {
    // The check's verdict comes first: a worker that cannot serve is that, whatever the bucket did.
    if (checked.status === 'rejected') {
      if (store) await forgetModules(store, { application, script, version }, worker.modules);
      throw checked.reason;
    }
    if (uploaded.status === 'rejected' || store === null) throw (uploaded as PromiseRejectedResult).reason;

    const record: DeploymentRecord = {
      schema_version: SCHEMA_VERSION,
      application,
      script,
      deployment: version,
      created_ms: createdMs,
      runtime: CELL_VERSION_LINE,
      modules: modules.length,
      assets: assets ? Object.keys(assets.files).length : 0,
      bytes: codeBytes + (assets ? [...assets.blobs.values()].reduce((s, b) => s + b.byteLength, 0) : 0),
      ...(request.deploy ? { deploy: request.deploy } : {}),
    };
    // The writes keep their order (docs/runtime.md "Write order"); the pointers are read while
    // the record and the manifest are written, which on a remote bucket saves two round trips.
    const scriptPointer = keys.runtimeScriptPointer(application, script);
    const selector = keys.runtimeSelector(application);
    const readScriptPointer = readAhead(store, scriptPointer);
    const readSelector = readAhead(store, selector);
    await store.put(keys.runtimeRecord(application, script, version), JSON.stringify(record), {
      ifNoneMatch: '*',
    });
    await store.put(keys.runtimeManifest(application, script, version), JSON.stringify(manifest), {
      ifNoneMatch: '*',
    });

    await movePointer(store, scriptPointer, script, version, readScriptPointer);
    await movePointer(store, selector, script, version, readSelector);
    options.log(`cell: the fleet's selector now points at ${script}/${version}`);
  } finally {
    await store?.close();
  }
  return { application, script, deployment: version };
}

/** Where one deployment's objects go. */
interface DeploymentKeys {
  application: string;
  script: string;
  version: string;
}

/** The deployment's modules, then its assets' blobs and `assets.json`: all of it under its own keys. */
async function uploadContent(
  store: Store,
  at: DeploymentKeys,
  modules: readonly { name: string; bytes: Uint8Array }[],
  assets: ReturnType<typeof collectAssets> | null,
  log: (line: string) => void,
): Promise<void> {
  const { application, script, version } = at;
  await inParallel([...modules], (m) =>
    store.put(keys.runtimeModule(application, script, version, m.name), m.bytes, { ifNoneMatch: '*' }),
  );
  const codeBytes = modules.reduce((sum, m) => sum + m.bytes.byteLength, 0);
  log(`cell: uploaded ${modules.length} module(s), ${codeBytes} bytes`);
  if (!assets) return;
  const uploaded = await uploadBlobs(store, application, assets.blobs);
  log(`cell: ${Object.keys(assets.files).length} asset(s), ${uploaded} new blob(s) uploaded`);
  const index: AssetsIndex = {
    schema_version: SCHEMA_VERSION,
    required_features: [],
    files: assets.files,
    ...(assets.headers.length > 0 ? { headers: assets.headers } : {}),
    ...(assets.redirects.length > 0 ? { redirects: assets.redirects } : {}),
  };
  await store.put(keys.runtimeAssetsIndex(application, script, version), JSON.stringify(index), {
    ifNoneMatch: '*',
  });
}

/** Deletes what a refused deployment wrote beside its blobs, as far as the bucket lets it. */
async function forgetModules(
  store: Store,
  at: DeploymentKeys,
  modules: readonly { name: string }[],
): Promise<void> {
  const { application, script, version } = at;
  const written = [
    ...modules.map((m) => keys.runtimeModule(application, script, version, m.name)),
    keys.runtimeAssetsIndex(application, script, version),
  ];
  await inParallel(written, (key) => store.delete(key).catch(() => false));
}

/**
 * A version is hex: the creation time in milliseconds (12 digits, so versions sort by age)
 * and 32 random bits against two publishes in one millisecond.
 */
export function newVersion(nowMs = Date.now()): string {
  return nowMs.toString(16).padStart(12, '0') + randomBytes(4).toString('hex');
}

/** A read started before it is needed; one that fails is made again when it is (movePointer). */
export function readAhead(store: Store, key: string): Promise<StoredObject | null | undefined> {
  return store.get(key).catch(() => undefined);
}

/**
 * Points a pointer at the new deployment with a conditional write on what was read, so a
 * racing writer is noticed; the publish that read last wins, never an interleaving of two.
 * `readFirst` is the pointer as read ahead (undefined: that read failed): the first attempt
 * writes on it, so a writer that moved the pointer since is noticed as any racing writer.
 */
export async function movePointer(
  store: Store,
  key: string,
  script: string,
  deployment: string,
  readFirst: Promise<StoredObject | null | undefined>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const ahead = attempt === 1 ? await readFirst : undefined;
    const current = ahead === undefined ? await store.get(key) : ahead;
    if (current) {
      const parsed = parsePointer(current.body);
      // An unreadable pointer is replaced: the publish is the operator's newest intent.
      if (parsed.ok && parsed.value.script === script && parsed.value.deployment === deployment) return;
    }
    const pointer: Pointer = { schema_version: SCHEMA_VERSION, script, deployment, moved_ms: Date.now() };
    try {
      await store.put(
        key,
        JSON.stringify(pointer),
        current ? { ifMatch: current.etag } : { ifNoneMatch: '*' },
      );
      return;
    } catch (err) {
      if (!isCasConflict(err) || attempt >= POINTER_ATTEMPTS) {
        if (isCasConflict(err)) {
          throw new CellError(
            `${key} kept changing under ${POINTER_ATTEMPTS} attempts to move it; publish again`,
          );
        }
        throw err;
      }
    }
  }
}

async function uploadBlobs(
  store: Store,
  application: string,
  blobs: Map<string, Uint8Array>,
): Promise<number> {
  let uploaded = 0;
  await inParallel([...blobs.entries()], async ([hash, bytes]) => {
    const key = keys.runtimeBlob(application, hash);
    const existing = await store.stat(key);
    // Content-addressed: the same key always holds the same bytes, so a write is never a conflict.
    if (
      existing &&
      existing.size === bytes.byteLength &&
      Date.now() - existing.modified.getTime() < BLOB_REFRESH_MS
    ) {
      return;
    }
    await store.put(key, bytes);
    uploaded++;
  });
  return uploaded;
}

/** A deployment of assets alone: every request that no asset answers is a 404. */
function assetsOnlyWorker() {
  const source = "export default { fetch() { return new Response('Not Found', { status: 404 }); } };\n";
  return {
    mainModule: ASSETS_ONLY_MODULE,
    modules: [{ name: ASSETS_ONLY_MODULE, type: 'esm' as const, bytes: new TextEncoder().encode(source) }],
  };
}

async function inParallel<T>(items: T[], work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(UPLOAD_CONCURRENCY, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await work(item);
    }
  });
  await Promise.all(runners);
}

/** Warns of each service binding naming an application the fleet does not have (yet). */
async function warnUnknownServices(
  store: Store,
  services: ServiceBinding[],
  application: string,
  script: string,
  log: (line: string) => void,
): Promise<void> {
  for (const s of services) {
    if (s.service === application || s.service === script) continue;
    if (await store.stat(keys.application(s.service))) continue;
    log(
      `cell: warning: service binding ${s.binding} names "${s.service}", which is no application of this fleet: its calls are answered 503 until "${s.service}" is deployed`,
    );
  }
}
