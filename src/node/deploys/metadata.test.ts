// The x-svc-deploy parser: examples of every refusal, the canonical round trip, and properties
// (any string answers a document or `invalid-input` "Malformed request", never anything else).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Problem } from '../../problem.ts';
import { encodeDeployMetadata, MAX_METADATA_CHARS, parseDeployMetadata } from './metadata.ts';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

function refused(header: string | string[] | undefined, detail?: RegExp): void {
  assert.throws(
    () => parseDeployMetadata(header),
    (err: unknown) => {
      assert.ok(err instanceof Problem, `expected a Problem, got ${String(err)}`);
      assert.equal(err.code, 'invalid-input');
      assert.equal(err.title, 'Malformed request');
      assert.equal(err.status, 400);
      if (detail) assert.match(err.detail ?? '', detail);
      return true;
    },
  );
}

test('an absent header is the empty document', () => {
  assert.deepEqual(parseDeployMetadata(undefined), {});
  assert.deepEqual(parseDeployMetadata(b64('{}')), {});
});

test('the canonical form round-trips', () => {
  const metadata = {
    replicas: 3,
    nodeSelector: { zone: 'eu', 'disk-type': 'ssd' },
    source: { provider: 'github', repo: 'acme/shop', ref: 'refs/heads/main', commit: 'abc123' },
  };
  assert.deepEqual(parseDeployMetadata(encodeDeployMetadata(metadata)), metadata);
  assert.deepEqual(parseDeployMetadata(encodeDeployMetadata({ replicas: 'all' })), { replicas: 'all' });
  assert.deepEqual(parseDeployMetadata(encodeDeployMetadata({ replicas: null, nodeSelector: null })), {
    replicas: null,
    nodeSelector: null,
  });
});

test('other members are ignored', () => {
  assert.deepEqual(parseDeployMetadata(b64('{"note":"hi","replicas":2}')), { replicas: 2 });
});

test('encoding refusals: padding, characters outside base64url, over-long, non-canonical base64', () => {
  refused(`${b64('{}')}=`, /base64url/);
  refused('e30=', /base64url/);
  refused('e3+0', /base64url/);
  refused('', /base64url/);
  refused('e 30', /base64url/);
  refused('A'.repeat(MAX_METADATA_CHARS + 1), /at most 8192/);
  // "e31" decodes to the same bytes as "e30" but carries non-zero trailing bits.
  refused('e31', /canonical base64url/);
  refused('e', /canonical base64url/);
  refused([b64('{}'), b64('{}')], /one x-svc-deploy/);
});

test('text refusals: invalid UTF-8, not JSON', () => {
  refused(Buffer.from([0x7b, 0xff, 0x7d]).toString('base64url'), /UTF-8/);
  refused(b64('{'), /JSON/);
  refused(b64('{"replicas":1'), /JSON/);
});

test('canonical JSON: whitespace, duplicate keys, other escapes and number forms are refused', () => {
  refused(b64('{ }'), /canonical JSON/);
  refused(b64('{"replicas": 2}'), /canonical JSON/);
  refused(b64('{"replicas":2}\n'), /canonical JSON/);
  refused(b64('{"replicas":2,"replicas":2}'), /canonical JSON/);
  refused(b64('{"a":"\\u0061"}'), /canonical JSON/);
  refused(b64('{"a":"\\/"}'), /canonical JSON/);
  refused(b64('{"replicas":2.0}'), /canonical JSON/);
  refused(b64('{"replicas":2e0}'), /canonical JSON/);
  // An integer-like key is moved first by JSON.parse: the given order cannot be kept.
  refused(b64('{"b":"x","1":"y"}'), /canonical JSON/);
});

test('the document and source must be objects', () => {
  refused(b64('[]'), /JSON object/);
  refused(b64('null'), /JSON object/);
  refused(b64('"x"'), /JSON object/);
  refused(b64('{"source":[]}'), /source/);
  refused(b64('{"source":null}'), /source/);
});

test('refused names: application, oidc, source.oidcSub', () => {
  refused(b64('{"application":"shop"}'), /"application"/);
  refused(b64('{"oidc":{}}'), /"oidc"/);
  const source = { provider: 'github', repo: 'a/b', ref: 'main', commit: 'c', oidcSub: 'x' };
  refused(b64(JSON.stringify({ source })), /source\.oidcSub/);
});

