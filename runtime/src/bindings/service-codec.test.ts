// The value codec of JS RPC to another application (docs/bindings.md "Service bindings"), loaded
// from the very source workerd runs: every value it carries comes back equal (same types, NaN,
// -0, holes read as undefined), through JSON text, and what it cannot carry is refused with a
// TypeError naming the value and where it sits.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SERVICE_CODEC_SOURCE } from './service-codec.ts';

const codec = (await import(`data:text/javascript,${encodeURIComponent(SERVICE_CODEC_SOURCE)}`)) as {
  encodeValue(value: unknown, path?: string): unknown;
  decodeValue(tree: unknown): unknown;
};

const roundTrip = (value: unknown) => codec.decodeValue(JSON.parse(JSON.stringify(codec.encodeValue(value))));

const TYPED = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
] as const;

const leaf = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.double(),
  fc.constantFrom(Number.NaN, -0, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.bigInt(),
  fc.string({ unit: 'binary' }),
  fc.date({ noInvalidDate: false }),
  fc.constantFrom(/a+b/giu, /x/, /[\]/]/ms),
  fc.uint8Array().map((bytes) => bytes.buffer),
  fc
    .tuple(fc.constantFrom(...TYPED), fc.uint8Array({ maxLength: 64 }))
    .map(
      ([View, bytes]) =>
        new View(bytes.buffer.slice(0, bytes.length - (bytes.length % View.BYTES_PER_ELEMENT))),
    ),
  fc.bigInt64Array(),
  fc.uint8Array().map((bytes) => new DataView(bytes.buffer)),
  fc
    .tuple(fc.constantFrom(Error, TypeError, RangeError, SyntaxError), fc.string())
    .map(([Kind, message]) => new Kind(message)),
);

const value = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, leaf, tie('array'), tie('object'), tie('map'), tie('set')),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.dictionary(fc.string(), tie('value'), { maxKeys: 5, noNullPrototype: true }),
  map: fc.array(fc.tuple(tie('value'), tie('value')), { maxLength: 4 }).map((entries) => new Map(entries)),
  set: fc.array(tie('value'), { maxLength: 4 }).map((items) => new Set(items)),
})).value;

describe('the JS RPC value codec', () => {
  it('brings back every value it carries, through JSON', () => {
    fc.assert(
      fc.property(value, (v) => {
        assert.deepStrictEqual(roundTrip(v), v);
      }),
      { numRuns: 500 },
    );
  });

  it('keeps -0, NaN, a key named __proto__, an error kind and cause, and a view of part of a buffer', () => {
    assert.ok(Object.is(roundTrip(-0), -0));
    assert.ok(Number.isNaN(roundTrip(Number.NaN)));
    const tricky = JSON.parse('{"__proto__": {"polluted": 1}}');
    const back = roundTrip(tricky) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(back), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(back, '__proto__')?.value, { polluted: 1 });
    const error = roundTrip(new RangeError('out', { cause: 7n })) as Error;
    assert.ok(error instanceof RangeError);
    assert.equal(error.message, 'out');
    assert.equal(error.cause, 7n);
    const part = new Uint16Array(new Uint8Array([1, 2, 3, 4, 5, 6]).buffer, 2, 2);
    assert.deepStrictEqual(roundTrip(part), new Uint16Array([part[0]!, part[1]!]));
    // Structured clone keeps only the standard error kinds.
    class QuotaError extends Error {
      override name = 'QuotaError';
    }
    const custom = roundTrip(new QuotaError('full')) as Error;
    assert.deepEqual([custom.constructor, custom.name, custom.message], [Error, 'Error', 'full']);
  });

  it('refuses a function, a stream, a class instance, a symbol and a cycle, naming where it sits', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const cases: [unknown, RegExp][] = [
      [{ a: [1, () => 2] }, /^cannot send a function \(at argument 1\.a\[1\]\)/],
      [new ReadableStream(), /^cannot send a ReadableStream \(at argument 1\)/],
      [new Map([[1, new (class Stub {})()]]), /^cannot send a Stub \(at argument 1\.get\(\.\.\.\)\)/],
      [Symbol('s'), /^cannot send a symbol/],
      [cyclic, /^cannot send a value that contains itself \(at argument 1\.self\)/],
    ];
    for (const [v, message] of cases)
      assert.throws(
        () => codec.encodeValue(v, 'argument 1'),
        (err: Error) => err instanceof TypeError && message.test(err.message),
      );
  });

  it('refuses a tree it could not have written', () => {
    for (const tree of [['?'], { a: 1 }, ['v', 'Nope', '']])
      assert.throws(() => codec.decodeValue(tree), /not a value of the RPC codec/);
  });
});
