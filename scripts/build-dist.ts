// `make dist`: the release form of the `svc` executable (docs/decisions.md: esbuild bundles
// `dist/` for release: the folder is what ships). The bundle carries its dependencies except esbuild,
// which is a native executable and is resolved from node_modules when `svc deploy` packs.
//
// Both run with a small young generation (`--max-semi-space-size=1`, in the shebang): the daemon
// is not allocation-bound, and the default semi-spaces cost it about 30 MB of resident memory
// (bench/RESULTS.md "Daemon memory"). Run it as `dist/svc.mjs ...` so the shebang applies.

import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { CONSOLE_ASSETS, checkoutPath, DIST_ASSETS_FOLDER } from '../src/console/assets.ts';

const root = resolve(import.meta.dirname, '..');
export const DIST_SVC = resolve(root, 'dist', 'svc.mjs');
/**
 * The runtime, bundled the same way: what a node runs once per application (`--cell-bin
 * dist/cell.mjs`). Bundled, it skips type stripping and loads one file: about 20 MB less
 * proportional memory per application than runtime/bin/cell (bench/RESULTS.md "Density").
 */
export const DIST_CELL = resolve(root, 'dist', 'cell.mjs');
/**
 * The runtime's resident part (Go, runtime/front/), which `cell serve` execs: the runtime looks for
 * it beside its entry script, so it sits beside dist/cell.mjs as runtime/bin/cell-front sits beside
 * runtime/bin/cell. Built for this machine by scripts/build-front.sh, static (CGO_ENABLED=0).
 */
export const DIST_FRONT = resolve(root, 'dist', 'cell-front');

/** The entry modules, given to esbuild by name: each runs its program's `main`. */
const ENTRIES: Record<string, string> = {
  svc: './src/main.ts',
  cell: './runtime/src/main.ts',
  // The process each open D1 database runs in, forked by the D1 host (runtime/src/bindings/d1-connection.ts).
  'd1-process': './runtime/src/bindings/d1-process.ts',
};

/**
 * Builds dist/svc.mjs from src/main.ts and dist/cell.mjs from runtime/src/main.ts in one build
 * split into chunks (dist/chunk-*.mjs) that both share, so what a program only imports on demand
 * (the S3 client on a directory bucket, the commands a daemon never runs) is never loaded: about
 * 9 MB less resident memory at start (bench/RESULTS.md "Daemon memory"). Every file sits in dist/
 * itself, one level below the package root, as src/version.ts expects; then dist/cell-front.
 */
