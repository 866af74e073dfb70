// `cell publish`'s load check (docs/runtime.md "The worker config"): the built code is started by
// the front's `cell-front check` (the checkout's runtime/bin/cell-front, built by make setup) in a
// real workerd. One test stands in a program that answers nothing for the front binary, named as
// one: a front that dies without an answer.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, before, beforeEach, describe, it } from 'node:test';
import type { Manifest } from '../../src/runtime-tools/layout.ts';
import { CellError } from './errors.ts';
import { proveLoads } from './load-check.ts';

const FRONT = resolve(import.meta.dirname, '..', 'bin', 'cell-front');

/** A one-module worker's manifest and code, as `cell publish` hands them to the check. */
function worker(source: string, extra: Partial<Manifest> = {}) {
  const bytes = new TextEncoder().encode(source);
  const manifest: Manifest = {
    schema_version: 1,
    required_features: ['modules'],
    application: 'shop',
    script: 'web',
    deployment: 'v1',
    created_ms: 0,
    runtime: 'cell test',
    main_module: 'w.js',
    modules: [
      {
        name: 'w.js',
        type: 'esm',
        size: bytes.byteLength,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      },
    ],
    compatibility_date: '2025-06-01',
    compatibility_flags: [],
    vars: {},
    assets: null,
    ...extra,
  };
  return { manifest, code: new Map([['w.js', bytes]]) };
}

describe('the load check', () => {
  let stateDir: string;
  let env: NodeJS.ProcessEnv;
  before(() => {
    assert.ok(existsSync(FRONT), `the load check runs ${FRONT}: build it with make setup`);
  });
  // A fresh CELL_STATE_DIR per test: the check must leave it as it found it.
  beforeEach(() => {
    stateDir = mkdtempSync(join(tmpdir(), 'cell-lc-'));
    env = { CELL_FRONT_BIN: FRONT, CELL_STATE_DIR: stateDir };
  });
  afterEach(() => rmSync(stateDir, { recursive: true, force: true }));

  it('passes a worker that answers its probe, vars and crons included, and leaves nothing behind', async () => {
    const { manifest, code } = worker(
      'export default { fetch(r, env) { return new Response(env.GREETING); }, scheduled() {} };',
      { vars: { GREETING: 'hi' }, crons: ['*/5 * * * *'] },
    );
    await proveLoads({ manifest, code, env });
    assert.deepEqual(readdirSync(stateDir), []);
  });

  it('refuses a worker that throws while loading with its error and module:line:column', async () => {
    const { manifest, code } = worker(
      "const url = globalThis.DATABASE_URL;\nif (!url) throw new Error('DATABASE_URL is not set');\nexport default {};\n",
    );
    await assert.rejects(proveLoads({ manifest, code, env }), (err: Error) => {
      assert.ok(err instanceof CellError);
      assert.match(
        err.message,
        /^the worker cannot serve: it was started in workerd and web\/v1 failed to start: service cell-user: Uncaught Error: DATABASE_URL is not set\n\s+at w\.js:2:\d+; nothing was published$/,
      );
      return true;
    });
    assert.deepEqual(readdirSync(stateDir), []);
  });

  it('refuses when the front binary is missing, naming it and how to build it', async () => {
    const missing = join(stateDir, 'no-front');
    const { manifest, code } = worker('export default {};');
    await assert.rejects(proveLoads({ manifest, code, env: { ...env, CELL_FRONT_BIN: missing } }), {
      name: 'CellError',
      message: `cell publish needs its front binary ${missing} for the load check; build it with make setup (or make dist)`,
    });
    assert.deepEqual(readdirSync(stateDir), []);
  });

  it('says so when the front ends without an answer, and leaves nothing behind', async () => {
    // Stand-in for a broken front binary: exits 1 printing nothing.
    const { manifest, code } = worker('export default {};');
    await assert.rejects(proveLoads({ manifest, code, env: { ...env, CELL_FRONT_BIN: '/bin/false' } }), {
      name: 'CellError',
      message: 'the load check (/bin/false check) ended (code 1) without an answer; nothing was published',
    });
    assert.deepEqual(readdirSync(stateDir), []);
  });
});
