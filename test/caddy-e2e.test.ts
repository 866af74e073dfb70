// The Caddy adapter end to end (docs/adapter.md "Tests"; docs/ingress.md "The storage protocol"): the
// real svc-caddy build running the image's default Caddyfile (adapter/Caddyfile, with test ports,
// Caddy's internal issuer and one extra plain-HTTP site that always proxies) in front of a real
// `svc sail` on MinIO. The node's bucket sits behind the test S3 proxy, which holds the node's
// first reconcile pass so that Caddy starts with no document. Runtime processes come from the cell
// stand-in (test/helpers/cell-standin.ts, named as such: it honours the runtime contract's `serve`).

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { PASS_INTERVAL_MS } from '../src/node/fleet/reconcile.ts';
import { keys } from '../src/registry/keys.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { ensureDeployedApplication } from './helpers/applications.ts';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { IngressClient } from './helpers/ingress-client.ts';
import { useMinio } from './helpers/minio.ts';
import { type S3Proxy, startS3Proxy } from './helpers/s3-proxy.ts';
import { freePort, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TOKEN = 'ingress-e2e-0123456789abcdef';
const PLATFORM = 'svc.test';
const APP_HOST = `shop.${PLATFORM}`;
const PASS_WAIT_MS = 6 * PASS_INTERVAL_MS;
const NOT_FOUND_PAGE = /<h1>404 Not found<\/h1>/;

const minioStarting = useMinio();
let proxy: S3Proxy;
let store: Store;
let node: SailProcess;
let caddy: CaddyProcess;
let ports: { http: number; https: number; probe: number };
/** While true, the node's listings of `_svc/domains/` are refused: its first pass cannot complete. */
let holdRouting = true;

const isClaimListing = (path: string) => decodeURIComponent(path).includes('prefix=_svc/domains/');

before(async () => {
  ensureCaddyBuilt();
  const minio = await minioStarting;
  const bucket = await minio.createBucket();
  const options = minio.bucketOptions(bucket);
  store = await openStore({ ...options, stateDir: tempDir() });
  proxy = await startS3Proxy(minio.endpoint, {
    fault: (request) => (holdRouting && isClaimListing(request.path) ? 'refuse' : undefined),
  });
  await ensureDeployedApplication(store, 'shop', {});
  node = await startSail([
    ...['--endpoint', proxy.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
    ...['--cell-bin', CELL_STANDIN, '--ingress-token', TOKEN],
    ...['--platform-domains', PLATFORM, '--api-public'],
    ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
  ]);
  ports = { http: await freePort(), https: await freePort(), probe: await freePort() };
  const caddyfile = defaultCaddyfileWith(
    [
      'admin off',
      `http_port ${ports.http}`,
      `https_port ${ports.https}`,
      'local_certs',
      'skip_install_trust',
    ],
    // Test-only: a plain-HTTP site that proxies every host, to see `unavailable` and `unknown`
    // without a certificate. The two shipped sites are unchanged.
    `http://:${ports.probe} {\n\timport svc_proxy\n\timport svc_errors\n}\n`,
  );
  const home = tempDir('svc-caddy-env-');
  caddy = await startCaddy(caddyfile, ports.probe, {
    SVC_FLEET_ENDPOINT: node.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_POLL_INTERVAL: '200ms',
    SVC_ACCESS_LOG: join(home, 'access.log'),
  });
});

after(async () => {
  await caddy?.stop();
  await node?.stop();
  await proxy?.close();
  await store?.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A plain-HTTP request to Caddy with an arbitrary Host header. */
function viaHttp(port: number, host: string, path = '/'): Promise<Answer> {
  return new Promise((resolveAnswer, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** An HTTPS request to Caddy: TLS server name `sni`, Host header `host` (the same unless given). */
function viaHttps(
  sni: string,
  path = '/',
  host = sni,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolveAnswer, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port: ports.https,
        path,
        servername: sni,
        headers: { host, ...headers },
        rejectUnauthorized: false, // Caddy's internal CA; the certificate is checked by name below
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The certificate Caddy presents for `sni`, or the handshake error. */
function handshake(sni: string): Promise<X509Certificate | Error> {
  return new Promise((resolveHandshake) => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: ports.https,
      servername: sni,
      rejectUnauthorized: false,
    });
    socket.once('secureConnect', () => {
      const raw = socket.getPeerCertificate().raw;
      socket.destroy();
      resolveHandshake(new X509Certificate(raw));
    });
    socket.once('error', (err) => resolveHandshake(err));
  });
}

test('before any routing document: 503 (svc.route unavailable), and no certificate for anyone', async () => {
  await waitFor(() => proxy.seen.some((r) => isClaimListing(r.path)), 'the node to reach its claims listing');
  const routes = await fetch(`${node.url}/v1/ingress/routes`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(routes.status, 503, 'the node does not know its routing yet');
  await routes.arrayBuffer();
  const answer = await viaHttp(ports.probe, APP_HOST);
  assert.equal(answer.status, 503, answer.body);
  assert.doesNotMatch(answer.body, NOT_FOUND_PAGE, 'unavailable is not answered as unknown');
  assert.ok((await handshake(APP_HOST)) instanceof Error, 'no certificate while no document says the host');
});

test('a request is routed by host to the application the node runs', async () => {
  holdRouting = false;
  const answer = await waitFor(
    async () => {
      const a = await viaHttp(ports.probe, APP_HOST, '/hello');
      return a.status === 200 ? a : null;
    },
    'Caddy to route shop.svc.test',
    PASS_WAIT_MS,
  );
  assert.equal(answer!.body, 'standin shop');
  // Host matching is case-insensitive and ignores the port.
  assert.equal((await viaHttp(ports.probe, `SHOP.${PLATFORM}:${ports.probe}`)).body, 'standin shop');
});

test('an unknown host is 404 with the small HTML page', async () => {
  for (const host of ['nope.example', `other.${PLATFORM}`, `a.shop.${PLATFORM}`]) {
    const answer = await viaHttp(ports.probe, host);
    assert.equal(answer.status, 404, host);
    assert.match(answer.body, NOT_FOUND_PAGE, host);
    assert.match(String(answer.headers['content-type']), /^text\/html/);
  }
});

test('the shipped plain-HTTP site redirects with 308 to https', async () => {
  const answer = await viaHttp(ports.http, APP_HOST, '/a/b?c=d');
  assert.equal(answer.status, 308);
  assert.equal(answer.headers.location, `https://${APP_HOST}/a/b?c=d`);
});

test('on-demand TLS: certificates only for named hosts, issued and stored through the node', async () => {
  const cert = await handshake(APP_HOST);
  assert.ok(cert instanceof X509Certificate, `handshake for ${APP_HOST}: ${String(cert)}`);
  assert.match(cert.subjectAltName ?? '', new RegExp(`DNS:${APP_HOST.replace(/\./g, '\\.')}`));
  const api = await handshake(PLATFORM);
  assert.ok(api instanceof X509Certificate, `the API host ${PLATFORM} is named too: ${String(api)}`);
  for (const refused of [`nope.${PLATFORM}`, 'nope.example', `x.shop.${PLATFORM}`]) {
    assert.ok((await handshake(refused)) instanceof Error, `no certificate for ${refused}`);
  }

  // The certificate went to the fleet: in the node's storage keyspace of the bucket, not on disk.
  const client = new IngressClient(node.url, TOKEN);
  const stored = await waitFor(async () => {
    const found = await client.list(`certificates/local/${APP_HOST}`, true);
    return found.length > 0 ? found : null;
  }, 'the certificate in the node storage');
  for (const suffix of ['crt', 'key', 'json']) {
    assert.ok(stored!.includes(`certificates/local/${APP_HOST}/${APP_HOST}.${suffix}`), stored!.join(', '));
  }
  const pem = new TextDecoder().decode((await client.get(`certificates/local/${APP_HOST}/${APP_HOST}.crt`))!);
  assert.equal(
    new X509Certificate(pem).fingerprint256,
    cert.fingerprint256,
    'the served certificate is the stored one',
  );
  assert.ok(await store.stat(keys.ingressObject(`certificates/local/${APP_HOST}/${APP_HOST}.crt`)));
  assert.deepEqual(localCertificates(caddy.home), [], 'no certificate on the ingress disk');
  // The internal CA itself stays local (docs/ingress.md: pki/ belongs to the ingress's disk).
  assert.equal(await client.get('pki/authorities/local/root.crt'), null);

  const over = await viaHttps(APP_HOST, '/x');
  assert.equal(over.status, 200);
  assert.equal(over.body, 'standin shop');
});

test('the API host proxies to the daemon, but denied paths are answered 404 by Caddy', async () => {
  const health = await viaHttps(PLATFORM, '/.well-known/svc/health');
  assert.equal(health.status, 200, health.body);
  const auth = { authorization: `Bearer ${TOKEN}` };
  for (const path of [
    '/v1/storage',
    `/v1/storage/objects/certificates/local/${APP_HOST}/${APP_HOST}.key`,
    '/v1/storage/list?prefix=certificates',
    '/v1/ingress/routes',
    '/v1/ingress/routes/proxyb',
  ]) {
    // With the node's own ingress token: were it proxied, the node would answer it.
    const answer = await viaHttps(PLATFORM, path, PLATFORM, auth);
    assert.equal(answer.status, 404, path);
    assert.match(answer.body, NOT_FOUND_PAGE, `${path} is answered by the ingress`);
    assert.doesNotMatch(answer.body, /BEGIN|routes|svc_/, `${path} leaked nothing`);
  }
  // A segment boundary: /v1/storagex is not denied, so the node answers (its own 404 problem).
  const near = await viaHttps(PLATFORM, '/v1/storagex', PLATFORM, auth);
  assert.equal(near.status, 404);
  assert.equal(near.headers['content-type'], 'application/problem+json');
});

test("an unknown host over HTTPS (a named host's certificate, another Host) is 404", async () => {
  const answer = await viaHttps(APP_HOST, '/', 'nope.example');
  assert.equal(answer.status, 404);
  assert.match(answer.body, NOT_FOUND_PAGE);
});

/** Certificate files under Caddy's local data directory. */
function localCertificates(home: string): string[] {
  const dir = join(home, 'data', 'caddy', 'certificates');
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith('.crt'));
}
