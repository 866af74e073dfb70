// Shared vectors of docs/routing-vectors.md (docs/ingress.md "The routing document", "The Traefik format"):
// every file's input must render to its expected documents byte for byte.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { renderProxyb, renderProxybBytes, serializeProxyb } from './proxyb.ts';
import { renderRouting, resolvePrefer, serializeRouting } from './render.ts';
import { resolveRequest } from './resolve.ts';
import type { FleetRouting, RoutingInput } from './types.ts';

interface Lookup {
  host: string;
  path: string;
  route: string;
  matched: string;
  application?: string;
  upstreams?: unknown[];
}

export interface Vector {
  name: string;
  description: string;
  input: RoutingInput;
  entryPoints: string[];
  expected: FleetRouting;
  expectedPrefer: Record<string, FleetRouting>;
  proxyb: Record<string, unknown>;
  lookups?: Lookup[];
}

const dir = new URL('../../testdata/routing/', import.meta.url);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

/** Independent of the renderers' construction order: keys sorted recursively. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v as object)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]]),
        )
      : v,
  );
}

test('there are at least 25 vectors', () => {
  assert.ok(files.length >= 25, `only ${files.length} vectors`);
});

for (const file of files) {
  const vector = JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Vector;

  test(`vector ${file}`, () => {
    assert.equal(vector.name, file.replace(/\.json$/, ''));
    assert.ok(vector.description.length > 40, 'a vector explains itself');
    assert.ok('' in vector.proxyb, 'proxyb has the no-prefer key ""');
    assert.ok(!('' in vector.expectedPrefer), 'the no-prefer document is "expected"');

    const plain = renderRouting(vector.input);
    assert.deepEqual(plain, vector.expected);
    assert.equal(serializeRouting(plain), JSON.stringify(vector.expected));
    assert.deepEqual(renderRouting(vector.input, ''), plain, 'empty prefer is the fleet order');

    for (const [prefer, expected] of Object.entries(vector.expectedPrefer)) {
      const doc = renderRouting(vector.input, prefer);
      assert.deepEqual(doc, expected, `prefer=${prefer}`);
      assert.equal(serializeRouting(doc), JSON.stringify(expected), `prefer=${prefer} bytes`);
      assert.ok(prefer in vector.proxyb, `proxyb also has prefer=${prefer}`);
    }

    for (const [prefer, expected] of Object.entries(vector.proxyb)) {
      const doc = renderRouting(vector.input, prefer);
      const preferNode = resolvePrefer(prefer, vector.input.selfNodeId);
      const config = renderProxyb(doc, { entryPoints: vector.entryPoints, preferNode });
      assert.deepEqual(config, expected, `proxyb prefer=${prefer}`);
      const bytes = serializeProxyb(config);
      assert.equal(bytes, JSON.stringify(expected), `proxyb prefer=${prefer} bytes`);
      assert.equal(bytes, canonical(expected), `proxyb prefer=${prefer} keys sorted`);
      const served = renderProxybBytes(doc, { entryPoints: vector.entryPoints, preferNode });
      assert.equal(served, bytes, `proxyb prefer=${prefer} served bytes`);
    }

    for (const { host, path, ...want } of vector.lookups ?? []) {
      assert.deepEqual(resolveRequest(vector.expected, host, path), want, `lookup ${host}${path}`);
    }
  });
}
