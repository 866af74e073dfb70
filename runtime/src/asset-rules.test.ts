// `_headers` and `_redirects` parsing, rule patterns and the router's configuration
// (docs/assets.md). Cases derived from workers-sdk's own tests of the same grammar:
// packages/workers-shared/utils/tests/parseHeaders.valid.test.ts, parseHeaders.invalid.test.ts,
// parseRedirects.valid.test.ts, parseRedirects.invalid.test.ts, parseStaticRouting.test.ts,
// asset-worker/tests/compatibility-flags.test.ts and handler.test.ts ("attaches custom headers",
// "evaluates custom redirects"). Where svc differs (it keeps 100 header rules where Cloudflare's
// parser keeps 101; it refuses header names and values a response could not carry) the case says so.
// Properties: any text parses to rules and warnings without throwing, within the limits, and every
// kept rule compiles to a pattern that matches what it should.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  parseWorkerConfig,
  WorkerConfigError,
  workerFirstProblem,
} from '../../src/runtime-tools/worker-config.ts';
import {
  MAX_DYNAMIC_REDIRECTS,
  MAX_HEADER_RULES,
  MAX_STATIC_REDIRECTS,
  normaliseRuleUrl,
  parseHeadersFile,
  parseRedirectsFile,
  patternSource,
  prefersAssetsForNavigation,
  routerConfig,
  routeSource,
} from './asset-rules.ts';

describe('_headers', () => {
  it('reads blocks of a path and its headers, joining repeated names, ignoring blanks and comments', () => {
    const { rules, warnings } = parseHeadersFile(`
# a comment
/a
  Name:   Value
  x-frame-options: DENY

/b
  Link: </x.css>; rel=preload
  Link: </y.js>; rel=preload
  Wow: Hello!
`);
    assert.deepEqual(warnings, []);
    assert.deepEqual(rules, [
      {
        path: '/a',
        set: [
          ['name', 'Value'],
          ['x-frame-options', 'DENY'],
        ],
        unset: [],
      },
      {
        path: '/b',
        set: [
          ['link', '</x.css>; rel=preload, </y.js>; rel=preload'],
          ['wow', 'Hello!'],
        ],
        unset: [],
      },
    ]);
  });

  it('detaches headers with "! Name" and keeps absolute https rules without their port', () => {
    const { rules, warnings } = parseHeadersFile(`/a
  ! Content-Type
https://example.com/*
  X-Robots-Tag: noindex
https://example.com:8080/x
  a: b
http://example.com/x
  a: b`);
    assert.deepEqual(rules, [
      { path: '/a', set: [], unset: ['Content-Type'] },
      { path: 'https://example.com/*', set: [['x-robots-tag', 'noindex']], unset: [] },
    ]);
    assert.equal(warnings.length, 2);
    assert.match(warnings[0]!, /^_headers:5: a port may not be given/);
    assert.match(warnings[1]!, /^_headers:7: a URL must be relative/);
  });

  it('warns for each malformed line and keeps the rest (parseHeaders.invalid)', () => {
    const { rules, warnings } = parseHeadersFile(`
    c
    Access-Control-Allow-Origin: *
    /a
      Name: Value
    /b
      I'm invalid!
      !x-content-type
      But: I'm okay!
      ! Content-Type: application/json
    /c
    /d
      :
      test:
      x(y: z
`);
    assert.deepEqual(rules, [
      { path: '/a', set: [['name', 'Value']], unset: [] },
      { path: '/b', set: [['but', "I'm okay!"]], unset: [] },
    ]);
    assert.deepEqual(
      warnings.map((w) => w.replace(/: .*/, '')),
      [
        '_headers:2',
        '_headers:3',
        '_headers:7',
        '_headers:8',
        '_headers:10',
        '_headers:11',
        '_headers:13',
        '_headers:14',
        '_headers:15',
        '_headers:12',
      ],
    );
    assert.match(warnings[1]!, /a URL path must come before the header access-control-allow-origin/);
    assert.match(warnings[4]!, /cannot include spaces/);
    assert.match(warnings[5]!, /\/c sets no header/);
    assert.match(warnings[8]!, /"x\(y" is no header name/);
  });

  it('normalises paths as a browser sends them', () => {
    const { rules } = parseHeadersFile(`/some page with spaces
  a: b
/://so;\`me
  a: b
/nons:/&@%+~{}ense
  a: b
/a/../b
  a: b`);
    assert.deepEqual(
      rules.map((r) => r.path),
      ['/some%20page%20with%20spaces', '/://so;%60me', '/nons:/&@%+~%7B%7Dense', '/b'],
    );
  });

  it('refuses two wildcards, or * with :splat, in one path', () => {
    const { rules, warnings } = parseHeadersFile(`/a/*/b/*
  x: 1
  y: 2
/c/*/:splat
  x: 1
/ok/*
  x: 1`);
    assert.deepEqual(
      rules.map((r) => r.path),
      ['/ok/*'],
    );
    assert.equal(warnings.length, 2, 'the headers under a skipped path are not reported again');
  });

  it('ignores lines longer than 2,000 characters', () => {
    const { rules, warnings } = parseHeadersFile(`/a\n  x: ${'v'.repeat(2000)}\n  y: 1`);
    assert.deepEqual(rules, [{ path: '/a', set: [['y', '1']], unset: [] }]);
    assert.match(warnings[0]!, /^_headers:2: longer than 2000 characters/);
  });

  it(`reads at most ${MAX_HEADER_RULES} rules (Cloudflare's parser keeps one more)`, () => {
    const text = Array.from({ length: 150 }, (_, i) => `/a/${i}\n  x-index: ${i}`).join('\n');
    const { rules, warnings } = parseHeadersFile(text);
    assert.equal(rules.length, MAX_HEADER_RULES);
    assert.equal(rules.at(-1)!.path, `/a/${MAX_HEADER_RULES - 1}`);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /at most 100 rules are read; the remaining 100 lines are skipped/);
  });
});

