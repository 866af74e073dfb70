// The asset router's decisions (docs/assets.md), run in Node against the very source workerd
// runs. The blob store and the user worker are stand-ins here (a function answering the blob's
// name, one answering "worker"); test/assets-rules.test.ts runs the same router in real workerd
// behind `cell serve`. Cases derived from workers-sdk: asset-rules.cases.ts (html_handling and
// encoding fixtures), packages/workers-shared/asset-worker/tests/handler.test.ts ("attaches
// custom headers", "evaluates custom redirects", "should prevent external redirects via double
// slash", "canFetch" incl. "assets_navigation_prefers_asset_serving", "should return true even for
// a bad method"), and router-worker/tests/index.test.ts (static_routing and
// invoke_user_worker_ahead_of_assets). Property: whatever the request, the folder and the rules,
// the router answers without throwing and never with a 5xx, and no canonical 307 points at itself.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AssetsConfig, HeaderRule, RedirectRule } from '../../src/runtime-tools/layout.ts';
import { RESOLUTION_CASES } from './asset-rules.cases.ts';
import { parseHeadersFile, parseRedirectsFile, routerConfig } from './asset-rules.ts';
import { ROUTER_SOURCE } from './router-worker.ts';

const router: { fetch(request: Request, env: unknown): Promise<Response> } = (
  await import(`data:text/javascript,${encodeURIComponent(ROUTER_SOURCE)}`)
).default;

interface Setup {
  files: string[];
  assets?: Partial<AssetsConfig>;
  date?: string;
  flags?: string[];
  headers?: string;
  redirects?: string;
  worker?: boolean;
}

function environment(setup: Setup) {
  const assets: AssetsConfig = {
    binding: null,
    html_handling: 'auto-trailing-slash',
    not_found_handling: 'none',
    ...setup.assets,
  };
  const headers: HeaderRule[] = parseHeadersFile(setup.headers ?? '').rules;
  const redirects: RedirectRule[] = parseRedirectsFile(setup.redirects ?? '', {
    htmlHandling: assets.html_handling,
  }).rules;
  return {
    MANIFEST: Object.fromEntries(
      setup.files.map((f) => [f, { blob: encodeURIComponent(f), size: f.length, content_type: 'text/html' }]),
    ),
    CONFIG: routerConfig(
      assets,
      { date: setup.date ?? '2025-06-01', flags: setup.flags ?? [] },
      { headers, redirects },
    ),
    BLOBS: {
      fetch: async (url: string) => new Response(decodeURIComponent(url.slice('http://blobs/'.length))),
    },
    ...(setup.worker
      ? { FALLBACK: { fetch: async () => new Response('worker', { headers: { 'x-from': 'worker' } }) } }
      : {}),
  };
}

async function ask(setup: Setup, path: string, init: RequestInit = {}) {
  const response = await router.fetch(new Request(`https://example.com${path}`, init), environment(setup));
  return {
    status: response.status,
    location: response.headers.get('location'),
    headers: response.headers,
    body: await response.text(),
  };
}

describe('html_handling resolves as the asset worker does', () => {
  for (const [mode, files, request, served, finalPath] of RESOLUTION_CASES) {
    it(`${mode}: ${request} with ${files.join(' ')} -> ${served ? `${served} at ${finalPath}` : '404'}`, async () => {
      const env = environment({ files, assets: { html_handling: mode } });
      let url = `https://example.com${request}`;
      let response: Response;
      for (let hops = 0; ; hops++) {
        response = await router.fetch(new Request(url), env);
        if (response.status !== 307) break;
        assert.ok(hops < 3, 'at most a few redirects');
        url = new URL(response.headers.get('location')!, url).href;
      }
      if (served) {
        assert.equal(response.status, 200);
        assert.equal(await response.text(), served);
        assert.equal(new URL(url).pathname, finalPath);
      } else {
        assert.equal(response.status, 404);
        assert.equal(await response.text(), '', 'a 404 without a 404 page has no body');
      }
    });
  }

  it('redirects with 307 and keeps the query', async () => {
    const answer = await ask({ files: ['/index.html'] }, '/index.html?x=1');
    assert.equal(answer.status, 307);
    assert.equal(answer.location, '/?x=1');
  });
});

describe('not_found_handling', () => {
  const files = ['/index.html', '/404.html', '/blog/404.html', '/blog/post.html'];
  it('404-page serves the nearest 404.html up the path with status 404', async () => {
    const nested = await ask({ files, assets: { not_found_handling: '404-page' } }, '/blog/missing/deep');
    assert.deepEqual([nested.status, nested.body], [404, '/blog/404.html']);
    const top = await ask({ files, assets: { not_found_handling: '404-page' } }, '/elsewhere');
    assert.deepEqual([top.status, top.body], [404, '/404.html']);
  });
  it('single-page-application serves /index.html with 200', async () => {
    const answer = await ask(
      { files, assets: { not_found_handling: 'single-page-application' } },
      '/app/route',
    );
    assert.deepEqual([answer.status, answer.body], [200, '/index.html']);
  });
  it('none answers an empty 404', async () => {
    assert.deepEqual((await ask({ files }, '/nothing')).status, 404);
  });
});

