// Which worker config `svc deploy` reads and what it becomes in the artifact, as wrangler resolves
// it for `wrangler deploy` (docs/deploys.md "Which config is deployed"):
//   1. `-c`/`--worker-config <file>` when given;
//   2. svc's own `cell.jsonc`, else `cell.json`, at the project root;
//   3. the deploy redirect `.wrangler/deploy/config.json` that framework builds write
//      (`@cloudflare/vite-plugin`): its `configPath`, relative to the redirect file, is deployed;
//   4. `wrangler.json`, else `wrangler.jsonc`, else `wrangler.toml` (wrangler's order).
// With `--env <env>` the config's `env.<env>` section is merged as wrangler merges it: inheritable
// keys from the section when it sets them, else from the top level; non-inheritable keys (vars and
// bindings) only from the section; the name is the section's, else `<name>-<env>`.
// A config outside the project root has its paths (`main`, `assets.directory`, `base_dir`)
// rewritten to the root, where the artifact's `cell.jsonc` sits; a path that leaves the project
// is refused here, before anything is packed.
// Refusals and warnings of the runtime's parser are placed in the user's own file (TOML included)
// through `locate`, not in the converted text.

import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, posix, relative, resolve, sep } from 'node:path';
import { findNodeAtLocation, type Node } from 'jsonc-parser';
import { parse as parseToml } from 'smol-toml';
import { invalidInput } from '../problem.ts';
import { parseConfigSyntax, position, WorkerConfigError } from '../runtime-tools/worker-config.ts';

export const WORKER_CONFIGS = ['cell.jsonc', 'cell.json'] as const;
/** wrangler's config files, in the order wrangler looks for them. */
export const WRANGLER_CONFIGS = ['wrangler.json', 'wrangler.jsonc', 'wrangler.toml'] as const;
/** The redirect a framework build leaves for `wrangler deploy`, relative to the project root. */
export const DEPLOY_REDIRECT = '.wrangler/deploy/config.json';

type KeyPath = (string | number)[];
type Position = { line: number; column: number };

/** The worker config of a project, as the artifact will carry it. */
export interface ProjectConfig {
  /** Its name in the artifact. */
  file: (typeof WORKER_CONFIGS)[number];
  /** The artifact's config: the user's file byte for byte when nothing changed, else generated JSON. */
  bytes: Buffer;
  /** The user's file, relative to the project root (`/`-separated). */
  source: string;
  /** Set when the artifact's config is not the user's file as it is: why (for the note). */
  convertedFrom?: string;
  /** The redirect file that named the source, when one did. */
  redirectedBy?: string;
  /** The application name the config gives (the top-level `name`, before any environment). */
  name: unknown;
  /** Where a key path of the artifact's config sits in the user's file (null: not there). */
  locate?: (path: KeyPath) => Position | null;
  /** Lines for the user about how the config was read. */
  notes: string[];
}

export interface ResolveOptions {
  /** `-c`/`--worker-config`, relative to the working directory. */
  configFile?: string;
  /** `--env`: the section of the config to merge. */
  env?: string;
}

/** Keys wrangler inherits from the top level into an environment that does not set them. */
const INHERITABLE = new Set([
  'account_id',
  'compatibility_date',
  'compatibility_flags',
  'jsx_factory',
  'jsx_fragment',
  'tsconfig',
  'rules',
  'name',
  'main',
  'find_additional_modules',
  'preserve_file_names',
  'base_dir',
  'route',
  'routes',
  'triggers',
  'assets',
  'limits',
  'placement',
  'build',
  'workers_dev',
  'preview_urls',
  'migrations',
  'exports',
  'logfwdr',
  'no_bundle',
  'minify',
  'keep_names',
  'first_party_worker',
  'logpush',
  'upload_source_maps',
  'observability',
  'access',
  'cache',
  'compliance_region',
  'python_modules',
  'previews',
]);
/** Top-level keys that are never part of an environment. */
const TOP_LEVEL_ONLY = new Set([
  '$schema',
  'env',
  'send_metrics',
  'keep_vars',
  'dev',
  'site',
  'legacy_env',
  'alias',
]);
/** What wrangler itself adds to a config it generates (a redirected one): never the user's keys. */
const COMPUTED_FIELDS = [
  'configPath',
  'userConfigPath',
  'topLevelName',
  'definedEnvironments',
  'targetEnvironment',
];
/** Config paths that name files, relative to the config file. */
const PATH_KEYS: KeyPath[] = [['main'], ['assets', 'directory'], ['base_dir'], ['tsconfig']];

