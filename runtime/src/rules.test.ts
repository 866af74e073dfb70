// wrangler's module rules and cron triggers in the worker config: parsing and refusals, and how
// the rules type a module path (the config's rules first, defaults of unclaimed types after);
// bundling as wrangler bundles: its rules while bundling, Node.js compatibility modes, defines,
// find_additional_modules, base_dir, preserve_file_names.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { buildWorker, bundleOptionsOf, bundlingRules, effectiveRules, ruleTypeOf } from './bundle.ts';
import { parseWorkerConfig } from './config.ts';
import { type NodeCompatMode, navigatorDefined, nodeCompatMode } from './nodejs-compat.ts';

const BASE = '"main": "w.js", "compatibility_date": "2025-06-01"';
const parse = (extra: string) =>
  parseWorkerConfig(`{ ${BASE}, ${extra} }`, 'cell.jsonc', { maxCompatibilityDate: '2026-11-17' });
const refusal = (extra: string) => {
  try {
    parse(extra);
  } catch (err) {
    return (err as Error).message;
  }
  return assert.fail('expected a refusal');
};

describe('rules and triggers in the config', () => {
  it('reads rules and crons, and no longer ignores triggers', () => {
    const config = parse(
      '"rules": [{ "type": "Text", "globs": ["**/*.tmpl"], "fallthrough": true }], "triggers": { "crons": ["*/5 * * * *", "0 0 * * *"] }',
    );
    assert.deepEqual(config.rules, [{ type: 'Text', globs: ['**/*.tmpl'], fallthrough: true }]);
    assert.deepEqual(config.crons, ['*/5 * * * *', '0 0 * * *']);
    assert.deepEqual(config.ignored, []);
    assert.deepEqual(parse('"triggers": {}').crons, []);
  });

  it('warns as wrangler does of rules a rule without fallthrough hides, its defaults included', () => {
    const config = parseWorkerConfig(
      '{ "main": "w.js", "compatibility_date": "2025-06-01",\n  "rules": [\n    { "type": "Text", "globs": ["**/*.md"] },\n    { "type": "Text", "globs": ["**/*.tmpl"] },\n    { "type": "Data", "globs": ["**/*.dat"], "fallthrough": false }\n  ] }',
      'cell.jsonc',
    );
    assert.deepEqual(config.warnings, [
      'cell.jsonc:4:5: "rules[1]" is ignored: the earlier Text rule "rules[0]" has no fallthrough; add "fallthrough": true to it to use both, or "fallthrough": false to silence this',
      'cell.jsonc:3:5: "rules[0]" has no fallthrough, so wrangler\'s default Text rule is ignored; add "fallthrough": true to keep it, or "fallthrough": false to silence this',
    ]);
  });

  it('refuses malformed rules and crons, naming the key', () => {
    assert.match(refusal('"rules": {}'), /"rules" must be a list/);
    assert.match(
      refusal('"rules": [{ "type": "Markdown", "globs": ["*.md"] }]'),
      /"rules\[0\]\.type" must be one of/,
    );
    assert.match(
      refusal('"rules": [{ "type": "Text", "globs": [] }]'),
      /"rules\[0\]\.globs" must be a non-empty list/,
    );
    assert.match(refusal('"rules": [{ "type": "Text", "globs": ["*.x"], "fallthrough": 1 }]'), /fallthrough/);
    assert.match(refusal('"triggers": []'), /"triggers" must be an object/);
    assert.match(refusal('"triggers": { "crons": "* * * * *" }'), /"triggers\.crons" must be a list/);
    assert.match(
      refusal('"triggers": { "crons": ["* * *"] }'),
      /"\* \* \*" is no cron expression: give five fields/,
    );
    assert.match(
      refusal('"triggers": { "crons": ["99 * * * *"] }'),
      /"99 \* \* \* \*" is no cron expression/,
    );
  });
});

