// A real framework build deployed with `svc deploy` and no svc-specific file (docs/deploys.md
// "Framework builds"): React Router with @cloudflare/vite-plugin, as Cloudflare's template sets it
// up (the plugin on the `ssr` environment, a worker entry importing the virtual server build, a
// var read through `cloudflare:workers`), installed from the npm registry into a cache under
// `.tools/` (installed once, reused while its files are unchanged; helpers/framework-build.ts), built with its own
// `react-router build`, deployed through the redirect the build writes, against a real
// `svc sail` running the real runtime. Skipped when the registry cannot be reached.

import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type DeployNode, startDeployNode } from './helpers/deploy-node.ts';
import {
  buildFrameworkProject,
  frameworkBuildDir,
  installFrameworkProject,
} from './helpers/framework-build.ts';

/** The template's files, with its dependencies pinned (React Router's default app, trimmed of Tailwind). */
const PROJECT: Record<string, string> = {
  'package.json': `${JSON.stringify(
    {
      name: 'rr-svc',
      private: true,
      type: 'module',
      scripts: { build: 'react-router build' },
      dependencies: { isbot: '5.2.3', react: '19.3.1', 'react-dom': '19.3.1', 'react-router': '8.4.0' },
      devDependencies: {
        '@cloudflare/vite-plugin': '1.64.0',
        '@react-router/dev': '8.4.0',
        vite: '8.3.8',
        wrangler: '4.164.0',
      },
    },
    null,
    2,
  )}\n`,
  'wrangler.jsonc': `{
  "$schema": "node_modules/wrangler/config-schema.json",
  "name": "rr-svc",
  "compatibility_date": "2025-10-01",
  "main": "./workers/app.ts",
  "vars": {
    "VALUE_FROM_CLOUDFLARE": "Hello from Cloudflare"
  }
}
`,
  'vite.config.ts': `import { reactRouter } from "@react-router/dev/vite";
import { cloudflare } from "@cloudflare/vite-plugin";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [cloudflare({ viteEnvironment: { name: "ssr" } }), reactRouter()],
});
`,
  'react-router.config.ts': `import type { Config } from "@react-router/dev/config";

export default { ssr: true } satisfies Config;
`,
  'workers/app.ts': `import { createRequestHandler } from "react-router";

const requestHandler = createRequestHandler(
  () => import("virtual:react-router/server-build"),
  import.meta.env.MODE,
);

export default {
  async fetch(request: Request) {
    return requestHandler(request);
  },
};
`,
  'app/root.tsx': `import { Links, Meta, Outlet, Scripts, ScrollRestoration } from "react-router";

export function Layout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <head>
        <meta charSet="utf-8" />
        <Meta />
        <Links />
      </head>
      <body>
        {children}
        <ScrollRestoration />
        <Scripts />
      </body>
    </html>
  );
}

export default function App() {
  return <Outlet />;
}
`,
  'app/routes.ts': `import { type RouteConfig, index } from "@react-router/dev/routes";

export default [index("routes/home.tsx")] satisfies RouteConfig;
`,
  'app/routes/home.tsx': `import { env } from "cloudflare:workers";
import { useLoaderData } from "react-router";

export function loader() {
  return { message: (env as { VALUE_FROM_CLOUDFLARE: string }).VALUE_FROM_CLOUDFLARE };
}

export default function Home() {
  const { message } = useLoaderData<typeof loader>();
  return <main><h1>React Router on svc</h1><p>{message}</p></main>;
}
`,
};

const DIR = frameworkBuildDir('react-router', PROJECT);

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

test('React Router with @cloudflare/vite-plugin: built with its own vite, deployed unchanged, pages and assets served', async () => {
  assert.equal(installProblem, null, 'the template installs from the registry');
  const build = buildFrameworkProject(DIR, ['build', '.wrangler']);
  assert.equal(build.status, 0, build.output);
  assert.ok(
    existsSync(join(DIR, '.wrangler', 'deploy', 'config.json')),
    'the build writes the deploy redirect',
  );

  const node = target as DeployNode;
  const deployed = await node.deploy(DIR);
  assert.equal(deployed.code, 0, deployed.stderr);
  assert.match(deployed.stderr, /named by \.wrangler\/deploy\/config\.json/);
  const port = await node.portOf('rr-svc');

  const page = await fetch(`http://127.0.0.1:${port}/`);
  assert.equal(page.status, 200);
  const html = await page.text();
  assert.match(html, /<h1>React Router on svc<\/h1>/);
  assert.match(html, /<p>Hello from Cloudflare<\/p>/, "the loader reads the config's var");

  const scripts = readdirSync(join(DIR, 'build', 'client', 'assets')).filter((f) => f.endsWith('.js'));
  assert.ok(scripts.length > 0);
  for (const script of scripts) {
    assert.ok(html.includes(`/assets/${script}`) || scripts.length > 1, `${script} is linked from the page`);
    const asset = await fetch(`http://127.0.0.1:${port}/assets/${script}`);
    assert.equal(asset.status, 200, script);
    assert.match(asset.headers.get('content-type') ?? '', /javascript/);
    await asset.arrayBuffer();
  }
  const missing = await fetch(`http://127.0.0.1:${port}/no/such/page`);
  assert.equal(missing.status, 404, "React Router's own 404 for an unknown route");
  await missing.arrayBuffer();
});