describe('_redirects', () => {
  it('reads source, destination and optional status (302 by default), with comments', () => {
    const { rules, warnings } = parseRedirectsFile(`
# comment
  /a /b 301
/c /d
/e /f#frag 308 # trailing comment
/g https://x.com/h#i # comment
/q /r?s=t
/home /index.html
`);
    assert.deepEqual(warnings, []);
    assert.deepEqual(rules, [
      { from: '/a', to: '/b', status: 301, line: 3 },
      { from: '/c', to: '/d', status: 302, line: 4 },
      { from: '/e', to: '/f#frag', status: 308, line: 5 },
      { from: '/g', to: 'https://x.com/h#i', status: 302, line: 6 },
      { from: '/q', to: '/r?s=t', status: 302, line: 7 },
      { from: '/home', to: '/index.html', status: 302, line: 8 },
    ]);
  });

  it('skips malformed lines, bad statuses, duplicates and absolute sources (parseRedirects.invalid)', () => {
    const { rules, warnings } = parseRedirectsFile(`/a
/a /b 302 extra
/a /b 999
/a /b 301
/a /c 302
https://yeah.com https://nah.com
/nah https://yeah.com
yeah.com https://nah.com
/p https://example.com/b 200
/some page /somewhere else`);
    assert.deepEqual(rules, [
      { from: '/a', to: '/b', status: 301, line: 4 },
      { from: '/nah', to: 'https://yeah.com/', status: 302, line: 7 },
      { from: '/yeah.com', to: 'https://nah.com/', status: 302, line: 8 },
    ]);
    assert.deepEqual(
      warnings.map((w) => w.replace(/: .*/, '')),
      [
        '_redirects:1',
        '_redirects:2',
        '_redirects:3',
        '_redirects:5',
        '_redirects:6',
        '_redirects:9',
        '_redirects:10',
      ],
    );
    assert.match(warnings[2]!, /the status must be 200, 301, 302 \(the default\), 303, 307 or 308, not 999/);
    assert.match(warnings[3]!, /a rule for \/a came earlier/);
    assert.match(warnings[5]!, /a 200 \(rewrite\) rule can only point at a path of this site/);
  });

  it('refuses rules that would loop with html_handling, unless html_handling is none for /', () => {
    const text = '/* /index.html 200\n/* /index 200\n/ /index.html\n/ /index\n';
    const handled = parseRedirectsFile(text);
    assert.deepEqual(handled.rules, []);
    assert.equal(handled.warnings.length, 4);
    assert.match(handled.warnings[0]!, /single-page-application/);
    const none = parseRedirectsFile(text, { htmlHandling: 'none' });
    assert.deepEqual(none.rules, [{ from: '/', to: '/index.html', status: 302, line: 3 }]);
    assert.match(none.warnings[2]!, /^_redirects:4: a rule for \/ came earlier/);
  });

  it(`reads at most ${MAX_DYNAMIC_REDIRECTS} dynamic rules, then stops`, () => {
    const text = Array.from({ length: 150 }, (_, i) => `/a/${i}/* /b/${i}/:splat`).join('\n');
    const { rules, warnings } = parseRedirectsFile(text);
    assert.equal(rules.length, MAX_DYNAMIC_REDIRECTS);
    assert.deepEqual(warnings, [
      '_redirects:101: at most 100 dynamic redirects are read; the remaining 50 lines are skipped',
    ]);
  });

  it(`reads at most ${MAX_STATIC_REDIRECTS} static rules; a static rule after a dynamic one counts as dynamic`, () => {
    const statics = Array.from({ length: MAX_STATIC_REDIRECTS + 2 }, (_, i) => `/s/${i} /t/${i}`);
    const { rules, warnings } = parseRedirectsFile([...statics, '/d/* /e', '/late /x'].join('\n'));
    assert.equal(rules.length, MAX_STATIC_REDIRECTS + 2);
    assert.equal(warnings.length, 2);
    assert.match(warnings[0]!, /^_redirects:2001: at most 2000 static redirects are read; ignored/);
    const config = routerConfig(
      { binding: null, html_handling: 'none', not_found_handling: 'none' },
      { date: '2025-01-01', flags: [] },
      { redirects: rules },
    );
    assert.equal(Object.keys(config.redirects.static).length, MAX_STATIC_REDIRECTS);
    assert.deepEqual(
      config.redirects.dynamic.map((d) => d.to),
      ['/e', '/x'],
      'the static-looking rule after a dynamic one is matched in order among the dynamic ones',
    );
  });
});

