// `make dist`: the release form of the `svc` executable (docs/decisions.md: esbuild bundles
// `dist/` for release, one file to ship). The bundle carries its dependencies except esbuild,
// which is a native executable and is resolved from node_modules when `svc deploy` packs.
//
// Both run with a small young generation (`--max-semi-space-size=1`, in the shebang): the daemon
// is not allocation-bound, and the default semi-spaces cost it about 30 MB of resident memory
// (bench/RESULTS.md "Daemon memory"). Run it as `dist/svc.mjs ...` so the shebang applies.

import { chmodSync } from 'node:fs';
import { resolve } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
export const DIST_SVC = resolve(root, 'dist', 'svc.mjs');
/**
 * The runtime, bundled the same way: what a node runs once per application (`--cell-bin
 * dist/cell.mjs`). Bundled, it skips type stripping and loads one file: about 20 MB less
 * proportional memory per application than runtime/bin/cell (bench/RESULTS.md "Density").
 */
export const DIST_CELL = resolve(root, 'dist', 'cell.mjs');

/** Builds dist/svc.mjs from src/main.ts and dist/cell.mjs from runtime/src/main.ts. */
export async function buildDist(): Promise<string> {
  await bundle('./src/main.ts', 'svc-entry.ts', DIST_SVC, ['esbuild']);
  // workerd is a native executable the runtime finds through its npm package.
  await bundle('./runtime/src/main.ts', 'cell-entry.ts', DIST_CELL, ['esbuild', 'workerd']);
  return DIST_SVC;
}

async function bundle(entry: string, name: string, outfile: string, external: string[]): Promise<void> {
  await build({
    stdin: {
      contents: `import { main } from '${entry}';\nprocess.exitCode = await main(process.argv.slice(2));\n`,
      resolveDir: root,
      sourcefile: name,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    target: 'node22.18',
    format: 'esm',
    external,
    // ES builds first: jsonc-parser's `main` is a UMD wrapper whose requires a bundler cannot follow.
    mainFields: ['module', 'main'],
    // Bundled CommonJS dependencies call require(); an ES module has none of its own.
    banner: {
      js: [
        '#!/usr/bin/env -S node --max-semi-space-size=1',
        "import { createRequire as __svcCreateRequire } from 'node:module';",
        'const require = __svcCreateRequire(import.meta.url);',
      ].join('\n'),
    },
    outfile,
    logLevel: 'warning',
  });
  chmodSync(outfile, 0o755);
}

if (import.meta.main) {
  await buildDist();
  console.error(`build-dist: wrote ${DIST_SVC} and ${DIST_CELL}`);
}
