// `svc deploy` builds a project as `wrangler deploy` would, against a real `svc sail` running the
// real runtime (docs/deploys.md "Which config is deployed", docs/runtime.md "Bundling as wrangler
// bundles"): a framework build's deploy redirect (`.wrangler/deploy/config.json`, as
// @cloudflare/vite-plugin writes it, with its empty binding lists and its `../client` assets)
// deploys the built worker and its assets; a `nodejs_compat` worker gets wrangler's unenv
// polyfills and `process.env.NODE_ENV`; `find_additional_modules` uploads the modules a variable
// dynamic import loads; `--env` merges a wrangler.toml section and a binding is refused at its
// line there. The projects are written by the test (no registry).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { projectDir } from './helpers/artifacts.ts';
import { type DeployNode, startDeployNode } from './helpers/deploy-node.ts';

let target: DeployNode;

before(async () => {
  target = await startDeployNode();
});
after(async () => {
  await target?.stop();
});

const deploy = (dir: string, extra: string[] = []) => target.deploy(dir, extra);
const portOf = (application: string) => target.portOf(application);

/** The answer of the application's ready process for `path`. */
async function get(application: string, path: string): Promise<Response> {
  return fetch(`http://127.0.0.1:${await portOf(application)}${path}`);
}

/**
 * What `vite build` with @cloudflare/vite-plugin leaves (React Router's template): the user's
 * config naming sources that only the plugin can build, the built server with the generated
 * single-line wrangler.json (the resolved config: empty binding lists, wrangler's computed
 * fields, no_bundle with an ESModule rule, assets in `../client`), the client build, and the
 * redirect.
 */
const GENERATED_CONFIG = {
  configPath: '/home/user/app/wrangler.jsonc',
  userConfigPath: '/home/user/app/wrangler.jsonc',
  topLevelName: 'rr-app',
  definedEnvironments: [],
  legacy_env: true,
  compatibility_date: '2025-04-04',
  compatibility_flags: ['nodejs_compat'],
  jsx_factory: 'React.createElement',
  jsx_fragment: 'React.Fragment',
  rules: [{ type: 'ESModule', globs: ['**/*.js', '**/*.mjs'] }],
  name: 'rr-app',
  main: 'index.js',
  triggers: {},
  assets: { directory: '../client' },
  vars: {},
  durable_objects: { bindings: [] },
  workflows: [],
  kv_namespaces: [],
  send_email: [],
  queues: { producers: [], consumers: [] },
  r2_buckets: [],
  d1_databases: [],
  vectorize: [],
  hyperdrive: [],
  services: [],
  analytics_engine_datasets: [],
  dispatch_namespaces: [],
  mtls_certificates: [],
  logfwdr: { bindings: [] },
  python_modules: { exclude: ['**/*.pyc'] },
  dev: { ip: 'localhost', local_protocol: 'http' },
  no_bundle: true,
};
const REDIRECT_PROJECT = {
  'wrangler.jsonc':
    '{ "name": "rr-app", "main": "./workers/app.ts", "compatibility_date": "2025-04-04", "compatibility_flags": ["nodejs_compat"] }',
  'workers/app.ts':
    'import { createRequestHandler } from "react-router";\nimport * as build from "virtual:react-router/server-build";\nexport default { fetch: createRequestHandler(() => build) };\n',
  '.wrangler/deploy/config.json': JSON.stringify({ configPath: '../../build/server/wrangler.json' }),
  'build/server/wrangler.json': JSON.stringify(GENERATED_CONFIG),
  'build/server/index.js':
    'export default { async fetch(request) { const { page } = await import("./assets/page-Ab12.js"); return new Response(page(new URL(request.url).pathname), { headers: { "content-type": "text/html" } }); } };\n',
  'build/server/assets/page-Ab12.js': 'export const page = (path) => "<h1>rendered " + path + "</h1>";\n',
  'build/server/.dev.vars': 'SECRET=local-only\n',
  'build/client/favicon.txt': 'icon\n',
  'build/client/assets/entry.client-Xy9.js': 'console.log("client");\n',
};

const NODE_COMPAT_PROJECT = {
  'wrangler.toml': [
    'name = "node-compat"',
    'main = "src/index.js"',
    'compatibility_date = "2025-06-01"',
    'compatibility_flags = ["nodejs_compat"]',
    '',
  ].join('\n'),
  'src/index.js': [
    "import tty from 'node:tty';",
    "import { inspect } from 'node:util';",
    "import { legacy } from './legacy.cjs';",
    'export default {',
    '  fetch() {',
    '    return Response.json({',
    '      nodeEnv: process.env.NODE_ENV,',
    "      isatty: typeof tty.isatty === 'function' ? tty.isatty(1) : 'missing',",
    '      inspected: inspect({ a: 1 }),',
    "      buffer: Buffer.from('hi').toString('base64'),",
    "      performance: typeof performance.now === 'function',",
    '      legacy,',
    '    });',
    '  },',
    '};',
    '',
  ].join('\n'),
  // CommonJS requiring built-ins, as npm packages do: wrangler turns each into an import.
  'src/legacy.cjs': "const path = require('path');\nexports.legacy = path.join('a', 'b');\n",
};

