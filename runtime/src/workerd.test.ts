// The generated workerd configuration (docs/runtime.md: vars as
// bindings, assets served): user values are embedded from files, never written into it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capnpString, renderWorkerdConfig } from './workerd.ts';

describe('workerd config', () => {
  it('quotes Cap’n Proto text safely', () => {
    assert.equal(capnpString('a"b\\c\nd'), '"a\\"b\\\\c\\x0ad"');
  });

  it('embeds modules and vars, and routes through the asset router when there are assets', () => {
    const text = renderWorkerdConfig({
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: ['nodejs_compat'],
      vars: [
        { name: 'GREETING', kind: 'text', file: 'vars/0.txt' },
        { name: 'LIMITS', kind: 'json', file: 'vars/1.json' },
      ],
      assets: { filesJson: 'f.json', configJson: 'c.json', blobsDir: '/b', binding: 'ASSETS' },
    });
    assert.match(text, /\(name = "index\.js", esModule = embed "modules\/index\.js"\)/);
    assert.match(text, /\(name = "GREETING", text = embed "vars\/0\.txt"\)/);
    assert.match(text, /\(name = "LIMITS", json = embed "vars\/1\.json"\)/);
    assert.match(text, /\(name = "ASSETS", service = "cell-assets"\)/);
    assert.match(text, /address = "unix:\/tmp\/x\.sock", http = \(\), service = "cell-router"/);
    assert.match(text, /compatibilityFlags = \[ "nodejs_compat" \]/);
  });

  it('binds each KV namespace to the bindings socket, the application and namespace in injected headers', () => {
    const text = renderWorkerdConfig({
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
      assets: null,
      kv: {
        address: 'unix:/state/bindings.sock',
        application: 'shop',
        namespaces: [
          { binding: 'CACHE', id: 'cache' },
          { binding: 'SESSIONS', id: 's"1' },
          { binding: 'ALSO_CACHE', id: 'cache' },
        ],
      },
    });
    const service = (n: number, id: string) =>
      `(name = "cell-kv-${n}", external = (address = "unix:/state/bindings.sock", http = (injectRequestHeaders = [ (name = "cell-kv-application", value = "shop"), (name = "cell-kv-namespace", value = ${id}) ])))`;
    assert.ok(text.includes(service(0, '"cache"')), text);
    assert.ok(text.includes(service(1, '"s\\"1"')), text);
    assert.match(
      text,
      /\(name = "CACHE", kvNamespace = "cell-kv-0"\), \(name = "SESSIONS", kvNamespace = "cell-kv-1"\), \(name = "ALSO_CACHE", kvNamespace = "cell-kv-0"\)/,
    );
    assert.doesNotMatch(text, /cell-kv-2/, 'one service per namespace id');
  });

  it('binds each R2 bucket to the same bindings socket, the application and bucket name in injected headers', () => {
    const text = renderWorkerdConfig({
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
      assets: null,
      kv: {
        address: 'unix:/state/bindings.sock',
        application: 'shop',
        namespaces: [{ binding: 'CACHE', id: 'c' }],
      },
      r2: {
        address: 'unix:/state/bindings.sock',
        application: 'shop',
        buckets: [
          { binding: 'FILES', bucket_name: 'files' },
          { binding: 'LOGS', bucket_name: 'logs' },
          { binding: 'ALSO_FILES', bucket_name: 'files' },
        ],
      },
    });
    const service = (n: number, name: string) =>
      `(name = "cell-r2-${n}", external = (address = "unix:/state/bindings.sock", http = (injectRequestHeaders = [ (name = "cell-r2-application", value = "shop"), (name = "cell-r2-bucket", value = "${name}") ])))`;
    assert.ok(text.includes(service(0, 'files')), text);
    assert.ok(text.includes(service(1, 'logs')), text);
    assert.match(
      text,
      /\(name = "FILES", r2Bucket = "cell-r2-0"\), \(name = "LOGS", r2Bucket = "cell-r2-1"\), \(name = "ALSO_FILES", r2Bucket = "cell-r2-0"\)/,
    );
    assert.doesNotMatch(text, /cell-r2-2/, 'one service per bucket name');
    assert.match(text, /\(name = "CACHE", kvNamespace = "cell-kv-0"\)/);
  });

  it('gives the assets their own worker only when the worker has an assets binding', () => {
    const plan = {
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'index.js', type: 'esm' as const, file: 'modules/index.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
    };
    const assets = { filesJson: 'f.json', configJson: 'c.json', blobsDir: '/b' };
    // workerd starts an isolate for every worker service, bound or not: about 1.5 MB each.
    const unbound = renderWorkerdConfig({ ...plan, assets: { ...assets, binding: null } });
    assert.doesNotMatch(unbound, /cell-assets|assetsWorker/, unbound);
    assert.match(unbound, /\(name = "cell-router", worker = \.routerWorker\)/);
    assert.equal(unbound.match(/:Workerd\.Worker = \(/g)?.length, 2, 'the user worker and the router');
    const bound = renderWorkerdConfig({ ...plan, assets: { ...assets, binding: 'ASSETS' } });
    assert.match(bound, /\(name = "cell-assets", worker = \.assetsWorker\)/);
    assert.match(bound, /const assetsWorker :Workerd\.Worker = \(/);
    assert.equal(
      bound.match(/:Workerd\.Worker = \(/g)?.length,
      3,
      'the user worker, the router and the assets',
    );
  });

  it('serves the worker directly without assets', () => {
    const text = renderWorkerdConfig({
      address: '127.0.0.1:9000',
      modules: [{ name: 'w.js', type: 'esm', file: 'modules/w.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
      assets: null,
    });
    assert.match(text, /service = "cell-user"\) \]/);
    assert.doesNotMatch(text, /cell-router/);
  });

  it("sends the Cache API to the front's cache socket, an external service and no worker of its own", () => {
    const base = {
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'w.js', type: 'esm' as const, file: 'modules/w.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
      assets: null,
    };
    const text = renderWorkerdConfig({
      ...base,
      cacheAddress: 'unix:/state/d3/cache.sock',
      cronAddress: 'unix:/state/w3-cron.sock',
    });
    assert.ok(
      text.includes('(name = "cell-cache", external = (address = "unix:/state/d3/cache.sock", http = ()))'),
      text,
    );
    // The serving worker and the scheduled events' copy of it both send their cache calls there.
    assert.equal(text.match(/cacheApiOutbound = "cell-cache"/g)?.length, 2, text);
    // No isolate for the cache: the user worker, its scheduled copy and the cron trigger only.
    assert.equal(text.match(/:Workerd\.Worker = \(/g)?.length, 3, text);
    const without = renderWorkerdConfig(base);
    assert.doesNotMatch(without, /cell-cache|cacheApiOutbound/);
  });
});
