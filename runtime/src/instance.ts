// One deployment on this machine: its files fetched from the bucket into a local folder from
// which workerd serves them on a private Unix socket (an instance never listens on a port).
// `materialize` writes that folder, for `cell serve` (the runtime host's look, follower.ts) and
// for `cell publish`'s load check (load-check.ts); in both, the front starts, probes and stops
// workerd there (runtime/front/instance.go, docs/runtime.md).

import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { keys } from '../../src/registry/keys.ts';
import { egressEntriesFor } from '../../src/runtime-contract/egress.ts';
import { GEOIP_DB_VARIABLE, OBJECTS_DIR_VARIABLE } from '../../src/runtime-contract/environment.ts';
import {
  isModulePath,
  type Manifest,
  parseAssetsIndex,
  type ServiceBinding,
} from '../../src/runtime-tools/layout.ts';
import type { Store } from '../../src/store/store.ts';
import { routerConfig } from './asset-rules.ts';
import { D1_SOCKET } from './bindings/r2-headers.ts';
import { SERVICES_SOCKET } from './bindings/service-headers.ts';
import { applicationRpcKey, unusedRpcKey } from './bindings/service-rpc.ts';
import { egressRanges } from './egress.ts';
import { CellError } from './errors.ts';
import { ROUTER_MODULE, ROUTER_SOURCE } from './router-worker.ts';
import { CRON_MODULE, CRON_SOURCE, renderWorkerdConfig, type WorkerdPlan } from './workerd.ts';

/** The secrets a deployment is started with, and a digest that changes when any of them does. */
export interface Secrets {
  values: Record<string, string>;
  digest: string;
}

export const NO_SECRETS: Secrets = { values: {}, digest: '' };

/**
 * The Cache API's socket in the instance's folder (docs/runtime.md "Cache API"): the front listens
 * on it while the instance runs, and removes it when the instance stops. The front names it too:
 * runtime/front/cache.go `cacheSocketName`.
 */
export const CACHE_SOCKET = 'cache.sock';

/** Where instance number `n` lives: its folder, its HTTP socket, and its trigger socket if it has crons. */
export interface InstancePaths {
  dir: string;
  socketPath: string;
  /** The trigger worker's socket, when the deployment has cron triggers. */
  cronSocketPath: string | null;
  /**
   * The queue trigger's socket, when the deployment consumes queues: inside the instance's folder,
   * so it goes with the folder (docs/bindings.md "Queues").
   */
  queueSocketPath: string | null;
  /**
   * Where workerd sends the worker's Cache API calls: inside the instance's folder, answered by the
   * front while the instance runs (`CACHE_SOCKET`).
   */
  cacheSocketPath: string;
}

export function instancePaths(stateDir: string, n: number, manifest: Manifest): InstancePaths {
  const socketPath = join(stateDir, `w${n}.sock`);
  return {
    dir: join(stateDir, `d${n}`),
    socketPath,
    cronSocketPath: (manifest.crons ?? []).length > 0 ? socketPath.replace(/\.sock$/, '-cron.sock') : null,
    queueSocketPath:
      (manifest.queues?.consumers ?? []).length > 0 ? join(stateDir, `d${n}`, 'queues.sock') : null,
    cacheSocketPath: join(stateDir, `d${n}`, CACHE_SOCKET),
  };
}

/** workerd's arguments, run from the instance's folder. */
export function workerdArgs(paths: InstancePaths): string[] {
  // The trigger workers' flag is experimental in workerd; only a deployment with crons or queue
  // consumers needs it.
  const experimental = paths.cronSocketPath || paths.queueSocketPath;
  return ['serve', ...(experimental ? ['--experimental'] : []), 'config.capnp'];
}

