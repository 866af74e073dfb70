// A real Astro build deployed with `svc deploy` and no svc-specific file (docs/deploys.md
// "Astro"): Astro with the `@astrojs/cloudflare` adapter as its documentation sets it up (the
// adapter in `astro.config.mjs`, a `wrangler.jsonc` whose `main` is the adapter's server
// entrypoint), two static pages, one page rendered on demand that reads a var through
// `cloudflare:workers`, a public file and an imported image. Installed from the npm registry into
// a cache under `.tools/framework-builds/` (helpers/framework-build.ts), built with its own
// `astro build`, deployed through the redirect the build writes, against a real `svc sail`
// running the real runtime. The adapter's two defaults whose bindings svc cannot serve as declared
// are turned off as docs/deploys.md tells users to: sessions (a KV binding with no namespace id)
// and Cloudflare Images. A second test deploys the older adapter's output (the worker in
// `dist/_worker.js/`, which `.assetsignore` names) as that adapter writes it.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { projectDir } from './helpers/artifacts.ts';
import { type DeployNode, startDeployNode } from './helpers/deploy-node.ts';
import {
  buildFrameworkProject,
  frameworkBuildDir,
  installFrameworkProject,
} from './helpers/framework-build.ts';

/** The project, its dependencies pinned; wrangler and the Vite plugin at the React Router test's versions. */
const PROJECT: Record<string, string> = {
  'package.json': `${JSON.stringify(
    {
      name: 'astro-svc',
      private: true,
      type: 'module',
      scripts: { build: 'astro build' },
      dependencies: { '@astrojs/cloudflare': '14.3.3', astro: '7.3.5' },
      devDependencies: { '@cloudflare/vite-plugin': '1.64.0', vite: '8.3.8', wrangler: '4.164.0' },
    },
    null,
    2,
  )}\n`,
  'astro.config.mjs': `import cloudflare from "@astrojs/cloudflare";
import { defineConfig } from "astro/config";

export default defineConfig({
  // No Cloudflare Images binding, no KV-backed sessions: svc provides neither yet.
  adapter: cloudflare({ imageService: "passthrough" }),
  session: false,
});
`,
  'wrangler.jsonc': `{
  "name": "astro-svc",
  "main": "@astrojs/cloudflare/entrypoints/server",
  "compatibility_date": "2025-10-01",
  "assets": { "binding": "ASSETS", "directory": "./dist" },
  "vars": { "GREETING": "Hello from Cloudflare" }
}
`,
  'src/pages/index.astro': `---
---
<html lang="en">
  <head>
    <title>Astro on svc</title>
    <link rel="icon" href="/favicon.svg" />
  </head>
  <body>
    <h1>Astro on svc</h1>
    <a href="/about/">About</a>
  </body>
</html>
`,
  'src/pages/about.astro': `---
import logo from "../assets/logo.svg";
---
<html lang="en">
  <head><title>About</title></head>
  <body>
    <h1>About this site</h1>
    <img src={logo.src} alt="logo" width="32" height="32" />
  </body>
</html>
`,
  'src/pages/greet.astro': `---
import { env } from "cloudflare:workers";
export const prerender = false;
const name = Astro.url.searchParams.get("name") ?? "nobody";
---
<html lang="en">
  <head><title>Greeting</title></head>
  <body><h1>{env.GREETING}, {name}</h1></body>
</html>
`,
  'src/assets/logo.svg':
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 2 2"><circle cx="1" cy="1" r="1"/></svg>\n',
  'public/favicon.svg':
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>\n',
};

const DIR = frameworkBuildDir('astro', PROJECT);

let target: DeployNode | undefined;
let installProblem: string | null = null;

before(async () => {
  installProblem = installFrameworkProject(DIR, PROJECT);
  if (installProblem) return;
  target = await startDeployNode();
});
after(async () => {
  await target?.stop();
});

