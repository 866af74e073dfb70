// `svc deploy` with wrangler configs and installed dependencies: which config is read and how it
// lands in the artifact as cell.jsonc, and that node_modules travels only as far as the build
// reads it (the runtime's own esbuild build, run locally).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'jsonc-parser';
import { projectDir } from '../../test/helpers/artifacts.ts';
import { unpackArtifact } from '../node/deploys/archive.ts';
import { Problem } from '../problem.ts';
import { buildDependencies } from './build-inputs.ts';
import { configName, packProject, readProjectConfig } from './pack.ts';

const TOML = `name = "from-toml"
main = "src/index.js"
compatibility_date = 2025-06-01
compatibility_flags = ["nodejs_compat"]

[vars]
GREETING = "hi"

[triggers]
crons = ["*/5 * * * *"]
`;

test('the worker config wins over wrangler files; wrangler.jsonc over .json over .toml', async () => {
  const all = {
    'wrangler.toml': TOML,
    'wrangler.json': '{"name":"from-json"}',
    'wrangler.jsonc': '{"name":"from-jsonc"}',
  };
  const own = await readProjectConfig(projectDir({ ...all, 'cell.json': '{"name":"own"}' }));
  assert.equal(own?.file, 'cell.json');
  assert.equal(own?.convertedFrom, undefined);
  const jsonc = await readProjectConfig(projectDir(all));
  assert.deepEqual(
    [jsonc?.file, jsonc?.convertedFrom, configName(jsonc!)],
    ['cell.jsonc', 'wrangler.jsonc', 'from-jsonc'],
  );
  const { 'wrangler.jsonc': _, ...rest } = all;
  const json = await readProjectConfig(projectDir(rest));
  assert.equal(json?.convertedFrom, 'wrangler.json');
  assert.equal(json?.bytes.toString(), '{"name":"from-json"}', 'JSON forms go byte for byte');
  assert.equal(await readProjectConfig(projectDir({ 'package.json': '{}' })), null);
});

test('wrangler.toml becomes the same config as JSON; a TOML date is its text', async () => {
  const config = (await readProjectConfig(projectDir({ 'wrangler.toml': TOML })))!;
  assert.equal(config.convertedFrom, 'wrangler.toml');
  assert.match(config.bytes.toString(), /^\/\/ Converted by svc deploy from wrangler\.toml\.\n/);
  assert.deepEqual(parse(config.bytes.toString()), {
    name: 'from-toml',
    main: 'src/index.js',
    compatibility_date: '2025-06-01',
    compatibility_flags: ['nodejs_compat'],
    vars: { GREETING: 'hi' },
    triggers: { crons: ['*/5 * * * *'] },
  });
  assert.equal(configName(config), 'from-toml');
});

test('a TOML syntax error is refused naming the file, line and column', async () => {
  await assert.rejects(readProjectConfig(projectDir({ 'wrangler.toml': 'name = "x"\n[vars\n' })), (err) => {
    assert.ok(err instanceof Problem);
    assert.equal(err.code, 'invalid-input');
    assert.equal(err.title, 'Invalid worker config');
    assert.match(err.detail!, /^wrangler\.toml:2:\d+: .*; fix the TOML$/);
    return true;
  });
});

const PROJECT = {
  'cell.json':
    '{"name":"deps","main":"src/index.js","compatibility_date":"2025-06-01","compatibility_flags":["nodejs_compat"]}',
  'src/index.js':
    "import { lib } from 'lib';\nimport note from './note.sql';\nexport default { fetch: () => new Response(lib + note) };\n",
  'src/note.sql': 'SELECT 1;',
  'node_modules/lib/package.json': '{"name":"lib","main":"./cjs/main.js","module":"./esm/main.js"}',
  'node_modules/lib/esm/main.js': "import { inner } from 'inner';\nexport const lib = inner;\n",
  'node_modules/lib/cjs/main.js': 'module.exports = 1;',
  'node_modules/lib/node_modules/inner/package.json': '{"name":"inner","main":"index.js"}',
  'node_modules/lib/node_modules/inner/index.js':
    "const { EventEmitter } = require('events');\nexports.inner = typeof EventEmitter;\n",
  'node_modules/dev-only/package.json': '{"name":"dev-only"}',
  'node_modules/dev-only/index.js': 'x'.repeat(100_000),
  'node_modules/.package-lock.json': '{}',
};

test('node_modules: only the files the build reads and the package.json files that resolve them', async () => {
  const dir = projectDir(PROJECT);
  const config = (await readProjectConfig(dir))!;
  const needed = await buildDependencies(dir, config.bytes);
  assert.deepEqual([...needed].sort(), [
    'node_modules/lib/esm/main.js',
    'node_modules/lib/node_modules/inner/index.js',
    'node_modules/lib/node_modules/inner/package.json',
    'node_modules/lib/package.json',
  ]);
  const packed = await packProject(dir, config, config.bytes, needed);
  const out = join(mkdtempSync(join(tmpdir(), 'svc-unpacked-')), 'root');
  await unpackArtifact(packed.file, out, { artifactBytes: 10 * 1024 * 1024, archiveEntries: 1000 });
  await packed.dispose();
  assert.equal(
    readFileSync(join(out, 'node_modules/lib/esm/main.js'), 'utf8'),
    PROJECT['node_modules/lib/esm/main.js'],
  );
  assert.throws(() => readFileSync(join(out, 'node_modules/dev-only/index.js')));
  assert.throws(() => readFileSync(join(out, 'node_modules/lib/cjs/main.js')));
  assert.equal(readFileSync(join(out, 'src/note.sql'), 'utf8'), 'SELECT 1;');
});

test('no_bundle and assets-only projects pack nothing of node_modules', async () => {
  const nb = Buffer.from('{"main":"src/index.js","compatibility_date":"2025-06-01","no_bundle":true}');
  assert.equal((await buildDependencies(projectDir(PROJECT), nb)).size, 0);
  const site = Buffer.from('{"compatibility_date":"2025-06-01","assets":{"directory":"public"}}');
  assert.equal((await buildDependencies(projectDir(PROJECT), site)).size, 0);
});

test('a worker that does not build is refused before packing, naming file, line and column', async () => {
  const dir = projectDir({
    ...PROJECT,
    'src/index.js': "import { gone } from 'missing-package';\nexport default {};\n",
  });
  const config = (await readProjectConfig(dir))!;
  await assert.rejects(buildDependencies(dir, config.bytes), (err) => {
    assert.ok(err instanceof Problem);
    assert.equal(err.title, 'Worker does not build');
    assert.match(err.detail!, /^src\/index\.js:1:\d+: Could not resolve "missing-package"/);
    return true;
  });
});
