// The worker config (`cell.jsonc`, else `cell.json`, at the project root, with the wrangler
// keys a user already knows; a top-level `env` key is refused). One parser for both sides: the
// runtime (`cell publish`, runtime/src/config.ts) applies it to the staged artifact, and
// `svc deploy` (src/cli/deploy-action.ts) applies it to the project before anything is packed or
// sent, so a config the runtime would refuse is refused on the user's machine with the same
// words. Pure: text in, config or WorkerConfigError out; nothing here touches the disk.
//
// Every refusal names the file with the line and column of the offending key (or of the
// syntax error), `<file>:<line>:<column>: ...`, as compilers do, so an editor can jump there.

import { findNodeAtLocation, type Node, type ParseError, parseTree, printParseErrorCode } from 'jsonc-parser';
import {
  D1_DATABASE_NAME_RULE,
  isApplicationName,
  isD1DatabaseName,
  isQueueName,
  isR2BucketName,
  isScriptName,
  QUEUE_NAME_RULE,
  R2_BUCKET_NAME_RULE,
} from '../registry/names.ts';
import { cronProblem } from './cron-schedule.ts';
import {
  type AssetsConfig,
  CLASS_NAME,
  type D1DatabaseBinding,
  type DurableObjectBinding,
  KV_NAMESPACE_ID,
  type KvNamespaceBinding,
  type QueueConsumer,
  type QueueProducerBinding,
  type R2BucketBinding,
  type ServiceBinding,
} from './layout.ts';

export const CONFIG_FILES = ['cell.jsonc', 'cell.json'] as const;

/** The config after validation, with paths still relative to the project root. */
export interface WorkerConfig {
  /** The script name; defaults to the application when the config has none. */
  name: string | null;
  main: string | null;
  compatibility_date: string;
  compatibility_flags: string[];
  vars: Record<string, unknown>;
  assets: (AssetsConfig & { directory: string }) | null;
  no_bundle: boolean;
  /** wrangler's module `rules`: which files become which module type (see runtime/src/bundle.ts). */
  rules: ModuleRule[];
  /** `triggers.crons`: the schedules the worker's `scheduled` handler runs on. */
  crons: string[];
  /** `find_additional_modules`; null when absent (wrangler's default: true with no_bundle only). */
  find_additional_modules: boolean | null;
  /** `base_dir`: the root of module names, relative to the project root; null: the folder of `main`. */
  base_dir: string | null;
  /** `preserve_file_names`: rule modules keep their paths instead of hashed names. */
  preserve_file_names: boolean;
  /** wrangler's build options: `define`, `alias`, `minify`, `keep_names`, `jsx_*`, `tsconfig`. */
  build: {
    define: Record<string, string>;
    alias: Record<string, string>;
    minify: boolean;
    keep_names: boolean;
    jsx_factory: string | null;
    jsx_fragment: string | null;
    tsconfig: string | null;
  };
  /**
   * wrangler's custom build (`build.command`, `build.cwd`): the command `svc deploy` runs before it
   * packs the project; null when the config names none. `build.watch_dir` is for `wrangler dev`.
   */
  custom_build: CustomBuild | null;
  /** `kv_namespaces`: each binding name and the namespace id its data is kept under. */
  kv_namespaces: KvNamespaceBinding[];
  /** `r2_buckets`: each binding name and the bucket name its objects are kept under. */
  r2_buckets: R2BucketBinding[];
  /** `services`: each binding name, the application (or own script) it reaches, entrypoint and props. */
  services: ServiceBinding[];
  /** `d1_databases`: each binding name, the database it reaches and its migrations settings. */
  d1_databases: D1DatabaseBinding[];
  /** `queues`: the queues the worker sends to (by binding) and those it consumes. */
  queues: { producers: QueueProducerBinding[]; consumers: QueueConsumer[] };
  /**
   * `durable_objects.bindings` and what `migrations` leave: each live class by its current name
   * and its first name (which its storage key derives from), whether SQLite-API, and the deleted ones.
   */
  durable_objects: DurableObjectsConfig;
  /** Unknown keys this runtime ignores. */
  ignored: string[];
  /** One sentence per thing the user should know but that does not stop the deploy. */
  warnings: string[];
}

/** wrangler's custom build: a shell command, run in `cwd` (relative to the project) or the project. */
export interface CustomBuild {
  command: string;
  cwd: string | null;
}

/** A Durable Object class as the migrations leave it: named now `class_name`, created as `first_name`. */
export interface DurableObjectClassConfig {
  class_name: string;
  first_name: string;
  sql: boolean;
}

export interface DurableObjectsConfig {
  bindings: DurableObjectBinding[];
  classes: DurableObjectClassConfig[];
  deleted: { class_name: string; first_name: string }[];
}

/** wrangler's module rule types. */
export const RULE_TYPES = ['ESModule', 'CommonJS', 'Text', 'Data', 'CompiledWasm'] as const;
export interface ModuleRule {
  type: (typeof RULE_TYPES)[number];
  globs: string[];
  fallthrough: boolean;
}

export interface ParseOptions {
  /** The newest compatibility date the runtime's workerd supports; unchecked when absent. */
  maxCompatibilityDate?: string;
  /**
   * Where a key path sits in the user's own file, when the text parsed is not that file (a
   * wrangler.toml converted to JSON, an `env` section merged): refusals and warnings are placed
   * there instead of in the text. Null: the key is not in the file (placed at the text's key).
   */
  locate?: (path: (string | number)[]) => { line: number; column: number } | null;
}

/** A config the runtime refuses; `message` is the whole `<file>:<line>:<column>: ...` line. */
export class WorkerConfigError extends Error {
  readonly file: string;
  readonly line: number;
  readonly column: number;

  /** `also`: further whole lines, when one run refuses several keys. */
  constructor(file: string, at: { line: number; column: number }, what: string, also: string[] = []) {
    super([`${file}:${at.line}:${at.column}: ${what}`, ...also].join('\n'));
    this.name = 'WorkerConfigError';
    this.file = file;
    this.line = at.line;
    this.column = at.column;
  }
}

/**
 * Bindings of other products, with the heading of docs/bindings.md that says when each comes and
 * what a worker can do meanwhile: refused, since a worker whose code uses them cannot run here.
 * An empty declaration (`[]`, `{ "bindings": [] }`, as framework builds write) declares nothing.
 */
