// A real Next.js build deployed with `svc deploy` and no svc-specific file (docs/deploys.md
// "OpenNext (Next.js)"): a Next.js App Router project with `@opennextjs/cloudflare` as its
// documentation sets it up (`open-next.config.ts`, `initOpenNextCloudflareForDev` in
// `next.config.ts`, a `wrangler.jsonc` whose `main` is `.open-next/worker.js` and whose assets are
// `.open-next/assets`, `nodejs_compat`): a prerendered page, a page rendered on demand from its
// route param and a request header, an ISR page kept in OpenNext's R2 incremental cache and
// regenerated through its memory queue (a service binding to the worker itself), a page rendered
// again after `revalidatePath` through OpenNext's KV tag cache, a route handler answering JSON,
// and a public file. Installed from the npm registry into a cache under
// `.tools/framework-builds/` (helpers/framework-build.ts), built with `opennextjs-cloudflare build`
// (which runs the project's `next build`), deployed against a real `svc sail` running the real
// runtime. OpenNext's cache features that take D1 or Durable Objects, which svc lacks, are left
// out.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type DeployNode, startDeployNode } from './helpers/deploy-node.ts';
import {
  buildFrameworkProject,
  frameworkBuildDir,
  installFrameworkProject,
} from './helpers/framework-build.ts';
import { waitFor } from './helpers/svc.ts';

/**
 * The project, its dependencies pinned: `next build` as `build` and `opennextjs-cloudflare build`
 * as `build:worker`, as OpenNext's documentation names them; wrangler at the other tests' version.
 */
const PROJECT: Record<string, string> = {
  'package.json': `${JSON.stringify(
    {
      name: 'opennext-svc',
      private: true,
      type: 'module',
      scripts: {
        build: 'next build',
        'build:worker': 'opennextjs-cloudflare build',
      },
      dependencies: {
        '@opennextjs/cloudflare': '1.20.17',
        next: '16.4.6',
        react: '19.3.1',
        'react-dom': '19.3.1',
      },
      devDependencies: {
        '@types/node': '24.19.2',
        '@types/react': '19.3.0',
        typescript: '5.9.3',
        wrangler: '4.164.0',
      },
    },
    null,
    2,
  )}\n`,
  'wrangler.jsonc': `{
  "$schema": "node_modules/wrangler/config-schema.json",
  "name": "opennext-svc",
  "main": ".open-next/worker.js",
  "compatibility_date": "2026-10-01",
  "compatibility_flags": ["nodejs_compat", "global_fetch_strictly_public"],
  "assets": { "binding": "ASSETS", "directory": ".open-next/assets" },
  "r2_buckets": [{ "binding": "NEXT_INC_CACHE_R2_BUCKET", "bucket_name": "opennext-cache" }],
  "services": [{ "binding": "WORKER_SELF_REFERENCE", "service": "opennext-svc" }],
  "kv_namespaces": [{ "binding": "NEXT_TAG_CACHE_KV", "id": "opennext-tags" }]
}
`,
  'open-next.config.ts': `import { defineCloudflareConfig } from "@opennextjs/cloudflare";
import r2IncrementalCache from "@opennextjs/cloudflare/overrides/incremental-cache/r2-incremental-cache";
import memoryQueue from "@opennextjs/cloudflare/overrides/queue/memory-queue";
import kvNextTagCache from "@opennextjs/cloudflare/overrides/tag-cache/kv-next-tag-cache";

export default defineCloudflareConfig({
  incrementalCache: r2IncrementalCache,
  queue: memoryQueue,
  tagCache: kvNextTagCache,
});
`,
  'next.config.ts': `import type { NextConfig } from "next";

const nextConfig: NextConfig = {};

export default nextConfig;

import { initOpenNextCloudflareForDev } from "@opennextjs/cloudflare";
initOpenNextCloudflareForDev();
`,
  'tsconfig.json': `${JSON.stringify(
    {
      compilerOptions: {
        target: 'ES2017',
        lib: ['dom', 'dom.iterable', 'esnext'],
        allowJs: true,
        skipLibCheck: true,
        strict: true,
        noEmit: true,
        esModuleInterop: true,
        module: 'esnext',
        moduleResolution: 'bundler',
        resolveJsonModule: true,
        isolatedModules: true,
        jsx: 'react-jsx',
        incremental: true,
        plugins: [{ name: 'next' }],
        paths: { '@/*': ['./*'] },
      },
      include: ['next-env.d.ts', '**/*.ts', '**/*.tsx', '.next/types/**/*.ts', '.next/dev/types/**/*.ts'],
      exclude: ['node_modules'],
    },
    null,
    2,
  )}\n`,
  'app/layout.tsx': `export const metadata = { title: "Next.js on svc" };

export default function RootLayout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
`,
  'app/page.tsx': `export default function Home() {
  return <h1>Next.js on svc</h1>;
}
`,
  'app/isr/page.tsx': `export const revalidate = 2;

export default async function Isr() {
  return <h1>{\`rendered at \${Date.now()}\`}</h1>;
}
`,
  'app/pinned/page.tsx': `export const revalidate = 3600;

export default async function Pinned() {
  return <h1>{\`pinned at \${Date.now()}\`}</h1>;
}
`,
  'app/api/revalidate/route.ts': `import { revalidatePath } from "next/cache";

export async function POST() {
  revalidatePath("/pinned");
  return Response.json({ revalidated: "/pinned" });
}
`,
  'app/hello/[name]/page.tsx': `import { headers } from "next/headers";

export default async function Hello({ params }: { params: Promise<{ name: string }> }) {
  const { name } = await params;
  const agent = (await headers()).get("x-visitor") ?? "nobody";
  return <h1>{\`Hello \${name}, seen by \${agent}\`}</h1>;
}
`,
  'app/api/echo/route.ts': `export const dynamic = "force-dynamic";

export async function GET(request: Request) {
  const url = new URL(request.url);
  return Response.json({
    word: url.searchParams.get("word"),
    nodeEnv: process.env.NODE_ENV,
  });
}
`,
  'public/robots.txt': 'User-agent: *\nDisallow:\n',
};