describe('module rules', () => {
  it("types paths by wrangler's defaults", () => {
    const rules = effectiveRules([]);
    assert.equal(ruleTypeOf(rules, 'index.js'), 'esm');
    assert.equal(ruleTypeOf(rules, 'lib/a.mjs'), 'esm');
    assert.equal(ruleTypeOf(rules, 'old.cjs'), 'commonjs');
    assert.equal(ruleTypeOf(rules, './schema.sql'), 'text');
    assert.equal(ruleTypeOf(rules, '../page.html'), 'text');
    assert.equal(ruleTypeOf(rules, 'blob.bin'), 'data');
    assert.equal(ruleTypeOf(rules, 'mod.wasm'), 'wasm');
    assert.equal(ruleTypeOf(rules, 'notes.md'), null);
  });

  it("puts the config's rules first; a type it names drops its defaults unless it falls through", () => {
    const closed = effectiveRules([{ type: 'Text', globs: ['**/*.md'], fallthrough: false }]);
    assert.equal(ruleTypeOf(closed, 'notes.md'), 'text');
    assert.equal(ruleTypeOf(closed, 'schema.sql'), null);
    assert.equal(ruleTypeOf(closed, 'index.js'), 'esm');
    const open = effectiveRules([{ type: 'Text', globs: ['**/*.md'], fallthrough: true }]);
    assert.equal(ruleTypeOf(open, 'schema.sql'), 'text');
    const data = effectiveRules([{ type: 'Data', globs: ['**/*.sql'], fallthrough: false }]);
    assert.equal(ruleTypeOf(data, 'schema.sql'), 'data', 'the first matching rule wins');
  });
});

describe("bundling as wrangler bundles (wrangler's rules, modes and defines)", () => {
  it("keeps wrangler's bundling rules: config rules, then Text/Data/CompiledWasm; a shadowed rule dropped", () => {
    const rules = bundlingRules([
      { type: 'Text', globs: ['**/*.md'], fallthrough: false },
      { type: 'Text', globs: ['**/*.tmpl'], fallthrough: false },
    ]);
    assert.deepEqual(
      rules.map((r) => `${r.type}:${r.globs.join(',')}`),
      ['Text:**/*.md', 'Data:**/*.bin', 'CompiledWasm:**/*.wasm,**/*.wasm?module'],
      'no JavaScript defaults while bundling; the second Text rule follows one without fallthrough',
    );
  });

  it("computes wrangler's Node.js compatibility mode from the date and flags", () => {
    const cases: [string, string[], NodeCompatMode][] = [
      ['2024-09-22', ['nodejs_compat'], 'v1'],
      ['2024-09-23', ['nodejs_compat'], 'v2'],
      ['2023-01-01', ['nodejs_compat_v2'], 'v2'],
      ['2023-01-01', ['nodejs_compat', 'nodejs_compat_v2'], 'v2'],
      ['2025-06-01', ['nodejs_als'], 'als'],
      ['2025-06-01', [], null],
      ['2026-08-04', [], 'v2'],
      ['2026-08-04', ['no_nodejs_compat_v2'], 'v1'],
      ['2026-08-04', ['no_nodejs_compat', 'no_nodejs_compat_v2'], null],
    ];
    for (const [date, flags, mode] of cases)
      assert.equal(nodeCompatMode(date, flags), mode, `${date} ${flags}`);
    assert.equal(navigatorDefined('2022-03-20', []), false);
    assert.equal(navigatorDefined('2022-03-21', []), true);
    assert.equal(navigatorDefined('2021-01-01', ['global_navigator']), true);
    assert.equal(navigatorDefined('2025-01-01', ['no_global_navigator']), false);
  });

  const project = (files: Record<string, string>) => {
    const root = mkdtempSync(join(tmpdir(), 'cell-bundle-'));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    return realpathSync(root);
  };
  const text = (worker: { modules: { name: string; bytes: Uint8Array }[] }, name: string) =>
    new TextDecoder().decode(worker.modules.find((m) => m.name === name)!.bytes);

  it('defines process.env.NODE_ENV as "production" and navigator.userAgent where workerd has it', async () => {
    const root = project({
      'src/index.js':
        'export default { fetch: () => new Response(process.env.NODE_ENV + globalThis.process.env.NODE_ENV + navigator.userAgent) };\n',
    });
    const worker = await buildWorker({
      root,
      mainPath: join(root, 'src/index.js'),
      noBundle: false,
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
    });
    const main = text(worker, 'index.js');
    assert.match(main, /new Response\("productionproductionCloudflare-Workers"\)/);
  });

  it('nodejs_compat v2 polyfills what workerd lacks through the unenv preset; v1 leaves imports to workerd', async () => {
    const root = project({
      'src/index.js':
        "import tty from 'node:tty';\nexport default { fetch: () => new Response(String(tty.isatty(1))) };\n",
    });
    const options = { root, mainPath: join(root, 'src/index.js'), noBundle: false };
    const v2 = text(
      await buildWorker({
        ...options,
        compatibilityDate: '2025-06-01',
        compatibilityFlags: ['nodejs_compat'],
      }),
      'index.js',
    );
    assert.doesNotMatch(v2, /from "node:tty"/);
    assert.match(v2, /isatty/);
    const v1 = text(
      await buildWorker({
        ...options,
        compatibilityDate: '2024-01-01',
        compatibilityFlags: ['nodejs_compat'],
      }),
      'index.js',
    );
    assert.match(v1, /from "node:tty"/);
  });

  it('find_additional_modules under base_dir: found modules stay imports, named by their path there; preserve_file_names', async () => {
    const root = project({
      'src/worker/index.js':
        "import t from './tmpl/page.txt';\nexport default { async fetch() { const m = await import('../lang/' + 'en.js'); return new Response(t + m.hi); } };\n",
      'src/worker/tmpl/page.txt': 'page',
      'src/lang/en.js': "export const hi = 'hi';\n",
      'src/lang/notes.md': 'not a module',
    });
    const worker = await buildWorker({
      root,
      mainPath: join(root, 'src/worker/index.js'),
      noBundle: false,
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      rules: [{ type: 'ESModule', globs: ['lang/*.js'], fallthrough: false }],
      baseDir: join(root, 'src'),
      findAdditionalModules: true,
      preserveFileNames: true,
    });
    assert.equal(worker.mainModule, 'worker/index.js');
    assert.deepEqual(worker.modules.map((m) => [m.name, m.type]).sort(), [
      ['lang/en.js', 'esm'],
      ['worker/index.js', 'esm'],
      ['worker/tmpl/page.txt', 'text'],
    ]);
    assert.match(text(worker, 'worker/index.js'), /from "\.\/tmpl\/page\.txt"/);
  });

  it('without preserve_file_names a rule module is named <sha1>-<file name> beside the bundle', async () => {
    const root = project({
      'src/index.js': "import t from './page.txt';\nexport default { fetch: () => new Response(t) };\n",
      'src/page.txt': 'page',
    });
    const worker = await buildWorker({
      root,
      mainPath: join(root, 'src/index.js'),
      noBundle: false,
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
    });
    const sha1 = createHash('sha1').update('page').digest('hex');
    assert.ok(worker.modules.some((m) => m.name === `${sha1}-page.txt` && m.type === 'text'));
  });

  it('no_bundle with find_additional_modules false uploads the entry alone', async () => {
    const root = project({ 'src/index.js': 'export default {};\n', 'src/other.js': 'export const x = 1;\n' });
    const options = {
      root,
      mainPath: join(root, 'src/index.js'),
      noBundle: true,
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
    };
    assert.deepEqual((await buildWorker(options)).modules.map((m) => m.name).sort(), [
      'index.js',
      'other.js',
    ]);
    assert.deepEqual(
      (await buildWorker({ ...options, findAdditionalModules: false })).modules.map((m) => m.name),
      ['index.js'],
    );
  });
});