/** The project's worker config; null when it has none. */
export async function resolveProjectConfig(
  dir: string,
  options: ResolveOptions = {},
): Promise<ProjectConfig | null> {
  const found = await findConfigFile(dir, options.configFile);
  if (!found) return null;
  const { path, redirectedBy, auxiliary = 0 } = found;
  const source = relative(dir, path).split(sep).join('/');
  const bytes = await readFile(path);
  const text = bytes.toString('utf8');
  const toml = path.endsWith('.toml');
  const parsed = toml ? parseTomlConfig(text, source) : parseJsonConfig(text, source);
  const notes: string[] = [];
  if (redirectedBy)
    notes.push(`svc: using ${source}, named by ${redirectedBy} (written by the project's build)`);
  if (auxiliary > 0) {
    notes.push(
      `svc: ${redirectedBy} also names ${auxiliary} auxiliary worker${auxiliary > 1 ? 's' : ''}; svc deploys the entry worker only: deploy each auxiliary worker's generated config with -c as an application of its own`,
    );
  }

  let doc = parsed.doc;
  let name = doc.name;
  const fromEnv = new Set<string>();
  const redirected = redirectedBy !== undefined;
  if (redirected) {
    // A build for an environment already names the worker `<name>-<env>`; svc's --env adds the
    // suffix itself, so the application comes from the top-level name the build kept.
    if (options.env !== undefined && typeof doc.topLevelName === 'string') name = doc.topLevelName;
    const target = doc.targetEnvironment;
    if (options.env !== undefined && typeof target === 'string' && target !== options.env) {
      throw invalidInput(
        'Invalid worker config',
        `${source} was built for the environment "${target}", not "${options.env}"; run the project's build for "${options.env}" (CLOUDFLARE_ENV=${options.env}) and deploy again`,
      );
    }
    doc = without(doc, COMPUTED_FIELDS);
  }
  const environments = isObject(doc.env) ? Object.keys(doc.env) : [];
  if (options.env !== undefined && environments.length > 0) {
    const section = (doc.env as Record<string, unknown>)[options.env];
    if (!isObject(section)) {
      const at = parsed.locate(['env']) ?? { line: 1, column: 1 };
      throw invalidInput(
        'Invalid worker config',
        `${source}:${at.line}:${at.column}: no environment "${options.env}" in "env" (it has ${environments.map((e) => `"${e}"`).join(', ')}); add an [env.${options.env}] section or deploy one of those`,
      );
    }
    doc = mergeEnvironment(doc, section, options.env, fromEnv);
  } else if (environments.length > 0) {
    notes.push(
      `svc: ${source} defines environments (${environments.join(', ')}) but no --env was given; deploying the top level`,
    );
  }
  if ('env' in doc) doc = without(doc, ['env']);

  const configDir = relative(dir, dirname(path)).split(sep).join('/');
  if (configDir !== '') doc = rebasePaths(doc, configDir, source, parsed.locate);
  checkPathsInside(dir, doc, source, parsed.locate, configDir);

  const own = WORKER_CONFIGS.find((f) => f === source);
  const transformed = toml || redirected || configDir !== '' || doc !== parsed.doc;
  if (!transformed) {
    // The user's JSON file goes byte for byte; the runtime reads it as cell.jsonc.
    return { file: own ?? 'cell.jsonc', bytes, source, convertedFrom: own ? undefined : source, name, notes };
  }
  // A key the file does not hold (a name made from `<name>-<env>`) is placed at its start.
  const locate = (key: KeyPath): Position => {
    const head = key[0];
    const inFile =
      typeof head === 'string' && fromEnv.has(head)
        ? parsed.locate(['env', options.env!, ...key])
        : parsed.locate(key);
    return inFile ?? { line: 1, column: 1 };
  };
  const generated = `// Generated by svc deploy from ${source}.\n${JSON.stringify(doc, null, 2)}\n`;
  return {
    file: 'cell.jsonc',
    bytes: Buffer.from(generated, 'utf8'),
    source,
    convertedFrom: source,
    redirectedBy,
    name,
    locate,
    notes,
  };
}

/** The config file to deploy, and the redirect that named it. */
async function findConfigFile(
  dir: string,
  given: string | undefined,
): Promise<{ path: string; redirectedBy?: string; auxiliary?: number } | null> {
  if (given !== undefined) {
    const path = resolve(given);
    if (!isFile(path))
      throw invalidInput('No worker config', `${given} is no file; -c names the worker config to deploy`);
    if (!isInside(dir, path)) {
      throw invalidInput(
        'Invalid worker config',
        `${given} lies outside ${dir}; an artifact carries only the project's own files: deploy the folder that holds it`,
      );
    }
    return { path };
  }
  for (const file of WORKER_CONFIGS) if (isFile(join(dir, file))) return { path: join(dir, file) };
  const redirect = join(dir, DEPLOY_REDIRECT);
  if (isFile(redirect)) {
    const { path, auxiliary } = await readRedirect(dir, redirect);
    return { path, redirectedBy: DEPLOY_REDIRECT, auxiliary };
  }
  for (const file of WRANGLER_CONFIGS) if (isFile(join(dir, file))) return { path: join(dir, file) };
  return null;
}