test('source needs four non-empty strings', () => {
  const full = { provider: 'github', repo: 'a/b', ref: 'main', commit: 'c' };
  for (const field of ['provider', 'repo', 'ref', 'commit'] as const) {
    refused(b64(JSON.stringify({ source: { ...full, [field]: '' } })), new RegExp(`source\\.${field}`));
    const { [field]: _dropped, ...rest } = full;
    refused(b64(JSON.stringify({ source: rest })), new RegExp(`source\\.${field}`));
    refused(b64(JSON.stringify({ source: { ...full, [field]: 1 } })), new RegExp(`source\\.${field}`));
  }
});

test('placement members: replicas and nodeSelector shapes', () => {
  for (const bad of [0, -1, 1.5, '2', true, [], {}])
    refused(b64(JSON.stringify({ replicas: bad })), /replicas/);
  for (const bad of [[], 'zone=eu', { zone: 1 }, 3]) {
    refused(b64(JSON.stringify({ nodeSelector: bad })), /nodeSelector/);
  }
  assert.deepEqual(parseDeployMetadata(b64('{"nodeSelector":{}}')), { nodeSelector: {} });
});

test('a __proto__ key stays a plain key', () => {
  const parsed = parseDeployMetadata(b64('{"nodeSelector":{"__proto__":"x"}}'));
  assert.equal(Object.getPrototypeOf(parsed.nodeSelector), Object.prototype);
  assert.deepEqual(Object.keys(parsed.nodeSelector!), ['__proto__']);
});

/** Whatever the input, the parser answers a document or the one refusal. */
function answersOrRefuses(header: string): void {
  try {
    parseDeployMetadata(header);
  } catch (err) {
    assert.ok(err instanceof Problem, `threw a non-Problem: ${String(err)}`);
    assert.equal(err.code, 'invalid-input');
    assert.equal(err.title, 'Malformed request');
  }
}

test('property: any string is a document or invalid-input', () => {
  fc.assert(fc.property(fc.string({ maxLength: 200 }), answersOrRefuses), { numRuns: 2000 });
  fc.assert(fc.property(fc.stringMatching(/^[A-Za-z0-9_-]{0,120}$/), answersOrRefuses), { numRuns: 2000 });
});

test('property: any bytes, base64url-encoded, are a document or invalid-input', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) =>
      answersOrRefuses(Buffer.from(bytes).toString('base64url')),
    ),
    { numRuns: 2000 },
  );
});

test('property: any JSON value, canonically encoded, parses or is refused with the one problem', () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
      const header = b64(JSON.stringify(value));
      if (header.length === 0) return;
      answersOrRefuses(header);
    }),
    { numRuns: 2000 },
  );
});

test('property: re-formatted JSON with whitespace is refused', () => {
  fc.assert(
    fc.property(
      fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 8 }), { minKeys: 1 }),
      (selector) => {
        const pretty = JSON.stringify({ nodeSelector: selector }, null, 1);
        refused(b64(pretty), /canonical JSON/);
      },
    ),
    { numRuns: 300 },
  );
});

test('property: what svc deploy encodes, the node parses back to the same document', () => {
  const selector = fc.dictionary(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }), { maxKeys: 6 });
  const nonEmpty = fc.string({ minLength: 1, maxLength: 20 });
  fc.assert(
    fc.property(
      fc.record(
        {
          replicas: fc.oneof(fc.constant('all' as const), fc.integer({ min: 1, max: 1000 })),
          nodeSelector: selector,
          source: fc.record({ provider: nonEmpty, repo: nonEmpty, ref: nonEmpty, commit: nonEmpty }),
        },
        { requiredKeys: [] },
      ),
      (metadata) => {
        // fast-check builds null-prototype objects; the wire carries plain ones.
        const plain = JSON.parse(JSON.stringify(metadata));
        assert.deepEqual(parseDeployMetadata(encodeDeployMetadata(plain)), plain);
      },
    ),
    { numRuns: 1000 },
  );
});