/** What `materialize` reads from: the bucket (null when the code is handed over) and the state folder. */
export interface MaterializeContext {
  store: Store | null;
  application: string;
  /** The process's private folder: instances, sockets and the blob cache live here. */
  stateDir: string;
  /** The runtime's `CELL_*` variables (the egress allowance), as `cell serve` was given them. */
  env: NodeJS.ProcessEnv;
  /** Where a line about the instance goes (the application's output). */
  log: (line: string) => void;
  /**
   * The path of the runtime host's bindings socket (KV and R2, runtime/src/bindings/), asked only
   * of a deployment with bindings; absent for the publish load check, whose worker starts but
   * reaches no KV or R2 data.
   */
  bindingsSocket?: () => Promise<string>;
  /**
   * The folder workerd keeps the deployment's Durable Objects in (workerd.ts `WorkerdPlan`
   * `durableObjects` says what it writes there), asked only of a deployment with Durable Objects;
   * absent: `objectsDir(env, application)`. The publish load check names a throwaway one.
   */
  durableObjectsDir?: (deletedStorageKeys: string[]) => Promise<string>;
}

/**
 * Where `cell serve` keeps an application's Durable Objects unless told otherwise:
 * `<CELL_OBJECTS_DIR>/<application>/` (a node daemon names a folder of its state directory), else
 * `<CELL_STATE_DIR>/objects/<application>/` (else under the system temp), so a restarted process
 * finds them (docs/bindings.md "Durable Objects").
 */
export function objectsDir(env: NodeJS.ProcessEnv, application: string): string {
  if (env[OBJECTS_DIR_VARIABLE]) return join(env[OBJECTS_DIR_VARIABLE], application);
  return join(env.CELL_STATE_DIR || tmpdir(), 'objects', application);
}

/**
 * Writes modules, vars, secrets, assets and the workerd config into the instance's folder, and
 * removes stale sockets at its socket paths: afterwards workerd can be started there. With `code`
 * (module name to bytes) nothing is read from the bucket and assets are left out. The one place
 * an instance folder is written: `cell serve` (through the runtime host) and the publish load check.
 */