describe("wrangler's build options from the config", () => {
  it('applies define, alias, minify, keep_names and jsx_factory as wrangler passes them to esbuild', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cell-build-options-'));
    mkdirSync(join(root, 'src'), { recursive: true });
    writeFileSync(
      join(root, 'src/index.jsx'),
      "import fetcher from 'node-fetch';\nfunction named() { return <b>x</b>; }\nexport default { fetch: () => new Response(String(DEBUG_LEVEL) + fetcher() + named.name) };\n",
    );
    writeFileSync(join(root, 'src/fetch-shim.js'), "export default () => 'shim';\n");
    const config = parseWorkerConfig(
      JSON.stringify({
        main: 'src/index.jsx',
        compatibility_date: '2025-06-01',
        define: { DEBUG_LEVEL: '3' },
        alias: { 'node-fetch': './src/fetch-shim.js' },
        jsx_factory: 'h',
        keep_names: false,
      }),
      'cell.jsonc',
    );
    assert.deepEqual(config.warnings, []);
    const real = realpathSync(root);
    const worker = await buildWorker(bundleOptionsOf(real, join(real, 'src/index.jsx'), config));
    const main = new TextDecoder().decode(worker.modules[0]!.bytes);
    assert.match(main, /String\(3\)/, 'define');
    assert.match(main, /'shim'|"shim"/, 'alias');
    assert.match(main, /h\("b", null, "x"\)/, 'jsx_factory');
    assert.doesNotMatch(main, /__name\(/, 'keep_names: false');
    const minified = await buildWorker(
      bundleOptionsOf(real, join(real, 'src/index.jsx'), {
        ...config,
        build: { ...config.build, minify: true },
      }),
    );
    assert.ok(minified.modules[0]!.bytes.length < worker.modules[0]!.bytes.length, 'minify');
    assert.throws(
      () =>
        parseWorkerConfig('{"main":"a.js","compatibility_date":"2025-06-01","define":{"X":1}}', 'cell.jsonc'),
      /"define" must be an object of strings/,
    );
  });
});
