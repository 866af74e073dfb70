// The worker's code as workerd modules (docs/runtime.md: `cell
// publish` bundles with esbuild unless `no_bundle` is set). Bundling follows wrangler's choices
// (ESM out, the `workerd`/`worker`/`browser` conditions, `cloudflare:` and `node:` imports left
// to the runtime) so a project that builds with wrangler builds here.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { basename, dirname, join, matchesGlob, relative, resolve as resolvePath, sep } from 'node:path';
import type * as esbuild from 'esbuild';
import type { ModuleType } from '../../src/runtime-tools/layout.ts';
import type { ModuleRule } from './config.ts';
import { CellError } from './errors.ts';

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

/**
 * Builds the worker rooted at `mainPath`. `root` is the project root: nothing outside it is
 * read when not bundling. `skipDirs` are absolute folders never taken as modules (assets).
 */
export async function buildWorker(options: {
  root: string;
  mainPath: string;
  noBundle: boolean;
  compatibilityFlags: string[];
  rules?: ModuleRule[];
  skipDirs: string[];
}): Promise<BuiltWorker> {
  const built = options.noBundle ? await collectModules(options) : await bundle(options);
  const total = built.modules.reduce((sum, m) => sum + m.bytes.byteLength, 0);
  if (total > MAX_CODE_BYTES) {
    throw new CellError(
      `the worker's code is ${total} bytes, more than the ${MAX_CODE_BYTES} bytes a deployment may carry`,
    );
  }
  return built;
}

/** What the bundler needs of a worker; `svc deploy` runs the same build to learn its inputs. */
export interface BundleOptions {
  root: string;
  mainPath: string;
  compatibilityFlags: string[];
  rules?: ModuleRule[];
}

/**
 * The esbuild options for a worker, as wrangler sets them, and the modules the rules plugin
 * sets aside (filled while the build runs).
 */
export function bundleBuildOptions(options: BundleOptions): {
  build: esbuild.BuildOptions & { entryPoints: Record<string, string> };
  ruleModules: BuiltModule[];
} {
  const nodeCompat = options.compatibilityFlags.some(
    (f) => f === 'nodejs_compat' || f === 'nodejs_compat_v2',
  );
  // Node built-ins stay imports for workerd to satisfy under nodejs_compat; without the flag
  // only `node:`-prefixed ones are left alone, so a bare `fs` import fails at build time.
  const external = ['cloudflare:*', 'node:*', ...(nodeCompat ? builtinModules : [])];
  const main = basename(options.mainPath).replace(/\.(m|c)?[jt]sx?$/, '');
  const ruleModules: BuiltModule[] = [];
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
      target: 'es2022',
      conditions: ['workerd', 'worker', 'browser'],
      mainFields: ['browser', 'module', 'main'],
      external,
      plugins: [
        moduleRulesPlugin(effectiveRules(options.rules ?? []), ruleModules),
        nodeRequirePlugin(nodeCompat),
      ],
      // Files the rules plugin does not see (imports from packages, require calls) are inlined.
      loader: { '.wasm': 'copy', '.txt': 'text', '.html': 'text', '.sql': 'text', '.bin': 'binary' },
      assetNames: '[name]-[hash]',
      outExtension: { '.js': '.js' },
      logLevel: 'silent',
      sourcemap: false,
      legalComments: 'none',
    },
  };
}

/**
 * wrangler's module rules while bundling: an import a Text, Data or CompiledWasm rule matches
 * stays an import of a module of that type, uploaded beside the bundle under a name made from
 * its content hash (so two files of one name never collide).
 */
function moduleRulesPlugin(rules: ModuleRule[], into: BuiltModule[]): esbuild.Plugin {
  const moduleRules = rules.filter(
    (r) => r.type === 'Text' || r.type === 'Data' || r.type === 'CompiledWasm',
  );
  return {
    name: 'cell-module-rules',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind !== 'import-statement' && args.kind !== 'dynamic-import') return undefined;
        if (!args.path.startsWith('.') && !args.path.startsWith('/')) return undefined;
        const type = ruleTypeOf(moduleRules, args.path);
        if (type === null) return undefined;
        const file = resolvePath(args.resolveDir, args.path.replace(/\?module$/, ''));
        let bytes: Uint8Array;
        try {
          bytes = readFileSync(file);
        } catch {
          return { errors: [{ text: `cannot read ${args.path} (a ${type} module by the module rules)` }] };
        }
        const name = `${sha256(bytes).slice(0, 16)}-${basename(file)}`;
        if (!into.some((m) => m.name === name)) into.push({ name, type, bytes });
        return { path: `./${name}`, external: true };
      });
    },
  };
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
async function collectModules(options: {
  root: string;
  mainPath: string;
  rules?: ModuleRule[];
  skipDirs: string[];
}): Promise<BuiltWorker> {
  const base = dirname(options.mainPath);
  const rules = effectiveRules(options.rules ?? []);
  const mainType = ruleTypeOf(rules, relative(base, options.mainPath).split(sep).join('/'));
  if (mainType !== 'esm' && mainType !== 'commonjs') {
    throw new CellError(
      `"main" ${relative(options.root, options.mainPath)} must be a JavaScript module (.js, .mjs or .cjs, or an ESModule/CommonJS rule) when no_bundle is set`,
    );
  }
  const files: string[] = [];
  walk(base, options.skipDirs, files);
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
