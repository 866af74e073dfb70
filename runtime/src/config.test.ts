// Worker config parsing (docs/runtime.md): the wrangler keys, the
// refused `env` key, and refusals that name the file, the key and the fix.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseWorkerConfig } from './config.ts';
import { CellError } from './errors.ts';

const parse = (text: string) => parseWorkerConfig(text, 'cell.jsonc', { maxCompatibilityDate: '2026-11-17' });

function refusal(text: string): string {
  try {
    parse(text);
  } catch (err) {
    assert.ok(err instanceof CellError, `expected a CellError, got ${err}`);
    return err.message;
  }
  assert.fail('expected a refusal');
}

describe('worker config', () => {
  it('reads the wrangler keys, with comments and trailing commas', () => {
    const config = parse(`{
      // a comment
      "name": "hello",
      "main": "src/index.js",
      "compatibility_date": "2025-06-01",
      "compatibility_flags": ["nodejs_compat"],
      "vars": { "GREETING": "hi", "LIMITS": { "n": 3 } },
      "assets": { "directory": "./public", "binding": "ASSETS" },
      "no_bundle": true,
    }`);
    assert.equal(config.name, 'hello');
    assert.equal(config.main, 'src/index.js');
    assert.deepEqual(config.compatibility_flags, ['nodejs_compat']);
    assert.deepEqual(config.vars, { GREETING: 'hi', LIMITS: { n: 3 } });
    assert.deepEqual(config.assets, {
      directory: './public',
      binding: 'ASSETS',
      html_handling: 'auto-trailing-slash',
      not_found_handling: 'none',
      run_worker_first: false,
    });
    assert.equal(config.no_bundle, true);
    assert.deepEqual(config.ignored, []);
  });

  it('refuses a top-level env key, saying what to do instead', () => {
    const message = refusal('{"main":"a.js","compatibility_date":"2025-01-01","env":{"staging":{}}}');
    assert.match(message, /"env" is not supported/);
    assert.match(message, /svc deploy --env/);
  });

  it('names the line and column of a syntax error', () => {
    assert.match(refusal('{\n  "main": "a.js",\n  "compatibility_date" "x"\n}'), /^cell\.jsonc:3:\d+: /);
  });

  it('requires a compatibility date written as a real date, not newer than workerd', () => {
    assert.match(refusal('{"main":"a.js"}'), /"compatibility_date" is required/);
    assert.match(refusal('{"main":"a.js","compatibility_date":"2025-02-30"}'), /YYYY-MM-DD/);
    assert.match(refusal('{"main":"a.js","compatibility_date":"2099-01-01"}'), /newer than .* 2026-11-17/);
  });

  it('requires main unless the deployment is assets alone', () => {
    assert.match(refusal('{"compatibility_date":"2025-01-01"}'), /"main" is required/);
    assert.equal(parse('{"compatibility_date":"2025-01-01","assets":{"directory":"p"}}').main, null);
  });

  it('refuses bad names, vars and bindings of other products', () => {
    assert.match(
      refusal('{"name":"Hello","main":"a.js","compatibility_date":"2025-01-01"}'),
      /"name" must be/,
    );
    assert.match(
      refusal('{"name":"images","main":"a.js","compatibility_date":"2025-01-01"}'),
      /"name" must be/,
    );
    assert.match(refusal('{"main":"a.js","compatibility_date":"2025-01-01","vars":{"1X":"a"}}'), /vars\.1X/);
    assert.match(
      refusal('{"main":"a.js","compatibility_date":"2025-01-01","vars":{"A":null}}'),
      /vars\.A" is null/,
    );
    assert.match(
      refusal(
        '{"main":"a.js","compatibility_date":"2025-01-01","vectorize":[{"binding":"DB","index_name":"x"}]}',
      ),
      /"vectorize" declares bindings this runtime does not provide yet \(DB\)/,
    );
    assert.match(refusal('{"main":"a.js","compatibility_date":"2025-01-01","no_bundle":"yes"}'), /no_bundle/);
    assert.match(refusal('[]'), /must be a JSON object/);
  });

  it('lists unknown keys to warn about, and drops Cloudflare-only ones quietly', () => {
    const config = parse('{"main":"a.js","compatibility_date":"2025-01-01","account_id":"x","mystery":1}');
    assert.deepEqual(config.ignored, ['mystery']);
    assert.deepEqual(config.warnings, ['cell.jsonc:1:67: ignoring "mystery": this runtime does not use it']);
  });

  it('reads empty binding declarations, as framework builds write them, as no bindings', () => {
    const config = parse(
      '{"main":"a.js","compatibility_date":"2025-01-01","kv_namespaces":[],"durable_objects":{"bindings":[]},"unsafe":{},"tail_consumers":[],"mystery":"h"}',
    );
    assert.deepEqual(config.ignored, ['mystery']);
    assert.equal(config.warnings.length, 1);
    const generated = parse(
      '{"main":"a.js","compatibility_date":"2025-01-01","jsx_factory":"React.createElement","jsx_fragment":"React.Fragment","worker_loaders":[],"vpc_services":[]}',
    );
    assert.deepEqual(
      generated.warnings,
      [],
      "wrangler's defaults, as generated configs spell them, say nothing",
    );
    assert.match(
      refusal(
        '{"main":"a.js","compatibility_date":"2025-01-01","pipelines":[{"binding":"EVENTS","pipeline":"p"}]}',
      ),
      /"pipelines" declares bindings this runtime does not provide yet \(EVENTS\): the section Pipelines of/,
    );
  });

  it('refuses every binding in one run, in file order, each at its key, with advice that keeps the app', () => {
    const text = [
      '{',
      '  "main": "a.js",',
      '  "hyperdrive": [{ "binding": "FILES", "bucket_name": "f" }],',
      '  "compatibility_date": "2025-01-01",',
      '  "vectorize": [{ "binding": "DB", "index_name": "1" }, { "binding": "LOGS", "index_name": "2" }],',
      '  "ai": { "binding": "AI" },',
      '  "queues": []',
      '}',
    ].join('\n');
    const lines = refusal(text).split('\n');
    assert.equal(lines.length, 3);
    assert.match(
      lines[0]!,
      /^cell\.jsonc:3:3: "hyperdrive" declares bindings this runtime does not provide yet \(FILES\): the section Hyperdrive of svc's docs\/bindings\.md says when/,
    );
    assert.match(lines[1]!, /^cell\.jsonc:5:3: "vectorize" .*\(DB, LOGS\).*section Vectorize of/);
    assert.match(lines[2]!, /^cell\.jsonc:6:3: "ai" .*\(AI\).*section Workers AI of/);
    assert.doesNotMatch(refusal(text), /remove the key/);
  });

  it("places refusals and warnings where locate says the key is in the user's file", () => {
    const text =
      '{"main":"a.js","compatibility_date":"2025-01-01","pipelines":[{"binding":"Q","pipeline":"q"}],"mystery":1}';
    const at = { pipelines: { line: 7, column: 1 }, mystery: { line: 9, column: 3 } } as Record<
      string,
      { line: number; column: number }
    >;
    const locate = (path: (string | number)[]) => at[String(path[0])] ?? null;
    try {
      parseWorkerConfig(text, 'wrangler.toml', { locate });
      assert.fail('expected a refusal');
    } catch (err) {
      assert.match((err as Error).message, /^wrangler\.toml:7:1: "pipelines" declares bindings/);
    }
    const warned = parseWorkerConfig(
      '{"main":"a.js","compatibility_date":"2025-01-01","mystery":1}',
      'wrangler.toml',
      { locate },
    );
    assert.deepEqual(warned.warnings, [
      'wrangler.toml:9:3: ignoring "mystery": this runtime does not use it',
    ]);
  });
});