const DIR = frameworkBuildDir('opennext', PROJECT);

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

test('Next.js with @opennextjs/cloudflare: built with opennextjs-cloudflare build, deployed unchanged, every route and a public file served', async () => {
  assert.equal(installProblem, null, 'the project installs from the registry');
  const build = buildFrameworkProject(DIR, ['.next', '.open-next'], 'build:worker');
  assert.equal(build.status, 0, build.output);
  assert.ok(existsSync(join(DIR, '.open-next', 'worker.js')), 'the build writes the worker');

  const node = target as DeployNode;
  const deployed = await node.deploy(DIR);
  assert.equal(deployed.code, 0, deployed.stderr);
  assert.match(deployed.stderr, /using wrangler\.jsonc, converted to cell\.jsonc in the artifact/);
  const port = await node.portOf('opennext-svc');
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
    return { response, body: await response.text() };
  };

  const home = await get('/');
  assert.equal(home.response.status, 200, home.body);
  assert.match(home.response.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(home.body, /<h1>Next\.js on svc<\/h1>/);
  assert.match(home.body, /<title>Next\.js on svc<\/title>/);
  assert.equal(home.response.headers.get('x-opennext'), '1', "answered by OpenNext's worker");

  const hello = await get('/hello/Ada', { 'x-visitor': 'svc-test' });
  assert.equal(hello.response.status, 200, hello.body);
  assert.match(
    hello.body,
    /<h1>Hello Ada, seen by svc-test<\/h1>/,
    'rendered on demand from the param and the header',
  );
  const other = await get('/hello/Grace');
  assert.match(other.body, /<h1>Hello Grace, seen by nobody<\/h1>/, 'rendered again for another request');
  assert.match(other.response.headers.get('cache-control') ?? '', /no-store/, 'a dynamic page is not cached');

  const echo = await get('/api/echo?word=sail');
  assert.equal(echo.response.status, 200, echo.body);
  assert.match(echo.response.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(JSON.parse(echo.body), { word: 'sail', nodeEnv: 'production' });

  // Kept in the R2 bucket once rendered: svc does not fill the cache at deploy
  // (docs/deploys.md), so the first answers render the page and store it. Each of those first
  // renders is stored, the last write winning, so what the cache keeps is the render it answers
  // twice in a row.
  const renderOf = (body: string) => body.match(/<h1>(?:rendered|pinned) at (\d+)<\/h1>/)?.[1];
  const storedRender = (path: string) => {
    let previous: string | undefined;
    return waitFor(async () => {
      const again = await get(path);
      const hit = again.response.headers.get('x-nextjs-cache') === 'HIT';
      const render = hit ? renderOf(again.body) : undefined;
      const settled = render !== undefined && render === previous ? render : null;
      previous = render;
      return settled;
    }, `${path} served from the R2 incremental cache`);
  };
  const first = await get('/isr');
  assert.equal(first.response.status, 200, first.body);
  assert.equal(first.response.headers.get('x-nextjs-cache'), 'MISS', 'the cache starts empty');
  assert.ok(renderOf(first.body), first.body);
  const stored = Number(await storedRender('/isr'));
  // Past its 2 s, a request is answered from the cache and queues the page's regeneration,
  // which the memory queue requests through WORKER_SELF_REFERENCE; a later request sees it.
  const regenerated = await waitFor(async () => {
    const render = Number(renderOf((await get('/isr')).body));
    return render >= stored + 2_000 ? render : null;
  }, 'the ISR page regenerated in the background after its revalidate time');
  assert.ok(regenerated);

  // On demand: revalidatePath marks the page in the KV tag cache, so the next request renders it
  // again although its hour has not passed.
  await storedRender('/pinned');
  const revalidatedAt = Date.now();
  const revalidate = await fetch(`http://127.0.0.1:${port}/api/revalidate`, { method: 'POST' });
  assert.equal(revalidate.status, 200, await revalidate.text());
  const repinned = await waitFor(async () => {
    const render = Number(renderOf((await get('/pinned')).body));
    return render >= revalidatedAt ? render : null;
  }, 'the page rendered again after revalidatePath');
  assert.ok(repinned);

  const robots = await get('/robots.txt');
  assert.equal(robots.response.status, 200);
  assert.equal(robots.body, PROJECT['public/robots.txt']);

  const script = home.body.match(/<script src="(\/_next\/static\/[^"]+\.js)"/)?.[1];
  assert.ok(script, 'the page loads its client scripts from /_next/static/');
  const chunk = await get(script);
  assert.equal(chunk.response.status, 200);
  assert.match(chunk.response.headers.get('content-type') ?? '', /javascript/);

  const missing = await get('/no/such/page');
  assert.equal(missing.response.status, 404, "Next's own 404 for an unknown route");
  assert.match(missing.body, /This page could not be found/);
});
