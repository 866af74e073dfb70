// `make dist`: the release form of the `svc` executable (docs/decisions.md: esbuild bundles
// `dist/` for release, one file to ship). The bundle carries its dependencies except esbuild,
// which is a native executable and is resolved from node_modules when `svc deploy` packs.
//
// It runs with a small young generation (`--max-semi-space-size=1`, in the shebang): the daemon
// is not allocation-bound, and the default semi-spaces cost it about 30 MB of resident memory
// (bench/RESULTS.md "Daemon memory"). Run it as `dist/svc.mjs ...` so the shebang applies.

import { chmodSync } from 'node:fs';
import { resolve } from 'node:path';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
export const DIST_SVC = resolve(root, 'dist', 'svc.mjs');

/** Builds dist/svc.mjs from src/main.ts. */
export async function buildDist(): Promise<string> {
  await build({
    stdin: {
      contents:
        "import { main } from './src/main.ts';\nprocess.exitCode = await main(process.argv.slice(2));\n",
      resolveDir: root,
      sourcefile: 'svc-entry.ts',
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    target: 'node22.18',
    format: 'esm',
    external: ['esbuild'],
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
    outfile: DIST_SVC,
    logLevel: 'warning',
  });
  chmodSync(DIST_SVC, 0o755);
  return DIST_SVC;
}

if (import.meta.main) {
  console.error(`build-dist: wrote ${await buildDist()}`);
}
