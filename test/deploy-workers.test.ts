// `svc deploy` of real Workers projects against a real `svc sail` running the real runtime: each
// wrangler config form (wrangler.jsonc, wrangler.json, wrangler.toml) deploys and serves, with a
// note on stderr and the project file untouched; a project with its dev dependencies installed
// packs only what the build reads (well under 1 MiB) and serves. The dependency tree is made on
// disk by the test (no registry), shaped as npm installs it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Bucket } from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { type DeployNode, SERVE_DEADLINE_MS, startDeployNode } from './helpers/deploy-node.ts';
import { type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const EXAMPLES = resolve(import.meta.dirname, '..', 'examples');
let target: DeployNode;
let bucket: Bucket;
let node: SailProcess;

before(async () => {
  target = await startDeployNode();
  ({ bucket, node } = target);
});
after(async () => {
  await target?.stop();
});

const deploy = (dir: string, extra: string[] = []) => target.deploy(dir, extra);
const portOf = (application: string) => target.portOf(application);

/** The body the application answers on its node for `path`, once its process is ready. */
async function served(application: string, path = '/'): Promise<string> {
  const port = await portOf(application);
  return waitFor(
    async () => {
      const answer = await fetch(`http://127.0.0.1:${port}${path}`).catch(() => null);
      return answer?.status === 200 ? answer.text() : null;
    },
    () => `${application} to serve ${path}\n${node.log().slice(-3000)}`,
    SERVE_DEADLINE_MS,
  ) as Promise<string>;
}

describe('svc deploy of the other examples', () => {
  test('static-site: assets only, with its 404 page', async () => {
    const { code, stderr } = await deploy(join(EXAMPLES, 'static-site'));
    assert.equal(code, 0, stderr);
    assert.match(await served('static-site'), /<h1>static-site<\/h1>/);
    const missing = await fetch(`http://127.0.0.1:${await portOf('static-site')}/nope`);
    assert.equal(missing.status, 404);
    assert.match(await missing.text(), /<h1>not here<\/h1>/);
  });

  test('websocket: a streamed body and a WebSocket echo', async () => {
    const { code, stderr } = await deploy(join(EXAMPLES, 'websocket'));
    assert.equal(code, 0, stderr);
    assert.equal(await served('websocket', '/stream'), 'chunk 1\nchunk 2\nchunk 3\n');
    const socket = new WebSocket(`ws://127.0.0.1:${await portOf('websocket')}/ws`);
    const echoed = await new Promise<string>((resolveEcho, reject) => {
      socket.addEventListener('open', () => socket.send('ping'));
      socket.addEventListener('message', (event) => resolveEcho(String(event.data)));
      socket.addEventListener('error', () => reject(new Error('the WebSocket failed')));
    });
    socket.close();
    assert.equal(echoed, 'echo: ping');
  });

  test('text-rules: a .sql module by a default rule and a .tmpl module by the config', async () => {
    const { code, stderr } = await deploy(join(EXAMPLES, 'text-rules'));
    assert.equal(code, 0, stderr);
    assert.deepEqual(JSON.parse(await served('text-rules')), {
      schema: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);',
      page: '<p>hi</p>',
    });
  });

  test('hono-app after npm ci from the registry: packs under 1 MiB and serves', async (t) => {
    const dir = tempDir('svc-hono-');
    cpSync(join(EXAMPLES, 'hono-app'), dir, { recursive: true });
    const install = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(
      install.status,
      0,
      `npm ci could not install hono from the registry: ${(install.stderr || install.error?.message || '').slice(-300)}`,
    );
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    const [, size, unit] = /svc: packed \d+ files \(([\d.]+) (B|KiB|MiB)\)/.exec(stderr) ?? [];
    assert.ok(size, stderr);
    assert.notEqual(unit, 'MiB', `packed ${size} ${unit}`);
    t.diagnostic(`hono-app packed ${size} ${unit}`);
    assert.equal(await served('hono-app'), 'Hello Hono!');
    assert.deepEqual(JSON.parse(await served('hono-app', '/users/7')), { id: '7' });
  });
});