const UNSUPPORTED_BINDINGS: Record<string, string> = {
  ai: 'Workers AI',
  vectorize: 'Vectorize',
  hyperdrive: 'Hyperdrive',
  analytics_engine_datasets: 'Analytics Engine',
  browser: 'Browser Rendering',
  containers: 'Containers',
  workflows: 'Workflows',
  secrets_store_secrets: 'Secrets Store',
  dispatch_namespaces: 'Dispatch namespaces',
  mtls_certificates: 'mTLS certificates',
  send_email: 'Email',
  version_metadata: 'Version metadata',
  images: 'Images',
  ratelimits: 'Rate limiting',
  unsafe: 'Unsafe bindings',
  logfwdr: 'Unsafe bindings',
  pipelines: 'Pipelines',
  worker_loaders: 'Worker Loaders',
  vpc_services: 'VPC services',
  vpc_networks: 'VPC services',
  ai_search: 'AI Search',
  ai_search_namespaces: 'AI Search',
  agent_memory: 'Other bindings',
  websearch: 'Other bindings',
  media: 'Other bindings',
  stream: 'Other bindings',
  artifacts: 'Other bindings',
  flagship: 'Other bindings',
  k2: 'Other bindings',
  connect: 'Other bindings',
  unsafe_hello_world: 'Unsafe bindings',
};
/** Keys that only steer Cloudflare's own account and tooling: they mean nothing here, quietly. */
const QUIET_KEYS = [
  '$schema',
  'send_metrics',
  'legacy_env',
  'python_modules',
  'account_id',
  'workers_dev',
  'preview_urls',
  'upload_source_maps',
  'keep_vars',
  'dev',
];
/**
 * Cloudflare features this runtime does not provide, whose absence changes what the worker does:
 * ignored, with a warning saying so.
 */
const UNPROVIDED_FEATURES: Record<string, string> = {
  routes: 'svc routes by application name and domains (svc app domain add), not by Cloudflare routes',
  route: 'svc routes by application name and domains (svc app domain add), not by Cloudflare routes',
  observability: 'logs and traces come from svc sail --observability, not from this key',
  placement: 'svc places applications with --replicas and --node-selector',
  limits: 'this runtime applies no per-request CPU limit',
  logpush: 'Logpush is a Cloudflare product',
  tail_consumers: 'tail workers are not run by this runtime',
};
const KNOWN_KEYS = [
  'name',
  'main',
  'compatibility_date',
  'compatibility_flags',
  'vars',
  'assets',
  'no_bundle',
  'rules',
  'triggers',
  'find_additional_modules',
  'base_dir',
  'preserve_file_names',
  'define',
  'alias',
  'minify',
  'keep_names',
  'jsx_factory',
  'jsx_fragment',
  'tsconfig',
  'kv_namespaces',
  'r2_buckets',
  'services',
  'd1_databases',
  'queues',
  'durable_objects',
  'migrations',
  'build',
];

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FORBIDDEN_NAMES = ['__proto__', 'constructor', 'prototype'];
/** A JS export name (workerd's `entrypoint`). */
const ENTRYPOINT_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const COMPAT_FLAG = /^[a-z0-9_]+$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

type KeyPath = (string | number)[];

/** A kind of binding, as messages name it: "a KV namespace also binds", "an earlier KV namespace". */
interface BindingKind {
  /** With its article: `a KV namespace`. */
  readonly one: string;
  /** Without it: `KV namespace`. */
  readonly name: string;
}

const bindingKind = (article: 'a' | 'an', name: string): BindingKind => ({ one: `${article} ${name}`, name });
const KV_NAMESPACE = bindingKind('a', 'KV namespace');
const R2_BUCKET = bindingKind('an', 'R2 bucket');
const SERVICE_BINDING = bindingKind('a', 'service binding');
const D1_DATABASE = bindingKind('a', 'D1 database');
const DURABLE_OBJECT_BINDING = bindingKind('a', 'Durable Object binding');
const QUEUE_PRODUCER = bindingKind('a', 'queue producer');

/**
 * The names a worker's env binds, claimed in the order the config's keys are read. A worker sees
 * one value per name, so a name claimed twice is refused, saying who holds it.
 */
export class BindingNames {
  /** Each name, and who holds it in a message's words (`vars`, `a KV namespace`). */
  readonly #holders = new Map<string, string>();
  readonly #bad: (path: KeyPath, why: string) => WorkerConfigError;

  constructor(bad: (path: KeyPath, why: string) => WorkerConfigError) {
    this.#bad = bad;
  }

  /** Records a name taken by something with rules of its own (a var, the assets binding). */
  hold(name: string, by: string): void {
    this.#holders.set(name, by);
  }

  /** Who holds `name`, in a message's words, if anyone does. */
  heldBy(name: string): string | undefined {
    return this.#holders.get(name);
  }

  /** `binding`, found at `place`: a JS identifier no earlier entry holds, now held by `kind`. */
  claim(place: KeyPath, binding: unknown, kind: BindingKind): string {
    if (typeof binding !== 'string' || !VAR_NAME.test(binding) || FORBIDDEN_NAMES.includes(binding))
      throw this.#bad(
        place,
        'must be a binding name: letters, digits and underscores, not starting with a digit',
      );
    const holder = this.#holders.get(binding);
    if (holder === kind.one)
      throw this.#bad(place, `names ${binding}, which an earlier ${kind.name} binds; choose another name`);
    if (holder !== undefined)
      throw this.#bad(place, `names ${binding}, which ${holder} also binds; choose another name`);
    this.#holders.set(binding, kind.one);
    return binding;
  }
}

/**
 * The syntax step alone: the config as a plain object, or a WorkerConfigError at the first
 * syntax error. `svc deploy` reads the application name from it before anything else.
 */
export function parseConfigSyntax(text: string, file: string): { doc: Record<string, unknown>; tree: Node } {
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0) {
    const first = errors[0]!;
    throw new WorkerConfigError(
      file,
      position(text, first.offset),
      `${printParseErrorCode(first.error)}: the worker config is not valid JSONC (JSON with comments)`,
    );
  }
  if (tree?.type !== 'object') {
    throw new WorkerConfigError(
      file,
      position(text, tree?.offset ?? 0),
      'the worker config must be a JSON object',
    );
  }
  return { doc: nodeValue(tree) as Record<string, unknown>, tree };
}

