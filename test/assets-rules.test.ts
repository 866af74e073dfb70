// Static assets as Cloudflare serves them (docs/assets.md), end to end: `cell publish` of projects
// with assets, `_headers`, `_redirects` and `.assetsignore`, then `cell serve` with real workerd on
// a local-directory bucket, each rule checked by its answer (status, Location, headers, body).
// Expected answers follow Cloudflare's documentation (developers.cloudflare.com/workers/static-assets/:
// routing/advanced/html-handling, routing/single-page-application, routing/worker-script, headers,
// redirects, binding#run_worker_first) and the cases of workers-sdk's tests that
// runtime/src/router-worker.test.ts names (handler.test.ts, router-worker index.test.ts).

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { openDirStore } from '../src/store/dir.ts';
import {
  type BucketEnv,
  type CellProcess,
  dirBucketEnv,
  fetchText,
  publish,
  startCell,
} from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const SERVE_DEADLINE_MS = 30_000;

function project(files: Record<string, string>): string {
  const dir = tempDir('cell-assets-');
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/** A full-stack app: an SPA with an API worker, route list, rules and ignored files. */
const APP = {
  'cell.json': JSON.stringify({
    main: 'worker.js',
    compatibility_date: '2025-06-01',
    assets: {
      directory: 'public',
      binding: 'ASSETS',
      not_found_handling: 'single-page-application',
      run_worker_first: ['/api/*', '!/api/docs/*'],
    },
  }),
  'worker.js': `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/api/about-through-binding') return env.ASSETS.fetch(new Request(new URL('/about', url)));
    return new Response('worker ' + request.method + ' ' + url.pathname, { headers: { 'x-answered-by': 'worker' } });
  },
};\n`,
  'public/index.html': '<h1>app shell</h1>',
  'public/about.html': '<h1>about</h1>',
  'public/docs/index.html': '<h1>docs</h1>',
  'public/api/docs/index.html': '<h1>api docs</h1>',
  'public/assets/app.css': 'body{}',
  'public/assets/app.css.map': '{"mapped":true}',
  'public/private/secret.txt': 'secret',
  'public/nested/_headers': 'a nested _headers is an ordinary file',
  'public/.assetsignore': '*.map\nprivate/\n',
  'public/_headers': `# every asset answer
/*
  X-Frame-Options: DENY
/assets/*
  Cache-Control: public, max-age=31536000, immutable
/about
  ! X-Frame-Options
  X-Page: about
/blog/:slug
  X-Slug: :slug
this line is no rule
`,
  'public/_redirects': `/old /about 301
/docs-alias /docs/ 200
/external https://example.com/x 308
/blog/:slug /posts/:slug
/files/* /assets/:splat 307
`,
};

/** An SPA with a worker and no route list: navigation requests decide. */
const SPA = {
  'cell.json': JSON.stringify({
    main: 'worker.js',
    compatibility_date: '2025-06-01',
    assets: { directory: 'public', not_found_handling: 'single-page-application' },
  }),
  'worker.js': APP['worker.js'],
  'public/index.html': '<h1>spa shell</h1>',
  'public/app.js': 'run()',
  'public/_headers': '/*\n  X-Frame-Options: DENY\n',
  'public/_redirects': '/old /app.js 301\n',
};

/** Assets alone: 404 pages and drop-trailing-slash. */
const SITE = {
  'cell.json': JSON.stringify({
    compatibility_date: '2025-06-01',
    assets: { directory: 'www', not_found_handling: '404-page', html_handling: 'drop-trailing-slash' },
  }),
  'www/index.html': '<h1>home</h1>',
  'www/404.html': '<h1>not here</h1>',
  'www/blog/404.html': '<h1>no such post</h1>',
  'www/blog/post.html': '<h1>post</h1>',
  'www/folder/index.html': '<h1>folder</h1>',
};

describe('assets served as Cloudflare serves them, through cell serve and workerd', () => {
  let bucketDir: string;
  let bucket: BucketEnv;
  const running: CellProcess[] = [];
  let app: CellProcess;
  let site: CellProcess;
  let spa: CellProcess;
  let appWarnings = '';

  const serveDeployment = async (application: string, files: Record<string, string>) => {
    const result = await publish(project(files), application, bucket);
    assert.equal(result.code, 0, result.stderr);
    const cell = await startCell(application, 'node-a', bucket);
    running.push(cell);
    await waitFor(
      async () => {
        const health = await fetchText(`${cell.url}/.well-known/cell/health`);
        return health?.status === 200 && JSON.parse(health.body).deployment === result.published!.deployment;
      },
      () => `cell to serve ${application}\n${cell.stderr()}`,
      SERVE_DEADLINE_MS,
    );
    return { cell, result };
  };
  // node:http, not fetch: fetch sets Sec-Fetch-Mode itself, as a browser would for a script.
  const get = (
    cell: CellProcess,
    path: string,
    init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ) =>
    new Promise<{ status: number; headers: Headers; body: string }>((resolve, reject) => {
      const request = httpRequest(
        `${cell.url}${path}`,
        { method: init.method ?? 'GET', headers: init.headers ?? {} },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => {
            const headers = new Headers();
            for (const [name, value] of Object.entries(response.headers)) {
              if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
            }
            resolve({ status: response.statusCode!, headers, body: Buffer.concat(chunks).toString('utf8') });
          });
        },
      );
      request.on('error', reject);
      request.end(init.body);
    });
  const navigate = { headers: { 'sec-fetch-mode': 'navigate' } };

  before(async () => {
    bucketDir = tempDir('cell-bucket-');
    bucket = dirBucketEnv(bucketDir);
    const served = await serveDeployment('app', APP);
    app = served.cell;
    appWarnings = served.result.stderr;
    const store = await openDirStore(bucketDir);
    const manifest = JSON.parse(
      new TextDecoder().decode(
        (await store.get(keys.runtimeManifest('app', 'app', served.result.published!.deployment)))!.body,
      ),
    );
    await store.close();
    assert.deepEqual(manifest.required_features, ['modules', 'assets', 'asset-rules']);
    site = (await serveDeployment('site', SITE)).cell;
    spa = (await serveDeployment('spa', SPA)).cell;
  });
  after(async () => {
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
    rmSync(bucketDir, { recursive: true, force: true });
  });

  it('publish warns about the _headers line it skipped, naming it', () => {
    assert.match(appWarnings, /cell: warning: _headers:11: expected a header as "Name: value"/);
  });

  it('html_handling: 307 to the canonical URL, the query kept, and the asset there', async () => {
    const index = await get(app, '/index.html?x=1');
    assert.deepEqual([index.status, index.headers.get('location')], [307, '/?x=1']);
    const home = await get(app, '/');
    assert.deepEqual([home.status, home.body], [200, '<h1>app shell</h1>']);
    assert.equal(home.headers.get('cache-control'), 'public, max-age=0, must-revalidate');
    assert.equal((await get(app, '/about.html')).headers.get('location'), '/about');
    assert.equal((await get(app, '/about')).body, '<h1>about</h1>');
    assert.equal((await get(app, '/docs')).headers.get('location'), '/docs/');
    assert.equal((await get(app, '/docs/')).body, '<h1>docs</h1>');
    // drop-trailing-slash on the assets-only site
    assert.equal((await get(site, '/folder')).body, '<h1>folder</h1>');
    const slash = await get(site, '/folder/');
    assert.deepEqual([slash.status, slash.headers.get('location')], [307, '/folder']);
  });

  it('conditional requests: the ETag answers 304', async () => {
    const first = await get(app, '/about');
    const again = await get(app, '/about', { headers: { 'if-none-match': first.headers.get('etag')! } });
    assert.equal(again.status, 304);
  });

  it('not_found_handling 404-page: the nearest 404.html with status 404', async () => {
    const post = await get(site, '/blog/missing');
    assert.deepEqual([post.status, post.body], [404, '<h1>no such post</h1>']);
    const top = await get(site, '/missing/deep');
    assert.deepEqual([top.status, top.body], [404, '<h1>not here</h1>']);
  });

  it('single-page-application with a worker: navigations get the shell, other requests the worker', async () => {
    const deep = await get(spa, '/dashboard/settings', navigate);
    assert.deepEqual([deep.status, deep.body], [200, '<h1>spa shell</h1>']);
    assert.equal((await get(spa, '/dashboard/settings')).body, 'worker GET /dashboard/settings');
    assert.equal((await get(spa, '/app.js', navigate)).body, 'run()');
  });

  it('single-page-application with a route list: every path the worker does not claim gets the shell', async () => {
    const deep = await get(app, '/dashboard/settings');
    assert.deepEqual([deep.status, deep.body], [200, '<h1>app shell</h1>']);
  });

  it('run_worker_first routes: /api/* runs the worker even for navigations, !/api/docs/* stays on assets', async () => {
    assert.equal((await get(app, '/api/users', navigate)).body, 'worker GET /api/users');
    assert.equal((await get(app, '/api/docs/')).body, '<h1>api docs</h1>');
    assert.equal(
      (await get(app, '/api/about-through-binding')).body,
      '<h1>about</h1>',
      'the binding reaches the assets',
    );
  });

  it('a method other than GET or HEAD is 405 where the assets answer, and reaches the worker elsewhere', async () => {
    assert.equal((await get(app, '/about', { method: 'POST', body: 'x' })).status, 405);
    assert.equal(
      (await get(app, '/form', { method: 'POST', body: 'x' })).status,
      405,
      'the shell answers /form',
    );
    assert.equal((await get(app, '/api/form', { method: 'POST', body: 'x' })).body, 'worker POST /api/form');
    assert.equal((await get(spa, '/app.js', { method: 'POST', body: 'x' })).status, 405);
    assert.equal((await get(spa, '/form', { method: 'POST', body: 'x' })).body, 'worker POST /form');
  });

  it('_redirects: static, dynamic and splat rules with their status; 200 serves another asset', async () => {
    const old = await get(app, '/old');
    assert.deepEqual([old.status, old.headers.get('location')], [301, '/about']);
    const blog = await get(app, '/blog/hello?ref=feed');
    assert.deepEqual([blog.status, blog.headers.get('location')], [302, '/posts/hello?ref=feed']);
    assert.equal(blog.headers.get('x-slug'), 'hello', '_headers apply to redirects too');
    const external = await get(app, '/external');
    assert.deepEqual([external.status, external.headers.get('location')], [308, 'https://example.com/x']);
    const splat = await get(app, '/files/app.css');
    assert.deepEqual([splat.status, splat.headers.get('location')], [307, '/assets/app.css']);
    const alias = await get(app, '/docs-alias');
    assert.deepEqual([alias.status, alias.body], [200, '<h1>docs</h1>']);
  });

  it('_headers: set on every asset answer, detached per path, never on the worker', async () => {
    const css = await get(app, '/assets/app.css');
    assert.equal(css.body, 'body{}');
    assert.equal(css.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(css.headers.get('x-frame-options'), 'DENY');
    const about = await get(app, '/about');
    assert.equal(about.headers.get('x-frame-options'), null);
    assert.equal(about.headers.get('x-page'), 'about');
    const worker = await get(app, '/api/users');
    assert.equal(worker.headers.get('x-answered-by'), 'worker');
    assert.equal(worker.headers.get('x-frame-options'), null);
    assert.equal((await get(spa, '/')).headers.get('x-frame-options'), 'DENY');
    assert.equal((await get(spa, '/anything')).headers.get('x-frame-options'), null, 'the worker answered');
  });

  it('the control files and what .assetsignore names are never served', async () => {
    for (const path of [
      '/_headers',
      '/_redirects',
      '/.assetsignore',
      '/assets/app.css.map',
      '/private/secret.txt',
    ]) {
      assert.equal(
        (await get(app, path)).body,
        '<h1>app shell</h1>',
        `${path} is no asset: the shell answers`,
      );
    }
    for (const path of ['/_headers', '/_redirects']) {
      assert.equal(
        (await get(spa, path)).body,
        `worker GET ${path}`,
        `${path} is no asset: the worker answers`,
      );
    }
    assert.equal((await get(spa, '/old')).headers.get('location'), '/app.js', 'yet its rules apply');
    assert.equal((await get(site, '/_headers')).status, 404);
    const nested = await get(app, '/nested/_headers');
    assert.equal(nested.body, 'a nested _headers is an ordinary file');
  });
});

