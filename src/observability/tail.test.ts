import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pretty } from '../cli/tail.ts';
import { Problem } from '../problem.ts';
import {
  filterQuery,
  keeps,
  keepsAll,
  parseFilters,
  parseMessage,
  runtimeMessage,
  type TailMessage,
} from './tail.ts';
import { LineBuffer, TailOutput } from './tail-sources.ts';

const where = { node: 'n1', application: 'shop' };

function request(method: string, url: string, outcome = 'ok', status = 200): TailMessage {
  return {
    ...runtimeMessage(where, ''),
    kind: 'request',
    outcome,
    event: { request: { method, url }, response: { status } },
    durationMs: 1.5,
    message: undefined,
  } as TailMessage;
}

function log(text: string): TailMessage {
  return {
    ...runtimeMessage(where, ''),
    kind: 'log',
    logs: [{ message: [text], level: 'log', timestamp: 1 }],
  };
}

function exception(name: string, message: string): TailMessage {
  return {
    ...runtimeMessage(where, ''),
    kind: 'exception',
    outcome: 'exception',
    exceptions: [{ name, message, timestamp: 1 }],
  };
}

test('filters are read from the query and sent on to other nodes unchanged', () => {
  const filters = parseFilters({
    status: ['ok', 'error,canceled'],
    method: 'post',
    search: 'cart',
    sampling_rate: '0.5',
    node: ['n1', 'n2'],
  });
  assert.deepEqual(filters, {
    status: ['ok', 'error', 'canceled'],
    method: ['POST'],
    search: 'cart',
    samplingRate: 0.5,
    node: ['n1', 'n2'],
  });
  const query = filterQuery(filters);
  const sent: Record<string, string[]> = {};
  for (const key of new Set(query.keys())) sent[key] = query.getAll(key);
  assert.deepEqual(parseFilters(sent), filters);
  assert.deepEqual(parseFilters({}), {});
  assert.ok(keepsAll(parseFilters({ node: 'n1' })), 'a node filter needs no parsing of lines');
  assert.ok(!keepsAll(parseFilters({ search: 'x' })));
});

test('a bad filter is refused naming the flag', () => {
  const refused = (query: Record<string, string>, title: string) =>
    assert.throws(
      () => parseFilters(query),
      (err: unknown) => err instanceof Problem && err.code === 'invalid-input' && err.title === title,
    );
  refused({ status: 'failed' }, 'Invalid --status');
  refused({ method: 'GE T' }, 'Invalid --method');
  refused({ search: 'x'.repeat(1025) }, 'Invalid --search');
  for (const rate of ['0', '-1', '1.01', 'NaN', 'half', ' '])
    refused({ sampling_rate: rate }, 'Invalid --sampling-rate');
  refused({ node: 'Not A Node' }, 'Invalid --node-id');
});

test('status and method keep requests; console lines belong to no request; exceptions are errors', () => {
  const errors = parseFilters({ status: 'error' });
  assert.ok(keeps(request('GET', 'http://x/', 'exception', 500), errors));
  assert.ok(
    keeps(request('GET', 'http://x/', 'exceededCpu', 503), errors),
    'error is every outcome but ok and canceled',
  );
  assert.ok(!keeps(request('GET', 'http://x/'), errors));
  assert.ok(!keeps(request('GET', 'http://x/', 'canceled'), errors));
  assert.ok(keeps(exception('TypeError', 'x'), errors));
  assert.ok(!keeps(log('a line'), errors));
  assert.ok(keeps(runtimeMessage(where, 'cell: serving'), errors), 'runtime lines always pass');

  const posts = parseFilters({ method: 'POST' });
  assert.ok(keeps(request('POST', 'http://x/'), posts));
  assert.ok(!keeps(request('GET', 'http://x/'), posts));
  assert.ok(!keeps(log('a line'), posts));
  assert.ok(!keeps(exception('Error', 'x'), posts));
});

test('search looks in the URL, the console line and the exception; sampling keeps a share', () => {
  const cart = parseFilters({ search: 'cart' });
  assert.ok(keeps(request('GET', 'http://x/cart'), cart));
  assert.ok(!keeps(request('GET', 'http://x/home'), cart));
  assert.ok(keeps(log('cart for 42'), cart));
  assert.ok(!keeps(log('home'), cart));
  assert.ok(keeps(exception('Error', 'the cart is empty'), cart));
  const half = parseFilters({ sampling_rate: '0.5' });
  assert.ok(keeps(log('x'), half, () => 0.49));
  assert.ok(!keeps(log('x'), half, () => 0.5));
});

test('a line that is no record (the socket hello, a cut-off line) is none', () => {
  assert.equal(parseMessage('{"kind":"hello","node":"n1"}'), null);
  assert.equal(parseMessage('{"kind":"requ'), null);
  assert.equal(parseMessage(JSON.stringify(log('x')))?.kind, 'log');
});

test('whole lines only, across chunks', () => {
  const lines = new LineBuffer();
  assert.equal(lines.push('{"a":'), '');
  assert.equal(lines.push('1}\n{"b"'), '{"a":1}\n');
  assert.equal(lines.push(':2}\n{"c":3}\n'), '{"b":2}\n{"c":3}\n');
});

test('a client that does not read loses records past the bound, counted and told with the next write', async () => {
  // A writable that takes nothing until told: its buffered length grows as a stalled socket's does.
  let release: (() => void) | null = null;
  const written: string[] = [];
  const stalled = new Writable({
    highWaterMark: 16,
    write(chunk, _encoding, done) {
      written.push(String(chunk));
      release = done;
    },
  });
  const out = new TailOutput(stalled, where, 100);
  const line = `${JSON.stringify(log('x'.repeat(60)))}\n`;
  out.lines(line); // taken by the writable, which holds it: its length is now over the bound
  out.lines(line.repeat(2)); // dropped: 2 records
  out.message(log('y')); // dropped: 1 record
  assert.equal(written.length, 1);
  (release as (() => void) | null)?.();
  await new Promise((resolve) => setImmediate(resolve));
  out.lines(line);
  (release as (() => void) | null)?.();
  await new Promise((resolve) => setImmediate(resolve));
  const records = written
    .join('')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as TailMessage);
  assert.deepEqual(
    records.map((r) => r.kind),
    ['log', 'dropped', 'log'],
  );
  const notice = records[1]!;
  assert.equal(notice.dropped, 3);
  assert.equal(notice.node, 'n1');
  assert.match(notice.message!, /^3 records dropped by the node on node n1: this tail read too slowly$/);
});

test("pretty: wrangler tail's request line, then console lines and exceptions under it", () => {
  const at = new Date(1795660196027).toLocaleString();
  assert.equal(
    pretty({ ...request('GET', 'https://shop.example/cart'), eventTimestamp: 1795660196027 }),
    `GET https://shop.example/cart - Ok @ ${at} [n1] 200 1.5 ms`,
  );
  assert.equal(
    pretty({
      ...request('POST', 'https://shop.example/pay', 'exception', 500),
      eventTimestamp: 1795660196027,
    }),
    `POST https://shop.example/pay - Exception Thrown @ ${at} [n1] 500 1.5 ms`,
  );
  assert.equal(pretty(log('cart for 42')), '  (log) [n1] cart for 42');
  assert.equal(pretty(exception('TypeError', 'x is undefined')), '  ✘ [n1] TypeError: x is undefined');
  assert.equal(pretty(runtimeMessage(where, 'cell: serving shop')), '  [n1] cell: serving shop');
});
