// The worker config (docs/runtime.md: `cell.jsonc`, else
// `cell.json`, at the project root, with the wrangler keys a user already knows; a top-level
// `env` key is refused). Parsing is pure; only `readWorkerConfig` touches the disk.

import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ParseError, parse, printParseErrorCode } from 'jsonc-parser';
import { type AssetsConfig, isScriptName } from '../../src/runtime-tools/layout.ts';
import { cronProblem } from './cron.ts';
import { CellError } from './errors.ts';

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
  /** wrangler's module `rules`: which files become which module type (see bundle.ts). */
  rules: ModuleRule[];
  /** `triggers.crons`: the schedules the worker's `scheduled` handler runs on. */
  crons: string[];
  /** Unknown keys this runtime ignores, for one warning line each. */
  ignored: string[];
}

/** wrangler's module rule types. */
export const RULE_TYPES = ['ESModule', 'CommonJS', 'Text', 'Data', 'CompiledWasm'] as const;
export interface ModuleRule {
  type: (typeof RULE_TYPES)[number];
  globs: string[];
  fallthrough: boolean;
}

/** Bindings of other products: refused, since a worker relying on them cannot run here. */
const UNSUPPORTED_BINDINGS = [
  'kv_namespaces',
  'r2_buckets',
  'd1_databases',
  'durable_objects',
  'queues',
  'services',
  'ai',
  'vectorize',
  'hyperdrive',
  'analytics_engine_datasets',
  'browser',
  'containers',
  'workflows',
  'secrets_store_secrets',
  'dispatch_namespaces',
  'mtls_certificates',
  'send_email',
  'version_metadata',
];
/** Keys that only steer Cloudflare's own deployment and mean nothing here. */
const IGNORED_KEYS = [
  '$schema',
  'account_id',
  'workers_dev',
  'preview_urls',
  'routes',
  'route',
  'observability',
  'placement',
  'limits',
  'upload_source_maps',
  'keep_vars',
  'minify',
  'logpush',
  'tail_consumers',
  'dev',
];

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FORBIDDEN_NAMES = ['__proto__', 'constructor', 'prototype'];
const COMPAT_FLAG = /^[a-z0-9_]+$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Finds the config: the given path (relative to `cwd`), else `cell.jsonc`, else `cell.json`. */
export function findConfig(cwd: string, given: string | undefined): string {
  if (given !== undefined) {
    const path = resolve(cwd, given);
    if (!existsSync(path)) {
      throw new CellError(`no worker config at ${path}: add cell.jsonc (or cell.json) at the project root`);
    }
    return path;
  }
  for (const name of CONFIG_FILES) {
    const path = join(cwd, name);
    if (existsSync(path)) return path;
  }
  throw new CellError(`no worker config in ${cwd}: add cell.jsonc (or cell.json) at the project root`);
}

export function readWorkerConfig(
  path: string,
  options: { maxCompatibilityDate?: string } = {},
): WorkerConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CellError(`cannot read the worker config ${path}: ${(err as Error).message}`);
  }
  return parseWorkerConfig(text, path, options);
}

/** Parses and validates the config text; every refusal names the file, the key and the fix. */
export function parseWorkerConfig(
  text: string,
  file: string,
  options: { maxCompatibilityDate?: string } = {},
): WorkerConfig {
  const errors: ParseError[] = [];
  const raw: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0) {
    const first = errors[0]!;
    const { line, column } = position(text, first.offset);
    throw new CellError(
      `${file}:${line}:${column}: ${printParseErrorCode(first.error)}: the worker config is not valid JSONC`,
    );
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new CellError(`${file}: the worker config must be a JSON object`);
  }
  const doc = raw as Record<string, unknown>;
  const bad = (key: string, why: string) => new CellError(`${file}: "${key}" ${why}`);

  if ('env' in doc) {
    throw bad(
      'env',
      'is not supported: svc addresses an environment as its own application (svc deploy --env <env>); move the values to the top level, or pass them with svc deploy --var',
    );
  }
  for (const key of UNSUPPORTED_BINDINGS) {
    if (key in doc)
      throw bad(key, 'declares bindings this runtime does not provide; remove the key to deploy here');
  }
  const known = [
    'name',
    'main',
    'compatibility_date',
    'compatibility_flags',
    'vars',
    'assets',
    'no_bundle',
    'rules',
    'triggers',
  ];
  // Cloudflare-only keys are dropped quietly; anything else unknown gets a warning line.
  const ignored = Object.keys(doc).filter((key) => !known.includes(key) && !IGNORED_KEYS.includes(key));

  let name: string | null = null;
  if (doc.name !== undefined) {
    if (!isScriptName(doc.name)) {
      throw bad(
        'name',
        `must be 1-63 lowercase letters or digits, optionally separated by single hyphens (and not "images" or "queues"), got ${JSON.stringify(doc.name)}`,
      );
    }
    name = doc.name;
  }

  let main: string | null = null;
  if (doc.main !== undefined) {
    if (typeof doc.main !== 'string' || doc.main.trim() === '')
      throw bad('main', 'must be the path of the entry module');
    main = doc.main;
  }

  if (doc.compatibility_date === undefined) {
    throw bad(
      'compatibility_date',
      'is required: add "compatibility_date": "YYYY-MM-DD" (for example today\'s date)',
    );
  }
  const date = doc.compatibility_date;
  if (typeof date !== 'string' || !isRealDate(date)) {
    throw bad('compatibility_date', `must be a date written YYYY-MM-DD, got ${JSON.stringify(date)}`);
  }
  if (options.maxCompatibilityDate && date > options.maxCompatibilityDate) {
    throw bad(
      'compatibility_date',
      `${date} is newer than this runtime's workerd supports (${options.maxCompatibilityDate}); use ${options.maxCompatibilityDate} or earlier`,
    );
  }

  let flags: string[] = [];
  if (doc.compatibility_flags !== undefined) {
    const value = doc.compatibility_flags;
    if (!Array.isArray(value) || !value.every((f) => typeof f === 'string' && COMPAT_FLAG.test(f))) {
      throw bad('compatibility_flags', 'must be a list of flag names such as "nodejs_compat"');
    }
    flags = value as string[];
  }

  let vars: Record<string, unknown> = {};
  if (doc.vars !== undefined) {
    if (!doc.vars || typeof doc.vars !== 'object' || Array.isArray(doc.vars)) {
      throw bad('vars', 'must be an object of variable names to values');
    }
    for (const [key, value] of Object.entries(doc.vars as Record<string, unknown>)) {
      if (!VAR_NAME.test(key) || FORBIDDEN_NAMES.includes(key)) {
        throw bad(
          `vars.${key}`,
          'is no variable name: letters, digits and underscores, not starting with a digit',
        );
      }
      if (value === null) throw bad(`vars.${key}`, 'is null: give a string, number, boolean, list or object');
    }
    vars = doc.vars as Record<string, unknown>;
  }

  const assets = parseAssets(doc.assets, bad);
  if (assets?.binding && assets.binding in vars) {
    throw bad('assets.binding', `names ${assets.binding}, which vars also binds; choose another name`);
  }
  if (main === null && assets === null) {
    throw bad('main', 'is required: name the worker entry module (or configure "assets" for a static site)');
  }

  if (doc.no_bundle !== undefined && typeof doc.no_bundle !== 'boolean')
    throw bad('no_bundle', 'must be true or false');

  const rules = parseRules(doc.rules, bad);
  const crons = parseCrons(doc.triggers, bad);
  if (crons.length > 0 && main === null) {
    throw bad('triggers.crons', 'needs a worker: set "main" to the module whose scheduled handler runs');
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
    ignored,
  };
}

