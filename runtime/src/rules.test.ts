// wrangler's module rules and cron triggers in the worker config: parsing and refusals, and how
// the rules type a module path (the config's rules first, defaults of unclaimed types after).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { effectiveRules, ruleTypeOf } from './bundle.ts';
import { parseWorkerConfig } from './config.ts';

const BASE = '"main": "w.js", "compatibility_date": "2025-06-01"';
const parse = (extra: string) =>
  parseWorkerConfig(`{ ${BASE}, ${extra} }`, 'cell.jsonc', { maxCompatibilityDate: '2026-11-17' });
const refusal = (extra: string) => {
  try {
    parse(extra);
  } catch (err) {
    return (err as Error).message;
  }
  return assert.fail('expected a refusal');
};

describe('rules and triggers in the config', () => {
  it('reads rules and crons, and no longer ignores triggers', () => {
    const config = parse(
      '"rules": [{ "type": "Text", "globs": ["**/*.tmpl"], "fallthrough": true }], "triggers": { "crons": ["*/5 * * * *", "0 0 * * *"] }',
    );
    assert.deepEqual(config.rules, [{ type: 'Text', globs: ['**/*.tmpl'], fallthrough: true }]);
    assert.deepEqual(config.crons, ['*/5 * * * *', '0 0 * * *']);
    assert.deepEqual(config.ignored, []);
    assert.deepEqual(parse('"triggers": {}').crons, []);
  });

  it('refuses malformed rules and crons, naming the key', () => {
    assert.match(refusal('"rules": {}'), /"rules" must be a list/);
    assert.match(
      refusal('"rules": [{ "type": "Markdown", "globs": ["*.md"] }]'),
      /"rules\[0\]\.type" must be one of/,
    );
    assert.match(
      refusal('"rules": [{ "type": "Text", "globs": [] }]'),
      /"rules\[0\]\.globs" must be a non-empty list/,
    );
    assert.match(refusal('"rules": [{ "type": "Text", "globs": ["*.x"], "fallthrough": 1 }]'), /fallthrough/);
    assert.match(refusal('"triggers": []'), /"triggers" must be an object/);
    assert.match(refusal('"triggers": { "crons": "* * * * *" }'), /"triggers\.crons" must be a list/);
    assert.match(
      refusal('"triggers": { "crons": ["* * *"] }'),
      /"\* \* \*" is no cron expression: give five fields/,
    );
    assert.match(
      refusal('"triggers": { "crons": ["99 * * * *"] }'),
      /"99 \* \* \* \*" is no cron expression/,
    );
  });
});

describe('module rules', () => {
  it("types paths by wrangler's defaults", () => {
    const rules = effectiveRules([]);
    assert.equal(ruleTypeOf(rules, 'index.js'), 'esm');
    assert.equal(ruleTypeOf(rules, 'lib/a.mjs'), 'esm');
    assert.equal(ruleTypeOf(rules, 'old.cjs'), 'commonjs');
    assert.equal(ruleTypeOf(rules, './schema.sql'), 'text');
    assert.equal(ruleTypeOf(rules, '../page.html'), 'text');
    assert.equal(ruleTypeOf(rules, 'blob.bin'), 'data');
    assert.equal(ruleTypeOf(rules, 'mod.wasm'), 'wasm');
    assert.equal(ruleTypeOf(rules, 'notes.md'), null);
  });

  it("puts the config's rules first; a type it names drops its defaults unless it falls through", () => {
    const closed = effectiveRules([{ type: 'Text', globs: ['**/*.md'], fallthrough: false }]);
    assert.equal(ruleTypeOf(closed, 'notes.md'), 'text');
    assert.equal(ruleTypeOf(closed, 'schema.sql'), null);
    assert.equal(ruleTypeOf(closed, 'index.js'), 'esm');
    const open = effectiveRules([{ type: 'Text', globs: ['**/*.md'], fallthrough: true }]);
    assert.equal(ruleTypeOf(open, 'schema.sql'), 'text');
    const data = effectiveRules([{ type: 'Data', globs: ['**/*.sql'], fallthrough: false }]);
    assert.equal(ruleTypeOf(data, 'schema.sql'), 'data', 'the first matching rule wins');
  });
});