describe('rule patterns', () => {
  const matches = (pattern: string, path: string) => {
    const source = patternSource(pattern);
    assert.ok(source, pattern);
    return new RegExp(source).exec(path)?.groups ?? (new RegExp(source).test(path) ? {} : null);
  };

  it('splats match anything, placeholders one segment (handler.test "evaluates custom redirects")', () => {
    assert.deepEqual({ ...matches('/splat/*', '/splat/foo/bar/baz') }, { splat: 'foo/bar/baz' });
    assert.deepEqual({ ...matches('/splat/*', '/splat/') }, { splat: '' });
    assert.deepEqual({ ...matches('/dynamic/:seg', '/dynamic/foo') }, { seg: 'foo' });
    assert.equal(matches('/dynamic/:seg', '/dynamic/foo/bar'), null);
    assert.deepEqual({ ...matches('/partialSplat*', '/partialSplatfoo/bar') }, { splat: 'foo/bar' });
    assert.deepEqual({ ...matches('/partial:p', '/partialfoo') }, { p: 'foo' });
    assert.equal(matches('/partial:p', '/partialfoo/'), null);
    assert.deepEqual(
      { ...matches('https://:sub.example.com/*', 'https://a.example.com/x') },
      { sub: 'a', splat: 'x' },
    );
    assert.equal(matches('https://:sub.example.com/*', 'https://a.b.example.com/x'), null);
    assert.ok(matches('/a.b', '/a.b'));
    assert.equal(matches('/a.b', '/axb'), null, 'regex characters are literal');
  });

  it('a placeholder named twice can never match', () => {
    assert.equal(patternSource('/:a/:a'), null);
    assert.equal(patternSource('/*/:splat'), null);
    assert.ok(patternSource('/:foo/:foobar'), 'a name that extends another is its own name');
  });

  it('run_worker_first routes: only * is special', () => {
    assert.ok(new RegExp(routeSource('/api/*')).test('/api/x/y'));
    assert.ok(!new RegExp(routeSource('/api/*')).test('/apix'));
    assert.ok(new RegExp(routeSource('/a.:b')).test('/a.:b'));
    assert.ok(!new RegExp(routeSource('/a.:b')).test('/aX:b'));
  });

  it('normalises URLs, refusing what is neither a path nor https', () => {
    assert.deepEqual(normaliseRuleUrl('/a b?c#d', { relativeOnly: false, keepQuery: true }), {
      url: '/a%20b?c#d',
    });
    assert.deepEqual(normaliseRuleUrl('x', { relativeOnly: true, keepQuery: false }), { url: '/x' });
    assert.ok('why' in normaliseRuleUrl('x', { relativeOnly: false, keepQuery: false }));
    assert.ok('why' in normaliseRuleUrl('https://a/b', { relativeOnly: true, keepQuery: false }));
  });
});