export async function materialize(
  context: MaterializeContext,
  manifest: Manifest,
  secrets: Secrets,
  paths: InstancePaths,
  code?: ReadonlyMap<string, Uint8Array>,
): Promise<void> {
  const { store, application } = context;
  const m = manifest;
  const { dir } = paths;
  const label = `${m.script}/${m.deployment}`;
  await mkdir(dir, { recursive: true });
  const plan: WorkerdPlan = {
    address: `unix:${paths.socketPath}`,
    modules: [],
    compatibilityDate: m.compatibility_date,
    compatibilityFlags: m.compatibility_flags,
    vars: [],
    assets: null,
    // The front answers it (runtime/front/cache.go); in the publish load check too, as it starts
    // the worker with the same code.
    cacheAddress: `unix:${paths.cacheSocketPath}`,
  };
  for (const module of m.modules) {
    if (!isModulePath(module.name))
      throw new CellError(`module name ${JSON.stringify(module.name)} is unsafe`);
    const bytes = code ? code.get(module.name) : await readModule(store, application, m, module.name);
    if (!bytes) throw new CellError(`module ${module.name} is missing`);
    if (sha256(bytes) !== module.sha256)
      throw new CellError(`module ${module.name} does not match its manifest's checksum`);
    const file = join('modules', module.name);
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await writeFile(join(dir, file), bytes);
    plan.modules.push({ name: module.name, type: module.type, file });
  }
  // The main module must come first: workerd takes the first module as the entry point.
  plan.modules.sort((a, b) => Number(b.name === m.main_module) - Number(a.name === m.main_module));

  await mkdir(join(dir, 'vars'));
  for (const [i, [name, value]] of Object.entries(m.vars).entries()) {
    const text = typeof value === 'string';
    const file = join('vars', `${i}.${text ? 'txt' : 'json'}`);
    await writeFile(join(dir, file), text ? value : JSON.stringify(value));
    plan.vars.push({ name, kind: text ? 'text' : 'json', file });
  }
  // Secrets are text bindings like wrangler's; each value sits in an owner-only file.
  const clash = Object.keys(secrets.values).filter((name) => Object.hasOwn(m.vars, name));
  if (clash.length > 0) {
    throw new CellError(
      `${clash.join(', ')} is both a var of ${label} and a secret; remove the secret (svc app secret remove) or the var, then deploy again`,
    );
  }
  const bindingKinds = [
    { what: 'a KV namespace binding', names: (m.kv_namespaces ?? []).map((n) => n.binding) },
    { what: 'an R2 bucket binding', names: (m.r2_buckets ?? []).map((b) => b.binding) },
    { what: 'a service binding', names: (m.services ?? []).map((s) => s.binding) },
    { what: 'a D1 database binding', names: (m.d1_databases ?? []).map((d) => d.binding) },
    { what: 'a queue producer binding', names: (m.queues?.producers ?? []).map((p) => p.binding) },
    { what: 'a Durable Object binding', names: (m.durable_objects?.bindings ?? []).map((b) => b.name) },
  ];
  for (const { what, names } of bindingKinds) {
    const clashing = names.filter((name) => Object.hasOwn(secrets.values, name));
    if (clashing.length > 0)
      throw new CellError(
        `${clashing.join(', ')} is both ${what} of ${label} and a secret; remove the secret (svc app secret remove) or rename the binding, then deploy again`,
      );
  }
  await mkdir(join(dir, 'secrets'), { mode: 0o700 });
  for (const [i, [name, value]] of Object.entries(secrets.values).entries()) {
    const file = join('secrets', `${i}.txt`);
    await writeFile(join(dir, file), value, { mode: 0o600 });
    plan.vars.push({ name, kind: 'text', file });
  }

  if (m.assets && store) {
    const key = keys.runtimeAssetsIndex(application, m.script, m.deployment);
    const object = await store.get(key);
    if (!object) throw new CellError(`${key} is missing from the bucket`);
    const index = parseAssetsIndex(object.body);
    if (!index.ok) throw new CellError(`${key} cannot be used: ${index.why}`);
    const blobsDir = join(context.stateDir, 'blobs');
    await mkdir(blobsDir, { recursive: true });
    const hashes = [...new Set(Object.values(index.value.files).map((f) => f.blob))];
    await fetchBlobs(store, application, hashes, blobsDir);
    await writeFile(join(dir, 'assets-files.json'), JSON.stringify(index.value.files));
    await writeFile(
      join(dir, 'assets-config.json'),
      JSON.stringify(
        routerConfig(m.assets, { date: m.compatibility_date, flags: m.compatibility_flags }, index.value),
      ),
    );
    await writeFile(join(dir, ROUTER_MODULE), ROUTER_SOURCE);
    plan.assets = {
      filesJson: 'assets-files.json',
      configJson: 'assets-config.json',
      blobsDir,
      binding: m.assets.binding,
    };
  }
  const namespaces = m.kv_namespaces ?? [];
  const buckets = m.r2_buckets ?? [];
  const otherServices = (m.services ?? []).filter((s) => !isOwnService(s, m));
  if (otherServices.length > 0) {
    // The services socket sits beside the bindings socket (docs/bindings.md "Service bindings").
    const bindings = context.bindingsSocket ? await context.bindingsSocket() : join(dir, 'no-bindings.sock');
    plan.otherServices = {
      address: `unix:${join(dirname(bindings), SERVICES_SOCKET)}`,
      application,
      bindings: [],
    };
    await mkdir(join(dir, 'other-services'));
    for (const [i, s] of otherServices.entries()) {
      const propsFile = s.props ? join('other-services', `${i}.json`) : undefined;
      if (propsFile) await writeFile(join(dir, propsFile), JSON.stringify(s.props));
      plan.otherServices.bindings.push({
        binding: s.binding,
        service: s.service,
        ...(s.entrypoint ? { entrypoint: s.entrypoint } : {}),
        ...(propsFile ? { propsFile } : {}),
      });
    }
  }
  // Any application may be called over JS RPC: its key comes from the bucket; without one (the
  // publish load check) a fresh key nothing knows (docs/bindings.md "Service bindings").
  plan.serviceRpcKey = store ? await applicationRpcKey(store, application) : unusedRpcKey();
  const databases = m.d1_databases ?? [];
  if (namespaces.length > 0 || buckets.length > 0 || databases.length > 0) {
    // Without a host (the load check) the bindings point at a socket nothing listens on: the
    // worker loads, and a KV, R2 or D1 call during the check fails instead of reaching any data.
    const socket = context.bindingsSocket ? await context.bindingsSocket() : join(dir, 'no-bindings.sock');
    if (namespaces.length > 0) plan.kv = { address: `unix:${socket}`, application, namespaces };
    if (buckets.length > 0) plan.r2 = { address: `unix:${socket}`, application, buckets };
    // The D1 socket sits beside the bindings socket (docs/bindings.md "D1 databases").
    if (databases.length > 0)
      plan.d1 = { address: `unix:${join(dirname(socket), D1_SOCKET)}`, application, databases };
  }
  const producers = m.queues?.producers ?? [];
  if (producers.length > 0) {
    // Queue producers are served on the bindings socket (docs/bindings.md "Queues").
    const socket = context.bindingsSocket ? await context.bindingsSocket() : join(dir, 'no-bindings.sock');
    plan.queues = { address: `unix:${socket}`, application, producers };
  }
  if (paths.queueSocketPath) plan.queueTriggerAddress = `unix:${paths.queueSocketPath}`;
  const ownServices = (m.services ?? []).filter((s) => isOwnService(s, m));
  if (ownServices.length > 0) {
    await mkdir(join(dir, 'services'));
    plan.ownServices = [];
    for (const [i, s] of ownServices.entries()) {
      const propsFile = s.props ? join('services', `${i}.json`) : undefined;
      if (propsFile) await writeFile(join(dir, propsFile), JSON.stringify(s.props));
      plan.ownServices.push({
        binding: s.binding,
        ...(s.entrypoint ? { entrypoint: s.entrypoint } : {}),
        ...(propsFile ? { propsFile } : {}),
      });
    }
  }
  const objects = m.durable_objects;
  if (objects) {
    const storageDir = context.durableObjectsDir
      ? await context.durableObjectsDir(objects.deleted.map((d) => d.storage_key))
      : objectsDir(context.env, application);
    await mkdir(storageDir, { recursive: true, mode: 0o700 });
    // A deleted_classes migration drops the class's objects (storage keys name no path but a folder).
    for (const gone of objects.deleted)
      await rm(join(storageDir, gone.storage_key), { recursive: true, force: true });
    if (objects.classes.length > 0)
      plan.durableObjects = {
        storageDir,
        main: m.main_module,
        classes: objects.classes.map((c) => ({
          className: c.class_name,
          uniqueKey: c.storage_key,
          sql: c.sql,
        })),
        bindings: objects.bindings.map((b) => ({ binding: b.name, className: b.class_name })),
      };
  }
  plan.egressAllow = await egressRanges(egressEntriesFor(context.env, application), context.log);
  // The front fills request.cf from the GeoIP database, when there is one (front/geoip.go).
  if (context.env[GEOIP_DB_VARIABLE]) plan.cfBlob = true;
  if (paths.cronSocketPath) {
    await writeFile(join(dir, CRON_MODULE), CRON_SOURCE);
    plan.cronAddress = `unix:${paths.cronSocketPath}`;
  }
  await writeFile(join(dir, 'config.capnp'), renderWorkerdConfig(plan));
  await rm(paths.socketPath, { force: true });
  if (paths.cronSocketPath) await rm(paths.cronSocketPath, { force: true });
}