/** Parses and validates the config text; every refusal names the file, the place, the key and the fix. */
export function parseWorkerConfig(text: string, file: string, options: ParseOptions = {}): WorkerConfig {
  const { doc, tree } = parseConfigSyntax(text, file);
  /** Where the key `path` names is (its property, so the cursor lands on the key). */
  const place = (path: KeyPath) => {
    const inFile = options.locate?.(path);
    if (inFile) return inFile;
    const node = findNodeAtLocation(tree, path);
    const at = node?.parent?.type === 'property' ? node.parent : (node ?? tree);
    return position(text, at.offset);
  };
  const bad = (path: KeyPath, why: string) =>
    new WorkerConfigError(file, place(path), `"${keyName(path)}" ${why}`);

  if (has(doc, 'env')) {
    throw bad(
      ['env'],
      'is not supported: svc addresses an environment as its own application (svc deploy --env <env>); move the values to the top level, or pass them with svc deploy --var',
    );
  }
  // Every binding the worker declares and this runtime lacks, in the order the file has them.
  const refused = Object.keys(doc)
    .filter((key) => Object.hasOwn(UNSUPPORTED_BINDINGS, key) && !isEmptyDeclaration(doc[key]))
    .map((key) => ({ key, at: place([key]) }))
    .sort((a, b) => a.at.line - b.at.line || a.at.column - b.at.column);
  if (refused.length > 0) {
    const why = refused.map(
      ({ key }) =>
        `"${key}" declares bindings this runtime does not provide yet (${bindingNames(doc[key])}): the section ${UNSUPPORTED_BINDINGS[key]} of svc's docs/bindings.md says when they come and how the worker can do without them meanwhile`,
    );
    const also = refused.slice(1).map(({ at }, i) => `${file}:${at.line}:${at.column}: ${why[i + 1]}`);
    throw new WorkerConfigError(file, refused[0]!.at, why[0]!, also);
  }
  const warnings: string[] = [];
  const ignored: string[] = [];
  for (const key of Object.keys(doc)) {
    if (KNOWN_KEYS.includes(key) || QUIET_KEYS.includes(key)) continue;
    if (Object.hasOwn(UNSUPPORTED_BINDINGS, key)) continue; // empty: declares nothing
    const where = place([key]);
    const at = `${file}:${where.line}:${where.column}`;
    if (isEmptyDeclaration(doc[key])) continue; // `[]`, `{}`: declares nothing
    if (Object.hasOwn(UNPROVIDED_FEATURES, key)) {
      warnings.push(`${at}: ignoring "${key}": ${UNPROVIDED_FEATURES[key]}`);
    } else {
      ignored.push(key);
      warnings.push(`${at}: ignoring "${key}": this runtime does not use it`);
    }
  }

  let name: string | null = null;
  if (doc.name !== undefined) {
    if (!isScriptName(doc.name)) {
      throw bad(
        ['name'],
        `must be 1-63 lowercase letters or digits, optionally separated by single hyphens (and not "images" or "queues"), got ${JSON.stringify(doc.name)}`,
      );
    }
    name = doc.name;
  }

  let main: string | null = null;
  if (doc.main !== undefined) {
    if (typeof doc.main !== 'string' || doc.main.trim() === '')
      throw bad(['main'], 'must be the path of the entry module');
    main = doc.main;
  }

  if (doc.compatibility_date === undefined) {
    throw bad(
      ['compatibility_date'],
      'is required: add "compatibility_date": "YYYY-MM-DD" (for example today\'s date)',
    );
  }
  const date = doc.compatibility_date;
  if (typeof date !== 'string' || !isRealDate(date)) {
    throw bad(['compatibility_date'], `must be a date written YYYY-MM-DD, got ${JSON.stringify(date)}`);
  }
  if (options.maxCompatibilityDate && date > options.maxCompatibilityDate) {
    throw bad(
      ['compatibility_date'],
      `${date} is newer than this runtime's workerd supports (${options.maxCompatibilityDate}); use ${options.maxCompatibilityDate} or earlier`,
    );
  }

  let flags: string[] = [];
  if (doc.compatibility_flags !== undefined) {
    const value = doc.compatibility_flags;
    if (!Array.isArray(value) || !value.every((f) => typeof f === 'string' && COMPAT_FLAG.test(f))) {
      throw bad(['compatibility_flags'], 'must be a list of flag names such as "nodejs_compat"');
    }
    flags = value as string[];
  }

  let vars: Record<string, unknown> = {};
  if (doc.vars !== undefined) {
    if (!isObject(doc.vars)) throw bad(['vars'], 'must be an object of variable names to values');
    for (const [key, value] of Object.entries(doc.vars)) {
      if (!VAR_NAME.test(key) || FORBIDDEN_NAMES.includes(key)) {
        throw bad(
          ['vars', key],
          'is no variable name: letters, digits and underscores, not starting with a digit',
        );
      }
      if (value === null) throw bad(['vars', key], 'is null: give a string, number, boolean, list or object');
    }
    vars = doc.vars;
  }

  const assets = parseAssets(doc.assets, bad);
  const names = new BindingNames(bad);
  for (const name of Object.keys(vars)) names.hold(name, 'vars');
  if (assets?.binding) {
    if (names.heldBy(assets.binding) !== undefined)
      throw bad(['assets', 'binding'], `names ${assets.binding}, which vars also binds; choose another name`);
    names.hold(assets.binding, 'assets.binding');
  }
  const kvNamespaces = parseKvNamespaces(doc.kv_namespaces, bad, names);
  if (Array.isArray(doc.kv_namespaces)) {
    doc.kv_namespaces.forEach((entry, i) => {
      if (isObject(entry) && entry.preview_id !== undefined) {
        const where = place(['kv_namespaces', i, 'preview_id']);
        warnings.push(
          `${file}:${where.line}:${where.column}: ignoring "kv_namespaces[${i}].preview_id": svc has no preview namespaces; the binding always reaches "id"`,
        );
      }
    });
  }
  const r2Buckets = parseR2Buckets(doc.r2_buckets, bad, names);
  if (Array.isArray(doc.r2_buckets)) {
    doc.r2_buckets.forEach((entry, i) => {
      if (!isObject(entry)) return;
      for (const field of ['preview_bucket_name', 'jurisdiction'] as const) {
        if (entry[field] === undefined) continue;
        const where = place(['r2_buckets', i, field]);
        warnings.push(
          `${file}:${where.line}:${where.column}: ignoring "r2_buckets[${i}].${field}": ${field === 'jurisdiction' ? "svc keeps every bucket's objects in the fleet's own bucket, wherever that is" : 'svc has no preview buckets; the binding always reaches "bucket_name"'}`,
        );
      }
    });
  }
  const services = parseServices(doc.services, bad, names);
  const d1Databases = parseD1Databases(doc.d1_databases, bad, names);
  if (Array.isArray(doc.d1_databases)) {
    doc.d1_databases.forEach((entry, i) => {
      if (!isObject(entry) || entry.preview_database_id === undefined) return;
      const where = place(['d1_databases', i, 'preview_database_id']);
      warnings.push(
        `${file}:${where.line}:${where.column}: ignoring "d1_databases[${i}].preview_database_id": svc has no preview databases; the binding always reaches "database_name"`,
      );
    });
  }
  const durableObjects = parseDurableObjects(doc.durable_objects, doc.migrations, name, bad, names);
  const queues = parseQueues(doc.queues, bad, names);
  if ((durableObjects.bindings.length > 0 || durableObjects.classes.length > 0) && main === null) {
    throw bad(
      [doc.durable_objects === undefined ? 'migrations' : 'durable_objects'],
      'needs a worker: set "main" to the module that exports the Durable Object classes',
    );
  }
  if ((queues.producers.length > 0 || queues.consumers.length > 0) && main === null) {
    throw bad(['queues'], 'needs a worker: set "main" to the module that sends to or consumes the queues');
  }
  if (d1Databases.length > 0 && main === null) {
    throw bad(['d1_databases'], 'needs a worker: set "main" to the module that uses the databases');
  }
  if (main === null && assets === null) {
    throw bad(
      ['main'],
      'is required: name the worker entry module (or configure "assets" for a static site)',
    );
  }
  if (main === null && assets && assets.run_worker_first !== false) {
    throw bad(
      ['assets', 'run_worker_first'],
      'needs a worker to run first: set "main", or remove run_worker_first',
    );
  }
  if (assets?.run_worker_first === true && assets.binding === null) {
    const where = position(
      text,
      findNodeAtLocation(tree, ['assets', 'run_worker_first'])?.parent?.offset ?? 0,
    );
    warnings.push(
      `${file}:${where.line}:${where.column}: "assets.run_worker_first" is true but "assets.binding" is not set: every request runs the worker, which cannot reach the assets without a binding`,
    );
  }

  if (doc.no_bundle !== undefined && typeof doc.no_bundle !== 'boolean')
    throw bad(['no_bundle'], 'must be true or false');

  const rules = parseRules(doc.rules, bad);
  warnings.push(
    ...shadowedRules(doc.rules as unknown[] | undefined, rules).map(({ at, why }) => {
      const where = place(at);
      return `${file}:${where.line}:${where.column}: ${why}`;
    }),
  );
  const crons = parseCrons(doc.triggers, bad);
  for (const key of ['find_additional_modules', 'preserve_file_names'] as const) {
    if (doc[key] !== undefined && typeof doc[key] !== 'boolean') throw bad([key], 'must be true or false');
  }
  if (doc.base_dir !== undefined && (typeof doc.base_dir !== 'string' || doc.base_dir.trim() === '')) {
    throw bad(['base_dir'], 'must be the folder module names start from, such as "./src"');
  }
  if (services.length > 0 && main === null) {
    throw bad(['services'], 'needs a worker: set "main" to the module whose exports the bindings reach');
  }
  if (crons.length > 0 && main === null) {
    throw bad(['triggers', 'crons'], 'needs a worker: set "main" to the module whose scheduled handler runs');
  }

  return {
    name,
    main,
    compatibility_date: date,
    compatibility_flags: flags,
    vars,
    assets,
    no_bundle: doc.no_bundle === true,
    rules,
    crons,
    find_additional_modules:
      typeof doc.find_additional_modules === 'boolean' ? doc.find_additional_modules : null,
    base_dir: typeof doc.base_dir === 'string' ? doc.base_dir : null,
    preserve_file_names: doc.preserve_file_names === true,
    build: parseBuildOptions(doc, bad),
    custom_build: parseCustomBuild(doc, bad),
    kv_namespaces: kvNamespaces,
    r2_buckets: r2Buckets,
    services,
    d1_databases: d1Databases,
    queues,
    durable_objects: durableObjects,
    ignored,
    warnings,
  };
}