export async function buildDist(): Promise<string> {
  rmSync(resolve(root, 'dist'), { recursive: true, force: true });
  await build({
    entryPoints: Object.keys(ENTRIES),
    plugins: [entryModules(), httpThroughRequire()],
    bundle: true,
    splitting: true,
    platform: 'node',
    target: 'node22.18',
    format: 'esm',
    // esbuild is a native executable resolved from node_modules when `svc deploy` packs; workerd
    // is one the runtime finds through its npm package; unenv and its Cloudflare preset are read
    // from node_modules as files (their polyfills go into a nodejs_compat worker's bundle).
    external: ['esbuild', 'workerd', 'unenv', '@cloudflare/unenv-preset'],
    // ES builds first: jsonc-parser's `main` is a UMD wrapper whose requires a bundler cannot follow.
    mainFields: ['module', 'main'],
    // The runtime's version lives in runtime/package.json, which the bundle's location does not
    // lead to: it is written in at build time.
    define: { CELL_BUNDLED_VERSION: JSON.stringify(runtimeVersion()) },
    // Bundled CommonJS dependencies call require(); an ES module has none of its own.
    banner: {
      js: [
        '#!/usr/bin/env -S node --max-semi-space-size=1',
        "import { createRequire as __svcCreateRequire } from 'node:module';",
        'const require = __svcCreateRequire(import.meta.url);',
      ].join('\n'),
    },
    // The dependencies' license notices go to dist/*.LEGAL.txt, beside the code they cover.
    legalComments: 'external',
    outdir: resolve(root, 'dist'),
    outExtension: { '.js': '.mjs' },
    logLevel: 'warning',
  });
  assertAscii();
  copyConsoleAssets();
  chmodSync(DIST_SVC, 0o755);
  chmodSync(DIST_CELL, 0o755);
  execFileSync(resolve(root, 'scripts', 'build-front.sh'), [DIST_FRONT], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return DIST_SVC;
}

/**
 * Node keeps each loaded module's source text for the life of the process, and V8 stores a text
 * holding one character outside ASCII with two bytes per character: one arrow left in a comment
 * esbuild keeps (it keeps those on class members) doubles the main chunk's 2 MB
 * (bench/RESULTS.md "Daemon memory"). esbuild escapes such characters in strings, not comments.
 */
function assertAscii(): void {
  const dist = resolve(root, 'dist');
  for (const name of readdirSync(dist).filter((file) => file.endsWith('.mjs'))) {
    const bytes = readFileSync(resolve(dist, name));
    const at = bytes.findIndex((byte) => byte > 0x7f);
    if (at === -1) continue;
    const line = bytes.subarray(0, at).toString('latin1').split('\n').length;
    throw new Error(
      `build-dist: dist/${name}:${line} holds a character outside ASCII (in a comment esbuild keeps?); ` +
        'write it in ASCII in the source, so the module is held at one byte per character',
    );
  }
}

/** `svc console`'s stylesheet and scripts (its own and uPlot's), where the bundle looks for them. */
function copyConsoleAssets(): void {
  const folder = resolve(root, 'dist', DIST_ASSETS_FOLDER);
  mkdirSync(folder, { recursive: true });
  for (const asset of CONSOLE_ASSETS) copyFileSync(checkoutPath(asset.source), resolve(folder, asset.name));
}

/** Resolves the entry names to a module that imports the program and runs it. */
function entryModules(): Plugin {
  return {
    name: 'svc-entries',
    setup(builder) {
      builder.onResolve({ filter: /^(svc|cell|d1-process)$/ }, (args) =>
        args.kind === 'entry-point' ? { path: args.path, namespace: 'svc-entry' } : undefined,
      );
      builder.onLoad({ filter: /.*/, namespace: 'svc-entry' }, (args) => ({
        contents: `import { main } from '${ENTRIES[args.path]}';\nprocess.exitCode = await main(process.argv.slice(2));\n`,
        resolveDir: root,
        loader: 'ts',
      }));
    },
  };
}

/**
 * `node:http` imported as an ES module is bound through its ES facade, which reads every export
 * once, `WebSocket`, `MessageEvent` and `CloseEvent` among them: lazy getters that load Node's own
 * undici (fetch), about 13 MB of resident memory in a process that never fetches
 * (bench/RESULTS.md "Daemon memory"; nodejs/node#59686 reports the same facade's start-up cost).
 * require() returns the module object itself and touches none of them, so the bundle's ES imports
 * of `node:http` become require() calls (through the banner's `require`); undici then loads on
 * the first fetch, as Node intends. What the sources import does not change.
 */
function httpThroughRequire(): Plugin {
  const namespace = 'svc-http-require';
  return {
    name: namespace,
    setup(builder) {
      builder.onResolve({ filter: /^(node:)?http$/ }, (args) =>
        args.kind === 'import-statement' || args.kind === 'dynamic-import'
          ? { path: args.path, namespace }
          : undefined,
      );
      builder.onLoad({ filter: /.*/, namespace }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(args.path)});\n`,
        loader: 'js',
      }));
    },
  };
}

function runtimeVersion(): string {
  return (JSON.parse(readFileSync(resolve(root, 'runtime', 'package.json'), 'utf8')) as { version: string })
    .version;
}

if (import.meta.main) {
  await buildDist();
  console.error(`build-dist: wrote ${DIST_SVC}, ${DIST_CELL} and ${DIST_FRONT}`);
}