/** A binding to the deployment's own worker: its script name, or its application's name. */
export function isOwnService(binding: ServiceBinding, m: Manifest): boolean {
  return binding.service === m.script || binding.service === m.application;
}

async function readModule(
  store: Store | null,
  application: string,
  m: Manifest,
  name: string,
): Promise<Uint8Array> {
  if (!store) throw new CellError(`module ${name} has no source`);
  const key = keys.runtimeModule(application, m.script, m.deployment, name);
  const object = await store.get(key);
  if (!object) throw new CellError(`${key} is missing from the bucket`);
  return object.body;
}

/** Fetches each blob not cached yet, checking it against its content key. */
async function fetchBlobs(
  store: Store,
  application: string,
  hashes: string[],
  blobsDir: string,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < hashes.length) {
      const hash = hashes[next++]!;
      const path = join(blobsDir, hash);
      if (existsSync(path)) continue;
      const key = keys.runtimeBlob(application, hash);
      const object = await store.get(key);
      if (!object) throw new CellError(`${key} is missing from the bucket`);
      if (sha256(object.body) !== hash) throw new CellError(`${key} does not match its content key`);
      const temporary = `${path}.${process.pid}.tmp`;
      await writeFile(temporary, object.body);
      await rename(temporary, path);
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, hashes.length) }, worker));
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