/** The config a deploy redirect names, refused as wrangler refuses a broken one. */
async function readRedirect(dir: string, redirect: string): Promise<{ path: string; auxiliary: number }> {
  const text = await readFile(redirect, 'utf8');
  let configPath: unknown;
  let auxiliary = 0;
  try {
    const doc = parseConfigSyntax(text, DEPLOY_REDIRECT).doc as {
      configPath?: unknown;
      auxiliaryWorkers?: unknown;
    };
    configPath = doc.configPath;
    if (Array.isArray(doc.auxiliaryWorkers)) auxiliary = doc.auxiliaryWorkers.length;
  } catch (err) {
    throw invalidInput('Invalid worker config', `${(err as Error).message}; run the project's build again`);
  }
  if (typeof configPath !== 'string' || configPath === '') {
    throw invalidInput(
      'Invalid worker config',
      `${DEPLOY_REDIRECT} has no "configPath"; it is written by the project's build (vite build): run it again`,
    );
  }
  const path = resolve(dirname(redirect), configPath);
  if (!isFile(path)) {
    throw invalidInput(
      'No worker config',
      `${DEPLOY_REDIRECT} names ${relative(dir, path)}, which does not exist; run the project's build (vite build) first`,
    );
  }
  if (!isInside(dir, path)) {
    throw invalidInput(
      'Invalid worker config',
      `${DEPLOY_REDIRECT} names ${path}, outside ${dir}; deploy the folder that holds the build output`,
    );
  }
  return { path, auxiliary };
}

interface ParsedSource {
  doc: Record<string, unknown>;
  locate: (path: KeyPath) => Position | null;
}

function parseJsonConfig(text: string, file: string): ParsedSource {
  let parsed: { doc: Record<string, unknown>; tree: Node };
  try {
    parsed = parseConfigSyntax(text, file);
  } catch (err) {
    if (err instanceof WorkerConfigError) throw invalidInput('Invalid worker config', err.message);
    throw err;
  }
  const { doc, tree } = parsed;
  return {
    doc,
    locate: (path) => {
      for (let n = path.length; n > 0; n--) {
        const node = findNodeAtLocation(tree, path.slice(0, n));
        if (node) return position(text, (node.parent?.type === 'property' ? node.parent : node).offset);
      }
      return null;
    },
  };
}

function parseTomlConfig(text: string, file: string): ParsedSource {
  let value: unknown;
  try {
    value = parseToml(text);
  } catch (err) {
    const e = err as Error & { line?: number; column?: number };
    const at = e.line ? `:${e.line}:${e.column ?? 1}` : '';
    throw invalidInput('Invalid worker config', `${file}${at}: ${e.message.split('\n')[0]}; fix the TOML`);
  }
  // TOML dates (`compatibility_date = 2025-06-01`) are written as their text.
  const doc = JSON.parse(
    JSON.stringify(value, (_key, v) => (v instanceof Date ? v.toISOString().slice(0, 10) : v)),
  ) as Record<string, unknown>;
  const keys = tomlKeyPositions(text);
  return {
    doc,
    locate: (path) => {
      for (let n = path.length; n > 0; n--) {
        const at = keys.get(JSON.stringify(path.slice(0, n)));
        if (at) return at;
      }
      return null;
    },
  };
}

/**
 * Where each key of a TOML document is written: `[table]` and `[[array]]` headers and
 * `key = value` lines (dotted and quoted keys included), by key path. Values spread over lines
 * (arrays, multi-line strings) are skipped; their keys are where they start.
 */
