// What `svc deploy` packs from `node_modules` (docs/deploys.md "svc deploy"): the node runs
// `cell publish` on the unpacked artifact, which bundles the worker with esbuild; so the
// artifact needs the project's own files plus, from `node_modules`, exactly what that bundle
// reads. The same build (the runtime's own esbuild options) runs here first with a metafile,
// and its inputs under `node_modules`, with the `package.json` files on the way to each (they
// steer resolution: `exports`, `module`, `browser`), are what is packed from there. A project
// that does not bundle (`no_bundle`, or assets alone) needs nothing from `node_modules`.
//
// The assets folder goes in without what its `.assetsignore` names (docs/assets.md
// ".assetsignore"), as wrangler uploads no ignored asset, with the runtime's own matcher; but the
// build still needs its code: an ignored file the bundle reads, or one under the worker's module
// root (the folder of `main`, or `base_dir`: a build may put its worker there, as Astro's older
// Cloudflare adapter puts `dist/_worker.js/`), still travels. The control files (`.assetsignore`,
// `_headers`, `_redirects`) always travel: `cell publish` reads them.

import { existsSync } from 'node:fs';
import { readFile, realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type * as esbuild from 'esbuild';
import { assetsIgnorePatterns, CONTROL_FILES } from '../../runtime/src/assets.ts';
import { bundleBuildOptions, bundleOptionsOf, loadEsbuild } from '../../runtime/src/bundle.ts';
import { invalidInput } from '../problem.ts';
import { fileIgnoredInWalk } from '../runtime-tools/ignore-patterns.ts';
import { parseWorkerConfig, type WorkerConfig } from '../runtime-tools/worker-config.ts';

/**
 * The paths (relative, `/`-separated) the worker's build reads under `node_modules`, and those it
 * reads from the assets folder (which `.assetsignore` might otherwise leave out).
 */
export async function buildDependencies(dir: string, configBytes: Buffer): Promise<Set<string>> {
  const config = readConfig(configBytes);
  if (!config || config.main === null || config.no_bundle) return new Set();
  const root = await realpath(dir);
  const assets = config.assets ? projectPath(root, config.assets.directory) : null;
  const mainPath = resolve(root, config.main);
  // A missing main is the runtime's refusal to word; nothing to pack from node_modules then.
  if (!existsSync(mainPath)) return new Set();
  const { build } = bundleBuildOptions(bundleOptionsOf(root, mainPath, config));
  let metafile: esbuild.Metafile;
  try {
    metafile = (await (await loadEsbuild()).build({ ...build, metafile: true })).metafile!;
  } catch (err) {
    throw invalidInput('Worker does not build', describeFailure(err));
  }
  const needed = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    // Inputs of plugin namespaces (`name:path`) are generated, not files.
    if (/^[a-z-]+:/.test(input) || input.startsWith('../')) continue;
    if (assets !== null && isUnder(input, assets)) needed.add(input);
    if (!input.startsWith('node_modules/') && !input.includes('/node_modules/')) continue;
    needed.add(input);
    const parts = input.split('/');
    for (let n = parts.length - 1; n > 0; n--) {
      const folder = parts.slice(0, n).join('/');
      if (!folder.includes('node_modules')) break;
      const manifest = `${folder}/package.json`;
      if (existsSync(join(root, manifest))) needed.add(manifest);
    }
  }
  return needed;
}

/** Decides, for each project file, whether the assets' `.assetsignore` leaves it out of the artifact. */
export type AssetsLeftOut = (path: string) => boolean;

/**
 * The assets folder relative to the project root, when it lies inside the project below it; null
 * otherwise. It may sit in `node_modules` (a package's prebuilt dashboard), and then travels whole.
 */
export async function assetsFolder(dir: string, configBytes: Buffer): Promise<string | null> {
  const config = readConfig(configBytes);
  if (!config?.assets) return null;
  const folder = projectPath(await realpath(dir), config.assets.directory);
  return folder === '' ? null : folder;
}

/**
 * What the assets folder's `.assetsignore` leaves out of the artifact; null when nothing is left
 * out (no assets, no `.assetsignore`, or a config the runtime refuses). `buildReads` are the
 * paths buildDependencies answered: they travel whatever the patterns say.
 */
export async function assetsLeftOut(
  dir: string,
  configBytes: Buffer,
  buildReads: ReadonlySet<string>,
): Promise<AssetsLeftOut | null> {
  const config = readConfig(configBytes);
  if (!config?.assets) return null;
  const root = await realpath(dir);
  const assets = projectPath(root, config.assets.directory);
  if (assets === null) return null;
  const text = await readFile(join(root, assets, '.assetsignore'), 'utf8').catch(() => null);
  if (text === null) return null;
  const patterns = assetsIgnorePatterns(text);
  const moduleRoot =
    config.main === null ? null : projectPath(root, config.base_dir ?? join(config.main, '..'));
  const controls = new Set<string>(CONTROL_FILES);
  return (path) => {
    if (!isUnder(path, assets)) return false;
    const rel = assets === '' ? path : path.slice(assets.length + 1);
    if (controls.has(rel) || buildReads.has(path)) return false;
    if (moduleRoot !== null && isUnder(path, moduleRoot)) return false;
    return fileIgnoredInWalk(patterns, rel);
  };
}

/** A config path as a project path (relative, `/`-separated, '' for the root); null outside it. */
function projectPath(root: string, path: string): string | null {
  const rel = relative(root, resolve(root, path));
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return null;
  return rel.split(sep).join('/');
}

function isUnder(path: string, folder: string): boolean {
  return folder === '' || path.startsWith(`${folder}/`);
}

/** The config as the runtime reads it; null when it is refused (the caller has said so). */
function readConfig(bytes: Buffer): WorkerConfig | null {
  try {
    return parseWorkerConfig(bytes.toString('utf8'), 'cell.jsonc');
  } catch {
    return null;
  }
}

function describeFailure(err: unknown): string {
  const errors = (err as { errors?: esbuild.Message[] }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return String((err as Error).message ?? err);
  const first = errors[0]!;
  const at = first.location ? `${first.location.file}:${first.location.line}:${first.location.column}: ` : '';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  return `${at}${first.text}${more}; fix the worker's code before deploying`;
}