/** `[]`, `{}`, null, or an object of nothing but those: what framework builds write for "none". */
export function isEmptyDeclaration(value: unknown): boolean {
  if (value === null) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (isObject(value)) return Object.values(value).every(isEmptyDeclaration);
  return false;
}

/** The binding names a declaration gives (each entry's `binding`, else `name`). */
function bindingNames(value: unknown): string {
  // A list of bindings, one binding, or an object of such lists (`durable_objects.bindings`,
  // `queues.producers`).
  const entries = Array.isArray(value)
    ? value
    : isObject(value) && value.binding === undefined && value.name === undefined
      ? Object.values(value).flatMap((v) => (Array.isArray(v) ? v : []))
      : [value];
  const names = entries
    .map((entry) => (isObject(entry) ? (entry.binding ?? entry.name) : undefined))
    .filter((name): name is string => typeof name === 'string');
  return names.length > 0 ? names.join(', ') : 'a binding';
}

/**
 * `kv_namespaces`: a list of `{ binding, id }`. A binding name is a JS identifier no var, the
 * assets binding or another namespace already takes; an id is 1-64 of [A-Za-z0-9_-], since it
 * names a folder in the bucket. Two bindings may share an id (they reach the same data).
 */
function parseKvNamespaces(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): KvNamespaceBinding[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) {
    throw bad(['kv_namespaces'], 'must be a list such as [{ "binding": "CACHE", "id": "cache" }]');
  }
  return value.map((entry, i) => {
    if (!isObject(entry))
      throw bad(['kv_namespaces', i], 'must be an object such as { "binding": "CACHE", "id": "cache" }');
    const { id } = entry;
    // A missing field is placed at its entry, a bad one at itself.
    const at = (field: string): KeyPath =>
      entry[field] === undefined ? ['kv_namespaces', i] : ['kv_namespaces', i, field];
    if (entry.binding === undefined)
      throw bad(
        at('binding'),
        'needs "binding": the name the worker reaches the namespace by, such as "CACHE"',
      );
    if (id === undefined)
      throw bad(at('id'), 'needs "id": the namespace\'s name in the fleet\'s bucket, such as "cache"');
    const binding = names.claim(['kv_namespaces', i, 'binding'], entry.binding, KV_NAMESPACE);
    if (typeof id !== 'string' || !KV_NAMESPACE_ID.test(id)) {
      throw bad(
        ['kv_namespaces', i, 'id'],
        `must be 1-64 letters, digits, "_" or "-" (the namespace's name in the fleet's bucket), got ${JSON.stringify(id ?? null)}`,
      );
    }
    return { binding, id };
  });
}

/**
 * `r2_buckets`: a list of `{ binding, bucket_name }`. A binding name follows the KV rule (a JS
 * identifier no var, the assets binding, a KV namespace or another bucket takes); a bucket name
 * follows Cloudflare's R2 rule (names.ts `isR2BucketName`). Two bindings may share a bucket.
 */
function parseR2Buckets(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): R2BucketBinding[] {
  if (value === undefined || value === null) return [];
  const example = '{ "binding": "FILES", "bucket_name": "files" }';
  if (!Array.isArray(value)) throw bad(['r2_buckets'], `must be a list such as [${example}]`);
  return value.map((entry, i) => {
    if (!isObject(entry)) throw bad(['r2_buckets', i], `must be an object such as ${example}`);
    const { bucket_name: bucketName } = entry;
    const at = (field: string): KeyPath =>
      entry[field] === undefined ? ['r2_buckets', i] : ['r2_buckets', i, field];
    if (entry.binding === undefined)
      throw bad(at('binding'), 'needs "binding": the name the worker reaches the bucket by, such as "FILES"');
    if (bucketName === undefined)
      throw bad(at('bucket_name'), 'needs "bucket_name": the bucket\'s name, such as "files"');
    const binding = names.claim(['r2_buckets', i, 'binding'], entry.binding, R2_BUCKET);
    if (!isR2BucketName(bucketName))
      throw bad(
        ['r2_buckets', i, 'bucket_name'],
        `must be an R2 bucket name: ${R2_BUCKET_NAME_RULE}, got ${JSON.stringify(bucketName ?? null)}`,
      );
    return { binding, bucket_name: bucketName };
  });
}

/**
 * `d1_databases` (docs/bindings.md "D1 databases"): a list of `{ binding, database_name,
 * database_id?, migrations_dir?, migrations_table? }`. A binding name is a JS identifier no other
 * binding takes; `database_name` names the database's data (names.ts `isD1DatabaseName`); two
 * bindings may reach one database. `database_id` is kept but reaches nothing: the name does.
 */
