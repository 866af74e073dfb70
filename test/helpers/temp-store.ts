// Helpers for unit tests over the bucket: a fresh local-directory bucket and a refusal check.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Problem } from '../../src/problem.ts';
import { openDirStore } from '../../src/store/dir.ts';
import type { Store } from '../../src/store/store.ts';

/** Asserts `run` refuses with this code and title; answers the Problem. */
export async function refuses(run: () => unknown, code: string, title: string | RegExp): Promise<Problem> {
  try {
    await run();
  } catch (err) {
    assert.ok(err instanceof Problem, `expected a Problem, got ${String(err)}`);
    assert.equal(err.code, code, `${err.title}: ${err.detail}`);
    if (typeof title === 'string') assert.equal(err.title, title);
    else assert.match(err.title, title);
    return err;
  }
  assert.fail(`expected ${code} (${String(title)}), but it succeeded`);
}

/** A fresh bucket in a temporary directory. */
export async function tempStore(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-registry-'));
  return openDirStore(join(dir, 'bucket'));
}