describe('router configuration', () => {
  it('navigation requests prefer assets from 2025-04-01, or by flag (compatibility-flags tests)', () => {
    assert.equal(prefersAssetsForNavigation('2025-03-31', []), false);
    assert.equal(prefersAssetsForNavigation('2025-04-01', []), true);
    assert.equal(prefersAssetsForNavigation('2024-01-01', ['assets_navigation_prefers_asset_serving']), true);
    assert.equal(prefersAssetsForNavigation('2099-12-12', ['assets_navigation_has_no_effect']), false);
  });

  it('splits run_worker_first routes into worker and assets lists', () => {
    const config = routerConfig(
      {
        binding: null,
        html_handling: 'auto-trailing-slash',
        not_found_handling: 'single-page-application',
        run_worker_first: ['/api/*', '!/api/docs/*'],
      },
      { date: '2025-06-01', flags: [] },
      {},
    );
    assert.deepEqual(config.run_worker_first, {
      worker: ['^\\/api\\/.*$'],
      assets: ['^\\/api\\/docs\\/.*$'],
    });
    assert.equal(config.navigation_prefers_assets, true);
    assert.deepEqual(config.headers, []);
  });
});

describe('run_worker_first lists (parseStaticRouting tests)', () => {
  it('accepts positive routes with negations', () => {
    assert.equal(workerFirstProblem(['/api/*', '!/api/docs/*', '/oauth/callback']), null);
  });
  it('refuses empty, negative-only, too many, too long, malformed, duplicate and redundant lists', () => {
    assert.match(workerFirstProblem([])!, /empty list/);
    assert.match(workerFirstProblem(['!/a/*'])!, /only negative routes/);
    assert.match(workerFirstProblem(Array.from({ length: 101 }, (_, i) => `/${i}`))!, /at most 100/);
    assert.match(workerFirstProblem([`/${'a'.repeat(100)}`])!, /at most 100 characters/);
    assert.match(workerFirstProblem(['api/*'])!, /'api\/\*': a route must start with '\/' or '!\/'/);
    assert.match(workerFirstProblem(['/a', '!api'])!, /a negative route must start with '!\/'/);
    assert.match(workerFirstProblem(['/a', '/a'])!, /'\/a' is given twice/);
    assert.match(
      workerFirstProblem(['/api/*', '/api/foo'])!,
      /'\/api\/foo' is redundant: '\/api\/\*' already covers it/,
    );
    assert.match(workerFirstProblem([1])!, /1 is no route pattern/);
  });
});

