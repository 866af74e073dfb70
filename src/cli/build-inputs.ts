// What `svc deploy` packs from `node_modules` (docs/deploys.md "svc deploy"): the node runs
// `cell publish` on the unpacked artifact, which bundles the worker with esbuild; so the
// artifact needs the project's own files plus, from `node_modules`, exactly what that bundle
// reads. The same build (the runtime's own esbuild options) runs here first with a metafile,
// and its inputs under `node_modules`, with the `package.json` files on the way to each (they
// steer resolution: `exports`, `module`, `browser`), are what is packed from there. A project
// that does not bundle (`no_bundle`, or assets alone) needs nothing from `node_modules`.

import { existsSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type * as esbuild from 'esbuild';
import { bundleBuildOptions, bundleOptionsOf, loadEsbuild } from '../../runtime/src/bundle.ts';
import { invalidInput } from '../problem.ts';
import { parseWorkerConfig, type WorkerConfig } from '../runtime-tools/worker-config.ts';

/** The paths (relative, `/`-separated) under `node_modules` the worker's build reads. */
export async function buildDependencies(dir: string, configBytes: Buffer): Promise<Set<string>> {
  const config = readConfig(configBytes);
  if (!config || config.main === null || config.no_bundle) return new Set();
  const root = await realpath(dir);
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
