// The head parser of s3-http.ts's GET (http-head.ts) faces the network: property tests that no
// input makes it throw anything but HttpHeadError, that a head it was given whole parses back to
// its fields, and that a head cut anywhere is incomplete or the same answer, never another one.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { HttpHeadError, MAX_HEAD_BYTES, parseHttpHead } from './http-head.ts';

/** Parses or refuses cleanly; anything else fails the property. */
function parsesOrRefuses(bytes: Uint8Array): void {
  try {
    const head = parseHttpHead(bytes);
    if (head) {
      assert.ok(head.status >= 100 && head.status <= 999);
      assert.ok(head.length <= bytes.length && head.length <= MAX_HEAD_BYTES);
    }
  } catch (err) {
    if (!(err instanceof HttpHeadError)) throw err;
  }
}

const token = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,20}$/);
const fieldValue = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,40}[\x21-\x7e])?$/);
const field = fc.tuple(token, fieldValue).filter(([name]) => name.toLowerCase() !== 'content-length');

interface Head {
  status: number;
  reason: string;
  fields: [string, string][];
  contentLength: number | null;
  body: Uint8Array;
}

const heads = fc.record({
  status: fc.integer({ min: 100, max: 599 }),
  reason: fc.stringMatching(/^[\x20-\x7e]{0,20}$/),
  fields: fc.array(field, { maxLength: 12 }),
  contentLength: fc.option(fc.integer({ min: 0, max: 2 ** 40 }), { nil: null }),
  body: fc.uint8Array({ maxLength: 64 }),
});

function encode(head: Head): { bytes: Buffer; length: number } {
  let text = `HTTP/1.1 ${head.status} ${head.reason}\r\n`;
  for (const [name, value] of head.fields) text += `${name}: ${value}\r\n`;
  if (head.contentLength !== null) text += `Content-Length: ${head.contentLength}\r\n`;
  text += '\r\n';
  const top = Buffer.from(text, 'latin1');
  return { bytes: Buffer.concat([top, head.body]), length: top.length };
}

test('any bytes parse, are incomplete, or are refused with HttpHeadError', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 400 }), parsesOrRefuses), { numRuns: 3000 });
  // Bytes that look like a head: a status line, then lines of printable text, CR, LF and colons.
  const near = fc
    .array(
      fc.oneof(
        fc.constantFrom('HTTP/1.1 200 OK', 'HTTP/1.0 404', 'HTTP/2 200', '\r\n', '\r', '\n', ':', ' ', '\t'),
        fc.constantFrom(
          'Content-Length: 5',
          'content-length: 05',
          'Content-Length: -1',
          'Content-Length: 1e3',
        ),
        fc.constantFrom('Content-Length: 99999999999999999999', 'Transfer-Encoding: chunked', '\x00', '\xff'),
        token,
        fieldValue,
      ),
      { maxLength: 30 },
    )
    .map((parts) => Buffer.from(parts.join(''), 'latin1'));
  fc.assert(fc.property(near, parsesOrRefuses), { numRuns: 5000 });
  fc.assert(
    fc.property(heads, fc.uint8Array({ maxLength: 40 }), fc.nat(), (head, noise, at) => {
      const { bytes } = encode(head);
      const cut = at % (bytes.length + 1);
      parsesOrRefuses(Buffer.concat([bytes.subarray(0, cut), noise, bytes.subarray(cut)]));
    }),
    { numRuns: 3000 },
  );
});

test('a well-formed head parses to its status, fields, Content-Length and length', () => {
  fc.assert(
    fc.property(heads, (head) => {
      const { bytes, length } = encode(head);
      const parsed = parseHttpHead(bytes);
      assert.ok(parsed);
      assert.equal(parsed.status, head.status);
      assert.equal(parsed.length, length);
      assert.equal(parsed.contentLength, head.contentLength);
      const expected = Object.create(null) as Record<string, string>;
      for (const [name, value] of head.fields) {
        const lower = name.toLowerCase();
        expected[lower] = expected[lower] === undefined ? value : `${expected[lower]}, ${value}`;
      }
      if (head.contentLength !== null) expected['content-length'] = String(head.contentLength);
      assert.deepEqual(parsed.headers, { ...expected });
    }),
    { numRuns: 2000 },
  );
});

test('a head cut anywhere is incomplete, never another answer; given in a longer buffer, only `end` counts', () => {
  fc.assert(
    fc.property(heads, fc.nat(), (head, at) => {
      const { bytes, length } = encode(head);
      const cut = at % length;
      assert.equal(parseHttpHead(bytes, cut), null);
      assert.equal(parseHttpHead(bytes.subarray(0, cut)), null);
      assert.deepEqual(parseHttpHead(bytes, length), parseHttpHead(bytes));
    }),
    { numRuns: 2000 },
  );
});

test('refused: bare LF, folded lines, bad names, controls, bad or disagreeing Content-Length, too long', () => {
  const refused = [
    'HTTP/1.1 200 OK\nA: b\r\n\r\n',
    'HTTP/1.1 200 OK\r\nA: b\n\r\n\r\n',
    'HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n',
    'HTTP/1.1 200 OK\r\nA b: c\r\n\r\n',
    'HTTP/1.1 200 OK\r\n: c\r\n\r\n',
    'HTTP/1.1 200 OK\r\nA: b\x00c\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999\r\n\r\n',
    'HTTP/2 200\r\n\r\n',
    'HTTP/1.1 20 OK\r\n\r\n',
    'HTTP/1.1 099 OK\r\n\r\n',
    'http/1.1 200 OK\r\n\r\n',
    `HTTP/1.1 200 OK\r\nA: ${'b'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`,
  ];
  for (const text of refused)
    assert.throws(() => parseHttpHead(Buffer.from(text, 'latin1')), HttpHeadError, JSON.stringify(text));
  // A head still arriving past the bound is refused before its end arrives.
  assert.throws(() => parseHttpHead(Buffer.alloc(MAX_HEAD_BYTES + 1, 0x61)), HttpHeadError);
  assert.equal(parseHttpHead(Buffer.alloc(MAX_HEAD_BYTES, 0x61)), null);
  // Agreeing repeats are one length; a field named like an Object property is a field like another.
  const parsed = parseHttpHead(
    Buffer.from(
      'HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\ncontent-length: 3\r\nconstructor: x\r\n__proto__: y\r\n\r\nabc',
      'latin1',
    ),
  );
  assert.equal(parsed?.contentLength, 3);
  assert.equal(parsed?.headers.constructor, 'x');
  assert.equal(Object.getPrototypeOf(parsed?.headers), Object.prototype);
  assert.equal(Object.hasOwn(parsed!.headers, '__proto__'), true);
});
