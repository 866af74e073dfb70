import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { parseAccessLine } from './access-log.ts';

/** A line as Caddy's JSON access log writes it (trimmed of headers it does not need). */
function caddyLine(o: {
  host: string;
  uri: string;
  status: number;
  size: number;
  read: number;
  duration: number;
}) {
  return JSON.stringify({
    level: 'info',
    ts: 1763900000.123,
    logger: 'http.log.access.log0',
    msg: 'handled request',
    request: {
      remote_ip: '127.0.0.1',
      proto: 'HTTP/1.1',
      method: 'GET',
      host: o.host,
      uri: o.uri,
      headers: {},
    },
    bytes_read: o.read,
    user_id: '',
    duration: o.duration,
    size: o.size,
    status: o.status,
    resp_headers: { Server: ['Caddy'] },
  });
}

test('a Caddy access line gives host, status, bytes both ways and latency in ms', () => {
  const entry = parseAccessLine(
    caddyLine({ host: 'shop.svc.test', uri: '/a?b=1', status: 503, size: 12, read: 7, duration: 0.0125 }),
  );
  assert.deepEqual(entry, {
    host: 'shop.svc.test',
    uri: '/a?b=1',
    status: 503,
    bytesIn: 7,
    bytesOut: 12,
    durationMs: 12.5,
  });
});

test('lines that are not access entries are skipped', () => {
  for (const line of [
    '',
    'not json',
    '[]',
    'null',
    '{"logger":"http.log.error","request":{"host":"a"},"status":200,"duration":0}',
    '{"logger":"http.log.access","status":200,"duration":0}',
    '{"logger":"http.log.access","request":{"host":"a"},"status":"200","duration":0}',
    '{"logger":"http.log.access","request":{"host":"a"},"status":200,"duration":-1}',
    '{"logger":"http.log.access","request":{"host":"a"},"status":200,"duration":0,"size":-5}',
    '{"logger":"http.log.access","request":{"host":"a"},"status":200,"duration":0,"size":1.5}',
    '{"logger":"http.log.access","request":{"host":"a"},"status":1000,"duration":0}',
  ]) {
    assert.equal(parseAccessLine(line), null, line);
  }
});

test('any line: an entry with sane numbers, or null; never a throw', () => {
  const check = (line: string) => {
    const entry = parseAccessLine(line);
    if (entry === null) return;
    assert.ok(Number.isInteger(entry.status) && entry.status >= 0 && entry.status <= 999);
    assert.ok(Number.isSafeInteger(entry.bytesIn) && entry.bytesIn >= 0);
    assert.ok(Number.isSafeInteger(entry.bytesOut) && entry.bytesOut >= 0);
    assert.ok(Number.isFinite(entry.durationMs) && entry.durationMs >= 0);
    assert.equal(typeof entry.host, 'string');
  };
  fc.assert(fc.property(fc.string({ maxLength: 300 }), check), { numRuns: 3000 });
  fc.assert(fc.property(fc.json(), check), { numRuns: 3000 });
  fc.assert(
    fc.property(
      fc.record({
        logger: fc.constantFrom('http.log.access', 'http.log.access.log0', 'x', 5),
        request: fc.oneof(
          fc.record({ host: fc.oneof(fc.string(), fc.integer()), uri: fc.string() }),
          fc.anything(),
        ),
        status: fc.oneof(fc.integer({ min: -5, max: 1200 }), fc.double(), fc.string()),
        duration: fc.oneof(fc.double(), fc.integer(), fc.string()),
        size: fc.oneof(fc.integer(), fc.double(), fc.constant(undefined)),
        bytes_read: fc.oneof(fc.integer(), fc.bigInt().map(String), fc.constant(undefined)),
      }),
      (o) => check(JSON.stringify(o)),
    ),
    { numRuns: 3000 },
  );
});

test('generated Caddy lines parse back to what was logged', () => {
  fc.assert(
    fc.property(
      fc.record({
        host: fc.domain(),
        uri: fc.webPath(),
        status: fc.integer({ min: 100, max: 599 }),
        size: fc.nat(),
        read: fc.nat(),
        duration: fc.double({ min: 0, max: 120, noNaN: true }),
      }),
      (o) => {
        const entry = parseAccessLine(caddyLine(o));
        assert.ok(entry);
        assert.equal(entry.host, o.host);
        assert.equal(entry.status, o.status);
        assert.equal(entry.bytesOut, o.size);
        assert.equal(entry.bytesIn, o.read);
        assert.equal(entry.durationMs, o.duration * 1000);
      },
    ),
  );
});
