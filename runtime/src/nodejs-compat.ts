// Node.js compatibility while bundling, as wrangler applies it (docs/runtime.md "Bundling as
// wrangler bundles"): the compatibility date and flags give a mode, and under `nodejs_compat`
// from 2024-09-23 (or `nodejs_compat_v2`) the build goes through the same unenv preset wrangler
// uses (`unenv` with `@cloudflare/unenv-preset`, at the versions wrangler pins): Node built-ins
// workerd provides stay imports, the others are aliased to unenv's polyfills, npm packages unenv
// shims (`cross-fetch`, ...) are aliased, and the globals (`process`, `performance`, ...) are
// injected. The polyfills are read from svc's own installation, as wrangler reads them from its.

import { createRequire } from 'node:module';
import { resolve as resolvePath } from 'node:path';
import type * as esbuild from 'esbuild';

/** How much of Node.js workerd provides: wrangler's NodeJSCompatMode. */
export type NodeCompatMode = 'v2' | 'v1' | 'als' | null;

/** From this date workerd turns both nodejs_compat and its v2 on by default. */
const NODEJS_COMPAT_DEFAULT_ON_DATE = '2026-08-04';
/** From this date `nodejs_compat` means v2 (polyfills and globals). */
const NODEJS_COMPAT_V2_SWITCH_OVER_DATE = '2024-09-23';

/** The mode a compatibility date and flags give, as wrangler computes it. */
export function nodeCompatMode(date: string, flags: readonly string[]): NodeCompatMode {
  const defaultOn = date >= NODEJS_COMPAT_DEFAULT_ON_DATE;
  const v1 = flags.includes('nodejs_compat') || (defaultOn && !flags.includes('no_nodejs_compat'));
  const v2 =
    flags.includes('nodejs_compat_v2') ||
    (!flags.includes('no_nodejs_compat_v2') &&
      (defaultOn || (v1 && date >= NODEJS_COMPAT_V2_SWITCH_OVER_DATE)));
  if (v2) return 'v2';
  if (v1) return 'v1';
  return flags.includes('nodejs_als') ? 'als' : null;
}

/** Whether workerd defines `navigator` (and so wrangler defines `navigator.userAgent`). */
export function navigatorDefined(date: string, flags: readonly string[]): boolean {
  if (flags.includes('global_navigator')) return true;
  if (flags.includes('no_global_navigator')) return false;
  return date >= '2022-03-21';
}

const require = createRequire(import.meta.url);
const REQUIRED_BUILTIN = 'cell-node-builtin';
const REQUIRED_UNENV_ALIAS = 'cell-unenv-alias';
const VIRTUAL_GLOBAL = /_virtual_unenv_global_polyfill-(.+)$/;

/**
 * wrangler's `hybrid-nodejs_compat` plugin: the unenv preset for the worker's date and flags,
 * applied to imports, `require()` calls and globals.
 */
export function unenvPlugin(options: {
  compatibilityDate: string;
  compatibilityFlags: string[];
}): esbuild.Plugin {
  return {
    name: 'cell-unenv',
    async setup(build) {
      // Both packages publish ES modules only, and only a build with this mode needs them.
      const { defineEnv } = await import('unenv');
      const { getCloudflarePreset, nonPrefixedNodeModules } = await import('@cloudflare/unenv-preset');
      const { alias, inject, external, polyfill } = defineEnv({
        presets: [
          getCloudflarePreset(options),
          // As wrangler: `debug` keeps its own implementation rather than unenv's no-op stub.
          { alias: { debug: 'debug' } },
        ],
        npmShims: true,
      }).env;
      const builtin = new RegExp(`^(${nonPrefixedNodeModules.join('|')}|node:.+)$`);
      requireCallsToBuiltins(build, builtin);
      aliasedPackages(build, alias, external);
      injectedGlobals(build, inject, polyfill);
    },
  };
}

