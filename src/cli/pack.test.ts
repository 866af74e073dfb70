// `svc deploy` packing: what goes in and what is left out, the config byte for byte or edited in
// memory, --var rules, and the round trip through the node's own artifact reader.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { test } from 'node:test';
import { parse } from 'jsonc-parser';
import { projectDir } from '../../test/helpers/artifacts.ts';
import { unpackArtifact } from '../node/deploys/archive.ts';
import { Problem } from '../problem.ts';
import { buildDependencies } from './build-inputs.ts';
import {
  compileRule,
  configName,
  editConfig,
  matchesIgnore,
  packProject,
  parseVars,
  readProjectConfig,
} from './pack.ts';

async function packAndUnpack(dir: string, edits = { vars: [] as [string, string][], noBundle: false }) {
  const config = (await readProjectConfig(dir))!;
  const packed = await packProject(dir, config, editConfig(config, edits));
  const out = join(mkdtempSync(join(tmpdir(), 'svc-unpacked-')), 'root');
  const unpacked = await unpackArtifact(packed.file, out, {
    artifactBytes: 10 * 1024 * 1024,
    archiveEntries: 1000,
  });
  await packed.dispose();
  const files: string[] = [];
  const walk = async (d: string, rel: string) => {
    const { readdir, stat } = await import('node:fs/promises');
    for (const name of (await readdir(d)).sort()) {
      const p = join(d, name);
      if ((await stat(p)).isDirectory()) await walk(p, `${rel}${name}/`);
      else files.push(`${rel}${name}`);
    }
  };
  await walk(out, '');
  return { root: out, files, unpacked };
}

const CONFIG =
  '// the worker\n{\n  "name": "shop", // trailing comment\n  "main": "src/index.js",\n  "vars": { "A": "1" },\n}\n';

test('a project packs and unpacks through the node reader; the config is byte for byte', async () => {
  const dir = projectDir({
    'cell.jsonc': CONFIG,
    'src/index.js': 'export default {}',
    'public/a.txt': 'a',
    'node_modules/dep/index.js': 'module.exports = 1',
  });
  const { root, files, unpacked } = await packAndUnpack(dir);
  assert.equal(unpacked.config, 'cell.jsonc');
  // node_modules travels only as far as the build reads it (none of it here: nothing imports dep).
  assert.deepEqual(files, ['cell.jsonc', 'public/a.txt', 'src/index.js']);
  assert.equal(readFileSync(join(root, 'cell.jsonc'), 'utf8'), CONFIG);
  await rm(dir, { recursive: true });
});

test('what is always left out, and .svcignore', async () => {
  const dir = projectDir({
    'cell.json': '{"name":"shop"}',
    'index.js': 'x',
    '.git/HEAD': 'ref',
    '.env': 'SECRET=1',
    '.env.production': 'SECRET=2',
    '.dev.vars': 'SECRET=3',
    'svc.config.jsonc': '{"secretKey":"x"}',
    'sub/svc.config.jsonc': 'kept: only the root one is the svc config',
    '.wrangler/state': 'x',
    'node_modules/.bin/tool': 'x',
    'dist/out.js': 'x',
    'logs/a.log': 'x',
    'keep.log': 'x',
    'docs/readme.md': 'x',
    '.svcignore': '# comment\n*.log\n!keep.log\n/docs/\ndist/\n.env\n!.env\n',
  });
  const { files } = await packAndUnpack(dir);
  assert.deepEqual(files, ['cell.json', 'index.js', 'keep.log', 'sub/svc.config.jsonc']);
  await rm(dir, { recursive: true });
});