export function tomlKeyPositions(text: string): Map<string, Position> {
  const found = new Map<string, Position>();
  const arrays = new Map<string, number>();
  let table: KeyPath = [];
  let inString: string | null = null;
  let depth = 0;
  // A key is where it is first written, its own line or a table below it (`[env.staging]` places `env`).
  const record = (path: KeyPath, at: Position) => {
    for (let n = 1; n <= path.length; n++) {
      const key = JSON.stringify(path.slice(0, n));
      if (!found.has(key)) found.set(key, at);
    }
  };
  text.split('\n').forEach((raw, index) => {
    const line = raw.replace(/\r$/, '');
    if (inString) {
      if (line.includes(inString)) inString = null;
      return;
    }
    if (depth > 0) {
      depth += bracketBalance(line);
      return;
    }
    const column = line.length - line.trimStart().length + 1;
    const body = line.trim();
    if (body === '' || body.startsWith('#')) return;
    const at = { line: index + 1, column };
    const header = /^\[\[\s*([^\]]+?)\s*\]\]/.exec(body) ?? /^\[\s*([^\]]+?)\s*\]/.exec(body);
    if (header) {
      const path = splitKey(header[1]!);
      if (body.startsWith('[[')) {
        const id = JSON.stringify(path);
        const n = arrays.get(id) ?? 0;
        arrays.set(id, n + 1);
        record(path, at);
        table = [...path, n];
      } else table = path;
      record(table, at);
      return;
    }
    const assignment = /^((?:"[^"]*"|'[^']*'|[A-Za-z0-9_.\s-])+?)\s*=\s*(.*)$/.exec(body);
    if (!assignment) return;
    record([...table, ...splitKey(assignment[1]!)], at);
    const value = assignment[2]!;
    for (const quote of ['"""', "'''"]) {
      if (value.startsWith(quote) && !value.slice(3).includes(quote)) inString = quote;
    }
    if (!inString) depth = Math.max(0, bracketBalance(value));
  });
  return found;
}

/** Opening minus closing brackets and braces outside strings. */
function bracketBalance(text: string): number {
  let balance = 0;
  let quote: string | null = null;
  for (const c of text) {
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#') break;
    else if (c === '[' || c === '{') balance++;
    else if (c === ']' || c === '}') balance--;
  }
  return balance;
}

function splitKey(key: string): string[] {
  const parts: string[] = [];
  for (const match of key.matchAll(/"([^"]*)"|'([^']*)'|([^.\s]+)/g)) {
    parts.push(match[1] ?? match[2] ?? match[3]!);
  }
  return parts;
}

/** The top level with `env.<env>` merged as wrangler merges an environment. */
function mergeEnvironment(
  doc: Record<string, unknown>,
  section: Record<string, unknown>,
  env: string,
  fromEnv: Set<string>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(doc)) {
    if (TOP_LEVEL_ONLY.has(key) || INHERITABLE.has(key)) setKey(merged, key, value);
  }
  for (const [key, value] of Object.entries(section)) {
    setKey(merged, key, value);
    fromEnv.add(key);
  }
  // As wrangler: an environment without its own name deploys as `<name>-<env>`.
  if (!Object.hasOwn(section, 'name') && typeof doc.name === 'string')
    setKey(merged, 'name', `${doc.name}-${env}`);
  return merged;
}

/** Paths of a config that is not at the project root, made relative to the root. */
function rebasePaths(
  doc: Record<string, unknown>,
  configDir: string,
  source: string,
  locate: ParsedSource['locate'],
): Record<string, unknown> {
  const out = structuredClone(doc);
  for (const path of PATH_KEYS) {
    const holder = path.length === 1 ? out : out[path[0] as string];
    const key = path[path.length - 1] as string;
    if (!isObject(holder) || typeof holder[key] !== 'string') continue;
    const value = holder[key] as string;
    if (isAbsolute(value)) {
      const at = locate(path) ?? { line: 1, column: 1 };
      throw invalidInput(
        'Invalid worker config',
        `${source}:${at.line}:${at.column}: "${path.join('.')}" is the absolute path ${value}; give it relative to ${source}`,
      );
    }
    holder[key] = posix.normalize(posix.join(configDir, value));
  }
  return out;
}

/** Every path key must stay inside the project: the artifact carries nothing else. */
function checkPathsInside(
  dir: string,
  doc: Record<string, unknown>,
  source: string,
  locate: ParsedSource['locate'],
  configDir: string,
): void {
  for (const path of PATH_KEYS) {
    const holder = path.length === 1 ? doc : doc[path[0] as string];
    const key = path[path.length - 1] as string;
    if (!isObject(holder) || typeof holder[key] !== 'string') continue;
    const value = holder[key] as string;
    if (isInside(dir, resolve(dir, value))) continue;
    const at = locate(path) ?? { line: 1, column: 1 };
    const written = configDir === '' ? value : posix.relative(configDir, value);
    throw invalidInput(
      'Invalid worker config',
      `${source}:${at.line}:${at.column}: "${path.join('.')}" (${written}) lies outside ${dir}, and svc deploys only what is inside the folder it packs: deploy the folder that holds both the config and ${written}`,
    );
  }
}

function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile();
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

function without(doc: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(doc)) if (!keys.includes(key)) setKey(out, key, value);
  return out;
}

/** An own data property, so a key such as `__proto__` stays an ordinary key. */
function setKey(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}
