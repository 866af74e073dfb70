// The ingress client's failure reports (docs/ingress.md "The storage protocol (version 1)": clients report
// `title` and `detail` when present, otherwise the status alone), against a local HTTP server answering what
// each case needs.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { IngressClient, IngressError } from './helpers/ingress-client.ts';

let server: Server;
let client: IngressClient;
const seen: { url: string; authorization?: string; version?: string }[] = [];

before(async () => {
  server = createServer((req, res) => {
    seen.push({
      url: req.url ?? '',
      authorization: req.headers.authorization,
      version: req.headers['x-svc-storage-version'] as string | undefined,
    });
    const answers: Record<string, [number, string, string]> = {
      '/prefix/v1/storage/objects/full': [
        409,
        'application/problem+json',
        '{"type":"urn:svc:cas-conflict","title":"Lock is held","status":409,"detail":"try later"}',
      ],
      '/prefix/v1/storage/objects/title': [
        400,
        'application/problem+json',
        '{"type":"urn:svc:invalid-input","title":"Invalid storage key","status":400}',
      ],
      '/prefix/v1/storage/objects/html': [502, 'text/html', '<h1>Bad gateway</h1>'],
      '/prefix/v1/storage/objects/a%20b/c%2Fd': [200, 'application/octet-stream', 'ok'],
    };
    const [status, type, body] = answers[req.url ?? ''] ?? [
      404,
      'application/problem+json',
      '{"title":"No such key","status":404}',
    ];
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = new IngressClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix/`, ' tok \n');
});
after(() => server.close());

async function failure(key: string): Promise<IngressError> {
  try {
    await client.get(key);
  } catch (err) {
    assert.ok(err instanceof IngressError);
    return err;
  }
  throw new Error(`${key} did not fail`);
}

test('a problem document is reported as title and detail, with its status and type', async () => {
  const err = await failure('full');
  assert.equal(err.message, 'Lock is held: try later');
  assert.equal(err.status, 409);
  assert.equal(err.type, 'urn:svc:cas-conflict');
  assert.equal((await failure('title')).message, 'Invalid storage key');
});

test('anything else is reported as the status alone', async () => {
  const err = await failure('html');
  assert.equal(err.message, 'HTTP 502');
  assert.equal(err.title, undefined);
});

test('404 reads as missing; the base path prefix is kept; token trimmed; version header sent', async () => {
  assert.equal(await client.get('nothing/here'), null);
  assert.deepEqual(await client.get('a b/c/d'), null, 'a slash in a key is a separator, not %2F');
  const value = await client.request('GET', '/v1/storage/objects/a%20b/c%2Fd');
  assert.equal(await value.text(), 'ok');
  const last = seen.at(-1)!;
  assert.equal(last.authorization, 'Bearer tok');
  assert.equal(last.version, '1');
  assert.ok(seen.every((s) => s.url.startsWith('/prefix/v1/')));
});