function parseRules(value: unknown, bad: (key: string, why: string) => CellError): ModuleRule[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw bad('rules', 'must be a list such as [{ "type": "Text", "globs": ["**/*.sql"] }]');
  }
  return value.map((rule, i) => {
    const r = (rule ?? {}) as Record<string, unknown>;
    if (typeof rule !== 'object' || Array.isArray(rule) || !RULE_TYPES.includes(r.type as never)) {
      throw bad(`rules[${i}].type`, `must be one of ${RULE_TYPES.join(', ')}`);
    }
    if (
      !Array.isArray(r.globs) ||
      r.globs.length === 0 ||
      !r.globs.every((g) => typeof g === 'string' && g !== '')
    ) {
      throw bad(`rules[${i}].globs`, 'must be a non-empty list of glob patterns such as "**/*.sql"');
    }
    if (r.fallthrough !== undefined && typeof r.fallthrough !== 'boolean') {
      throw bad(`rules[${i}].fallthrough`, 'must be true or false');
    }
    return {
      type: r.type as ModuleRule['type'],
      globs: r.globs as string[],
      fallthrough: r.fallthrough === true,
    };
  });
}

/** `triggers: { crons: [...] }`; each expression is checked by the scheduler's own parser. */
function parseCrons(value: unknown, bad: (key: string, why: string) => CellError): string[] {
  if (value === undefined) return [];
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw bad('triggers', 'must be an object such as { "crons": ["0 * * * *"] }');
  }
  const crons = (value as { crons?: unknown }).crons;
  if (crons === undefined) return [];
  if (!Array.isArray(crons) || !crons.every((c) => typeof c === 'string')) {
    throw bad('triggers.crons', 'must be a list of cron expressions such as "*/5 * * * *"');
  }
  for (const cron of crons) {
    const why = cronProblem(cron);
    if (why) throw bad('triggers.crons', `${JSON.stringify(cron)} is no cron expression: ${why}`);
  }
  return [...new Set(crons.map((c) => c.trim()))];
}

function parseAssets(value: unknown, bad: (key: string, why: string) => CellError): WorkerConfig['assets'] {
  if (value === undefined) return null;
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw bad('assets', 'must be an object such as { "directory": "./public" }');
  }
  const a = value as Record<string, unknown>;
  if (typeof a.directory !== 'string' || a.directory.trim() === '') {
    throw bad('assets.directory', 'is required: the folder of static files to serve, such as "./public"');
  }
  if (a.binding !== undefined && (typeof a.binding !== 'string' || !VAR_NAME.test(a.binding))) {
    throw bad('assets.binding', 'must be a binding name: letters, digits and underscores');
  }
  const html = a.html_handling ?? 'auto-trailing-slash';
  if (
    !['auto-trailing-slash', 'force-trailing-slash', 'drop-trailing-slash', 'none'].includes(html as string)
  ) {
    throw bad(
      'assets.html_handling',
      'must be "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash" or "none"',
    );
  }
  const notFound = a.not_found_handling ?? 'none';
  if (!['none', '404-page', 'single-page-application'].includes(notFound as string)) {
    throw bad('assets.not_found_handling', 'must be "none", "404-page" or "single-page-application"');
  }
  return {
    directory: a.directory,
    binding: (a.binding as string | undefined) ?? null,
    html_handling: html as AssetsConfig['html_handling'],
    not_found_handling: notFound as AssetsConfig['not_found_handling'],
  };
}

function isRealDate(text: string): boolean {
  const match = DATE.exec(text);
  if (!match) return false;
  const [, y, m, d] = match.map(Number) as [number, number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - before.lastIndexOf('\n') };
}
