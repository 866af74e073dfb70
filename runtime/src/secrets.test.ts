// The secrets file `cell serve` reads: absent is no secrets; a change (even of one value) gives a
// new digest, so the serving deployment restarts; a malformed file is refused without its content.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CellError } from './errors.ts';
import { parseSecrets, SecretsFile } from './secrets.ts';

test('absent, present, changed, removed', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'cell-secrets-')), 'app.json');
  const secrets = new SecretsFile(file);
  assert.deepEqual(secrets.read(), { values: {}, digest: '' });
  writeFileSync(file, JSON.stringify({ B: '2', A: '1' }));
  const first = secrets.read();
  assert.deepEqual(first.values, { A: '1', B: '2' });
  assert.notEqual(first.digest, '');
  assert.equal(secrets.read(), first, 'unchanged file: not read again');
  writeFileSync(file, JSON.stringify({ A: '1', B: '3' }));
  const second = secrets.read();
  assert.notEqual(second.digest, first.digest);
  rmSync(file);
  assert.deepEqual(secrets.read(), { values: {}, digest: '' });
  assert.deepEqual(new SecretsFile(undefined).read(), { values: {}, digest: '' });
});

test('a malformed file is refused without quoting it', () => {
  for (const text of ['not json hunter2', '[]', '{"A":1}', 'null']) {
    assert.throws(
      () => parseSecrets(text, '/x.json'),
      (err: unknown) => err instanceof CellError && !err.message.includes('hunter2'),
    );
  }
});
