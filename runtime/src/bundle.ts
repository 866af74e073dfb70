// The worker's code as workerd modules (docs/runtime.md "Bundling as wrangler bundles": `cell
// publish` bundles with esbuild unless `no_bundle` is set). Bundling reproduces what
// `wrangler deploy` does: ESM out, the `workerd`/`worker`/`browser` conditions, `cloudflare:`
// imports left to the runtime, `process.env.NODE_ENV` defined as "production", Node.js
// compatibility by wrangler's modes and unenv preset (nodejs-compat.ts), the module rules,
// `find_additional_modules`, `base_dir` and `preserve_file_names`; so a project that builds with
// wrangler builds here into the same modules.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import {
  basename,
  dirname,
  join,
  matchesGlob,
  posix,
  relative,
  resolve as resolvePath,
  sep,
} from 'node:path';
import type * as esbuild from 'esbuild';
import type { ModuleType } from '../../src/runtime-tools/layout.ts';
import type { ModuleRule, WorkerConfig } from './config.ts';
import { CellError } from './errors.ts';
import { navigatorDefined, nodeCompatMode, unenvPlugin } from './nodejs-compat.ts';

/** One module ready to upload. */
export interface BuiltModule {
  name: string;
  type: ModuleType;
  bytes: Uint8Array;
}

export interface BuiltWorker {
  mainModule: string;
  modules: BuiltModule[];
}

/** Upper bound on the code of one deployment (Workers' own limit for paid plans). */
export const MAX_CODE_BYTES = 10 * 1024 * 1024;

/** What each of wrangler's rule types becomes in the manifest. */
const RULE_MODULE_TYPE: Record<ModuleRule['type'], ModuleType> = {
  ESModule: 'esm',
  CommonJS: 'commonjs',
  Text: 'text',
  Data: 'data',
  CompiledWasm: 'wasm',
};

/** wrangler's default module rules; the JavaScript ones apply only to no_bundle. */
const DEFAULT_RULES: ModuleRule[] = [
  { type: 'ESModule', globs: ['**/*.js', '**/*.mjs'], fallthrough: false },
  { type: 'CommonJS', globs: ['**/*.cjs'], fallthrough: false },
  { type: 'Text', globs: ['**/*.txt', '**/*.html', '**/*.sql'], fallthrough: false },
  { type: 'Data', globs: ['**/*.bin'], fallthrough: false },
  { type: 'CompiledWasm', globs: ['**/*.wasm', '**/*.wasm?module'], fallthrough: false },
];

/**
 * The config's rules first, then the defaults of every type the config does not claim (a rule
 * with `fallthrough: true` keeps the defaults of its type), as wrangler combines them.
 */
export function effectiveRules(rules: readonly ModuleRule[]): ModuleRule[] {
  const closed = new Set(rules.filter((r) => !r.fallthrough).map((r) => r.type));
  return [...rules, ...DEFAULT_RULES.filter((r) => !closed.has(r.type))];
}

/** The module type the first matching rule gives `path` (`/`-separated, relative); null: none. */
export function ruleTypeOf(rules: readonly ModuleRule[], path: string): ModuleType | null {
  const plain = path.replace(/^(\.\.?\/)+/, '');
  for (const rule of rules) {
    if (rule.globs.some((glob) => matchesGlob(plain, glob))) return RULE_MODULE_TYPE[rule.type];
  }
  return null;
}

/** What the build of a worker needs from its config (paths absolute). */
export interface BundleOptions {
  root: string;
  mainPath: string;
  compatibilityDate: string;
  compatibilityFlags: string[];
  rules?: ModuleRule[];
  /** `base_dir`: the root of module names; the folder of `main` when absent. */
  baseDir?: string;
  /** `find_additional_modules`: the files under `baseDir` the rules match go up as modules. */
  findAdditionalModules?: boolean;
  /** `preserve_file_names`: rule modules keep their paths instead of hashed names. */
  preserveFileNames?: boolean;
  /** Absolute folders never taken as modules (assets). */
  skipDirs?: string[];
  /** wrangler's build options from the config (`tsconfig` resolved against the root). */
  build?: WorkerConfig['build'];
}