test('Astro with @astrojs/cloudflare: built with astro build, deployed unchanged, static and on-demand pages and assets served', async () => {
  assert.equal(installProblem, null, 'the project installs from the registry');
  const build = buildFrameworkProject(DIR, ['dist', '.wrangler']);
  assert.equal(build.status, 0, build.output);
  assert.ok(
    existsSync(join(DIR, '.wrangler', 'deploy', 'config.json')),
    'the build writes the deploy redirect',
  );
  const ignored = readFileSync(join(DIR, 'dist', 'client', '.assetsignore'), 'utf8');
  assert.match(ignored, /^wrangler\.json$/m, 'the build writes an .assetsignore');

  const node = target as DeployNode;
  const deployed = await node.deploy(DIR);
  assert.equal(deployed.code, 0, deployed.stderr);
  assert.match(
    deployed.stderr,
    /using dist\/server\/wrangler\.json, named by \.wrangler\/deploy\/config\.json/,
  );
  const port = await node.portOf('astro-svc');
  const get = async (path: string) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    return { response, body: await response.text() };
  };

  const home = await get('/');
  assert.equal(home.response.status, 200);
  assert.match(home.response.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(home.body, /<h1>Astro on svc<\/h1>/);
  assert.equal(
    home.body,
    readFileSync(join(DIR, 'dist', 'client', 'index.html'), 'utf8'),
    'the prerendered page',
  );

  const about = await get('/about/');
  assert.equal(about.response.status, 200);
  assert.match(about.body, /<h1>About this site<\/h1>/);
  const image = about.body.match(/<img src="(\/_astro\/logo\.[\w-]+\.svg)"/)?.[1];
  assert.ok(image, 'the page links the imported image');
  const logo = await get(image);
  assert.equal(logo.response.status, 200);
  assert.equal(logo.response.headers.get('content-type'), 'image/svg+xml');
  assert.equal(logo.body, PROJECT['src/assets/logo.svg']);
  assert.equal(
    logo.response.headers.get('cache-control'),
    'public, max-age=31536000, immutable',
    'the _headers rule the adapter writes for /_astro/*',
  );

  const greeting = await get('/greet?name=Ada');
  assert.equal(greeting.response.status, 200);
  assert.match(
    greeting.body,
    /<h1>Hello from Cloudflare, Ada<\/h1>/,
    "rendered on demand, reading the config's var",
  );

  const favicon = await get('/favicon.svg');
  assert.equal(favicon.response.status, 200);
  assert.equal(favicon.body, PROJECT['public/favicon.svg']);

  for (const path of ['/.assetsignore', '/_headers', '/wrangler.json']) {
    const hidden = await get(path);
    assert.equal(hidden.response.status, 404, `${path} is not served`);
  }
  const missing = await get('/no/such/page');
  assert.equal(missing.response.status, 404, "Astro's own 404 for an unknown route");
});

test("Astro's adapter before 13, its output as that adapter writes it: the worker in dist/_worker.js/, which .assetsignore names, deploys and is never served", async () => {
  assert.equal(installProblem, null, 'the node starts once the project installs');
  const dir = projectDir({
    'wrangler.jsonc': `{
  "name": "astro-legacy",
  "main": "dist/_worker.js/index.js",
  "compatibility_date": "2025-03-25",
  "assets": { "binding": "ASSETS", "directory": "./dist" }
}
`,
    'dist/.assetsignore': '_worker.js\n_routes.json\n',
    'dist/_routes.json': '{"version":1,"include":["/*"],"exclude":["/_astro/*"]}',
    'dist/index.html': '<h1>prerendered</h1>',
    'dist/_worker.js/index.js': `import { render } from './chunks/render.mjs';
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/ssr') return new Response(render(url), { headers: { 'content-type': 'text/html' } });
    return env.ASSETS.fetch(request);
  },
};
`,
    'dist/_worker.js/chunks/render.mjs':
      "export const render = (url) => '<h1>rendered for ' + url.searchParams.get('name') + '</h1>';\n",
  });
  const node = target as DeployNode;
  try {
    const deployed = await node.deploy(dir);
    assert.equal(deployed.code, 0, deployed.stderr);
    const port = await node.portOf('astro-legacy');
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: response.status, body: await response.text() };
    };
    assert.deepEqual(await get('/'), { status: 200, body: '<h1>prerendered</h1>' });
    assert.deepEqual(await get('/ssr?name=Ada'), { status: 200, body: '<h1>rendered for Ada</h1>' });
    for (const path of [
      '/_worker.js/index.js',
      '/_worker.js/chunks/render.mjs',
      '/_routes.json',
      '/.assetsignore',
    ]) {
      assert.equal((await get(path)).status, 404, `${path} is not served`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
