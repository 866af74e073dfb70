// docs/observability.md "Prometheus metrics": GET /metrics answers the text format with its
// content type; with a token, a request without it or with another is 401 `auth-invalid` (Token
// rejected), whatever the path; anything but GET /metrics is 404 `not-found`.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type MetricsEndpoint, startMetricsEndpoint } from './endpoint.ts';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
const TEXT = '# HELP svc_x An example\n# TYPE svc_x gauge\nsvc_x 1\n';

async function answer(url: string, init: RequestInit = {}) {
  const response = await fetch(url, init);
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

function assertProblem(
  got: { status: number; type: string | null; text: string },
  status: number,
  code: string,
  title: string,
) {
  assert.equal(got.status, status, got.text);
  assert.equal(got.type, 'application/problem+json');
  const doc = JSON.parse(got.text);
  assert.equal(doc.type, `urn:svc:${code}`);
  assert.equal(doc.title, title);
  assert.equal(doc.status, status);
}

describe('without a token', () => {
  let endpoint: MetricsEndpoint;
  before(async () => {
    endpoint = await startMetricsEndpoint({
      listen: '127.0.0.1:0',
      exposition: async () => TEXT,
      contentType: CONTENT_TYPE,
    });
  });
  after(() => endpoint.close());

  test('GET /metrics answers the exposition with its content type', async () => {
    const got = await answer(`${endpoint.url}/metrics`);
    assert.equal(got.status, 200);
    assert.equal(got.type, CONTENT_TYPE);
    assert.equal(got.text, TEXT);
    assert.equal((await answer(`${endpoint.url}/metrics?name[]=x`)).status, 200);
  });

  test('any other path or method is 404', async () => {
    assertProblem(await answer(`${endpoint.url}/`), 404, 'not-found', 'Not found');
    assertProblem(await answer(`${endpoint.url}/metrics/x`), 404, 'not-found', 'Not found');
    assertProblem(
      await answer(`${endpoint.url}/metrics`, { method: 'POST', body: 'x' }),
      404,
      'not-found',
      'Not found',
    );
  });
});

describe('with a token', () => {
  let endpoint: MetricsEndpoint;
  before(async () => {
    endpoint = await startMetricsEndpoint({
      listen: '127.0.0.1:0',
      token: 'scrape-secret',
      exposition: async () => TEXT,
      contentType: CONTENT_TYPE,
    });
  });
  after(() => endpoint.close());

  test('the token is asked for; another token or another scheme is refused', async () => {
    const url = `${endpoint.url}/metrics`;
    assertProblem(await answer(url), 401, 'auth-invalid', 'Token rejected');
    for (const authorization of ['Bearer scrape-secreT', 'Bearer scrape-secret2', 'Basic scrape-secret'])
      assertProblem(await answer(url, { headers: { authorization } }), 401, 'auth-invalid', 'Token rejected');
    assertProblem(await answer(`${endpoint.url}/other`), 401, 'auth-invalid', 'Token rejected');
    const got = await answer(url, { headers: { authorization: 'Bearer scrape-secret' } });
    assert.equal(got.status, 200);
    assert.equal(got.text, TEXT);
    const other = await answer(`${endpoint.url}/other`, {
      headers: { authorization: 'Bearer scrape-secret' },
    });
    assertProblem(other, 404, 'not-found', 'Not found');
  });
});

test('an address in use fails the start', async () => {
  const first = await startMetricsEndpoint({
    listen: '127.0.0.1:0',
    exposition: async () => '',
    contentType: CONTENT_TYPE,
  });
  try {
    const listen = new URL(first.url).host;
    await assert.rejects(
      startMetricsEndpoint({ listen, exposition: async () => '', contentType: CONTENT_TYPE }),
      /EADDRINUSE/,
    );
  } finally {
    await first.close();
  }
});
