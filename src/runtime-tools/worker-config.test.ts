// The shared worker-config parser: refusals at the line and column of the offending key or
// syntax error, warnings for keys the runtime ignores, and (properties) any text either parses
// or is refused with a WorkerConfigError placed inside the text; nothing else is ever thrown.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseWorkerConfig, WorkerConfigError } from './worker-config.ts';

function refusal(text: string): WorkerConfigError {
  try {
    parseWorkerConfig(text, 'cell.jsonc');
  } catch (err) {
    assert.ok(err instanceof WorkerConfigError, `expected a WorkerConfigError, got ${err}`);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('the shared worker config parser', () => {
  it('places a syntax error at its line and column', () => {
    const err = refusal('{\n  "name": "shop",\n  "main" "x.js"\n}\n');
    assert.equal(err.message.split(': ')[0], 'cell.jsonc:3:10');
    assert.match(err.message, /ColonExpected: the worker config is not valid JSONC/);
    assert.equal(err.line, 3);
    assert.equal(err.column, 10);
  });

  it('places a refused key at the key itself', () => {
    const text =
      '{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",\n    "vectorize": [{ "binding": "C" }]\n}';
    assert.match(refusal(text).message, /^cell\.jsonc:4:5: "vectorize" declares bindings/);
    const nested =
      '{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",\n  "vars": {\n    "1X": "a"\n  }\n}';
    assert.match(refusal(nested).message, /^cell\.jsonc:5:5: "vars\.1X" is no variable name/);
  });

  it('places a missing required key at the start of the object', () => {
    assert.match(
      refusal('\n\n{"main":"a.js"}').message,
      /^cell\.jsonc:3:1: "compatibility_date" is required/,
    );
  });

  it('warns of unknown keys and of Cloudflare features not provided, quietly drops account keys', () => {
    const config = parseWorkerConfig(
      '{\n "main": "a.js",\n "compatibility_date": "2025-01-01",\n "account_id": "x",\n "mystery": 1,\n "routes": ["shop.example/*"],\n "tail_consumers": []\n}',
      'cell.jsonc',
    );
    assert.deepEqual(config.ignored, ['mystery']);
    assert.deepEqual(config.warnings, [
      'cell.jsonc:5:2: ignoring "mystery": this runtime does not use it',
      'cell.jsonc:6:2: ignoring "routes": svc routes by application name and domains (svc app domain add), not by Cloudflare routes',
    ]);
  });

  it('reads wrangler\'s custom build (docs/deploys.md "Custom builds") without a warning, refuses a malformed one at its key', () => {
    const text = (build: string) =>
      `{\n "main": "a.js",\n "compatibility_date": "2025-01-01",\n "build": ${build}\n}`;
    const built = parseWorkerConfig(
      text(
        '{ "command": "esbuild app.tsx --outdir=public/dist", "cwd": "web", "watch_dir": ["src", "web"] }',
      ),
      'cell.jsonc',
    );
    assert.deepEqual(built.custom_build, { command: 'esbuild app.tsx --outdir=public/dist', cwd: 'web' });
    assert.deepEqual(built.warnings, []);
    assert.deepEqual(built.ignored, []);
    assert.equal(parseWorkerConfig(text('{ "watch_dir": "src" }'), 'cell.jsonc').custom_build, null);
    assert.equal(parseWorkerConfig(text('{}'), 'cell.jsonc').custom_build, null);
    assert.match(refusal(text('"npm run build"')).message, /^cell\.jsonc:4:2: "build" must be an object/);
    assert.match(
      refusal(text('{ "command": "" }')).message,
      /^cell\.jsonc:4:13: "build\.command" must be a non-empty string/,
    );
    assert.match(
      refusal(text('{ "command": "x", "cwd": 1 }')).message,
      /^cell\.jsonc:4:29: "build\.cwd" must be/,
    );
    assert.match(
      refusal(text('{ "watch_dir": [1] }')).message,
      /^cell\.jsonc:4:13: "build\.watch_dir" must be/,
    );
  });

  it('treats __proto__ as an ordinary key', () => {
    const config = parseWorkerConfig(
      '{"main":"a.js","compatibility_date":"2025-01-01","__proto__":{"env":1}}',
      'cell.jsonc',
    );
    assert.deepEqual(config.ignored, ['__proto__']);
    assert.equal(({} as Record<string, unknown>).env, undefined);
  });

  it('any text parses or is refused with a WorkerConfigError placed inside the text', () => {
    const near = fc.oneof(
      fc.string(),
      fc.json(),
      fc
        .record(
          {
            main: fc.oneof(fc.string(), fc.integer()),
            compatibility_date: fc.oneof(fc.constant('2025-01-01'), fc.string()),
            vars: fc.dictionary(fc.string(), fc.jsonValue()),
            assets: fc.oneof(fc.constant(undefined), fc.dictionary(fc.string(), fc.string())),
            name: fc.string(),
          },
          { requiredKeys: [] },
        )
        .map((doc) => JSON.stringify(doc)),
    );
    fc.assert(
      fc.property(near, (text) => {
        try {
          parseWorkerConfig(text, 'cell.jsonc');
        } catch (err) {
          if (!(err instanceof WorkerConfigError)) throw err;
          const lines = text.split('\n');
          assert.ok(err.line >= 1 && err.line <= lines.length);
          assert.ok(err.column >= 1 && err.column <= lines[err.line - 1]!.length + 1);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('kv_namespaces (docs/bindings.md "KV namespaces")', () => {
  const config = (kv: string, extra = '') =>
    `{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",${extra}\n  "kv_namespaces": ${kv}\n}`;

  it('reads each binding and id, ignores preview_id with a warning, and reads [] as no binding', () => {
    const parsed = parseWorkerConfig(
      config(
        '[{ "binding": "CACHE", "id": "cache-1" }, { "binding": "SESSIONS", "id": "s_2", "preview_id": "p" }]',
      ),
      'cell.jsonc',
    );
    assert.deepEqual(parsed.kv_namespaces, [
      { binding: 'CACHE', id: 'cache-1' },
      { binding: 'SESSIONS', id: 's_2' },
    ]);
    assert.deepEqual(parsed.warnings, [
      'cell.jsonc:4:100: ignoring "kv_namespaces[1].preview_id": svc has no preview namespaces; the binding always reaches "id"',
    ]);
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').kv_namespaces, []);
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').warnings, []);
  });

  it('refuses a bad declaration at the offending key', () => {
    const cases: [string, string, RegExp][] = [
      ['{ "binding": "C", "id": "x" }', '', /^cell\.jsonc:4:3: "kv_namespaces" must be a list/],
      ['["CACHE"]', '', /^cell\.jsonc:4:21: "kv_namespaces\[0\]" must be an object/],
      ['[{ "id": "x" }]', '', /^cell\.jsonc:4:21: "kv_namespaces\[0\]" needs "binding"/],
      ['[{ "binding": "C" }]', '', /^cell\.jsonc:4:21: "kv_namespaces\[0\]" needs "id"/],
      [
        '[{ "binding": "1C", "id": "x" }]',
        '',
        /^cell\.jsonc:4:23: "kv_namespaces\[0\]\.binding" must be a binding name/,
      ],
      [
        '[{ "binding": "C", "id": "" }]',
        '',
        /^cell\.jsonc:4:39: "kv_namespaces\[0\]\.id" must be 1-64 letters, digits, "_" or "-" .*got ""/,
      ],
      ['[{ "binding": "C", "id": "a/b" }]', '', /"kv_namespaces\[0\]\.id" must be 1-64 .*got "a\/b"/],
      [`[{ "binding": "C", "id": "${'x'.repeat(65)}" }]`, '', /"kv_namespaces\[0\]\.id" must be 1-64/],
      ['[{ "binding": "C", "id": 7 }]', '', /"kv_namespaces\[0\]\.id" must be 1-64 .*got 7/],
      [
        '[{ "binding": "GREETING", "id": "x" }]',
        '\n  "vars": { "GREETING": "hi" },',
        /^cell\.jsonc:5:23: "kv_namespaces\[0\]\.binding" names GREETING, which vars also binds/,
      ],
      [
        '[{ "binding": "ASSETS", "id": "x" }]',
        '\n  "assets": { "directory": "p", "binding": "ASSETS" },',
        /"kv_namespaces\[0\]\.binding" names ASSETS, which assets\.binding also binds/,
      ],
      [
        '[{ "binding": "C", "id": "x" }, { "binding": "C", "id": "y" }]',
        '',
        /^cell\.jsonc:4:54: "kv_namespaces\[1\]\.binding" names C, which an earlier KV namespace binds/,
      ],
    ];
    for (const [kv, extra, expected] of cases) assert.match(refusal(config(kv, extra)).message, expected, kv);
    assert.deepEqual(
      parseWorkerConfig(config(`[{ "binding": "C", "id": "${'x'.repeat(64)}" }]`), 'cell.jsonc')
        .kv_namespaces,
      [{ binding: 'C', id: 'x'.repeat(64) }],
    );
  });
});

describe('r2_buckets (docs/bindings.md "R2 buckets")', () => {
  const config = (r2: string, extra = '') =>
    `{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",${extra}\n  "r2_buckets": ${r2}\n}`;

  it('reads each binding and bucket_name, ignores preview_bucket_name and jurisdiction with a warning, and reads [] as no binding', () => {
    const parsed = parseWorkerConfig(
      config(
        '[{ "binding": "FILES", "bucket_name": "files-1" }, { "binding": "LOGS", "bucket_name": "abc", "preview_bucket_name": "p", "jurisdiction": "eu" }]',
      ),
      'cell.jsonc',
    );
    assert.deepEqual(parsed.r2_buckets, [
      { binding: 'FILES', bucket_name: 'files-1' },
      { binding: 'LOGS', bucket_name: 'abc' },
    ]);
    assert.deepEqual(parsed.warnings, [
      'cell.jsonc:4:111: ignoring "r2_buckets[1].preview_bucket_name": svc has no preview buckets; the binding always reaches "bucket_name"',
      `cell.jsonc:4:139: ignoring "r2_buckets[1].jurisdiction": svc keeps every bucket's objects in the fleet's own bucket, wherever that is`,
    ]);
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').r2_buckets, []);
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').warnings, []);
  });

  it('refuses a bad declaration at the offending key', () => {
    // Bucket name rule: developers.cloudflare.com/r2/buckets/create-buckets/ (3-63 of a-z, 0-9
    // and "-", not starting or ending with "-").
    const cases: [string, string, RegExp][] = [
      ['{ "binding": "F", "bucket_name": "abc" }', '', /^cell\.jsonc:4:3: "r2_buckets" must be a list/],
      ['["FILES"]', '', /^cell\.jsonc:4:18: "r2_buckets\[0\]" must be an object/],
      ['[{ "bucket_name": "abc" }]', '', /^cell\.jsonc:4:18: "r2_buckets\[0\]" needs "binding"/],
      ['[{ "binding": "F" }]', '', /^cell\.jsonc:4:18: "r2_buckets\[0\]" needs "bucket_name"/],
      [
        '[{ "binding": "1F", "bucket_name": "abc" }]',
        '',
        /^cell\.jsonc:4:20: "r2_buckets\[0\]\.binding" must be a binding name/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "ab" }]',
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2 bucket name: 3-63 .*got "ab"/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "-abc" }]',
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2 .*got "-abc"/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "abc-" }]',
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2 .*got "abc-"/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "Abc" }]',
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2 .*got "Abc"/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "a_c" }]',
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2 .*got "a_c"/,
      ],
      [
        `[{ "binding": "F", "bucket_name": "${'x'.repeat(64)}" }]`,
        '',
        /"r2_buckets\[0\]\.bucket_name" must be an R2/,
      ],
      ['[{ "binding": "F", "bucket_name": 7 }]', '', /"r2_buckets\[0\]\.bucket_name" must be an R2 .*got 7/],
      [
        '[{ "binding": "GREETING", "bucket_name": "abc" }]',
        '\n  "vars": { "GREETING": "hi" },',
        /^cell\.jsonc:5:20: "r2_buckets\[0\]\.binding" names GREETING, which vars also binds/,
      ],
      [
        '[{ "binding": "ASSETS", "bucket_name": "abc" }]',
        '\n  "assets": { "directory": "p", "binding": "ASSETS" },',
        /"r2_buckets\[0\]\.binding" names ASSETS, which assets\.binding also binds/,
      ],
      [
        '[{ "binding": "CACHE", "bucket_name": "abc" }]',
        '\n  "kv_namespaces": [{ "binding": "CACHE", "id": "c" }],',
        /"r2_buckets\[0\]\.binding" names CACHE, which a KV namespace also binds/,
      ],
      [
        '[{ "binding": "F", "bucket_name": "abc" }, { "binding": "F", "bucket_name": "def" }]',
        '',
        /"r2_buckets\[1\]\.binding" names F, which an earlier R2 bucket binds/,
      ],
    ];
    for (const [r2, extra, expected] of cases) assert.match(refusal(config(r2, extra)).message, expected, r2);
    assert.deepEqual(
      parseWorkerConfig(config(`[{ "binding": "F", "bucket_name": "${'x'.repeat(63)}" }]`), 'cell.jsonc')
        .r2_buckets,
      [{ binding: 'F', bucket_name: 'x'.repeat(63) }],
    );
  });
});