describe('with a worker', () => {
  const spa = {
    files: ['/index.html', '/app.js'],
    assets: { not_found_handling: 'single-page-application' as const },
    worker: true,
  };
  const navigate = { headers: { 'sec-fetch-mode': 'navigate' } };

  it('assets answer what they hold; everything else goes to the worker', async () => {
    assert.equal((await ask(spa, '/app.js')).body, '/app.js');
    assert.equal((await ask(spa, '/api/users')).body, 'worker');
  });

  it('navigation requests get the SPA shell from 2025-04-01, the worker before (or with the opt-out flag)', async () => {
    assert.deepEqual(Object.values(await ask(spa, '/dashboard', navigate)).slice(0, 1), [200]);
    assert.equal((await ask(spa, '/dashboard', navigate)).body, '/index.html');
    assert.equal((await ask({ ...spa, date: '2025-03-01' }, '/dashboard', navigate)).body, 'worker');
    assert.equal(
      (await ask({ ...spa, flags: ['assets_navigation_has_no_effect'] }, '/dashboard', navigate)).body,
      'worker',
    );
    assert.equal(
      (
        await ask(
          { ...spa, date: '2024-01-01', flags: ['assets_navigation_prefers_asset_serving'] },
          '/x',
          navigate,
        )
      ).body,
      '/index.html',
    );
    assert.equal((await ask(spa, '/dashboard', { headers: { 'sec-fetch-mode': 'cors' } })).body, 'worker');
  });

  it('run_worker_first: true sends everything to the worker', async () => {
    const first = { ...spa, assets: { ...spa.assets, run_worker_first: true } };
    assert.equal((await ask(first, '/app.js')).body, 'worker');
  });

  it('run_worker_first routes: matches go to the worker, negations and the rest to assets with not_found_handling', async () => {
    const routed = { ...spa, assets: { ...spa.assets, run_worker_first: ['/api/*', '!/api/docs/*'] } };
    assert.equal((await ask(routed, '/api/users')).body, 'worker');
    assert.equal(
      (await ask(routed, '/api/docs/intro')).body,
      '/index.html',
      'a negated route stays on assets',
    );
    assert.equal(
      (await ask(routed, '/settings')).body,
      '/index.html',
      'without navigation too: route lists keep not_found_handling',
    );
    const plain = { ...routed, assets: { ...routed.assets, not_found_handling: 'none' as const } };
    assert.equal((await ask(plain, '/settings')).body, 'worker', 'no asset and no fallback: the worker');
  });

  it('a method other than GET or HEAD on an asset is 405; on anything else it reaches the worker', async () => {
    const post = await ask(spa, '/app.js', { method: 'POST' });
    assert.deepEqual([post.status, post.body], [405, '']);
    assert.equal((await ask(spa, '/submit', { method: 'POST' })).body, 'worker');
  });
});

describe('_redirects', () => {
  const redirects = `/foo /bar 301
/proxy /other 200
/proxy-missing /nowhere 200
/query /target?a=b 302
/external https://example.org/x 308
/dynamic/:seg /:seg/new?with#params
/splat/* /:splat/new-splat 303
/splat/foo/* /never-fires
/open/* /:splat`;
  const setup = { files: ['/other.html', '/bar.html'], redirects, worker: true };

  it('static and dynamic rules answer their status and Location, keeping the query when the target has none', async () => {
    assert.deepEqual([(await ask(setup, '/foo')).status, (await ask(setup, '/foo')).location], [301, '/bar']);
    assert.equal((await ask(setup, '/foo?x=1')).location, '/bar?x=1');
    assert.equal((await ask(setup, '/query?x=1')).location, '/target?a=b');
    const external = await ask(setup, '/external?q=1');
    assert.deepEqual([external.status, external.location], [308, 'https://example.org/x?q=1']);
    assert.equal((await ask(setup, '/dynamic/foo')).location, '/foo/new?with#params');
    const splat = await ask(setup, '/splat/foo/bar');
    assert.deepEqual(
      [splat.status, splat.location],
      [303, '/foo/bar/new-splat'],
      'the first matching rule wins',
    );
  });

  it('a 200 rule serves the other asset at this URL; a missing target is a 404, never the worker', async () => {
    const proxied = await ask(setup, '/proxy');
    assert.deepEqual([proxied.status, proxied.body], [200, '/other.html']);
    const missing = await ask(setup, '/proxy-missing');
    assert.deepEqual([missing.status, missing.body], [404, '']);
  });

  it('an empty splat cannot turn a relative target into another host', async () => {
    assert.equal((await ask(setup, '/open//evil.example')).location, '/evil.example');
  });
});

