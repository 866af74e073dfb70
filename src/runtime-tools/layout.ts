// The documents the runtime keeps under `fleets/<name>/` (docs/runtime.md; layout and schemas in docs/runtime.md): their shapes, the features a reader must
// understand, and the strict parsers both `cell` and the svc storage tools (prune, lease) use.
// A parser answers a value or a reason; callers turn the reason into their own refusal.

import { createHash } from 'node:crypto';
import {
  isApplicationName,
  isD1DatabaseName,
  isQueueName,
  isR2BucketName,
  isScriptName,
} from '../registry/names.ts';

/** The one schema version of every runtime document this release writes and reads. */
export const SCHEMA_VERSION = 1;

/**
 * Required features a reader must understand before acting on a manifest or `assets.json`.
 * `modules`: code under `modules/`; `assets`: static files content-addressed in `deploy-blobs/`;
 * `containers`: container images under `deploy/images/` named by `containers[].image` and
 * `fence_image` (written by no release of `cell` yet, but understood by prune); `asset-rules`:
 * `run_worker_first`, `_headers` or `_redirects` rules a reader must apply to serve the assets;
 * `kv`: `kv_namespaces` bindings the runtime must serve (a runtime without them must not start
 * the worker, whose KV calls would fail); `r2`: `r2_buckets` bindings, alike; `services`:
 * `services` bindings (docs/bindings.md "Service bindings"), alike; `d1`: `d1_databases` bindings, alike;
 * `queues`: `queues` producers and consumers (docs/bindings.md "Queues"), alike;
 * `durable-objects`: `durable_objects` bindings and the classes `migrations` create
 * (docs/bindings.md "Durable Objects"), alike; `service-entrypoints`: a service binding to another
 * application with `entrypoint` or `props`, which a runtime without JS RPC across applications
 * would send to the default export without them.
 */
export const KNOWN_FEATURES: readonly string[] = [
  'modules',
  'assets',
  'containers',
  'asset-rules',
  'kv',
  'r2',
  'services',
  'd1',
  'queues',
  'durable-objects',
  'service-entrypoints',
];

/** Runtime releases the storage tools (prune, lease) were verified against (docs/cli.md). */
export const VERIFIED_RUNTIME_RELEASES: readonly string[] = [
  '0.5.0',
  '0.5.1',
  '0.6.0',
  '0.6.1',
  '0.6.2',
  '0.7.0',
  '0.8.0',
  '0.8.1',
];

/** A deployment version: lowercase hex, as `cell publish` writes it. */
export const VERSION_PATTERN = /^[0-9a-f]{1,64}$/;
/** A content key: the lowercase hex SHA-256 of a blob's bytes. */
export const BLOB_PATTERN = /^[0-9a-f]{64}$/;
/** A container image reference inside a manifest. */
export const IMAGE_REFERENCE = /^cell-image:([0-9a-f]+)$/;

/** One module of a deployment, stored at `deploy/<script>/<version>/modules/<name>`. */
export interface ModuleEntry {
  name: string;
  type: ModuleType;
  size: number;
  sha256: string;
}

export type ModuleType = 'esm' | 'commonjs' | 'text' | 'data' | 'wasm' | 'json';
export const MODULE_TYPES: readonly ModuleType[] = ['esm', 'commonjs', 'text', 'data', 'wasm', 'json'];

/** How static assets are matched, as wrangler's `assets` keys say. */
export interface AssetsConfig {
  /** Binding name the worker reaches the assets through, or null. */
  binding: string | null;
  html_handling: 'auto-trailing-slash' | 'force-trailing-slash' | 'drop-trailing-slash' | 'none';
  not_found_handling: 'none' | '404-page' | 'single-page-application';
  /** true, false, or route patterns (`!` for those kept on assets); absent means false. */
  run_worker_first?: boolean | string[];
}

/** One Workers KV binding: the worker's binding name and the namespace id its keys live under. */
export interface KvNamespaceBinding {
  binding: string;
  id: string;
}

/** A KV namespace id: 1-64 of [A-Za-z0-9_-], a folder name in the bucket. */
export const KV_NAMESPACE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** One R2 binding: the worker's binding name and the bucket name its objects live under. */
export interface R2BucketBinding {
  binding: string;
  bucket_name: string;
}