/** The build options a checked config gives, its paths resolved against the project root. */
export function bundleOptionsOf(
  root: string,
  mainPath: string,
  config: WorkerConfig,
  skipDirs: string[] = [],
): BundleOptions & { noBundle: boolean } {
  const baseDir = config.base_dir === null ? undefined : resolvePath(root, config.base_dir);
  if (baseDir !== undefined && !isInside(root, baseDir)) {
    throw new CellError(`"base_dir" must name a folder inside the project, not ${config.base_dir}`);
  }
  return {
    root,
    mainPath,
    noBundle: config.no_bundle,
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags,
    rules: config.rules,
    baseDir,
    findAdditionalModules: config.find_additional_modules ?? config.no_bundle,
    preserveFileNames: config.preserve_file_names,
    skipDirs,
    build: {
      ...config.build,
      tsconfig: config.build.tsconfig === null ? null : resolvePath(root, config.build.tsconfig),
    },
  };
}

/**
 * Builds the worker rooted at `mainPath`. `root` is the project root: nothing outside it is
 * read when not bundling.
 */
export async function buildWorker(options: BundleOptions & { noBundle: boolean }): Promise<BuiltWorker> {
  const built = options.noBundle ? await collectModules(options) : await bundle(options);
  const total = built.modules.reduce((sum, m) => sum + m.bytes.byteLength, 0);
  if (total > MAX_CODE_BYTES) {
    throw new CellError(
      `the worker's code is ${total} bytes, more than the ${MAX_CODE_BYTES} bytes a deployment may carry`,
    );
  }
  return built;
}

/**
 * The esbuild options for a worker, as wrangler sets them for `wrangler deploy`, and the modules
 * the rules plugin sets aside (filled while the build runs; the additional modules found under
 * `base_dir` are in it from the start).
 */
export function bundleBuildOptions(options: BundleOptions): {
  build: esbuild.BuildOptions & { entryPoints: Record<string, string> };
  ruleModules: BuiltModule[];
} {
  const mode = nodeCompatMode(options.compatibilityDate, options.compatibilityFlags);
  const moduleRoot = options.baseDir ?? dirname(options.mainPath);
  const main = entryName(moduleRoot, options.mainPath);
  const rules = bundlingRules(options.rules ?? []);
  const ruleModules: BuiltModule[] = options.findAdditionalModules
    ? findAdditionalModules(moduleRoot, options.mainPath, rules, options.skipDirs ?? [])
    : [];
  const found = new Map(ruleModules.map((m) => [resolvePath(moduleRoot, m.name), m]));
  // As wrangler: production for a deploy, and navigator.userAgent where workerd defines it.
  const production = JSON.stringify('production');
  const define: Record<string, string> = {
    'process.env.NODE_ENV': production,
    'global.process.env.NODE_ENV': production,
    'globalThis.process.env.NODE_ENV': production,
    ...(navigatorDefined(options.compatibilityDate, options.compatibilityFlags)
      ? { 'navigator.userAgent': '"Cloudflare-Workers"' }
      : {}),
    ...options.build?.define,
  };
  const plugins: esbuild.Plugin[] = [
    // The config's aliases come first, so they win over the unenv preset's, as in wrangler.
    aliasPlugin(options.root, options.build?.alias ?? {}),
    moduleRulesPlugin({
      rules,
      into: ruleModules,
      found,
      moduleRoot,
      mainDir: dirname(options.mainPath),
      preserveFileNames: options.preserveFileNames === true,
    }),
  ];
  let external = ['cloudflare:*', '__STATIC_CONTENT_MANIFEST'];
  if (mode === 'v2') {
    plugins.push(unenvPlugin(options));
  } else {
    // Without the polyfills, Node built-ins stay imports for workerd to satisfy: `node:` ones
    // always, bare ones under nodejs_compat (v1); otherwise a bare `fs` import fails to build.
    external = [...external, 'node:*', ...(mode === 'v1' ? builtinModules : [])];
    plugins.push(nodeRequirePlugin(mode === 'v1'));
  }
  return {
    ruleModules,
    build: {
      entryPoints: { [main]: options.mainPath },
      absWorkingDir: options.root,
      bundle: true,
      write: false,
      outdir: join(options.root, '.cell-out'),
      format: 'esm',
      platform: 'neutral',
      target: 'es2024',
      conditions: ['workerd', 'worker', 'browser'],
      mainFields: ['browser', 'module', 'main'],
      external,
      define,
      keepNames: options.build?.keep_names ?? true,
      minify: options.build?.minify ?? false,
      ...(options.build?.jsx_factory ? { jsxFactory: options.build.jsx_factory } : {}),
      ...(options.build?.jsx_fragment ? { jsxFragment: options.build.jsx_fragment } : {}),
      ...(options.build?.tsconfig ? { tsconfig: options.build.tsconfig } : {}),
      plugins,
      // Files the rules plugin does not see (imports from packages, require calls) are inlined.
      loader: {
        '.js': 'jsx',
        '.mjs': 'jsx',
        '.cjs': 'jsx',
        '.wasm': 'copy',
        '.txt': 'text',
        '.html': 'text',
        '.sql': 'text',
        '.bin': 'binary',
      },
      assetNames: '[name]-[hash]',
      outExtension: { '.js': '.js' },
      logLevel: 'silent',
      sourcemap: false,
      legalComments: 'none',
    },
  };
}

