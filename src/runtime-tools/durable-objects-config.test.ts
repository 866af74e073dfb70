// The `durable_objects` and `migrations` keys of the worker config (docs/bindings.md "Durable
// Objects"): the classes the migrations leave (renames keep the first name, which the storage key
// derives from), and every refusal as one `<file>:<line>:<column>:` line at the offending key.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { durableObjectStorageKey, parseManifest } from './layout.ts';
import { parseWorkerConfig, WorkerConfigError } from './worker-config.ts';

/** A config whose line 5 holds `durable_objects` and line 6 onwards `migrations`, as given. */
function config(bindings: unknown[], migrations: unknown[] | null, extra = ''): string {
  return [
    '{',
    '  "name": "shop",',
    '  "main": "src/index.js",',
    `  "compatibility_date": "2025-09-01",${extra}`,
    `  "durable_objects": { "bindings": ${JSON.stringify(bindings)} }${migrations ? ',' : ''}`,
    ...(migrations
      ? ['  "migrations": [', migrations.map((m) => `    ${JSON.stringify(m)}`).join(',\n'), '  ]']
      : []),
    '}',
  ].join('\n');
}

function refusal(text: string): string {
  try {
    parseWorkerConfig(text, 'cell.jsonc');
  } catch (err) {
    assert.ok(err instanceof WorkerConfigError, `expected a WorkerConfigError, got ${err}`);
    assert.equal(err.message.split('\n').length, 1, 'one line');
    return err.message;
  }
  assert.fail('expected a refusal');
}

/** `cell.jsonc:<line>:<column>` of the `n`th occurrence of `needle` (a key, quoted) in `text`. */
function at(text: string, needle: string, n = 0): string {
  let offset = -1;
  for (let i = 0; i <= n; i++) offset = text.indexOf(needle, offset + 1);
  assert.ok(offset >= 0, `${needle} is in the config`);
  const before = text.slice(0, offset);
  return `cell.jsonc:${before.split('\n').length}:${offset - before.lastIndexOf('\n')}`;
}

/** Asserts the config is refused at `needle` with `words`. */
function refusedAt(text: string, needle: string | [string, number], words: string | RegExp): void {
  const message = refusal(text);
  const [key, n] = typeof needle === 'string' ? [needle, 0] : needle;
  assert.equal(message.slice(0, message.indexOf(': ')), at(text, key, n));
  if (typeof words === 'string') assert.equal(message.slice(message.indexOf(': ') + 2), words);
  else assert.match(message.slice(message.indexOf(': ') + 2), words);
}

const ROOM = { name: 'ROOM', class_name: 'Room' };
const V1 = { tag: 'v1', new_sqlite_classes: ['Room'] };