/**
 * One D1 binding (docs/bindings.md "D1 databases"): the worker's binding name, the database's
 * name (its data's folder, the `<db>` of `svc d1`), and what wrangler's config says of its
 * migrations, kept for `svc d1 migrations` (the default folder `migrations`, table `d1_migrations`).
 */
export interface D1DatabaseBinding {
  binding: string;
  database_name: string;
  database_id?: string;
  migrations_dir?: string;
  migrations_table?: string;
}

/**
 * One queue producer binding (docs/bindings.md "Queues"): the worker's binding name, the queue it
 * sends to, and the delay (seconds) every message it sends waits unless a send names its own.
 */
export interface QueueProducerBinding {
  binding: string;
  queue: string;
  delivery_delay?: number;
}

/**
 * One queue the worker consumes (docs/bindings.md "Queues"), with Cloudflare's defaults filled in:
 * batches of up to `max_batch_size` messages, handed over once full or `max_batch_timeout`
 * seconds after the first waits; a message delivered `max_retries` + 1 times without an ack goes to
 * `dead_letter_queue` (or is dropped); a retry waits `retry_delay` seconds unless it names its own.
 */
export interface QueueConsumer {
  queue: string;
  max_batch_size: number;
  max_batch_timeout: number;
  max_retries: number;
  dead_letter_queue: string | null;
  retry_delay: number;
  /** Null: as many as svc runs (one batch at a time per queue in the fleet). */
  max_concurrency: number | null;
}

/**
 * One service binding (docs/bindings.md "Service bindings"): the worker's binding name, the
 * application (or the worker's own script name) it reaches, the named `WorkerEntrypoint` export
 * (absent: the default export) and the `ctx.props` the target sees (absent: `{}`).
 */
export interface ServiceBinding {
  binding: string;
  service: string;
  entrypoint?: string;
  props?: Record<string, unknown>;
}

/** One Durable Object binding: the worker's binding name and the class (of its own) it reaches. */
export interface DurableObjectBinding {
  name: string;
  class_name: string;
}

/**
 * One Durable Object class the worker's migrations leave in place (docs/bindings.md "Durable
 * Objects"): its current name, the key its objects are stored and addressed under
 * (`durableObjectStorageKey`: from the application and the class's first name, so a renamed class
 * keeps its objects and their ids), and whether it was created by `new_sqlite_classes` (`sql`:
 * `ctx.storage.sql` works) rather than `new_classes` (stored on SQLite too, key-value API only).
 */
export interface DurableObjectClass {
  class_name: string;
  storage_key: string;
  sql: boolean;
}

/**
 * A deployment's Durable Objects (required feature `durable-objects`): its bindings, its live
 * classes, and the classes a `deleted_classes` migration removed, whose stored objects are dropped.
 */
export interface DurableObjectsManifest {
  bindings: DurableObjectBinding[];
  classes: DurableObjectClass[];
  deleted: { class_name: string; storage_key: string }[];
}

/** A JS export name: a Durable Object class the main module exports. */
export const CLASS_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * The key one Durable Object class is stored and addressed under: workerd's `uniqueKey` (ids are
 * derived from it) and the folder of its objects' files, `<application>-<first name>`. A first
 * name with `$` (no safe file or bucket name) is replaced by a digest of it.
 */
export function durableObjectStorageKey(application: string, firstName: string): string {
  if (/^[A-Za-z0-9_]+$/.test(firstName)) return `${application}-${firstName}`;
  return `${application}-x${createHash('sha256').update(firstName).digest('hex').slice(0, 16)}`;
}

/** One `_headers` rule: its URL pattern, the headers it sets and those it detaches. */
export interface HeaderRule {
  path: string;
  set: [string, string][];
  unset: string[];
}

/** One `_redirects` rule, with its line in the file (static rules tie-break by it). */
export interface RedirectRule {
  from: string;
  to: string;
  status: number;
  line: number;
}

