// An instance's folder with R2 bindings (docs/bindings.md "R2 buckets"): the workerd config binds
// each bucket to the bindings socket (no socket at all for the publish load check, which has no
// host), and a binding named like a secret is refused, as KV's.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { Manifest } from '../../src/runtime-tools/layout.ts';
import { instancePaths, materialize, objectsDir } from './instance.ts';

const CODE = new TextEncoder().encode('export default { fetch: () => new Response("hi") };');

const manifest: Manifest = {
  schema_version: 1,
  required_features: ['modules', 'r2'],
  application: 'shop',
  script: 'shop',
  deployment: 'v1',
  created_ms: 1,
  runtime: 'cell 0.0.0',
  main_module: 'index.js',
  modules: [
    {
      name: 'index.js',
      type: 'esm',
      size: CODE.byteLength,
      sha256: createHash('sha256').update(CODE).digest('hex'),
    },
  ],
  compatibility_date: '2025-06-01',
  compatibility_flags: [],
  vars: {},
  assets: null,
  r2_buckets: [{ binding: 'FILES', bucket_name: 'files' }],
};

describe('materialize with R2 bindings', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'r2-instance-'));
  after(() => rmSync(stateDir, { recursive: true, force: true }));
  const context = (bindingsSocket?: () => Promise<string>) => ({
    store: null,
    application: 'shop',
    stateDir,
    env: {},
    log: () => {},
    bindingsSocket,
  });
  const code = new Map([['index.js', CODE]]);

  it("binds each bucket to the host's bindings socket, or to no socket without a host", async () => {
    const paths = instancePaths(stateDir, 1, manifest);
    await materialize(
      context(async () => '/state/bindings.sock'),
      manifest,
      { values: {}, digest: '' },
      paths,
      code,
    );
    const config = readFileSync(join(paths.dir, 'config.capnp'), 'utf8');
    assert.match(config, /\(name = "FILES", r2Bucket = "cell-r2-0"\)/);
    assert.match(config, /external = \(address = "unix:\/state\/bindings\.sock"/);
    assert.match(
      config,
      /\(name = "cell-r2-application", value = "shop"\), \(name = "cell-r2-bucket", value = "files"\)/,
    );
    const check = instancePaths(stateDir, 2, manifest);
    await materialize(context(), manifest, { values: {}, digest: '' }, check, code);
    assert.ok(
      readFileSync(join(check.dir, 'config.capnp'), 'utf8').includes(
        `unix:${join(check.dir, 'no-bindings.sock')}`,
      ),
    );
  });

  it('refuses a bucket binding that is also a secret', async () => {
    await assert.rejects(
      materialize(
        context(),
        manifest,
        { values: { FILES: 'x' }, digest: 'd' },
        instancePaths(stateDir, 3, manifest),
        code,
      ),
      /FILES is both an R2 bucket binding of shop\/v1 and a secret; remove the secret \(svc app secret remove\) or rename the binding/,
    );
  });
});

describe('objectsDir', () => {
  it("takes the node's CELL_OBJECTS_DIR first, else a folder of CELL_STATE_DIR", () => {
    assert.equal(objectsDir({ CELL_OBJECTS_DIR: '/srv/o', CELL_STATE_DIR: '/s' }, 'shop'), '/srv/o/shop');
    assert.equal(objectsDir({ CELL_STATE_DIR: '/s' }, 'shop'), '/s/objects/shop');
  });
});