/**
 * The main module's name: its path below the module root without its extension (so the relative
 * imports of additional modules resolve from it), else its file name.
 */
function entryName(moduleRoot: string, mainPath: string): string {
  const rel = relative(moduleRoot, mainPath).split(sep).join('/');
  const name = rel.startsWith('../') || rel.startsWith('/') ? basename(mainPath) : rel;
  return name.replace(/\.(m|c)?[jt]sx?$/, '');
}

/**
 * The rules while bundling, as wrangler parses them: the config's, then the defaults for Text,
 * Data and CompiledWasm; a rule after one of its type without `fallthrough` is dropped.
 * JavaScript is bundled, so only the config's own ESModule/CommonJS rules name JS modules.
 */
export function bundlingRules(rules: readonly ModuleRule[]): ModuleRule[] {
  const all = [...rules, ...DEFAULT_RULES.filter((r) => r.type !== 'ESModule' && r.type !== 'CommonJS')];
  const closed = new Set<string>();
  const kept: ModuleRule[] = [];
  for (const rule of all) {
    if (closed.has(rule.type)) continue;
    kept.push(rule);
    if (!rule.fallthrough) closed.add(rule.type);
  }
  return kept;
}

/**
 * find_additional_modules: every file under the module root a rule matches (the entry, folders
 * starting with a dot, `node_modules` and the assets folder excepted), named by its path there.
 */
function findAdditionalModules(
  moduleRoot: string,
  mainPath: string,
  rules: ModuleRule[],
  skipDirs: string[],
): BuiltModule[] {
  const files: string[] = [];
  walk(moduleRoot, skipDirs, files);
  const modules: BuiltModule[] = [];
  for (const file of files) {
    if (file === mainPath) continue;
    const name = relative(moduleRoot, file).split(sep).join('/');
    const type = ruleTypeOf(rules, name);
    if (type) modules.push({ name, type, bytes: readFileSync(file) });
  }
  return modules;
}

/**
 * wrangler's module rules while bundling: an import a Text, Data or CompiledWasm rule matches
 * stays an import of a module of that type, uploaded beside the bundle under a name made from its
 * content hash (`<sha1>-<file name>`, so two files of one name never collide) or, with
 * `preserve_file_names`, its own path. An import of an additional module found under `base_dir`
 * (any rule type, JavaScript included) stays an import of that module.
 */