describe('services (docs/bindings.md "Service bindings")', () => {
  const config = (services: string, extra = '') =>
    `{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",${extra}\n  "services": ${services}\n}`;

  it('reads each binding, service, entrypoint and props, and reads [] as no binding', () => {
    const parsed = parseWorkerConfig(
      config(
        '[{ "binding": "API", "service": "api" }, { "binding": "ADMIN", "service": "shop", "entrypoint": "AdminApi", "props": { "role": "reader" } }]',
      ),
      'cell.jsonc',
    );
    assert.deepEqual(parsed.services, [
      { binding: 'API', service: 'api' },
      { binding: 'ADMIN', service: 'shop', entrypoint: 'AdminApi', props: { role: 'reader' } },
    ]);
    assert.deepEqual(parsed.warnings, []);
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').services, []);
  });

  it('refuses a bad declaration at the offending key', () => {
    const cases: [string, string, RegExp][] = [
      ['{ "binding": "A", "service": "a" }', '', /^cell\.jsonc:4:3: "services" must be a list/],
      ['["API"]', '', /^cell\.jsonc:4:16: "services\[0\]" must be an object/],
      ['[{ "service": "api" }]', '', /^cell\.jsonc:4:16: "services\[0\]" needs "binding"/],
      ['[{ "binding": "A" }]', '', /^cell\.jsonc:4:16: "services\[0\]" needs "service"/],
      [
        '[{ "binding": "1A", "service": "api" }]',
        '',
        /^cell\.jsonc:4:18: "services\[0\]\.binding" must be a binding name/,
      ],
      [
        '[{ "binding": "A", "service": "Api" }]',
        '',
        /^cell\.jsonc:4:34: "services\[0\]\.service" must be an application name: .*got "Api"/,
      ],
      [
        '[{ "binding": "A", "service": "api", "environment": "staging" }]',
        '',
        /^cell\.jsonc:4:52: "services\[0\]\.environment" is not supported: .*"api-staging"/,
      ],
      [
        '[{ "binding": "A", "service": "api", "entrypoint": "no-export" }]',
        '',
        /^cell\.jsonc:4:52: "services\[0\]\.entrypoint" must name an export .*got "no-export"/,
      ],
      [
        '[{ "binding": "A", "service": "api", "props": [1] }]',
        '',
        /^cell\.jsonc:4:52: "services\[0\]\.props" must be an object/,
      ],
      [
        '[{ "binding": "GREETING", "service": "api" }]',
        '\n  "vars": { "GREETING": "hi" },',
        /^cell\.jsonc:5:18: "services\[0\]\.binding" names GREETING, which vars also binds/,
      ],
      [
        '[{ "binding": "CACHE", "service": "api" }]',
        '\n  "kv_namespaces": [{ "binding": "CACHE", "id": "c" }],',
        /"services\[0\]\.binding" names CACHE, which a KV namespace also binds/,
      ],
      [
        '[{ "binding": "FILES", "service": "api" }]',
        '\n  "r2_buckets": [{ "binding": "FILES", "bucket_name": "files" }],',
        /"services\[0\]\.binding" names FILES, which an R2 bucket also binds/,
      ],
      [
        '[{ "binding": "ASSETS", "service": "api" }]',
        '\n  "assets": { "directory": "public", "binding": "ASSETS" },',
        /"services\[0\]\.binding" names ASSETS, which assets\.binding also binds/,
      ],
      [
        '[{ "binding": "A", "service": "api" }, { "binding": "A", "service": "b" }]',
        '',
        /"services\[1\]\.binding" names A, which an earlier service binding binds/,
      ],
    ];
    for (const [services, extra, expected] of cases) {
      const err = refusal(config(services, extra));
      assert.match(err.message, expected, services);
    }
    assert.match(
      refusal(
        '{\n  "compatibility_date": "2025-01-01",\n  "assets": { "directory": "public" },\n  "services": [{ "binding": "A", "service": "api" }]\n}',
      ).message,
      /^cell\.jsonc:4:3: "services" needs a worker: set "main"/,
    );
  });
});