describe('_headers', () => {
  const headers = `/*
  X-Frame-Options: DENY
/art/*
  X-Art: value :splat
  Set-Cookie: me
/art/nested/*
  Set-Cookie: me too
/system/*
  ! ETag
  ! Cache-Control
/bang/:name
  X-Bang: hello :name`;
  const setup = { files: ['/art/a.html', '/system/s.html', '/index.html'], headers, worker: true };

  it('sets, joins and detaches headers on asset answers, placeholders filled', async () => {
    const art = await ask(setup, '/art/a.html');
    assert.equal(art.status, 307, 'html_handling answers first');
    assert.equal(art.headers.get('x-art'), 'value a.html', 'rules apply to redirects too');
    const nested = await ask({ ...setup, files: ['/art/nested/x.png'] }, '/art/nested/x.png');
    assert.equal(nested.headers.get('set-cookie'), 'me, me too');
    assert.equal(nested.headers.get('x-frame-options'), 'DENY');
    const system = await ask(setup, '/system/s');
    assert.equal(system.status, 200);
    assert.equal(system.headers.get('etag'), null);
    assert.equal(system.headers.get('cache-control'), null);
  });

  it('apply to 404s of assets alone, never to the worker', async () => {
    const alone = { ...setup, worker: false };
    const missing = await ask(alone, '/bang/you');
    assert.deepEqual([missing.status, missing.headers.get('x-bang')], [404, 'hello you']);
    const worker = await ask(setup, '/bang/you');
    assert.deepEqual([worker.body, worker.headers.get('x-bang')], ['worker', null]);
  });

  it('apply to 304s', async () => {
    const first = await ask(setup, '/');
    const again = await ask(setup, '/', { headers: { 'if-none-match': first.headers.get('etag')! } });
    assert.equal(again.status, 304);
    assert.equal(again.headers.get('x-frame-options'), 'DENY');
    const weak = await ask(setup, '/', { headers: { 'if-none-match': `W/${first.headers.get('etag')}` } });
    assert.equal(weak.status, 304);
  });
});

describe('asset answers', () => {
  it('carry ETag, Content-Type and the revalidating Cache-Control, left out with Authorization or Range', async () => {
    const plain = await ask({ files: ['/a.txt'] }, '/a.txt');
    assert.equal(plain.headers.get('cache-control'), 'public, max-age=0, must-revalidate');
    assert.equal(plain.headers.get('etag'), `"${encodeURIComponent('/a.txt')}"`);
    const authorised = await ask({ files: ['/a.txt'] }, '/a.txt', { headers: { authorization: 'Bearer x' } });
    assert.equal(authorised.headers.get('cache-control'), null);
  });

  it('HEAD answers the headers without a body', async () => {
    const head = await ask({ files: ['/a.txt'] }, '/a.txt', { method: 'HEAD' });
    assert.deepEqual([head.status, head.body, head.headers.get('content-length')], [200, '', '6']);
  });
});

describe('property: any request, any folder, any rules', () => {
  const segment = fc.oneof(
    fc.constantFrom(
      'index',
      'index.html',
      'a',
      'a.html',
      '404.html',
      '',
      '%',
      '%E0%A4%A',
      '%2F',
      '..',
      '[x]',
      'é',
    ),
    fc.string({ maxLength: 6 }),
  );
  const path = fc.array(segment, { maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
  const file = fc.array(fc.constantFrom('index.html', 'a.html', 'a', '404.html', 'b', '[x].html'), {
    minLength: 1,
    maxLength: 3,
  });

  it('answers a response, never throws, and never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          file.map((parts) => `/${parts.join('/')}`),
          { maxLength: 6 },
        ),
        path,
        fc.constantFrom(
          'auto-trailing-slash',
          'force-trailing-slash',
          'drop-trailing-slash',
          'none',
        ) as fc.Arbitrary<AssetsConfig['html_handling']>,
        fc.constantFrom('none', '404-page', 'single-page-application') as fc.Arbitrary<
          AssetsConfig['not_found_handling']
        >,
        fc.boolean(),
        fc.constantFrom('GET', 'HEAD', 'POST'),
        fc.string({ maxLength: 60 }),
        async (files, requested, html, notFound, worker, method, rules) => {
          const setup = {
            files,
            assets: { html_handling: html, not_found_handling: notFound },
            worker,
            headers: `/*\n  X-A: 1\n${rules}`,
            redirects: `/r/* /:splat 302\n${rules}`,
          };
          let url: URL;
          try {
            url = new URL(`https://example.com${requested}`);
          } catch {
            return; // not a URL a client could send
          }
          const response = await router.fetch(new Request(url, { method }), environment(setup));
          assert.ok(response.status < 500, `${response.status} for ${requested}`);
          if (response.status === 307) {
            // A canonical redirect never points at itself.
            assert.notEqual(response.headers.get('location'), url.pathname + url.search);
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});
