// The demo's ingress (adapter/demo.Caddyfile, what `make demo` runs): plain HTTP only, so a host
// no fleet routes answers the friendly 404 page, never a redirect to an https:// the demo does not
// serve. A real `svc sail` on the local-directory bucket (as the demo runs it) and the real
// svc-caddy build; runtime processes come from the cell stand-in (named as such: it honours the
// runtime contract's `serve`).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { type CaddyProcess, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { freePort, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const DEMO_CADDYFILE = resolve(import.meta.dirname, '..', 'adapter', 'demo.Caddyfile');
const TOKEN = 'demo-test-ingress-token-0123456789';

let node: SailProcess;
let caddy: CaddyProcess;
let httpPort: number;

before(async () => {
  ensureCaddyBuilt();
  const bucket = tempDir('svc-demo-bucket-');
  node = await startSail([
    ...['--endpoint', `file://${bucket}`, '--cell-bin', CELL_STANDIN],
    ...['--platform-domains', 'svc.localhost', '--ingress-token', TOKEN],
  ]);
  httpPort = await freePort();
  const adminPort = await freePort();
  caddy = await startCaddy(readFileSync(DEMO_CADDYFILE, 'utf8'), httpPort, {
    SVC_FLEET_ENDPOINT: node.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_FLEET_POLL_INTERVAL: '200ms',
    SVC_ACCESS_LOG: join(tempDir('svc-demo-log-'), 'access.log'),
    DEMO_HTTP_PORT: String(httpPort),
    DEMO_ADMIN_PORT: String(adminPort),
  });
});

after(async () => {
  await caddy?.stop();
  await node?.stop();
});

function get(host: string): Promise<{ status: number; type: string; location: string; body: string }> {
  return new Promise((resolveAnswer, reject) => {
    const req = request({ host: '127.0.0.1', port: httpPort, path: '/', headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () =>
        resolveAnswer({
          status: res.statusCode ?? 0,
          type: String(res.headers['content-type'] ?? ''),
          location: String(res.headers.location ?? ''),
          body,
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

test('a host the demo does not route answers the 404 page over plain HTTP, never a redirect to https', async () => {
  // Before Caddy holds the fleet's first document the answer is a 503; never a redirect.
  const answer = await waitFor(async () => {
    const a = await get('nothing-here.svc.localhost');
    assert.notEqual(a.status, 308, `redirected to ${a.location}`);
    return a.status === 404 ? a : null;
  }, 'the demo ingress to answer an unrouted host');
  if (!answer) assert.fail('no answer');
  assert.match(answer.type, /^text\/html/);
  assert.match(answer.body, /<h1>404 Not found<\/h1>/);
  assert.equal(answer.location, '');
  const other = await get('example.org');
  assert.equal(other.status, 404);
  assert.match(other.body, /No application answers on this host/);
});