const ADDITIONAL_MODULES_PROJECT = {
  'wrangler.jsonc': JSON.stringify({
    name: 'dynamic-langs',
    main: 'src/index.js',
    compatibility_date: '2025-06-01',
    find_additional_modules: true,
    rules: [
      { type: 'ESModule', globs: ['lang/*.js'] },
      { type: 'Text', globs: ['**/*.md'] },
    ],
    preserve_file_names: true,
  }),
  'src/index.js': [
    "import about from './about.md';",
    'export default {',
    '  async fetch(request) {',
    "    const lang = new URL(request.url).searchParams.get('lang') ?? 'en';",
    '    // A specifier esbuild cannot see through: only an uploaded module answers it.',
    "    const specifier = './lang/' + lang + '.js';",
    '    const { greeting } = await import(specifier);',
    "    return new Response(greeting + ' | ' + about.trim());",
    '  },',
    '};',
    '',
  ].join('\n'),
  'src/lang/en.js': "export const greeting = 'hello';\n",
  'src/lang/fr.js': "export const greeting = 'bonjour';\n",
  'src/about.md': '# about\n',
};

const ENV_PROJECT = {
  'wrangler.toml': [
    'name = "envapp"',
    'main = "src/index.js"',
    'compatibility_date = "2025-06-01"',
    '',
    '[vars]',
    'LEVEL = "top"',
    '',
    '[env.staging.vars]',
    'LEVEL = "staging"',
    '',
    '[env.cached]',
    '[[env.cached.hyperdrive]]',
    'binding = "CACHE"',
    'bucket_name = "1"',
    '',
  ].join('\n'),
  'src/index.js': 'export default { fetch: (request, env) => new Response(env.LEVEL) };\n',
};

describe('svc deploy builds as wrangler deploy', () => {
  test('--env merges the section as wrangler does; a binding in another section is refused at its TOML line', async () => {
    const dir = projectDir(ENV_PROJECT);
    const staging = await deploy(dir, ['--env', 'staging']);
    assert.equal(staging.code, 0, staging.stderr);
    assert.match(staging.stdout, /^deployed envapp-staging /);
    assert.equal(await (await get('envapp-staging', '/')).text(), 'staging');
    const cached = await deploy(dir, ['--env', 'cached']);
    assert.equal(cached.code, 1);
    assert.match(
      cached.stderr,
      /^svc: Invalid worker config: \S*wrangler\.toml:12:1: "hyperdrive" declares bindings this runtime does not provide yet \(CACHE\).*\[urn:svc:invalid-input\]$/m,
    );
    assert.doesNotMatch(cached.stderr, /packed|accepted/, 'refused before anything is sent');
  });

  test('a framework build deploys through its redirect: the built worker, its chunks and ../client assets', async () => {
    const dir = projectDir(REDIRECT_PROJECT);
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /using build\/server\/wrangler\.json, named by \.wrangler\/deploy\/config\.json/);
    assert.doesNotMatch(stderr, /kv_namespaces|declares bindings/, 'empty binding lists are no bindings');
    const page = await get('rr-app', '/products/7');
    assert.equal(page.status, 200);
    assert.equal(await page.text(), '<h1>rendered /products/7</h1>');
    const asset = await get('rr-app', '/assets/entry.client-Xy9.js');
    assert.equal(asset.status, 200);
    assert.equal(await asset.text(), 'console.log("client");\n');
    assert.equal(await (await get('rr-app', '/favicon.txt')).text(), 'icon\n');
  });

  test('nodejs_compat goes through the unenv preset; process.env.NODE_ENV is "production"', async () => {
    const dir = projectDir(NODE_COMPAT_PROJECT);
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    const answer = await get('node-compat', '/');
    assert.equal(answer.status, 200);
    assert.deepEqual(await answer.json(), {
      nodeEnv: 'production',
      isatty: false,
      inspected: '{ a: 1 }',
      buffer: 'aGk=',
      performance: true,
      legacy: 'a/b',
    });
  });

  test('find_additional_modules: a variable dynamic import loads an uploaded module', async () => {
    const dir = projectDir(ADDITIONAL_MODULES_PROJECT);
    const { code, stderr } = await deploy(dir);
    assert.equal(code, 0, stderr);
    const fr = await get('dynamic-langs', '/?lang=fr');
    assert.equal(fr.status, 200);
    assert.equal(await fr.text(), 'bonjour | # about');
    assert.equal(await (await get('dynamic-langs', '/?lang=en')).text(), 'hello | # about');
  });
});