describe('d1_databases (docs/bindings.md "D1 databases")', () => {
  const config = (d1: string, extra = '') =>
    `{\n  "main": "a.js",\n  "compatibility_date": "2025-01-01",${extra}\n  "d1_databases": ${d1}\n}`;

  it('reads each binding, database_name, database_id and migrations settings; ignores preview_database_id with a warning', () => {
    const parsed = parseWorkerConfig(
      config(
        '[{ "binding": "DB", "database_name": "main-db", "database_id": "8f6e" }, { "binding": "LOGS", "database_name": "logs", "migrations_dir": "sql", "migrations_table": "applied", "preview_database_id": "p" }]',
      ),
      'cell.jsonc',
    );
    assert.deepEqual(parsed.d1_databases, [
      { binding: 'DB', database_name: 'main-db', database_id: '8f6e' },
      { binding: 'LOGS', database_name: 'logs', migrations_dir: 'sql', migrations_table: 'applied' },
    ]);
    assert.equal(parsed.warnings.length, 1);
    assert.match(
      parsed.warnings[0]!,
      /ignoring "d1_databases\[1\]\.preview_database_id": svc has no preview databases/,
    );
    assert.deepEqual(parseWorkerConfig(config('[]'), 'cell.jsonc').d1_databases, []);
  });

  it('refuses a bad declaration at the offending key', () => {
    const cases: [string, string, RegExp][] = [
      ['{ "binding": "DB" }', '', /cell\.jsonc:4:3: "d1_databases" must be a list/],
      ['[{ "database_name": "a" }]', '', /"d1_databases\[0\]" needs "binding"/],
      ['[{ "binding": "DB" }]', '', /"d1_databases\[0\]" needs "database_name"/],
      [
        '[{ "binding": "1DB", "database_name": "a" }]',
        '',
        /"d1_databases\[0\]\.binding" must be a binding name/,
      ],
      [
        '[{ "binding": "DB", "database_name": "a b" }]',
        '',
        /"d1_databases\[0\]\.database_name" must be a D1 database name/,
      ],
      [
        '[{ "binding": "DB", "database_name": "a" }, { "binding": "DB", "database_name": "b" }]',
        '',
        /names DB, which an earlier D1 database binds/,
      ],
      [
        '[{ "binding": "CACHE", "database_name": "a" }]',
        '\n  "kv_namespaces": [{ "binding": "CACHE", "id": "c" }],',
        /names CACHE, which a KV namespace also binds/,
      ],
      [
        '[{ "binding": "DB", "database_name": "a", "migrations_dir": 3 }]',
        '',
        /"d1_databases\[0\]\.migrations_dir" must be a non-empty string/,
      ],
    ];
    for (const [d1, extra, expected] of cases)
      assert.throws(() => parseWorkerConfig(config(d1, extra), 'cell.jsonc'), expected, d1);
  });
});