/** `deploy/<script>/<version>/manifest.json`: written last, so its presence marks a complete deployment. */
export interface Manifest {
  schema_version: number;
  required_features: string[];
  application: string;
  script: string;
  deployment: string;
  created_ms: number;
  /** `cell --version` of the publisher. */
  runtime: string;
  main_module: string;
  modules: ModuleEntry[];
  compatibility_date: string;
  compatibility_flags: string[];
  /** Bindings: a string is a text binding, anything else a JSON binding. */
  vars: Record<string, unknown>;
  /** Null when the deployment has no static assets. */
  assets: AssetsConfig | null;
  containers?: { image: string }[];
  fence_image?: string;
  /** Cron schedules (five fields, UTC) the worker's `scheduled` handler runs on; absent: none. */
  crons?: string[];
  /** KV namespace bindings (required feature `kv`); absent: none. */
  kv_namespaces?: KvNamespaceBinding[];
  /** R2 bucket bindings (required feature `r2`); absent: none. */
  r2_buckets?: R2BucketBinding[];
  /** Service bindings (required feature `services`); absent: none. */
  services?: ServiceBinding[];
  /** D1 database bindings (required feature `d1`); absent: none. */
  d1_databases?: D1DatabaseBinding[];
  /** Queue producers and consumers (required feature `queues`); absent: none. */
  queues?: { producers: QueueProducerBinding[]; consumers: QueueConsumer[] };
  /** Durable Object bindings and classes (required feature `durable-objects`); absent: none. */
  durable_objects?: DurableObjectsManifest;
}

/** One static file: its request path maps to a blob in `deploy-blobs/`. */
export interface AssetEntry {
  blob: string;
  size: number;
  content_type: string;
}

/** `deploy/<script>/<version>/assets.json`. */
export interface AssetsIndex {
  schema_version: number;
  required_features: string[];
  /** Keyed by request path, starting with `/`. */
  files: Record<string, AssetEntry>;
  /** The parsed `_headers` and `_redirects` of the assets folder, when it has them. */
  headers?: HeaderRule[];
  redirects?: RedirectRule[];
}

/** `records/<script>/<version>.json`: written before the manifest; its time orders deployments. */
export interface DeploymentRecord {
  schema_version: number;
  application: string;
  script: string;
  deployment: string;
  created_ms: number;
  runtime: string;
  modules: number;
  assets: number;
  bytes: number;
  /** The svc deploy that published it (`CELL_DEPLOY`), when svc ran the publish. */
  deploy?: string;
}

/** `selector.json` (fleet-wide) and `pointers/<script>.json` (per script). */
export interface Pointer {
  schema_version: number;
  script: string;
  deployment: string;
  moved_ms: number;
}

/** The runtime's node lease `nodes/<node>.json`. */
export interface NodeLease {
  node: string;
  expires_ms: number;
}