function moduleRulesPlugin(options: {
  rules: ModuleRule[];
  into: BuiltModule[];
  found: Map<string, BuiltModule>;
  moduleRoot: string;
  mainDir: string;
  preserveFileNames: boolean;
}): esbuild.Plugin {
  const { rules, into, found, mainDir } = options;
  // The bundle sits where `main` did below the module root; its modules are named from there.
  const mainFolder = posix.dirname(entryName(options.moduleRoot, join(mainDir, 'main.js')));
  return {
    name: 'cell-module-rules',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind !== 'import-statement' && args.kind !== 'dynamic-import') return undefined;
        if (!args.path.startsWith('.') && !args.path.startsWith('/')) return undefined;
        const cleaned = args.path.replace(/\?.*$/, '');
        const file = resolvePath(args.resolveDir, cleaned);
        if (found.has(file)) return { path: moduleSpecifier(mainDir, file), external: true };
        const type = ruleTypeOf(rules, args.path);
        if (type === null || type === 'esm' || type === 'commonjs') return undefined;
        let bytes: Uint8Array;
        try {
          bytes = readFileSync(file);
        } catch {
          return { errors: [{ text: `cannot read ${args.path} (a ${type} module by the module rules)` }] };
        }
        const preserved = relative(options.moduleRoot, file).split(sep).join('/');
        if (options.preserveFileNames && !preserved.startsWith('../')) {
          if (!into.some((m) => m.name === preserved)) into.push({ name: preserved, type, bytes });
          return { path: moduleSpecifier(mainDir, file), external: true };
        }
        const hashed = `${createHash('sha1').update(bytes).digest('hex')}-${basename(file)}`;
        const name = posix.join(mainFolder, hashed);
        if (!into.some((m) => m.name === name)) into.push({ name, type, bytes });
        return { path: `./${hashed}`, external: true };
      });
    },
  };
}

/**
 * The config's `alias`: an import of exactly a key resolves to its value, found with Node's
 * resolution from the project root (a path or a package), as wrangler resolves it.
 */
function aliasPlugin(root: string, alias: Record<string, string>): esbuild.Plugin {
  const resolveFromRoot = createRequire(join(root, 'package.json')).resolve;
  return {
    name: 'cell-alias',
    setup(build) {
      if (Object.keys(alias).length === 0) return;
      build.onResolve({ filter: /.*/ }, (args) => {
        if (!Object.hasOwn(alias, args.path)) return undefined;
        const target = alias[args.path]!;
        try {
          return { path: resolveFromRoot(target.startsWith('.') ? join(root, target) : target) };
        } catch {
          return {
            errors: [
              {
                text: `"alias" maps ${args.path} to ${target}, which does not resolve from the project root`,
              },
            ],
          };
        }
      });
    },
  };
}

/** How the bundled main module (which sits where `main` did) imports a module file. */
function moduleSpecifier(mainDir: string, file: string): string {
  const rel = relative(mainDir, file).split(sep).join('/');
  return rel.startsWith('../') ? rel : `./${rel}`;
}

/**
 * CommonJS code that `require()`s a Node built-in under nodejs_compat: esbuild alone leaves a
 * `require` that throws in an ES module, so, as wrangler does, each such require becomes an
 * import of the built-in whose default export is what `require` answers.
 */
function nodeRequirePlugin(nodeCompat: boolean): esbuild.Plugin {
  const builtins = new Set(builtinModules.filter((m) => !m.startsWith('_')));
  const isBuiltin = (path: string) =>
    path.startsWith('node:') ? true : nodeCompat && builtins.has(path.split('/')[0]!);
  return {
    name: 'cell-node-require',
    setup(build) {
      build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
        if (args.kind !== 'require-call' || !isBuiltin(args.path)) return undefined;
        return { path: args.path.replace(/^node:/, ''), namespace: 'cell-node-require' };
      });
      build.onLoad({ filter: /.*/, namespace: 'cell-node-require' }, (args) => ({
        contents: `import builtin from 'node:${args.path}';\nmodule.exports = builtin;\n`,
        loader: 'js',
      }));
    },
  };
}