/** Packs as `svc deploy` does: the build's reads first, then the archive. */
async function deployPack(dir: string) {
  const config = (await readProjectConfig(dir))!;
  const packed = await packProject(dir, config, config.bytes, await buildDependencies(dir, config.bytes));
  const out = join(mkdtempSync(join(tmpdir(), 'svc-unpacked-')), 'root');
  await unpackArtifact(packed.file, out, { artifactBytes: 10 * 1024 * 1024, archiveEntries: 1000 });
  await packed.dispose();
  return (await readdir(out, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => relative(out, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .sort();
}

test('.assetsignore: the files it names are not packed, as wrangler uploads no ignored asset; its control files are', async () => {
  const dir = projectDir({
    'wrangler.jsonc':
      '{"name":"site","main":"src/index.js","compatibility_date":"2025-06-01","assets":{"directory":"public"}}',
    'src/index.js':
      "import data from '../public/data.json';\nexport default { fetch: () => Response.json(data) };\n",
    'public/.assetsignore':
      '# not for the public\nsecret.txt\ndrafts/\n*.map\n!keep.map\ndata.json\n_headers\n',
    'public/_headers': '/*\n  X-Site: 1\n',
    'public/_redirects': '/old /new 301\n',
    'public/index.html': '<h1>home</h1>',
    'public/secret.txt': 'not public',
    'public/drafts/next.html': 'draft',
    'public/drafts/deeper/more.html': 'draft',
    'public/app.js': 'x',
    'public/app.js.map': '{}',
    'public/keep.map': '{}',
    'public/data.json': '{"read":"by the worker"}',
    'secret.txt': 'outside the assets folder: .assetsignore says nothing of it',
  });
  assert.deepEqual(await deployPack(dir), [
    'cell.jsonc',
    'public/.assetsignore',
    'public/_headers',
    'public/_redirects',
    'public/app.js',
    // Ignored, but the worker's bundle reads it: the node's build needs it.
    'public/data.json',
    'public/index.html',
    'public/keep.map',
    'secret.txt',
    'src/index.js',
    'wrangler.jsonc',
  ]);
  await rm(dir, { recursive: true });
});

test("an assets folder inside node_modules (r2-explorer's dashboard) travels whole, the rest of node_modules does not", async () => {
  const dir = projectDir({
    'wrangler.json':
      '{"name":"explorer","main":"src/index.js","compatibility_date":"2025-06-01","assets":{"directory":"node_modules/ui/dashboard"}}',
    'src/index.js': 'export default { fetch: () => new Response("api") };\n',
    'node_modules/ui/package.json': '{"name":"ui"}',
    'node_modules/ui/dist/index.js': 'not read by the build',
    'node_modules/ui/dashboard/index.html': '<div id="app"></div>',
    'node_modules/ui/dashboard/assets/app.js': 'x',
    'node_modules/ui-dashboard-like/index.html': 'a sibling whose name starts the same',
    'node_modules/.bin/ui': 'x',
  });
  assert.deepEqual(await deployPack(dir), [
    'cell.jsonc',
    'node_modules/ui/dashboard/assets/app.js',
    'node_modules/ui/dashboard/index.html',
    'src/index.js',
    'wrangler.json',
  ]);
  await rm(dir, { recursive: true });
});

test(".assetsignore naming the folder of the worker (Astro's older dist/_worker.js/) leaves its code in", async () => {
  const dir = projectDir({
    'wrangler.jsonc':
      '{"name":"site","main":"dist/_worker.js/index.js","compatibility_date":"2025-06-01","assets":{"directory":"dist","binding":"ASSETS"}}',
    'dist/_worker.js/index.js':
      "import { page } from './chunks/page.mjs';\nexport default { fetch: () => new Response(page) };\n",
    'dist/_worker.js/chunks/page.mjs': "export const page = 'page';\n",
    'dist/_worker.js/manifest.wasm': 'not imported, but under the module root',
    'dist/.assetsignore': '_worker.js\n_routes.json\n',
    'dist/_routes.json': '{}',
    'dist/index.html': 'home',
  });
  assert.deepEqual(await deployPack(dir), [
    'cell.jsonc',
    'dist/.assetsignore',
    'dist/_worker.js/chunks/page.mjs',
    'dist/_worker.js/index.js',
    'dist/_worker.js/manifest.wasm',
    'dist/index.html',
    'wrangler.jsonc',
  ]);
  await rm(dir, { recursive: true });
});

test('links inside the project are followed; links out of it are refused', async () => {
  const dir = projectDir({ 'cell.json': '{"name":"shop"}', 'real/a.js': 'a' });
  symlinkSync(join(dir, 'real'), join(dir, 'linked'));
  symlinkSync(join(dir, 'real', 'a.js'), join(dir, 'b.js'));
  symlinkSync(dir, join(dir, 'real', 'loop'));
  const { files } = await packAndUnpack(dir);
  assert.deepEqual(files, ['b.js', 'cell.json', 'linked/a.js', 'real/a.js']);
  const outside = mkdtempSync(join(tmpdir(), 'svc-outside-'));
  symlinkSync(outside, join(dir, 'escape'));
  await assert.rejects(
    packAndUnpack(dir),
    (err: unknown) => err instanceof Problem && err.title === 'Link out of the project',
  );
  await rm(dir, { recursive: true });
});

test('long paths are carried in pax headers', async () => {
  const long = `${'deep/'.repeat(40)}file.js`;
  const dir = projectDir({ 'cell.json': '{"name":"shop"}', [long]: 'x' });
  const { files } = await packAndUnpack(dir);
  assert.deepEqual(files, ['cell.json', long]);
  await rm(dir, { recursive: true });
});

test('--var and --no-bundle edit the config in memory, keeping its comments', async () => {
  const dir = projectDir({ 'cell.jsonc': CONFIG, 'src/index.js': 'x' });
  const { root } = await packAndUnpack(dir, {
    vars: [
      ['A', 'two'],
      ['B', ''],
    ],
    noBundle: true,
  });
  const text = readFileSync(join(root, 'cell.jsonc'), 'utf8');
  assert.match(text, /\/\/ the worker/);
  assert.match(text, /\/\/ trailing comment/);
  assert.deepEqual(parse(text), {
    name: 'shop',
    main: 'src/index.js',
    vars: { A: 'two', B: '' },
    no_bundle: true,
  });
  assert.equal(readFileSync(join(dir, 'cell.jsonc'), 'utf8'), CONFIG, 'the project file is never written');
  await rm(dir, { recursive: true });
});

test('--var adds a vars object when the config has none; refuses a vars that is not one', () => {
  const added = editConfig(
    { file: 'cell.json', bytes: Buffer.from('{"name":"x"}') },
    { vars: [['K', 'v']], noBundle: false },
  );
  assert.deepEqual(JSON.parse(added.toString()), { name: 'x', vars: { K: 'v' } });
  assert.throws(
    () =>
      editConfig(
        { file: 'cell.json', bytes: Buffer.from('{"vars":"no"}') },
        { vars: [['K', 'v']], noBundle: false },
      ),
    (err: unknown) => err instanceof Problem && err.code === 'invalid-input',
  );
});

test('--var rules: first colon splits, empty value allowed; no colon, duplicates and bad names refused', () => {
  assert.deepEqual(parseVars(['URL:https://x:8080/a', 'EMPTY:', '_x1:y']), [
    ['URL', 'https://x:8080/a'],
    ['EMPTY', ''],
    ['_x1', 'y'],
  ]);
  for (const bad of [
    ['NOCOLON'],
    ['A:1', 'A:2'],
    ['1A:x'],
    ['a-b:x'],
    [':x'],
    ['__proto__:x'],
    ['constructor:x'],
    ['prototype:x'],
  ]) {
    assert.throws(
      () => parseVars(bad),
      (err: unknown) =>
        err instanceof Problem && err.code === 'invalid-input' && err.title === 'Invalid --var',
      bad.join(' '),
    );
  }
});

test('the config name: used when it is an application name, null when missing, blank or invalid', () => {
  const named = (text: string) => configName({ file: 'cell.jsonc', bytes: Buffer.from(text) });
  assert.equal(named('{"name":"shop"} // c'), 'shop');
  assert.equal(named('{}'), null);
  assert.equal(named('{"name":"  "}'), null);
  assert.equal(named('{"name":"Shop_1"}'), null);
  assert.equal(named('{"name":'), null);
});

test('ignore rules, gitignore style', () => {
  const rules = ['*.log', '!keep.log', '/top', 'a/**/b', 'dir/'].map((line) => compileRule(line)!);
  assert.ok(matchesIgnore(rules, 'x/y.log', false));
  assert.ok(!matchesIgnore(rules, 'keep.log', false));
  assert.ok(matchesIgnore(rules, 'top', false));
  assert.ok(!matchesIgnore(rules, 'sub/top', false));
  assert.ok(matchesIgnore(rules, 'a/b', false));
  assert.ok(matchesIgnore(rules, 'a/x/y/b', false));
  assert.ok(matchesIgnore(rules, 'x/dir', true));
  assert.ok(!matchesIgnore(rules, 'x/dir', false));
  assert.equal(compileRule('# comment'), null);
  assert.equal(compileRule('   '), null);
});

test('an empty directory tree still packs its config', async () => {
  const dir = projectDir({ 'cell.json': '{"name":"shop"}' });
  await mkdir(join(dir, 'empty'));
  const { files } = await packAndUnpack(dir);
  assert.deepEqual(files, ['cell.json']);
  await rm(dir, { recursive: true });
});