describe('assets keys of the worker config', () => {
  const parse = (assets: string, main = '"main": "w.js", ') =>
    parseWorkerConfig(`{ ${main}"compatibility_date": "2025-06-01",\n  "assets": ${assets} }`, 'cell.jsonc');
  const refusal = (assets: string, main?: string) => {
    try {
      parse(assets, main);
    } catch (err) {
      assert.ok(err instanceof WorkerConfigError);
      return err.message;
    }
    assert.fail('the config was accepted');
  };

  it('keeps run_worker_first as given, false by default', () => {
    assert.equal(parse('{ "directory": "p" }').assets!.run_worker_first, false);
    assert.deepEqual(parse('{ "directory": "p", "run_worker_first": ["/api/*"] }').assets!.run_worker_first, [
      '/api/*',
    ]);
  });

  it('refuses a run_worker_first that is no boolean or valid list, at its line', () => {
    assert.equal(
      refusal('{ "directory": "p", "run_worker_first": "yes" }'),
      'cell.jsonc:2:33: "assets.run_worker_first" must be true, false or a list of route patterns',
    );
    assert.match(
      refusal('{ "directory": "p", "run_worker_first": ["api"] }'),
      /^cell\.jsonc:2:33: "assets\.run_worker_first" has invalid routes: 'api'/,
    );
  });

  it('refuses run_worker_first without a worker, and warns when true without a binding', () => {
    assert.equal(
      refusal('{ "directory": "p", "run_worker_first": true }', ''),
      'cell.jsonc:2:33: "assets.run_worker_first" needs a worker to run first: set "main", or remove run_worker_first',
    );
    const config = parse('{ "directory": "p", "run_worker_first": true }');
    assert.deepEqual(config.warnings, [
      'cell.jsonc:2:33: "assets.run_worker_first" is true but "assets.binding" is not set: every request runs the worker, which cannot reach the assets without a binding',
    ]);
  });
});

describe('properties', () => {
  const lineish = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom('/', '/*', '/a/:b', 'https://x.com/*', '! X', 'a: b', '#', '/a /b 301', '/* /index.html'),
  );
  const fileText = fc.array(lineish, { maxLength: 40 }).map((lines) => lines.join('\n'));

  it('any text parses to rules and warnings, never an exception, within the limits', () => {
    fc.assert(
      fc.property(
        fileText,
        fc.constantFrom('auto-trailing-slash', 'none') as fc.Arbitrary<'none'>,
        (text, html) => {
          const headers = parseHeadersFile(text);
          const redirects = parseRedirectsFile(text, { htmlHandling: html });
          assert.ok(headers.rules.length <= MAX_HEADER_RULES);
          assert.ok(redirects.rules.length <= MAX_STATIC_REDIRECTS + MAX_DYNAMIC_REDIRECTS);
          for (const w of [...headers.warnings, ...redirects.warnings])
            assert.match(w, /^_(headers|redirects)(:\d+)?: /);
          for (const rule of headers.rules) {
            assert.ok(rule.path.startsWith('/') || rule.path.startsWith('https://'));
            assert.ok(rule.set.length > 0 || rule.unset.length > 0);
          }
          for (const rule of redirects.rules) {
            assert.ok(rule.from.startsWith('/'));
            assert.ok([200, 301, 302, 303, 307, 308].includes(rule.status));
          }
          // The router's configuration builds from whatever was kept, and every regex compiles.
          const config = routerConfig(
            { binding: null, html_handling: html, not_found_handling: 'none' },
            { date: '2025-01-01', flags: [] },
            { headers: headers.rules, redirects: redirects.rules },
          );
          for (const h of config.headers) new RegExp(h.regex);
          for (const d of config.redirects.dynamic) new RegExp(d.regex);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a literal path rule matches exactly that path and nothing else', () => {
    const segment = fc.string({ minLength: 1, maxLength: 8 }).filter((s) => !/[*:/\s#]/.test(s));
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), segment, (parts, other) => {
        const path = normaliseRuleUrl(`/${parts.join('/')}`, { relativeOnly: true, keepQuery: false });
        if ('why' in path) return;
        const regex = new RegExp(patternSource(path.url)!);
        assert.ok(regex.test(path.url));
        assert.ok(!regex.test(`${path.url}/${encodeURIComponent(other)}`));
      }),
      { numRuns: 300 },
    );
  });

  it('a splat captures exactly what follows its prefix', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), (rest) => {
        const groups = new RegExp(patternSource('/files/*')!).exec(`/files/${rest}`)?.groups;
        assert.equal(groups?.splat, rest.includes('\n') ? undefined : rest);
      }),
    );
  });
});
