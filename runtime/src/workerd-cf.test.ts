// The http socket's request.cf (docs/runtime.md "Geolocation"): with a GeoIP
// database the front hands request.cf over in a header workerd reads (cfBlobHeader); without one
// the socket is as before. The header's name is the front's too (runtime/front/geoip.go).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { CF_BLOB_HEADER, renderWorkerdConfig, type WorkerdPlan } from './workerd.ts';

const plan = (extra: Partial<WorkerdPlan> = {}): WorkerdPlan => ({
  address: 'unix:/run/http.sock',
  modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
  compatibilityDate: '2025-06-01',
  compatibilityFlags: [],
  vars: [],
  assets: null,
  ...extra,
});

describe('the http socket and request.cf', () => {
  it('reads request.cf from the front header only with a GeoIP database', () => {
    assert.match(
      renderWorkerdConfig(plan({ cfBlob: true })),
      /\(name = "http", address = "unix:\/run\/http\.sock", http = \(cfBlobHeader = "cell-cf-blob"\), service = /,
    );
    assert.match(renderWorkerdConfig(plan()), /\(name = "http", address = "[^"]*", http = \(\), service = /);
    assert.doesNotMatch(renderWorkerdConfig(plan()), /cfBlobHeader/);
  });

  it('names the header the front sets and strips', () => {
    const front = readFileSync(new URL('../front/geoip.go', import.meta.url), 'utf8');
    const name = /const CfBlobHeader = "([^"]+)"/.exec(front)?.[1];
    assert.equal(name?.toLowerCase(), CF_BLOB_HEADER);
  });
});