function parseD1Databases(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): D1DatabaseBinding[] {
  if (value === undefined || value === null) return [];
  const example = '{ "binding": "DB", "database_name": "main" }';
  if (!Array.isArray(value)) throw bad(['d1_databases'], `must be a list such as [${example}]`);
  return value.map((entry, i) => {
    if (!isObject(entry)) throw bad(['d1_databases', i], `must be an object such as ${example}`);
    const { database_name: name } = entry;
    const at = (field: string): KeyPath =>
      entry[field] === undefined ? ['d1_databases', i] : ['d1_databases', i, field];
    if (entry.binding === undefined)
      throw bad(at('binding'), 'needs "binding": the name the worker reaches the database by, such as "DB"');
    if (name === undefined)
      throw bad(at('database_name'), 'needs "database_name": the database\'s name, such as "main"');
    const binding = names.claim(['d1_databases', i, 'binding'], entry.binding, D1_DATABASE);
    if (!isD1DatabaseName(name))
      throw bad(
        ['d1_databases', i, 'database_name'],
        `must be a D1 database name: ${D1_DATABASE_NAME_RULE}, got ${JSON.stringify(name ?? null)}`,
      );
    const result: D1DatabaseBinding = { binding, database_name: name };
    for (const field of ['database_id', 'migrations_dir', 'migrations_table'] as const) {
      const v = entry[field];
      if (v === undefined) continue;
      if (typeof v !== 'string' || v.trim() === '')
        throw bad(['d1_databases', i, field], 'must be a non-empty string');
      result[field] = v;
    }
    return result;
  });
}

/**
 * `durable_objects` and `migrations` (docs/bindings.md "Durable Objects"): `{ bindings: [{ name,
 * class_name }] }` and wrangler's list of `{ tag, new_classes?, new_sqlite_classes?,
 * renamed_classes?: [{ from, to }], deleted_classes? }`, applied in order. A binding reaches a class
 * of this worker that the migrations leave in place; another worker's classes (`script_name`),
 * `environment` and `transferred_classes` are refused, since each application runs its own classes.
 * A class name once used is never created again: its storage key derives from it.
 */
function parseDurableObjects(
  value: unknown,
  migrationsValue: unknown,
  scriptName: string | null,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): DurableObjectsConfig {
  const classes = parseMigrations(migrationsValue, bad);
  if (value === undefined || value === null) return { bindings: [], ...classes };
  const example = '{ "name": "COUNTER", "class_name": "Counter" }';
  if (!isObject(value))
    throw bad(['durable_objects'], `must be an object such as { "bindings": [${example}] }`);
  for (const key of Object.keys(value))
    if (key !== 'bindings')
      throw bad(['durable_objects', key], 'is not a durable_objects setting: "bindings" is');
  const list = value.bindings ?? [];
  if (!Array.isArray(list)) throw bad(['durable_objects', 'bindings'], `must be a list such as [${example}]`);
  const bindings = list.map((entry, i): DurableObjectBinding => {
    const at: KeyPath = ['durable_objects', 'bindings', i];
    if (!isObject(entry)) throw bad(at, `must be an object such as ${example}`);
    if (entry.name === undefined)
      throw bad(at, 'needs "name": the binding the worker reaches the objects by, such as "COUNTER"');
    if (entry.class_name === undefined)
      throw bad(
        at,
        'needs "class_name": the Durable Object class the main module exports, such as "Counter"',
      );
    const { class_name: className } = entry;
    const name = names.claim([...at, 'name'], entry.name, DURABLE_OBJECT_BINDING);
    if (entry.script_name !== undefined && entry.script_name !== scriptName)
      throw bad(
        [...at, 'script_name'],
        `is not supported: a binding reaches this worker's own Durable Object classes only (each application runs its own); reach ${JSON.stringify(entry.script_name)}'s objects through a service binding to it`,
      );
    if (entry.environment !== undefined)
      throw bad(
        [...at, 'environment'],
        "is not supported: a binding reaches this worker's own Durable Object classes only; svc addresses an environment as its own application",
      );
    for (const key of Object.keys(entry))
      if (!['name', 'class_name', 'script_name', 'environment'].includes(key))
        throw bad([...at, key], 'is not a Durable Object binding setting: "name" and "class_name" are');
    if (typeof className !== 'string' || !CLASS_NAME.test(className) || FORBIDDEN_NAMES.includes(className))
      throw bad(
        [...at, 'class_name'],
        `must name a class the main module exports, such as "Counter", got ${JSON.stringify(className)}`,
      );
    if (!classes.classes.some((c) => c.class_name === className)) {
      const deleted = classes.deleted.some((c) => c.class_name === className);
      throw bad(
        [...at, 'class_name'],
        deleted
          ? `names ${className}, which a deleted_classes migration deletes; remove the binding`
          : `names ${className}, which no migration creates; add a migration such as { "tag": "v1", "new_sqlite_classes": ["${className}"] }`,
      );
    }
    return { name, class_name: className };
  });
  return { bindings, ...classes };
}

/** Applies wrangler's `migrations` in order: the classes they leave, and those they delete. */
function parseMigrations(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
): Omit<DurableObjectsConfig, 'bindings'> {
  if (value === undefined || value === null) return { classes: [], deleted: [] };
  const example = '{ "tag": "v1", "new_sqlite_classes": ["Counter"] }';
  if (!Array.isArray(value)) throw bad(['migrations'], `must be a list such as [${example}]`);
  const live = new Map<string, DurableObjectClassConfig>();
  const deleted: { class_name: string; first_name: string }[] = [];
  const used = new Set<string>();
  const tags = new Set<string>();
  const FIELDS = ['tag', 'new_classes', 'new_sqlite_classes', 'renamed_classes', 'deleted_classes'];
  value.forEach((migration, i) => {
    const at: KeyPath = ['migrations', i];
    if (!isObject(migration)) throw bad(at, `must be an object such as ${example}`);
    if (migration.transferred_classes !== undefined)
      throw bad(
        [...at, 'transferred_classes'],
        'is not supported: classes move between workers on Cloudflare only; each svc application keeps its own',
      );
    for (const key of Object.keys(migration))
      if (!FIELDS.includes(key))
        throw bad([...at, key], `is not a migration setting: ${FIELDS.map((f) => `"${f}"`).join(', ')} are`);
    const { tag } = migration;
    if (tag === undefined) throw bad(at, 'needs "tag": the migration\'s name, such as "v1"');
    if (typeof tag !== 'string' || tag.trim() === '') throw bad([...at, 'tag'], 'must be a non-empty string');
    if (tags.has(tag))
      throw bad([...at, 'tag'], `names ${JSON.stringify(tag)}, which an earlier migration names`);
    tags.add(tag);
    const names = (field: string): string[] => {
      const list = migration[field] ?? [];
      if (!Array.isArray(list))
        throw bad([...at, field], 'must be a list of class names such as ["Counter"]');
      return list.map((c, j) => {
        if (typeof c !== 'string' || !CLASS_NAME.test(c) || FORBIDDEN_NAMES.includes(c))
          throw bad([...at, field, j], `must be a class name such as "Counter", got ${JSON.stringify(c)}`);
        return c;
      });
    };
    const create = (field: string, sql: boolean) =>
      names(field).forEach((c, j) => {
        if (used.has(c))
          throw bad(
            [...at, field, j],
            live.has(c)
              ? `creates ${c}, which an earlier migration already creates`
              : `creates ${c}, a name an earlier migration used: a class name is never reused (its objects' storage is named after it); choose another name`,
          );
        used.add(c);
        live.set(c, { class_name: c, first_name: c, sql });
      });
    create('new_classes', false);
    create('new_sqlite_classes', true);
    const renames = migration.renamed_classes ?? [];
    if (!Array.isArray(renames))
      throw bad([...at, 'renamed_classes'], 'must be a list such as [{ "from": "Counter", "to": "Tally" }]');
    renames.forEach((rename, j) => {
      const where: KeyPath = [...at, 'renamed_classes', j];
      if (!isObject(rename) || typeof rename.from !== 'string' || typeof rename.to !== 'string')
        throw bad(where, 'must be an object such as { "from": "Counter", "to": "Tally" }');
      const from = live.get(rename.from);
      if (!from)
        throw bad([...where, 'from'], `names ${rename.from}, which no earlier migration leaves in place`);
      if (!CLASS_NAME.test(rename.to) || FORBIDDEN_NAMES.includes(rename.to))
        throw bad([...where, 'to'], `must be a class name such as "Tally", got ${JSON.stringify(rename.to)}`);
      if (used.has(rename.to))
        throw bad(
          [...where, 'to'],
          `names ${rename.to}, a name an earlier migration used: a class name is never reused`,
        );
      used.add(rename.to);
      live.delete(rename.from);
      live.set(rename.to, { ...from, class_name: rename.to });
    });
    names('deleted_classes').forEach((c, j) => {
      const gone = live.get(c);
      if (!gone)
        throw bad([...at, 'deleted_classes', j], `names ${c}, which no earlier migration leaves in place`);
      live.delete(c);
      deleted.push({ class_name: c, first_name: gone.first_name });
    });
  });
  return { classes: [...live.values()], deleted };
}

