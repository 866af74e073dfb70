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
import { type ParseError, parse } from 'jsonc-parser';
import { bundleBuildOptions, loadEsbuild } from '../../runtime/src/bundle.ts';
import type { ModuleRule } from '../../runtime/src/config.ts';
import { invalidInput } from '../problem.ts';

/** The paths (relative, `/`-separated) under `node_modules` the worker's build reads. */
export async function buildDependencies(dir: string, configBytes: Buffer): Promise<Set<string>> {
  const config = readBuildKeys(configBytes);
  if (!config || config.main === null || config.noBundle) return new Set();
  const root = await realpath(dir);
  const mainPath = resolve(root, config.main);
  // A missing main is the runtime's refusal to word; nothing to pack from node_modules then.
  if (!existsSync(mainPath)) return new Set();
  const { build } = bundleBuildOptions({
    root,
    mainPath,
    compatibilityFlags: config.compatibilityFlags,
    rules: config.rules,
  });
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

interface BuildKeys {
  main: string | null;
  noBundle: boolean;
  compatibilityFlags: string[];
  rules: ModuleRule[] | undefined;
}

/** The keys the build depends on; null when the config is no JSON object (refused later). */
function readBuildKeys(bytes: Buffer): BuildKeys | null {
  const errors: ParseError[] = [];
  const doc = parse(bytes.toString('utf8'), errors, { allowTrailingComma: true }) as Record<string, unknown>;
  if (errors.length > 0 || !doc || typeof doc !== 'object' || Array.isArray(doc)) return null;
  const flags = Array.isArray(doc.compatibility_flags)
    ? doc.compatibility_flags.filter((f): f is string => typeof f === 'string')
    : [];
  const rules = Array.isArray(doc.rules)
    ? (doc.rules as unknown[])
        .filter(
          (r): r is { type: ModuleRule['type']; globs: string[]; fallthrough?: boolean } =>
            !!r && typeof r === 'object' && Array.isArray((r as { globs?: unknown }).globs),
        )
        .map((r) => ({ type: r.type, globs: r.globs.map(String), fallthrough: r.fallthrough === true }))
    : undefined;
  return {
    main: typeof doc.main === 'string' && doc.main.trim() !== '' ? doc.main : null,
    noBundle: doc.no_bundle === true,
    compatibilityFlags: flags,
    rules,
  };
}

function describeFailure(err: unknown): string {
  const errors = (err as { errors?: esbuild.Message[] }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return String((err as Error).message ?? err);
  const first = errors[0]!;
  const at = first.location ? `${first.location.file}:${first.location.line}:${first.location.column}: ` : '';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  return `${at}${first.text}${more}; fix the worker's code before deploying`;
}