/** A `require()` of a built-in becomes an import whose default export is what require answers. */
function requireCallsToBuiltins(build: esbuild.PluginBuild, builtin: RegExp): void {
  build.onResolve({ filter: builtin }, (args) =>
    args.kind === 'require-call' ? { path: args.path, namespace: REQUIRED_BUILTIN } : undefined,
  );
  build.onLoad({ filter: /.*/, namespace: REQUIRED_BUILTIN }, ({ path }) => ({
    contents: `import libDefault from '${path}';\nmodule.exports = libDefault;`,
    loader: 'js',
  }));
}

/** Each alias the preset sets, resolved from svc's installation; built-ins it keeps stay imports. */
function aliasedPackages(
  build: esbuild.PluginBuild,
  alias: Readonly<Record<string, string>>,
  external: readonly string[],
): void {
  const absolute: Record<string, string> = {};
  for (const [module, target] of Object.entries(alias)) {
    try {
      absolute[module] = require.resolve(target);
    } catch {
      // An alias to a package svc does not carry (`debug`): the worker's own copy is used.
    }
  }
  const escaped = Object.keys(absolute).map((m) => m.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  build.onResolve({ filter: new RegExp(`^(${escaped.join('|')})$`) }, (args) => {
    const target = alias[args.path]!;
    if (
      args.kind === 'require-call' &&
      (target.startsWith('unenv/npm/') || target.startsWith('unenv/mock/'))
    ) {
      return { path: args.path, namespace: REQUIRED_UNENV_ALIAS };
    }
    return { path: absolute[args.path]!, external: external.includes(target) };
  });
  build.onLoad({ filter: /.*/, namespace: REQUIRED_UNENV_ALIAS }, ({ path }) => ({
    contents: [
      `import * as esm from '${path}';`,
      'module.exports = Object.entries(esm)',
      "  .filter(([k]) => k !== 'default')",
      '  .reduce((cjs, [k, value]) => Object.defineProperty(cjs, k, { value, enumerable: true }),',
      "    'default' in esm ? esm.default : {});",
    ].join('\n'),
    loader: 'js',
  }));
}

/** The preset's globals: each `inject` set on globalThis by a virtual module, each polyfill run first. */
function injectedGlobals(
  build: esbuild.PluginBuild,
  inject: Readonly<Record<string, string | readonly string[]>>,
  polyfill: readonly string[],
): void {
  // Virtual modules beside this file: what they import resolves from svc's installation.
  const prefix = resolvePath(import.meta.dirname, '_virtual_unenv_global_polyfill-');
  const byModule = new Map<string, { injectedName: string; exportName: string; importName: string }[]>();
  const moduleOfPath = new Map<string, string>();
  for (const [injectedName, specifier] of Object.entries(inject)) {
    const [module, exportName, importName] =
      typeof specifier === 'string'
        ? [specifier, 'default', 'defaultExport']
        : [specifier[0]!, specifier[1]!, specifier[1]!];
    if (!byModule.has(module)) {
      byModule.set(module, []);
      moduleOfPath.set(prefix + module.replaceAll('/', '-'), module);
    }
    byModule.get(module)!.push({ injectedName, exportName, importName });
  }
  build.initialOptions.inject = [
    ...(build.initialOptions.inject ?? []),
    ...moduleOfPath.keys(),
    ...polyfill.map((m) => require.resolve(m)),
  ];
  build.onResolve({ filter: VIRTUAL_GLOBAL }, ({ path }) => ({ path }));
  build.onLoad({ filter: VIRTUAL_GLOBAL }, ({ path }) => {
    const module = moduleOfPath.get(path)!;
    const injects = byModule.get(module)!;
    const imports = injects.map(({ exportName, importName }) =>
      importName === exportName ? exportName : `${exportName} as ${importName}`,
    );
    return {
      contents: [
        `import { ${imports.join(', ')} } from ${JSON.stringify(require.resolve(module))};`,
        ...injects.map(({ injectedName, importName }) => `globalThis.${injectedName} = ${importName};`),
      ].join('\n'),
      loader: 'js',
    };
  });
}