/**
 * Cloudflare's consumer settings: each field's range and its default
 * (developers.cloudflare.com/queues/configuration/configure-queues/, .../platform/limits/).
 */
const QUEUE_CONSUMER_SETTINGS = {
  max_batch_size: { min: 1, max: 100, fallback: 10, what: 'messages' },
  max_batch_timeout: { min: 0, max: 60, fallback: 5, what: 'seconds' },
  max_retries: { min: 0, max: 100, fallback: 3, what: 'retries' },
  retry_delay: { min: 0, max: 86_400, fallback: 0, what: 'seconds' },
  max_concurrency: { min: 1, max: 250, fallback: null, what: 'invocations' },
} as const;
const QUEUE_MAX_DELAY_SECONDS = 86_400;

/**
 * `queues` (docs/bindings.md "Queues"): `{ producers: [{ binding, queue, delivery_delay? }],
 * consumers: [{ queue, max_batch_size?, max_batch_timeout?, max_retries?, dead_letter_queue?,
 * retry_delay?, max_concurrency? }] }`, as wrangler has them. A producer's binding name is a JS
 * identifier no other binding takes; a queue is consumed by one entry; the consumer's unset
 * fields take Cloudflare's defaults. A pull consumer (`type: "http_pull"`) is refused: svc has no
 * HTTP API for queues.
 */
export function parseQueues(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): { producers: QueueProducerBinding[]; consumers: QueueConsumer[] } {
  if (value === undefined || value === null) return { producers: [], consumers: [] };
  if (!isObject(value))
    throw bad(
      ['queues'],
      'must be an object such as { "producers": [{ "binding": "JOBS", "queue": "jobs" }] }',
    );
  for (const key of Object.keys(value))
    if (key !== 'producers' && key !== 'consumers')
      throw bad(['queues', key], 'is not a queues setting: "producers" and "consumers" are');
  const seconds = (path: KeyPath, v: unknown, min: number, max: number, what: string): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
      throw bad(path, `must be a whole number of ${what} from ${min} to ${max}, got ${JSON.stringify(v)}`);
    return v;
  };
  const queueName = (path: KeyPath, v: unknown): string => {
    if (!isQueueName(v))
      throw bad(path, `must be a queue name: ${QUEUE_NAME_RULE}, got ${JSON.stringify(v ?? null)}`);
    return v;
  };
  const producersValue = value.producers ?? [];
  const producerExample = '{ "binding": "JOBS", "queue": "jobs" }';
  if (!Array.isArray(producersValue))
    throw bad(['queues', 'producers'], `must be a list such as [${producerExample}]`);
  const producers = producersValue.map((entry, i): QueueProducerBinding => {
    const at: KeyPath = ['queues', 'producers', i];
    if (!isObject(entry)) throw bad(at, `must be an object such as ${producerExample}`);
    if (entry.binding === undefined)
      throw bad(at, 'needs "binding": the name the worker sends to the queue by, such as "JOBS"');
    if (entry.queue === undefined) throw bad(at, 'needs "queue": the queue\'s name, such as "jobs"');
    const binding = names.claim([...at, 'binding'], entry.binding, QUEUE_PRODUCER);
    const producer: QueueProducerBinding = { binding, queue: queueName([...at, 'queue'], entry.queue) };
    if (entry.delivery_delay !== undefined)
      producer.delivery_delay = seconds(
        [...at, 'delivery_delay'],
        entry.delivery_delay,
        0,
        QUEUE_MAX_DELAY_SECONDS,
        'seconds',
      );
    return producer;
  });
  const consumersValue = value.consumers ?? [];
  const consumerExample = '{ "queue": "jobs", "max_batch_size": 10 }';
  if (!Array.isArray(consumersValue))
    throw bad(['queues', 'consumers'], `must be a list such as [${consumerExample}]`);
  const consumed = new Set<string>();
  const consumers = consumersValue.map((entry, i): QueueConsumer => {
    const at: KeyPath = ['queues', 'consumers', i];
    if (!isObject(entry)) throw bad(at, `must be an object such as ${consumerExample}`);
    if (entry.queue === undefined) throw bad(at, 'needs "queue": the name of the queue the worker consumes');
    const queue = queueName([...at, 'queue'], entry.queue);
    if (consumed.has(queue))
      throw bad(
        [...at, 'queue'],
        `names ${queue}, which an earlier consumer consumes: a queue has one consumer`,
      );
    consumed.add(queue);
    if (entry.type !== undefined && entry.type !== 'worker')
      throw bad(
        [...at, 'type'],
        "is not supported: svc delivers a queue to the worker's queue handler only (no HTTP pull consumers)",
      );
    if (entry.visibility_timeout_ms !== undefined)
      throw bad([...at, 'visibility_timeout_ms'], 'is for HTTP pull consumers, which svc has not');
    let dead: string | null = null;
    if (entry.dead_letter_queue !== undefined) {
      dead = queueName([...at, 'dead_letter_queue'], entry.dead_letter_queue);
      if (dead === queue)
        throw bad(
          [...at, 'dead_letter_queue'],
          'names the queue itself: a message past its retries would never leave it',
        );
    }
    const given = (key: keyof typeof QUEUE_CONSUMER_SETTINGS): number | undefined => {
      const s = QUEUE_CONSUMER_SETTINGS[key];
      return entry[key] === undefined ? undefined : seconds([...at, key], entry[key], s.min, s.max, s.what);
    };
    const S = QUEUE_CONSUMER_SETTINGS;
    return {
      queue,
      max_batch_size: given('max_batch_size') ?? S.max_batch_size.fallback,
      max_batch_timeout: given('max_batch_timeout') ?? S.max_batch_timeout.fallback,
      max_retries: given('max_retries') ?? S.max_retries.fallback,
      dead_letter_queue: dead,
      retry_delay: given('retry_delay') ?? S.retry_delay.fallback,
      max_concurrency: given('max_concurrency') ?? S.max_concurrency.fallback,
    };
  });
  return { producers, consumers };
}