describe('svc deploy of wrangler projects', () => {
  test('wrangler.jsonc: converted in the artifact, with a note; --name falls back to its name', async () => {
    const dir = join(EXAMPLES, 'plain-fetch');
    const before = readFileSync(join(dir, 'wrangler.jsonc'));
    const { code, stdout, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^deployed plain-fetch [0-9a-f]+ /);
    assert.match(
      stderr,
      /svc: no cell\.jsonc in .*; using wrangler\.jsonc, converted to cell\.jsonc in the artifact/,
    );
    assert.deepEqual(readFileSync(join(dir, 'wrangler.jsonc')), before, 'the project file is never written');
    assert.deepEqual(JSON.parse(await served('plain-fetch', '/x')), {
      hello: 'world',
      path: '/x',
      method: 'GET',
    });
  });

  test('wrangler.json with nodejs_compat and a CommonJS dependency', async () => {
    const { code, stderr } = await deploy(join(EXAMPLES, 'nodejs-compat'));
    assert.equal(code, 0, stderr);
    assert.match(stderr, /using wrangler\.json,/);
    assert.deepEqual(JSON.parse(await served('nodejs-compat')), {
      heard: 'hello node',
      encoded: Buffer.from('hello node').toString('base64'),
    });
  });

  test('wrangler.toml, deployed under --name', async () => {
    const { code, stdout, stderr } = await deploy(join(EXAMPLES, 'multi-module'), ['--name', 'temps']);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^deployed temps /);
    assert.match(stderr, /using wrangler\.toml,/);
    assert.deepEqual(JSON.parse(await served('temps', '/convert?f=212')), { unit: 'celsius', value: 100 });
  });

  test('a wrangler.jsonc renamed cell.jsonc deploys as it is, with no conversion', async () => {
    const dir = projectDir({
      'cell.jsonc': readFileSync(join(EXAMPLES, 'plain-fetch', 'wrangler.jsonc'), 'utf8'),
      'src/index.js': readFileSync(join(EXAMPLES, 'plain-fetch', 'src', 'index.js'), 'utf8'),
    });
    const { code, stderr } = await deploy(dir, ['--name', 'renamed']);
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stderr, /converted/);
    assert.equal(JSON.parse(await served('renamed', '/r')).path, '/r');
  });

  test('an invalid wrangler.toml is refused before anything is sent, naming the file and line', async () => {
    const dir = projectDir({ 'wrangler.toml': 'name = "x"\nmain = \n' });
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 1);
    assert.match(
      stderr,
      /^svc: Invalid worker config: wrangler\.toml:2:\d+: .*; fix the TOML \[urn:svc:invalid-input\]\n$/m,
    );
  });

  test('no worker config of any kind, and a worker that does not build, are refused before upload', async () => {
    const none = await deploy(projectDir({ 'package.json': '{}' }));
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /^svc: No worker config: .* has no cell\.jsonc, cell\.json, \.wrangler\/deploy\/config\.json \(a framework build's\) or wrangler config \(wrangler\.json, wrangler\.jsonc, wrangler\.toml\); .*\[urn:svc:invalid-input\]\n$/m,
    );
    const broken = await deploy(
      projectDir({
        'wrangler.json': '{ "name": "broken", "main": "src/index.js", "compatibility_date": "2025-06-01" }',
        'src/index.js':
          "import { x } from 'not-installed';\nexport default { fetch: () => new Response(x) };\n",
      }),
    );
    assert.equal(broken.code, 1);
    assert.match(
      broken.stderr,
      /^svc: Worker does not build: src\/index\.js:1:\d+: Could not resolve "not-installed".*\[urn:svc:invalid-input\]\n$/m,
    );
    assert.doesNotMatch(broken.stderr, /packed|accepted/);
    const apps = await bucket.store.list('_svc/apps/broken/', { recursive: true });
    assert.deepEqual(apps.objects, [], 'nothing reached the node');
  });

  test('a project with dev dependencies installed packs under 1 MiB and serves', async () => {
    const dir = projectDir({
      'wrangler.jsonc': '{ "name": "deps", "main": "src/index.js", "compatibility_date": "2025-06-01" }',
      'package.json':
        '{ "name": "deps", "dependencies": { "tiny-router": "1.0.0" }, "devDependencies": { "big-tool": "1.0.0" } }',
      'src/index.js':
        "import { answer } from 'tiny-router';\nexport default { fetch: () => new Response(answer()) };\n",
      // The runtime dependency, resolved through its package.json's exports (ESM entry).
      'node_modules/tiny-router/package.json':
        '{ "name": "tiny-router", "version": "1.0.0", "exports": { ".": { "import": "./dist/index.mjs", "require": "./dist/index.cjs" } } }',
      'node_modules/tiny-router/dist/index.mjs':
        "import { word } from './word.mjs';\nexport const answer = () => 'routed ' + word;\n",
      'node_modules/tiny-router/dist/word.mjs': "export const word = 'here';\n",
      'node_modules/tiny-router/dist/index.cjs': `module.exports = ${JSON.stringify(randomBytes(300_000).toString('base64'))};\n`,
      'node_modules/tiny-router/README.md': randomBytes(200_000).toString('base64'),
      // A dev dependency the worker never imports: megabytes that must not travel.
      'node_modules/big-tool/package.json':
        '{ "name": "big-tool", "version": "1.0.0", "main": "lib/tool.js" }',
      'node_modules/big-tool/lib/tool.js': `module.exports = ${JSON.stringify(randomBytes(3_000_000).toString('base64'))};\n`,
      'node_modules/.bin/big-tool': '#!/bin/sh\n',
    });
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    const [, files, size, unit] = /svc: packed (\d+) files \(([\d.]+) (B|KiB|MiB)\)/.exec(stderr) ?? [];
    assert.ok(files, stderr);
    assert.notEqual(unit, 'MiB', `packed ${size} ${unit}`);
    // cell.jsonc (converted), wrangler.jsonc, package.json, src/index.js, the router's
    // package.json and its two modules: nothing of big-tool, the router's README or its CommonJS build.
    assert.equal(Number(files), 7, stderr);
    assert.equal(await served('deps'), 'routed here');
  });
});
