// The worker's code as workerd modules (DESIGN.md "The runtime contract (`cell`)": `cell
// publish` bundles with esbuild unless `no_bundle` is set). Bundling follows wrangler's choices
// (ESM out, the `workerd`/`worker`/`browser` conditions, `cloudflare:` and `node:` imports left
// to the runtime) so a project that builds with wrangler builds here.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { basename, dirname, extname, join, relative, sep } from 'node:path';
import * as esbuild from 'esbuild';
import type { ModuleType } from '../../src/runtime-tools/layout.ts';
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

/** How no_bundle names module files by extension (wrangler's default module rules). */
const MODULE_RULES: Record<string, ModuleType> = {
  '.js': 'esm',
  '.mjs': 'esm',
  '.cjs': 'commonjs',
  '.wasm': 'wasm',
  '.txt': 'text',
  '.html': 'text',
  '.bin': 'data',
};

/**
 * Builds the worker rooted at `mainPath`. `root` is the project root: nothing outside it is
 * read when not bundling. `skipDirs` are absolute folders never taken as modules (assets).
 */
export async function buildWorker(options: {
  root: string;
  mainPath: string;
  noBundle: boolean;
  compatibilityFlags: string[];
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

async function bundle(options: {
  root: string;
  mainPath: string;
  compatibilityFlags: string[];
}): Promise<BuiltWorker> {
  const nodeCompat = options.compatibilityFlags.some(
    (f) => f === 'nodejs_compat' || f === 'nodejs_compat_v2',
  );
  // Node built-ins stay imports for workerd to satisfy under nodejs_compat; without the flag
  // only `node:`-prefixed ones are left alone, so a bare `fs` import fails at build time.
  const external = ['cloudflare:*', 'node:*', ...(nodeCompat ? builtinModules : [])];
  const main = basename(options.mainPath).replace(/\.(m|c)?[jt]sx?$/, '');
  let result: esbuild.BuildResult<{ write: false; metafile: false }>;
  try {
    result = await esbuild.build({
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
      loader: { '.wasm': 'copy', '.txt': 'text', '.html': 'text', '.bin': 'binary' },
      assetNames: '[name]-[hash]',
      outExtension: { '.js': '.js' },
      logLevel: 'silent',
      sourcemap: false,
      legalComments: 'none',
    });
  } catch (err) {
    throw new CellError(`the worker does not build:\n${await describeBuildFailure(err)}`);
  }
  const outdir = join(options.root, '.cell-out');
  const modules: BuiltModule[] = result.outputFiles.map((file) => {
    const name = relative(outdir, file.path).split(sep).join('/');
    const type: ModuleType = name.endsWith('.wasm') ? 'wasm' : 'esm';
    return { name, type, bytes: file.contents };
  });
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
  skipDirs: string[];
}): Promise<BuiltWorker> {
  const base = dirname(options.mainPath);
  const mainType = MODULE_RULES[extname(options.mainPath)];
  if (mainType !== 'esm' && mainType !== 'commonjs') {
    throw new CellError(
      `"main" ${relative(options.root, options.mainPath)} must be a .js, .mjs or .cjs module when no_bundle is set`,
    );
  }
  const files: string[] = [];
  walk(base, options.skipDirs, files);
  const modules: BuiltModule[] = [];
  for (const file of files) {
    const type = MODULE_RULES[extname(file)];
    if (!type) continue;
    const bytes = readFileSync(file);
    const name = relative(base, file).split(sep).join('/');
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
    await esbuild.transform(new TextDecoder().decode(bytes), {
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
