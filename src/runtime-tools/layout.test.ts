// The manifest's bindings (docs/runtime.md "Storage layout"): `kv_namespaces`, `r2_buckets` and
// `services` are read strictly, and a reader refuses a manifest requiring a feature it does not know.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KNOWN_FEATURES, parseManifest } from './layout.ts';

const manifest = (extra: Record<string, unknown>) =>
  JSON.stringify({
    schema_version: 1,
    required_features: ['modules'],
    application: 'shop',
    script: 'shop',
    deployment: 'v1',
    created_ms: 1,
    runtime: 'cell 0.0.0',
    main_module: 'a.js',
    modules: [{ name: 'a.js', type: 'esm', size: 1, sha256: 'a'.repeat(64) }],
    compatibility_date: '2025-01-01',
    compatibility_flags: [],
    vars: {},
    assets: null,
    ...extra,
  });

describe('manifest bindings', () => {
  it('reads r2_buckets with the feature r2, and refuses a malformed list', () => {
    assert.ok(KNOWN_FEATURES.includes('r2'));
    const parsed = parseManifest(
      manifest({
        required_features: ['modules', 'r2'],
        r2_buckets: [{ binding: 'FILES', bucket_name: 'files' }],
      }),
    );
    assert.ok(parsed.ok, JSON.stringify(parsed));
    assert.deepEqual(parsed.value.r2_buckets, [{ binding: 'FILES', bucket_name: 'files' }]);
    for (const r2 of [
      { binding: 'FILES' },
      [{ binding: 'FILES', bucket_name: 'F' }],
      [{ binding: '1F', bucket_name: 'files' }],
      [{ binding: 'FILES', bucket_name: 'a/b' }],
    ])
      assert.deepEqual(parseManifest(manifest({ r2_buckets: r2 })), {
        ok: false,
        why: 'r2_buckets is malformed',
      });
  });

  it('reads services with the feature services, and refuses a malformed list', () => {
    assert.ok(KNOWN_FEATURES.includes('services'));
    const services = [
      { binding: 'API', service: 'api' },
      { binding: 'ADMIN', service: 'shop', entrypoint: 'AdminApi', props: { role: 'reader' } },
    ];
    const parsed = parseManifest(manifest({ required_features: ['modules', 'services'], services }));
    assert.ok(parsed.ok, JSON.stringify(parsed));
    assert.deepEqual(parsed.value.services, services);
    for (const bad of [
      { binding: 'API', service: 'api' },
      [{ binding: 'API' }],
      [{ binding: '1A', service: 'api' }],
      [{ binding: 'API', service: 'Api' }],
      [{ binding: 'API', service: 'api', entrypoint: 'a-b' }],
      [{ binding: 'API', service: 'api', props: [1] }],
    ])
      assert.deepEqual(parseManifest(manifest({ services: bad })), {
        ok: false,
        why: 'services is malformed',
      });
  });
});