async function bundle(options: BundleOptions): Promise<BuiltWorker> {
  const { build, ruleModules } = bundleBuildOptions(options);
  const main = Object.keys(build.entryPoints)[0]!;
  let result: esbuild.BuildResult<{ write: false }>;
  try {
    result = (await (await loadEsbuild()).build(build)) as esbuild.BuildResult<{ write: false }>;
  } catch (err) {
    throw new CellError(`the worker does not build:\n${await describeBuildFailure(err)}`);
  }
  const outdir = build.outdir!;
  const modules: BuiltModule[] = result.outputFiles!.map((file) => {
    const name = relative(outdir, file.path).split(sep).join('/');
    const type: ModuleType = name.endsWith('.wasm') ? 'wasm' : 'esm';
    return { name, type, bytes: file.contents };
  });
  modules.push(...ruleModules.filter((r) => !modules.some((m) => m.name === r.name)));
  const mainModule = `${main}.js`;
  if (!modules.some((m) => m.name === mainModule)) {
    throw new CellError(`bundling ${options.mainPath} produced no ${mainModule}`);
  }
  return {
    mainModule,
    modules: [modules.find((m) => m.name === mainModule)!, ...modules.filter((m) => m.name !== mainModule)],
  };
}

/** One `file:line:column: message` line per build error (at most 10), with the offending line. */
async function describeBuildFailure(err: unknown): Promise<string> {
  const errors = (err as { errors?: esbuild.Message[] }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return String((err as Error).message ?? err);
  return errors
    .slice(0, 10)
    .map((e) => {
      const at = e.location;
      if (!at) return e.text;
      return `${at.file}:${at.line}:${at.column}: ${e.text}\n    ${at.lineText.trim()}`;
    })
    .join('\n');
}

/**
 * no_bundle: the entry module and every module file beside it or below (wrangler's default
 * rules), uploaded as they are. Each JavaScript module is still parsed, so a syntax error
 * fails the publish instead of the first request.
 */
async function collectModules(options: BundleOptions): Promise<BuiltWorker> {
  const base = options.baseDir ?? dirname(options.mainPath);
  const rules = effectiveRules(options.rules ?? []);
  const mainType = ruleTypeOf(rules, relative(base, options.mainPath).split(sep).join('/'));
  if (mainType !== 'esm' && mainType !== 'commonjs') {
    throw new CellError(
      `"main" ${relative(options.root, options.mainPath)} must be a JavaScript module (.js, .mjs or .cjs, or an ESModule/CommonJS rule) when no_bundle is set`,
    );
  }
  const files: string[] = [];
  // `find_additional_modules: false` uploads the entry alone, as wrangler does.
  if (options.findAdditionalModules === false) files.push(options.mainPath);
  else walk(base, options.skipDirs ?? [], files);
  const modules: BuiltModule[] = [];
  for (const file of files) {
    const name = relative(base, file).split(sep).join('/');
    const type = ruleTypeOf(rules, name);
    if (!type) continue;
    const bytes = readFileSync(file);
    if (type === 'esm' || type === 'commonjs') await checkSyntax(bytes, type, relative(options.root, file));
    modules.push({ name, type, bytes });
  }
  const mainModule = relative(base, options.mainPath).split(sep).join('/');
  const main = modules.find((m) => m.name === mainModule)!;
  return { mainModule, modules: [main, ...modules.filter((m) => m !== main)] };
}

function walk(dir: string, skipDirs: string[], into: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.') || skipDirs.includes(path)) continue;
      walk(path, skipDirs, into);
    } else if (entry.isFile()) {
      into.push(path);
    }
  }
}

async function checkSyntax(bytes: Uint8Array, type: ModuleType, file: string): Promise<void> {
  try {
    await (await loadEsbuild()).transform(new TextDecoder().decode(bytes), {
      loader: 'js',
      format: type === 'esm' ? 'esm' : 'cjs',
      sourcefile: file,
      logLevel: 'silent',
    });
  } catch (err) {
    throw new CellError(`the worker does not parse:\n${await describeBuildFailure(err)}`);
  }
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** True when `path` is `root` or inside it. */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !rel.startsWith(sep) && !/^[A-Za-z]:/.test(rel));
}

/**
 * esbuild's API, loaded on first use: a node's daemon shares this code but never builds, and
 * loading esbuild at start would cost it resident memory for nothing.
 */
export function loadEsbuild(): Promise<typeof esbuild> {
  return import('esbuild');
}