/**
 * `services` (docs/bindings.md "Service bindings"): a list of `{ binding, service, entrypoint?,
 * props? }`. A binding name is a JS identifier no other binding takes; `service` is an application
 * name (or the worker's own script name); `entrypoint` names a class or object the target's main
 * module exports; `props` is the JSON object the target sees as `ctx.props`. wrangler's
 * `environment` is refused, since svc addresses an environment as its own application.
 */
function parseServices(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
  names: BindingNames,
): ServiceBinding[] {
  if (value === undefined || value === null) return [];
  const example = '{ "binding": "API", "service": "api" }';
  if (!Array.isArray(value)) throw bad(['services'], `must be a list such as [${example}]`);
  return value.map((entry, i) => {
    if (!isObject(entry)) throw bad(['services', i], `must be an object such as ${example}`);
    const { service, entrypoint, props } = entry;
    const at = (field: string): KeyPath =>
      entry[field] === undefined ? ['services', i] : ['services', i, field];
    if (entry.binding === undefined)
      throw bad(at('binding'), 'needs "binding": the name the worker reaches the service by, such as "API"');
    if (service === undefined)
      throw bad(at('service'), 'needs "service": the application the binding reaches, such as "api"');
    const binding = names.claim(['services', i, 'binding'], entry.binding, SERVICE_BINDING);
    if (!isApplicationName(service))
      throw bad(
        ['services', i, 'service'],
        `must be an application name: 1-63 lowercase letters and digits, optionally separated by single hyphens, got ${JSON.stringify(service)}`,
      );
    if (entry.environment !== undefined)
      throw bad(
        ['services', i, 'environment'],
        `is not supported: svc addresses an environment as its own application; name it in "service" (such as "${service}-${typeof entry.environment === 'string' ? entry.environment : 'staging'}")`,
      );
    if (
      entrypoint !== undefined &&
      (typeof entrypoint !== 'string' ||
        !ENTRYPOINT_NAME.test(entrypoint) ||
        FORBIDDEN_NAMES.includes(entrypoint))
    )
      throw bad(
        ['services', i, 'entrypoint'],
        `must name an export of the target's main module, such as "AdminApi", got ${JSON.stringify(entrypoint)}`,
      );
    if (props !== undefined && !isObject(props))
      throw bad(['services', i, 'props'], 'must be an object, which the target sees as ctx.props');
    return {
      binding,
      service,
      ...(entrypoint !== undefined ? { entrypoint: entrypoint as string } : {}),
      ...(props !== undefined ? { props: props as Record<string, unknown> } : {}),
    };
  });
}

/** wrangler's build options, checked as wrangler types them. */
function parseBuildOptions(
  doc: Record<string, unknown>,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
): WorkerConfig['build'] {
  const strings = (key: 'define' | 'alias', example: string): Record<string, string> => {
    const value = doc[key];
    if (value === undefined) return {};
    if (!isObject(value) || !Object.values(value).every((v) => typeof v === 'string')) {
      throw bad([key], `must be an object of strings, such as ${example}`);
    }
    return value as Record<string, string>;
  };
  const flag = (key: 'minify' | 'keep_names', fallback: boolean): boolean => {
    if (doc[key] === undefined) return fallback;
    if (typeof doc[key] !== 'boolean') throw bad([key], 'must be true or false');
    return doc[key] as boolean;
  };
  const text = (key: 'jsx_factory' | 'jsx_fragment' | 'tsconfig'): string | null => {
    if (doc[key] === undefined) return null;
    if (typeof doc[key] !== 'string' || (doc[key] as string).trim() === '')
      throw bad([key], 'must be a non-empty string');
    return doc[key] as string;
  };
  return {
    define: strings('define', '{ "DEBUG": "false" }'),
    alias: strings('alias', '{ "node-fetch": "./src/fetch-shim.js" }'),
    minify: flag('minify', false),
    keep_names: flag('keep_names', true),
    jsx_factory: text('jsx_factory'),
    jsx_fragment: text('jsx_fragment'),
    tsconfig: text('tsconfig'),
  };
}

/**
 * wrangler's `build` table, as wrangler types it: `command` and `cwd` strings, `watch_dir` a
 * string or strings (only `wrangler dev` watches it). `{}` or no `command` builds nothing.
 */
function parseCustomBuild(
  doc: Record<string, unknown>,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
): CustomBuild | null {
  const build = doc.build;
  if (build === undefined) return null;
  if (!isObject(build)) throw bad(['build'], 'must be an object, such as { "command": "npm run build" }');
  const { command, cwd, watch_dir: watch } = build;
  if (command !== undefined && (typeof command !== 'string' || command.trim() === ''))
    throw bad(['build', 'command'], 'must be a non-empty string: the shell command to run before the deploy');
  if (cwd !== undefined && (typeof cwd !== 'string' || cwd.trim() === ''))
    throw bad(['build', 'cwd'], 'must be a non-empty string: a directory relative to the project');
  const paths = Array.isArray(watch) ? watch : [watch];
  if (watch !== undefined && !paths.every((path) => typeof path === 'string'))
    throw bad(['build', 'watch_dir'], 'must be a directory or a list of directories');
  if (command === undefined) return null;
  return { command, cwd: (cwd as string | undefined) ?? null };
}

/** The types whose defaults wrangler adds after the config's rules while bundling. */
const DEFAULT_RULE_TYPES = ['Text', 'Data', 'CompiledWasm'];

/**
 * wrangler's warning on rules: a rule without `fallthrough` (left out, not `false`) hides every
 * later rule of its type, the defaults included, and wrangler says so.
 */
function shadowedRules(raw: unknown[] | undefined, rules: ModuleRule[]): { at: KeyPath; why: string }[] {
  const out: { at: KeyPath; why: string }[] = [];
  const closedBy = new Map<string, number>();
  rules.forEach((rule, i) => {
    const earlier = closedBy.get(rule.type);
    if (earlier !== undefined) {
      if ((raw?.[earlier] as { fallthrough?: unknown })?.fallthrough === undefined) {
        out.push({
          at: ['rules', i],
          why: `"rules[${i}]" is ignored: the earlier ${rule.type} rule "rules[${earlier}]" has no fallthrough; add "fallthrough": true to it to use both, or "fallthrough": false to silence this`,
        });
      }
      return;
    }
    if (!rule.fallthrough) closedBy.set(rule.type, i);
  });
  for (const [type, i] of closedBy) {
    if (
      DEFAULT_RULE_TYPES.includes(type) &&
      (raw?.[i] as { fallthrough?: unknown })?.fallthrough === undefined
    ) {
      out.push({
        at: ['rules', i],
        why: `"rules[${i}]" has no fallthrough, so wrangler's default ${type} rule is ignored; add "fallthrough": true to keep it, or "fallthrough": false to silence this`,
      });
    }
  }
  return out;
}