describe('durable_objects and migrations (docs/bindings.md "Durable Objects")', () => {
  it('applies the migrations in order: the live classes by current and first name, and the deleted ones', () => {
    const parsed = parseWorkerConfig(
      config(
        [
          ROOM,
          { name: 'NOTES', class_name: 'Notes' },
          { name: 'TALLY', class_name: 'Tally', script_name: 'shop' },
        ],
        [
          { tag: 'v1', new_sqlite_classes: ['Room', 'Counter'], new_classes: ['Notes'] },
          { tag: 'v2', renamed_classes: [{ from: 'Counter', to: 'Tally' }], new_sqlite_classes: ['Old'] },
          { tag: 'v3', deleted_classes: ['Old'] },
        ],
      ),
      'cell.jsonc',
    );
    assert.deepEqual(parsed.durable_objects, {
      bindings: [
        { name: 'ROOM', class_name: 'Room' },
        { name: 'NOTES', class_name: 'Notes' },
        { name: 'TALLY', class_name: 'Tally' },
      ],
      classes: [
        { class_name: 'Notes', first_name: 'Notes', sql: false },
        { class_name: 'Room', first_name: 'Room', sql: true },
        { class_name: 'Tally', first_name: 'Counter', sql: true },
      ],
      deleted: [{ class_name: 'Old', first_name: 'Old' }],
    });
    assert.deepEqual(parsed.warnings, []);
  });

  it('an empty declaration is none, and a class needs no binding', () => {
    const none = parseWorkerConfig(config([], null), 'cell.jsonc');
    assert.deepEqual(none.durable_objects, { bindings: [], classes: [], deleted: [] });
    const unbound = parseWorkerConfig(config([], [V1]), 'cell.jsonc');
    assert.deepEqual(unbound.durable_objects.classes, [
      { class_name: 'Room', first_name: 'Room', sql: true },
    ]);
  });

  it("a class's storage key derives from the application and its first name", () => {
    assert.equal(durableObjectStorageKey('shop', 'Counter'), 'shop-Counter');
    assert.match(durableObjectStorageKey('shop', 'Co$t'), /^shop-x[0-9a-f]{16}$/);
    assert.notEqual(durableObjectStorageKey('shop', 'Co$t'), durableObjectStorageKey('shop', 'Co$u'));
  });

  it('refuses a binding to another worker, an environment, an unknown field, with the line of the key', () => {
    refusedAt(
      config([{ ...ROOM, script_name: 'billing' }], [V1]),
      '"script_name"',
      '"durable_objects.bindings[0].script_name" is not supported: a binding reaches this worker\'s own Durable Object classes only (each application runs its own); reach "billing"\'s objects through a service binding to it',
    );
    refusedAt(
      config([{ ...ROOM, environment: 'staging' }], [V1]),
      '"environment"',
      '"durable_objects.bindings[0].environment" is not supported: a binding reaches this worker\'s own Durable Object classes only; svc addresses an environment as its own application',
    );
    refusedAt(
      config([{ ...ROOM, colo: 'x' }], [V1]),
      '"colo"',
      /^"durable_objects\.bindings\[0\]\.colo" is not a Durable Object binding setting/,
    );
  });

  it('refuses a binding to a class the migrations never create, or delete', () => {
    refusedAt(
      config([ROOM], null),
      '"class_name"',
      '"durable_objects.bindings[0].class_name" names Room, which no migration creates; add a migration such as { "tag": "v1", "new_sqlite_classes": ["Room"] }',
    );
    refusedAt(
      config([ROOM], [V1, { tag: 'v2', deleted_classes: ['Room'] }]),
      '"class_name"',
      '"durable_objects.bindings[0].class_name" names Room, which a deleted_classes migration deletes; remove the binding',
    );
    refusedAt(
      config([ROOM], [V1, { tag: 'v2', renamed_classes: [{ from: 'Room', to: 'Hall' }] }]),
      '"class_name"',
      '"durable_objects.bindings[0].class_name" names Room, which no migration creates; add a migration such as { "tag": "v1", "new_sqlite_classes": ["Room"] }',
    );
  });

  it('refuses binding names taken, and bindings without a name or class', () => {
    refusedAt(
      config([ROOM], [V1], ' "vars": { "ROOM": "x" },'),
      ['"name"', 1],
      '"durable_objects.bindings[0].name" names ROOM, which vars also binds; choose another name',
    );
    refusedAt(
      config([ROOM, ROOM], [V1]),
      ['"name"', 2],
      '"durable_objects.bindings[1].name" names ROOM, which an earlier Durable Object binding binds; choose another name',
    );
    refusedAt(
      config([{ name: 'ROOM' }], [V1]),
      '{"name":"ROOM"}',
      /^"durable_objects\.bindings\[0\]" needs "class_name"/,
    );
    refusedAt(
      config([{ class_name: 'Room' }], [V1]),
      '{"class_name":"Room"}',
      /^"durable_objects\.bindings\[0\]" needs "name"/,
    );
  });

  it('refuses migrations that break the chain, each at its key', () => {
    refusedAt(
      config([], [V1, { tag: 'v2', new_classes: ['Room'] }]),
      ['"Room"', 1],
      '"migrations[1].new_classes[0]" creates Room, which an earlier migration already creates',
    );
    refusedAt(
      config([], [V1, { tag: 'v2', deleted_classes: ['Room'] }, { tag: 'v3', new_classes: ['Room'] }]),
      ['"Room"', 2],
      '"migrations[2].new_classes[0]" creates Room, a name an earlier migration used: a class name is never reused (its objects\' storage is named after it); choose another name',
    );
    refusedAt(
      config([], [V1, { tag: 'v2', deleted_classes: ['Nope'] }]),
      '"Nope"',
      '"migrations[1].deleted_classes[0]" names Nope, which no earlier migration leaves in place',
    );
    refusedAt(
      config([], [V1, { tag: 'v2', renamed_classes: [{ from: 'Nope', to: 'X' }] }]),
      '"from"',
      '"migrations[1].renamed_classes[0].from" names Nope, which no earlier migration leaves in place',
    );
    refusedAt(
      config([], [V1, { tag: 'v1', new_classes: ['B'] }]),
      ['"tag"', 1],
      '"migrations[1].tag" names "v1", which an earlier migration names',
    );
    refusedAt(
      config([], [{ new_classes: ['B'] }]),
      '{"new_classes"',
      '"migrations[0]" needs "tag": the migration\'s name, such as "v1"',
    );
    refusedAt(
      config([], [{ tag: 'v1', transferred_classes: [{ from: 'A', from_script: 'x', to: 'B' }] }]),
      '"transferred_classes"',
      '"migrations[0].transferred_classes" is not supported: classes move between workers on Cloudflare only; each svc application keeps its own',
    );
    refusedAt(
      config([], [{ tag: 'v1', new_classes: ['1x'] }]),
      '"1x"',
      /^"migrations\[0\]\.new_classes\[0\]" must be a class name/,
    );
  });

  it('refuses Durable Objects without a worker', () => {
    const text =
      '{\n  "compatibility_date": "2025-09-01",\n  "assets": { "directory": "public" },\n  "migrations": [{ "tag": "v1", "new_sqlite_classes": ["Room"] }]\n}';
    refusedAt(
      text,
      '"migrations"',
      '"migrations" needs a worker: set "main" to the module that exports the Durable Object classes',
    );
  });

  it('a manifest carries its classes by storage key; a malformed one is refused', () => {
    const manifest = {
      schema_version: 1,
      required_features: ['modules', 'durable-objects'],
      application: 'shop',
      script: 'shop',
      deployment: 'ab',
      created_ms: 1,
      runtime: 'cell 0.8.1',
      main_module: 'index.js',
      modules: [{ name: 'index.js', type: 'esm', size: 1, sha256: 'a'.repeat(64) }],
      compatibility_date: '2025-09-01',
      compatibility_flags: [],
      vars: {},
      assets: null,
      durable_objects: {
        bindings: [{ name: 'ROOM', class_name: 'Room' }],
        classes: [{ class_name: 'Room', storage_key: 'shop-Room', sql: true }],
        deleted: [{ class_name: 'Old', storage_key: 'shop-Old' }],
      },
    };
    assert.ok(parseManifest(JSON.stringify(manifest)).ok);
    const unbound = { ...manifest, durable_objects: { ...manifest.durable_objects, classes: [] } };
    assert.deepEqual(parseManifest(JSON.stringify(unbound)), {
      ok: false,
      why: 'durable_objects is malformed',
    });
    const escaping = {
      ...manifest,
      durable_objects: {
        ...manifest.durable_objects,
        classes: [{ class_name: 'Room', storage_key: '../x', sql: true }],
      },
    };
    assert.deepEqual(parseManifest(JSON.stringify(escaping)), {
      ok: false,
      why: 'durable_objects is malformed',
    });
  });
});