describe('asset refusals at publish', () => {
  const refuse = async (files: Record<string, string>) => {
    const bucketDir = tempDir('cell-bucket-');
    try {
      const result = await publish(project(files), 'refused', dirBucketEnv(bucketDir));
      assert.equal(result.code, 1, result.stdout);
      return result.stderr;
    } finally {
      rmSync(bucketDir, { recursive: true, force: true });
    }
  };

  it('run_worker_first without a worker', async () => {
    const stderr = await refuse({
      'cell.json': '{"compatibility_date":"2025-06-01","assets":{"directory":"p","run_worker_first":true}}',
      'p/index.html': 'x',
    });
    assert.match(stderr, /cell: cell\.json:1:\d+: "assets\.run_worker_first" needs a worker to run first/);
  });

  it('a run_worker_first list Cloudflare refuses', async () => {
    const stderr = await refuse({
      'cell.json':
        '{"main":"w.js","compatibility_date":"2025-06-01","assets":{"directory":"p","run_worker_first":["/api/*","/api/x"]}}',
      'w.js': 'export default { fetch() { return new Response("w"); } };',
      'p/index.html': 'x',
    });
    assert.match(stderr, /"assets\.run_worker_first" has invalid routes: '\/api\/x' is redundant/);
  });

  it('a Pages _worker.js in the assets without .assetsignore', async () => {
    const stderr = await refuse({
      'cell.json': '{"compatibility_date":"2025-06-01","assets":{"directory":"p"}}',
      'p/_worker.js': 'export default {};',
    });
    assert.match(stderr, /the assets folder holds _worker\.js, which would be served publicly/);
  });
});