function parseRules(value: unknown, bad: (path: KeyPath, why: string) => WorkerConfigError): ModuleRule[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw bad(['rules'], 'must be a list such as [{ "type": "Text", "globs": ["**/*.sql"] }]');
  }
  return value.map((rule, i) => {
    const r = (rule ?? {}) as Record<string, unknown>;
    if (typeof rule !== 'object' || Array.isArray(rule) || !RULE_TYPES.includes(r.type as never)) {
      throw bad(['rules', i, 'type'], `must be one of ${RULE_TYPES.join(', ')}`);
    }
    if (
      !Array.isArray(r.globs) ||
      r.globs.length === 0 ||
      !r.globs.every((g) => typeof g === 'string' && g !== '')
    ) {
      throw bad(['rules', i, 'globs'], 'must be a non-empty list of glob patterns such as "**/*.sql"');
    }
    if (r.fallthrough !== undefined && typeof r.fallthrough !== 'boolean') {
      throw bad(['rules', i, 'fallthrough'], 'must be true or false');
    }
    return {
      type: r.type as ModuleRule['type'],
      globs: r.globs as string[],
      fallthrough: r.fallthrough === true,
    };
  });
}

/** `triggers: { crons: [...] }`; each expression is checked by the scheduler's own parser. */
function parseCrons(value: unknown, bad: (path: KeyPath, why: string) => WorkerConfigError): string[] {
  if (value === undefined) return [];
  if (!isObject(value)) throw bad(['triggers'], 'must be an object such as { "crons": ["0 * * * *"] }');
  const crons = value.crons;
  if (crons === undefined) return [];
  if (!Array.isArray(crons) || !crons.every((c) => typeof c === 'string')) {
    throw bad(['triggers', 'crons'], 'must be a list of cron expressions such as "*/5 * * * *"');
  }
  for (const cron of crons) {
    const why = cronProblem(cron);
    if (why) throw bad(['triggers', 'crons'], `${JSON.stringify(cron)} is no cron expression: ${why}`);
  }
  return [...new Set(crons.map((c) => c.trim()))];
}

function parseAssets(
  value: unknown,
  bad: (path: KeyPath, why: string) => WorkerConfigError,
): WorkerConfig['assets'] {
  if (value === undefined) return null;
  if (!isObject(value)) throw bad(['assets'], 'must be an object such as { "directory": "./public" }');
  if (typeof value.directory !== 'string' || value.directory.trim() === '') {
    throw bad(
      ['assets', 'directory'],
      'is required: the folder of static files to serve, such as "./public"',
    );
  }
  if (value.binding !== undefined && (typeof value.binding !== 'string' || !VAR_NAME.test(value.binding))) {
    throw bad(['assets', 'binding'], 'must be a binding name: letters, digits and underscores');
  }
  const html = value.html_handling ?? 'auto-trailing-slash';
  if (
    !['auto-trailing-slash', 'force-trailing-slash', 'drop-trailing-slash', 'none'].includes(html as string)
  ) {
    throw bad(
      ['assets', 'html_handling'],
      'must be "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash" or "none"',
    );
  }
  const notFound = value.not_found_handling ?? 'none';
  if (!['none', '404-page', 'single-page-application'].includes(notFound as string)) {
    throw bad(['assets', 'not_found_handling'], 'must be "none", "404-page" or "single-page-application"');
  }
  const routes = value.run_worker_first ?? false;
  if (typeof routes !== 'boolean') {
    const why = Array.isArray(routes)
      ? workerFirstProblem(routes)
      : 'must be true, false or a list of route patterns';
    if (why) throw bad(['assets', 'run_worker_first'], why);
  }
  return {
    directory: value.directory,
    binding: (value.binding as string | undefined) ?? null,
    html_handling: html as AssetsConfig['html_handling'],
    not_found_handling: notFound as AssetsConfig['not_found_handling'],
    run_worker_first: routes as boolean | string[],
  };
}

/** Workers' bounds on `run_worker_first` route lists (workers-shared's static routing rules). */
const MAX_WORKER_FIRST_ROUTES = 100;
const MAX_WORKER_FIRST_ROUTE_LENGTH = 100;

/**
 * Why a `run_worker_first` list is refused, or null: routes start with `/` (to the worker) or
 * `!/` (kept on assets), at least one positive, at most 100 of at most 100 characters, no
 * duplicate, none made redundant by a broader `*` route of its kind.
 */
export function workerFirstProblem(routes: unknown[]): string | null {
  if (routes.length === 0) return 'is an empty list: give at least one route such as "/api/*"';
  if (routes.length > MAX_WORKER_FIRST_ROUTES) {
    return `has ${routes.length} routes; at most ${MAX_WORKER_FIRST_ROUTES} are allowed`;
  }
  const problems: string[] = [];
  const positive: string[] = [];
  const negative: string[] = [];
  for (const route of routes) {
    if (typeof route !== 'string') problems.push(`${JSON.stringify(route)} is no route pattern`);
    else if (route.startsWith('!/')) negative.push(route);
    else if (route.startsWith('/')) positive.push(route);
    else if (route.startsWith('!')) problems.push(`'${route}': a negative route must start with '!/'`);
    else problems.push(`'${route}': a route must start with '/' or '!/'`);
  }
  if (problems.length === 0 && positive.length === 0) {
    return 'holds only negative routes: add at least one route the worker runs first for, such as "/*"';
  }
  for (const group of [positive, negative]) {
    const seen = new Set<string>();
    for (const route of group) {
      if (route.length > MAX_WORKER_FIRST_ROUTE_LENGTH) {
        problems.push(`'${route}': a route may be at most ${MAX_WORKER_FIRST_ROUTE_LENGTH} characters long`);
      }
      if (seen.has(route)) problems.push(`'${route}' is given twice`);
      seen.add(route);
      if (!route.endsWith('*')) continue;
      for (const other of group) {
        if (other !== route && other.startsWith(route.slice(0, -1))) {
          problems.push(`'${other}' is redundant: '${route}' already covers it`);
        }
      }
    }
  }
  return problems.length > 0 ? `has invalid routes: ${problems.join('; ')}` : null;
}

/**
 * The plain value of a parsed node. Objects are built with own data properties only, so a key
 * such as `__proto__` is an ordinary key here and never reaches a prototype.
 */
function nodeValue(node: Node): unknown {
  switch (node.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const property of node.children ?? []) {
        const [key, value] = property.children ?? [];
        if (!key || !value) continue;
        Object.defineProperty(out, String(key.value), {
          value: nodeValue(value),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    case 'array':
      return (node.children ?? []).map(nodeValue);
    default:
      return node.value;
  }
}

/** A key path as a user writes it: `vars.GREETING`, `rules[0].type`. */
function keyName(path: KeyPath): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');
}

function has(object: object, key: string): boolean {
  return Object.hasOwn(object, key);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

function isRealDate(text: string): boolean {
  const match = DATE.exec(text);
  if (!match) return false;
  const [, y, m, d] = match.map(Number) as [number, number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

/** 1-based line and column of a character offset (columns count UTF-16 units, as editors do). */
export function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - before.lastIndexOf('\n') };
}
