// A real Remix build deployed with `svc deploy` and no svc-specific file (docs/deploys.md
// "Remix"): Remix v2's Cloudflare Workers template (`templates/cloudflare-workers` on Remix's `v2`
// branch; `create-remix` fetches templates from Remix's default branch, which no longer holds it),
// trimmed of Tailwind, ESLint and the Google Fonts links: a `wrangler.toml` whose `main` is the
// template's `server.ts` (which imports the server build from `./build/server`) and whose assets
// are `./build/client`, the Remix Vite plugin with `cloudflareDevProxyVitePlugin`, a page with a
// loader reading a var from the load context, a route rendered from its param, and a public file.
// Installed from the npm registry into a cache under `.tools/framework-builds/`
// (helpers/framework-build.ts), built with its own `remix vite:build`, deployed against a real
// `svc sail` running the real runtime. The server build leaves React to the worker's bundler, so
// the page reports which React build runs: it must be the production one.

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

/** The template's files, its dependencies pinned (wrangler at the latest 3.x its peer range allows). */
const PROJECT: Record<string, string> = {
  'package.json': `${JSON.stringify(
    {
      private: true,
      sideEffects: false,
      type: 'module',
      scripts: { build: 'remix vite:build', deploy: 'wrangler deploy' },
      dependencies: {
        '@remix-run/cloudflare': '2.17.5',
        '@remix-run/react': '2.17.5',
        '@remix-run/server-runtime': '2.17.5',
        isbot: '4.4.0',
        react: '18.3.1',
        'react-dom': '18.3.1',
      },
      devDependencies: {
        '@remix-run/dev': '2.17.5',
        vite: '6.4.6',
        'vite-tsconfig-paths': '4.3.2',
        wrangler: '3.114.17',
      },
    },
    null,
    2,
  )}\n`,
  'wrangler.toml': `#:schema node_modules/wrangler/config-schema.json
name = "remix-svc"

main = "./server.ts"
workers_dev = true
# https://developers.cloudflare.com/workers/platform/compatibility-dates
compatibility_date = "2024-09-26"

[assets]
# https://developers.cloudflare.com/workers/static-assets/binding/
directory = "./build/client"

[build]
command = "npm run build"

[vars]
GREETING = "Hello from Cloudflare"
`,
  'server.ts': `import { createRequestHandler, type ServerBuild } from "@remix-run/cloudflare";
// @ts-ignore This file won’t exist if it hasn’t yet been built
import * as build from "./build/server";
import { getLoadContext } from "./load-context";

const handleRemixRequest = createRequestHandler(build as any as ServerBuild);

export default {
  async fetch(request, env, ctx) {
    try {
      const loadContext = getLoadContext({
        request,
        context: {
          cloudflare: {
            cf: request.cf,
            ctx: {
              waitUntil: ctx.waitUntil.bind(ctx),
              passThroughOnException: ctx.passThroughOnException.bind(ctx),
            },
            caches,
            env,
          },
        },
      });
      return await handleRemixRequest(request, loadContext);
    } catch (error) {
      console.log(error);
      return new Response("An unexpected error occurred", { status: 500 });
    }
  },
} satisfies ExportedHandler<Env>;
`,
  'load-context.ts': `import { type PlatformProxy } from "wrangler";

type GetLoadContextArgs = {
  request: Request;
  context: {
    cloudflare: Omit<PlatformProxy<Env>, "dispose" | "caches" | "cf"> & {
      caches: PlatformProxy<Env>["caches"] | CacheStorage;
      cf: Request["cf"];
    };
  };
};

declare module "@remix-run/cloudflare" {
  interface AppLoadContext extends ReturnType<typeof getLoadContext> {}
}

export function getLoadContext({ context }: GetLoadContextArgs) {
  return context;
}
`,
  'vite.config.ts': `import { defineConfig } from "vite";
import {
  vitePlugin as remix,
  cloudflareDevProxyVitePlugin,
} from "@remix-run/dev";
import tsconfigPaths from "vite-tsconfig-paths";
import { getLoadContext } from "./load-context";

declare module "@remix-run/cloudflare" {
  interface Future {
    v3_singleFetch: true;
  }
}

export default defineConfig({
  plugins: [
    cloudflareDevProxyVitePlugin({
      getLoadContext,
    }),
    remix({
      future: {
        v3_fetcherPersist: true,
        v3_relativeSplatPath: true,
        v3_throwAbortReason: true,
        v3_singleFetch: true,
        v3_lazyRouteDiscovery: true,
      },
    }),
    tsconfigPaths(),
  ],
  ssr: {
    resolve: {
      conditions: ["workerd", "worker", "browser"],
    },
  },
  resolve: {
    mainFields: ["browser", "module", "main"],
  },
  build: {
    minify: true,
  },
});
`,
  'tsconfig.json': `{
  "include": ["worker-configuration.d.ts", "env.d.ts", "**/*.ts", "**/*.tsx"],
  "compilerOptions": {
    "lib": ["DOM", "DOM.Iterable", "ES2022"],
    "types": ["@remix-run/cloudflare", "vite/client"],
    "isolatedModules": true,
    "esModuleInterop": true,
    "jsx": "react-jsx",
    "moduleResolution": "Bundler",
    "resolveJsonModule": true,
    "target": "ES2022",
    "strict": true,
    "allowJs": true,
    "skipLibCheck": true,
    "forceConsistentCasingInFileNames": true,
    "baseUrl": ".",
    "paths": {
      "~/*": ["./app/*"]
    },
    "noEmit": true
  }
}
`,
  'app/entry.client.tsx': `import { RemixBrowser } from "@remix-run/react";
import { startTransition, StrictMode } from "react";
import { hydrateRoot } from "react-dom/client";

startTransition(() => {
  hydrateRoot(
    document,
    <StrictMode>
      <RemixBrowser />
    </StrictMode>
  );
});
`,
  'app/entry.server.tsx': `import type { AppLoadContext, EntryContext } from "@remix-run/cloudflare";
import { RemixServer } from "@remix-run/react";
import { isbot } from "isbot";
import { renderToReadableStream } from "react-dom/server";

const ABORT_DELAY = 5000;

export default async function handleRequest(
  request: Request,
  responseStatusCode: number,
  responseHeaders: Headers,
  remixContext: EntryContext,
  loadContext: AppLoadContext
) {
  const controller = new AbortController();
  const timeoutId = setTimeout(() => controller.abort(), ABORT_DELAY);

  const body = await renderToReadableStream(
    <RemixServer
      context={remixContext}
      url={request.url}
      abortDelay={ABORT_DELAY}
    />,
    {
      signal: controller.signal,
      onError(error: unknown) {
        if (!controller.signal.aborted) {
          console.error(error);
        }
        responseStatusCode = 500;
      },
    }
  );

  body.allReady.then(() => clearTimeout(timeoutId));

  if (isbot(request.headers.get("user-agent") || "")) {
    await body.allReady;
  }

  responseHeaders.set("Content-Type", "text/html");
  return new Response(body, {
    headers: responseHeaders,
    status: responseStatusCode,
  });
}
`,
  'app/root.tsx': `import {
  Links,
  Meta,
  Outlet,
  Scripts,
  ScrollRestoration,
} from "@remix-run/react";

export function Layout({ children }: { children: React.ReactNode }) {
  return (
    <html lang="en">
      <head>
        <meta charSet="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
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
  // React's production build throws from act(); its development build runs the callback.
  'app/routes/_index.tsx': `import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/cloudflare";
import { useLoaderData } from "@remix-run/react";
import * as React from "react";

export const meta: MetaFunction = () => [{ title: "Remix on svc" }];

function reactBuild(): string {
  try {
    React.unstable_act(() => {});
    return "development";
  } catch (error) {
    return /not supported in production builds/.test(String(error)) ? "production" : String(error);
  }
}

export async function loader({ context }: LoaderFunctionArgs) {
  return {
    greeting: context.cloudflare.env.GREETING,
    nodeEnv: process.env.NODE_ENV,
    react: reactBuild(),
  };
}

export default function Index() {
  const data = useLoaderData<typeof loader>();
  return (
    <main>
      <h1>{data.greeting}</h1>
      <p id="build">{\`NODE_ENV=\${data.nodeEnv} react=\${data.react}\`}</p>
      <img src="/logo.svg" alt="logo" width="32" height="32" />
    </main>
  );
}
`,
  'app/routes/hello.$name.tsx': `import type { LoaderFunctionArgs } from "@remix-run/cloudflare";
import { useLoaderData } from "@remix-run/react";

export async function loader({ params }: LoaderFunctionArgs) {
  return { name: params.name };
}

export default function Hello() {
  const { name } = useLoaderData<typeof loader>();
  return <h1>{\`Hello \${name}\`}</h1>;
}
`,
  'public/logo.svg':
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>\n',
};

const DIR = frameworkBuildDir('remix', PROJECT);

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

test("Remix v2 on Cloudflare Workers: its template built with remix vite:build, deployed unchanged, served with React's production build", async () => {
  assert.equal(installProblem, null, 'the project installs from the registry');
  const build = buildFrameworkProject(DIR, ['build']);
  assert.equal(build.status, 0, build.output);
  assert.ok(existsSync(join(DIR, 'build', 'server', 'index.js')), 'the build writes the server build');

  const node = target as DeployNode;
  const deployed = await node.deploy(DIR);
  assert.equal(deployed.code, 0, deployed.stderr);
  assert.match(deployed.stderr, /using wrangler\.toml, converted to cell\.jsonc in the artifact/);
  const port = await node.portOf('remix-svc');
  const get = async (path: string) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    return { response, body: await response.text() };
  };

  const home = await get('/');
  assert.equal(home.response.status, 200, home.body);
  assert.match(home.response.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(home.body, /<title>Remix on svc<\/title>/);
  assert.match(home.body, /<h1>Hello from Cloudflare<\/h1>/, "the loader reads the config's var");
  assert.match(home.body, /<p id="build">NODE_ENV=production react=production<\/p>/);

  const hello = await get('/hello/Ada');
  assert.equal(hello.response.status, 200, hello.body);
  assert.match(hello.body, /<h1>Hello Ada<\/h1>/);

  const data = await get('/hello/Grace.data');
  assert.equal(data.response.status, 200, 'the single-fetch data request of a client navigation');
  assert.match(data.body, /Grace/);

  const scripts = [...home.body.matchAll(/"(\/assets\/[\w.-]+\.js)"/g)].map((m) => m[1] as string);
  assert.ok(scripts.length > 0, 'the page loads its client scripts from /assets/');
  for (const script of new Set(scripts)) {
    const chunk = await get(script);
    assert.equal(chunk.response.status, 200, script);
    assert.match(chunk.response.headers.get('content-type') ?? '', /javascript/);
  }

  const logo = await get('/logo.svg');
  assert.equal(logo.response.status, 200);
  assert.equal(logo.response.headers.get('content-type'), 'image/svg+xml');
  assert.equal(logo.body, PROJECT['public/logo.svg']);

  const missing = await get('/no/such/page');
  assert.equal(missing.response.status, 404, "Remix's own 404 for an unknown route");
});