/** A parse outcome: the value, or why the document is malformed. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; why: string };

const fail = <T>(why: string): Parsed<T> => ({ ok: false, why });

/** Decodes bytes as a JSON object; answers why not. */
export function parseJsonObject(body: Uint8Array | string): Parsed<Record<string, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(
      typeof body === 'string' ? body : new TextDecoder('utf-8', { fatal: true }).decode(body),
    );
  } catch (err) {
    return fail(`not JSON (${(err as Error).message})`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return fail('not a JSON object');
  return { ok: true, value: value as Record<string, unknown> };
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isWhole = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Checks the two fields every versioned document carries. Answers the unknown parts (an unknown
 * schema version or unknown required features) apart from malformation, since the first is
 * `capability-missing` and the second `store-nonconforming`.
 */
export function checkVersioned(
  doc: Record<string, unknown>,
): { ok: true; unknown: string | null } | { ok: false; why: string } {
  if (!isWhole(doc.schema_version)) return { ok: false, why: 'schema_version is not a whole number' };
  if (!Array.isArray(doc.required_features) || !doc.required_features.every(isString)) {
    return { ok: false, why: 'required_features is not a list of strings' };
  }
  if (doc.schema_version !== SCHEMA_VERSION)
    return { ok: true, unknown: `schema_version ${doc.schema_version}` };
  const unknown = (doc.required_features as string[]).filter((f) => !KNOWN_FEATURES.includes(f));
  if (unknown.length > 0) return { ok: true, unknown: `required features ${unknown.join(', ')}` };
  return { ok: true, unknown: null };
}

/** A manifest whose versioned fields are known; `unknown` names what this release cannot read. */
export type ParsedVersioned<T> = { ok: true; value: T } | { ok: false; why: string; unknown?: boolean };

export function parseManifest(body: Uint8Array | string): ParsedVersioned<Manifest> {
  const json = parseJsonObject(body);
  if (!json.ok) return json;
  const doc = json.value;
  const versioned = checkVersioned(doc);
  if (!versioned.ok) return versioned;
  if (versioned.unknown) return { ok: false, why: versioned.unknown, unknown: true };
  if (!isString(doc.script) || !isString(doc.deployment) || !isString(doc.application)) {
    return fail('application, script or deployment is missing');
  }
  if (!isWhole(doc.created_ms)) return fail('created_ms is not a whole number');
  if (!isString(doc.main_module)) return fail('main_module is missing');
  if (!Array.isArray(doc.modules) || !doc.modules.every(isModuleEntry)) return fail('modules is malformed');
  if (!(doc.modules as ModuleEntry[]).some((m) => m.name === doc.main_module)) {
    return fail('main_module is not among the modules');
  }
  if (!isString(doc.compatibility_date)) return fail('compatibility_date is missing');
  if (!Array.isArray(doc.compatibility_flags) || !doc.compatibility_flags.every(isString)) {
    return fail('compatibility_flags is malformed');
  }
  if (!doc.vars || typeof doc.vars !== 'object' || Array.isArray(doc.vars))
    return fail('vars is not an object');
  if (doc.assets !== null && !isAssetsConfig(doc.assets)) return fail('assets is malformed');
  if (doc.crons !== undefined && !(Array.isArray(doc.crons) && doc.crons.every(isString)))
    return fail('crons is malformed');
  if (
    doc.kv_namespaces !== undefined &&
    !(Array.isArray(doc.kv_namespaces) && doc.kv_namespaces.every(isKvBinding))
  )
    return fail('kv_namespaces is malformed');
  if (doc.r2_buckets !== undefined && !(Array.isArray(doc.r2_buckets) && doc.r2_buckets.every(isR2Binding)))
    return fail('r2_buckets is malformed');
  if (doc.services !== undefined && !(Array.isArray(doc.services) && doc.services.every(isServiceBinding)))
    return fail('services is malformed');
  if (
    doc.d1_databases !== undefined &&
    !(Array.isArray(doc.d1_databases) && doc.d1_databases.every(isD1Binding))
  )
    return fail('d1_databases is malformed');
  if (doc.queues !== undefined && !isQueues(doc.queues)) return fail('queues is malformed');
  if (doc.durable_objects !== undefined && !isDurableObjects(doc.durable_objects))
    return fail('durable_objects is malformed');
  const images = imageReferences(doc);
  if (!images.ok) return images;
  return { ok: true, value: doc as unknown as Manifest };
}

/** An object whose `binding` is a binding name, as every binding entry of a manifest has. */
function hasBindingName(
  b: Record<string, unknown> | null,
): b is Record<string, unknown> & { binding: string } {
  return !!b && typeof b === 'object' && isString(b.binding) && /^[A-Za-z_][A-Za-z0-9_]*$/.test(b.binding);
}

function isKvBinding(v: unknown): v is KvNamespaceBinding {
  const b = v as Record<string, unknown> | null;
  return hasBindingName(b) && isString(b.id) && KV_NAMESPACE_ID.test(b.id);
}

function isServiceBinding(v: unknown): v is ServiceBinding {
  const b = v as Record<string, unknown> | null;
  return (
    hasBindingName(b) &&
    isApplicationName(b.service) &&
    (b.entrypoint === undefined ||
      (isString(b.entrypoint) && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(b.entrypoint))) &&
    (b.props === undefined || (!!b.props && typeof b.props === 'object' && !Array.isArray(b.props)))
  );
}

function isR2Binding(v: unknown): v is R2BucketBinding {
  const b = v as Record<string, unknown> | null;
  return hasBindingName(b) && isR2BucketName(b.bucket_name);
}

function isD1Binding(v: unknown): v is D1DatabaseBinding {
  const b = v as Record<string, unknown> | null;
  return (
    hasBindingName(b) &&
    isD1DatabaseName(b.database_name) &&
    ['database_id', 'migrations_dir', 'migrations_table'].every((f) => b[f] === undefined || isString(b[f]))
  );
}

function isQueues(v: unknown): v is Manifest['queues'] {
  const q = v as Record<string, unknown> | null;
  if (!q || typeof q !== 'object' || !Array.isArray(q.producers) || !Array.isArray(q.consumers)) return false;
  const whole = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0;
  const producers = (q.producers as Record<string, unknown>[]).every(
    (p) =>
      !!p &&
      isString(p.binding) &&
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(p.binding) &&
      isQueueName(p.queue) &&
      (p.delivery_delay === undefined || whole(p.delivery_delay)),
  );
  const consumers = (q.consumers as Record<string, unknown>[]).every(
    (c) =>
      !!c &&
      isQueueName(c.queue) &&
      whole(c.max_batch_size) &&
      (c.max_batch_size as number) > 0 &&
      whole(c.max_batch_timeout) &&
      whole(c.max_retries) &&
      whole(c.retry_delay) &&
      (c.dead_letter_queue === null || isQueueName(c.dead_letter_queue)) &&
      (c.max_concurrency === null || whole(c.max_concurrency)),
  );
  return producers && consumers;
}

function isDurableObjects(v: unknown): v is DurableObjectsManifest {
  const d = v as Record<string, unknown> | null;
  if (!d || typeof d !== 'object' || ![d.bindings, d.classes, d.deleted].every(Array.isArray)) return false;
  const className = (c: unknown) => isString(c) && CLASS_NAME.test(c);
  const storageKey = (k: unknown) => isString(k) && /^[a-z0-9-]+-[A-Za-z0-9_]+$/.test(k);
  const classes = d.classes as Record<string, unknown>[];
  return (
    (d.bindings as Record<string, unknown>[]).every(
      (b) =>
        !!b &&
        isString(b.name) &&
        /^[A-Za-z_][A-Za-z0-9_]*$/.test(b.name) &&
        classes.some((c) => !!c && c.class_name === b.class_name),
    ) &&
    classes.every(
      (c) => !!c && className(c.class_name) && storageKey(c.storage_key) && typeof c.sql === 'boolean',
    ) &&
    (d.deleted as Record<string, unknown>[]).every(
      (c) => !!c && className(c.class_name) && storageKey(c.storage_key),
    )
  );
}

function isModuleEntry(v: unknown): v is ModuleEntry {
  if (!v || typeof v !== 'object') return false;
  const m = v as Record<string, unknown>;
  return (
    isString(m.name) &&
    isModulePath(m.name) &&
    MODULE_TYPES.includes(m.type as ModuleType) &&
    isWhole(m.size) &&
    isString(m.sha256) &&
    BLOB_PATTERN.test(m.sha256)
  );
}

/** A module name is a relative path without `.`/`..` segments, so it stays inside its folder. */
export function isModulePath(name: string): boolean {
  if (name.length === 0 || name.length > 512 || name.startsWith('/') || name.includes('\\')) return false;
  return name.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

function isAssetsConfig(v: unknown): v is AssetsConfig {
  if (!v || typeof v !== 'object') return false;
  const a = v as Record<string, unknown>;
  return (
    (a.binding === null || isString(a.binding)) &&
    ['auto-trailing-slash', 'force-trailing-slash', 'drop-trailing-slash', 'none'].includes(
      a.html_handling as string,
    ) &&
    ['none', '404-page', 'single-page-application'].includes(a.not_found_handling as string) &&
    (a.run_worker_first === undefined ||
      typeof a.run_worker_first === 'boolean' ||
      (Array.isArray(a.run_worker_first) && a.run_worker_first.every(isString)))
  );
}

function isHeaderRule(v: unknown): boolean {
  const r = v as Record<string, unknown> | null;
  return (
    !!r &&
    isString(r.path) &&
    Array.isArray(r.set) &&
    r.set.every((pair) => Array.isArray(pair) && pair.length === 2 && pair.every(isString)) &&
    Array.isArray(r.unset) &&
    r.unset.every(isString)
  );
}

function isRedirectRule(v: unknown): boolean {
  const r = v as Record<string, unknown> | null;
  return !!r && isString(r.from) && isString(r.to) && isWhole(r.status) && isWhole(r.line);
}

/**
 * The container image content keys a manifest names (`containers[].image`, `fence_image`).
 * Every reference must be `cell-image:` plus a lowercase hex key (docs/cli.md prune rule 4).
 */
export function imageReferences(doc: Record<string, unknown>): Parsed<string[]> {
  const found: string[] = [];
  const take = (ref: unknown, where: string): string | null => {
    const match = isString(ref) ? IMAGE_REFERENCE.exec(ref) : null;
    if (!match) return `${where} ${JSON.stringify(ref)} is not cell-image: plus a lowercase hex key`;
    found.push(match[1]!);
    return null;
  };
  if (doc.containers !== undefined) {
    if (!Array.isArray(doc.containers)) return fail('containers is not a list');
    for (const [i, container] of doc.containers.entries()) {
      if (!container || typeof container !== 'object') return fail(`containers[${i}] is not an object`);
      const why = take((container as Record<string, unknown>).image, `containers[${i}].image`);
      if (why) return fail(why);
    }
  }
  if (doc.fence_image !== undefined) {
    const why = take(doc.fence_image, 'fence_image');
    if (why) return fail(why);
  }
  return { ok: true, value: found };
}

export function parseAssetsIndex(body: Uint8Array | string): ParsedVersioned<AssetsIndex> {
  const json = parseJsonObject(body);
  if (!json.ok) return json;
  const doc = json.value;
  const versioned = checkVersioned(doc);
  if (!versioned.ok) return versioned;
  if (versioned.unknown) return { ok: false, why: versioned.unknown, unknown: true };
  if (!doc.files || typeof doc.files !== 'object' || Array.isArray(doc.files))
    return fail('files is not an object');
  for (const [path, entry] of Object.entries(doc.files as Record<string, unknown>)) {
    if (!path.startsWith('/')) return fail(`file ${JSON.stringify(path)} does not start with /`);
    const e = entry as Record<string, unknown> | null;
    if (!e || typeof e !== 'object' || !isString(e.blob) || !BLOB_PATTERN.test(e.blob)) {
      return fail(`file ${JSON.stringify(path)} names no blob (64 lowercase hex)`);
    }
    if (!isWhole(e.size) || !isString(e.content_type))
      return fail(`file ${JSON.stringify(path)} is malformed`);
  }
  if (doc.headers !== undefined && !(Array.isArray(doc.headers) && doc.headers.every(isHeaderRule)))
    return fail('headers is malformed');
  if (doc.redirects !== undefined && !(Array.isArray(doc.redirects) && doc.redirects.every(isRedirectRule)))
    return fail('redirects is malformed');
  return { ok: true, value: doc as unknown as AssetsIndex };
}

export function parseRecord(body: Uint8Array | string): ParsedVersioned<DeploymentRecord> {
  const json = parseJsonObject(body);
  if (!json.ok) return json;
  const doc = json.value;
  if (!isWhole(doc.schema_version)) return fail('schema_version is not a whole number');
  if (doc.schema_version !== SCHEMA_VERSION) {
    return { ok: false, why: `schema_version ${doc.schema_version}`, unknown: true };
  }
  if (!isString(doc.script) || !isString(doc.deployment)) return fail('script or deployment is missing');
  if (!isWhole(doc.created_ms)) return fail('created_ms is not a whole number');
  return { ok: true, value: doc as unknown as DeploymentRecord };
}

export function parsePointer(body: Uint8Array | string): ParsedVersioned<Pointer> {
  const json = parseJsonObject(body);
  if (!json.ok) return json;
  const doc = json.value;
  if (!isWhole(doc.schema_version)) return fail('schema_version is not a whole number');
  if (doc.schema_version !== SCHEMA_VERSION) {
    return { ok: false, why: `schema_version ${doc.schema_version}`, unknown: true };
  }
  if (!isScriptName(doc.script)) return fail('script is not a script name');
  if (!isString(doc.deployment) || !VERSION_PATTERN.test(doc.deployment))
    return fail('deployment is not a hex version');
  return { ok: true, value: doc as unknown as Pointer };
}

/** A node lease: required fields `node` (string) and `expires_ms` (number). */
export function parseNodeLease(body: Uint8Array | string): Parsed<NodeLease> {
  const json = parseJsonObject(body);
  if (!json.ok) return json;
  const doc = json.value;
  if (!isString(doc.node) || doc.node === '') return fail('field node is missing or not a string');
  if (typeof doc.expires_ms !== 'number' || !Number.isFinite(doc.expires_ms)) {
    return fail('field expires_ms is missing or not a number');
  }
  return { ok: true, value: doc as unknown as NodeLease };
}

/** Renders a `cell --version` line or bare version as the bare version; null when neither. */
export function runtimeRelease(reported: unknown): string | null {
  if (!isString(reported)) return null;
  const match = /^(?:cell\s+)?v?(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)$/.exec(reported.trim());
  return match ? match[1]! : null;
}
