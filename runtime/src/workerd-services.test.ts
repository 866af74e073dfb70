// The generated workerd config's service-binding parts (docs/bindings.md "Service bindings"): a
// binding to another application is a wrapped binding over two external services marked `fetch`
// and `rpc`, whose modules the config carries as internal extension modules; an ES main module
// gets the RPC entry first, with the application's key, and `ctx.exports` where its date lacks it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderWorkerdConfig, type WorkerdPlan } from './workerd.ts';

const plan = (extra: Partial<WorkerdPlan> = {}): WorkerdPlan => ({
  address: 'unix:/run/http.sock',
  modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
  compatibilityDate: '2025-06-01',
  compatibilityFlags: ['nodejs_compat'],
  vars: [],
  assets: null,
  ...extra,
});

/** The user worker's compatibility flags as the config lists them. */
const flags = (config: string) =>
  /const userWorker :Workerd\.Worker = \([\s\S]*?compatibilityFlags = \[ ([^\]]*) \]/.exec(config)![1];

describe('the workerd config of service bindings to other applications', () => {
  it('wraps each binding over a fetch and an rpc service per target, with entrypoint and props', () => {
    const config = renderWorkerdConfig(
      plan({
        otherServices: {
          address: 'unix:/state/services.sock',
          application: 'shop',
          bindings: [
            { binding: 'API', service: 'billing' },
            { binding: 'ADMIN', service: 'billing', entrypoint: 'Admin', propsFile: 'other-services/1.json' },
          ],
        },
      }),
    );
    for (const kind of ['fetch', 'rpc'])
      assert.ok(
        config.includes(
          `(name = "cell-svc-${kind}-0", external = (address = "unix:/state/services.sock", http = (injectRequestHeaders = [ (name = "cell-service-caller", value = "shop"), (name = "cell-service-target", value = "billing"), (name = "cell-service-call", value = "${kind}") ])))`,
        ),
        kind,
      );
    assert.ok(
      config.includes(
        '(name = "ADMIN", wrapped = (moduleName = "cell-internal:service-rpc", innerBindings = [ (name = "fetcher", service = "cell-svc-fetch-0"), (name = "rpc", service = "cell-svc-rpc-0"), (name = "binding", text = "ADMIN"), (name = "service", text = "billing"), (name = "entrypoint", text = "Admin"), (name = "props", json = embed "other-services/1.json") ]))',
      ),
    );
    assert.match(
      config,
      /\(name = "API", wrapped = \(moduleName = "cell-internal:service-rpc", innerBindings = \[ [^\]]*\(name = "service", text = "billing"\) \]\)\)/,
    );
    assert.match(
      config,
      /extensions = \[ \(modules = \[ \(name = "cell-internal:service-codec", internal = true, /,
    );
    assert.match(config, /\(name = "cell-internal:service-rpc", internal = true, esModule = /);
  });

  it('writes no extension without such bindings', () => {
    assert.doesNotMatch(renderWorkerdConfig(plan()), /extensions/);
  });
});

describe('the workerd config of a JS RPC target', () => {
  it("puts the RPC entry with the application's key ahead of an ES main module", () => {
    const config = renderWorkerdConfig(plan({ serviceRpcKey: 'f'.repeat(64) }));
    const modules = /modules = \[ \(name = "([^"]+)", [\s\S]*?\(name = "([^"]+)"/.exec(config)!;
    assert.deepEqual([modules[1], modules[2]], ['cell-service-rpc-entry.js', 'cell-service-codec.js']);
    assert.ok(config.includes('import * as main from \\"./cell-egress-entry.js\\"'));
    assert.ok(config.includes('f'.repeat(64)));
    assert.equal(flags(config), '"nodejs_compat", "enable_ctx_exports"');
  });

  it('adds no ctx.exports flag from 2025-11-17 on, nor against the worker’s own choice', () => {
    const key = 'f'.repeat(64);
    assert.equal(
      flags(renderWorkerdConfig(plan({ serviceRpcKey: key, compatibilityDate: '2025-11-17' }))),
      '"nodejs_compat"',
    );
    assert.equal(
      flags(renderWorkerdConfig(plan({ serviceRpcKey: key, compatibilityFlags: ['disable_ctx_exports'] }))),
      '"disable_ctx_exports"',
    );
  });

  it('adds no entry to a main module that is not an ES module', () => {
    const config = renderWorkerdConfig(
      plan({
        serviceRpcKey: 'f'.repeat(64),
        modules: [{ name: 'sw.js', type: 'commonjs', file: 'modules/sw.js' }],
      }),
    );
    assert.doesNotMatch(config, /cell-service-rpc-entry/);
    assert.equal(flags(config), '"nodejs_compat"');
  });
});
