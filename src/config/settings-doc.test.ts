import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { settingsDocument } from '../../scripts/settings-doc.ts';

test('docs/configuration.md is generated from the settings table', () => {
  const committed = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  assert.equal(
    committed,
    settingsDocument(),
    'run: scripts/with-node node scripts/settings-doc.ts > docs/configuration.md',
  );
});
