// Per-application metrics from the ingress access log, end to end: the real svc-caddy build with
// the image's default Caddyfile (adapter/Caddyfile: its JSON access log at SVC_ACCESS_LOG, plain
// HTTP served through SVC_FLEET_HTTP_REDIRECT=off; test ports, and a small `roll_size` so that
// Caddy itself rotates the log mid-run) in front of a real `svc sail` on MinIO with
// --observability --ingress-access-log. Runtime processes come from the cell stand-in
// (test/helpers/cell-standin.ts, named as such: it honours the runtime contract's `serve`; its
// `/status/NNN` answers that status). A known number of requests with known statuses to two
// applications; `svc metrics` reports exactly those counts, bytes and plausible latencies, and
// the rotation loses none.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { ensureDeployedApplication } from './helpers/applications.ts';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { CELL_STANDIN } from './helpers/deploys.ts';
import { useMinio } from './helpers/minio.ts';
import { freePort, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const TOKEN = 'metrics-e2e-0123456789abcdef';
const PLATFORM = 'svc.test';
const WAIT_MS = 30_000;

const minioStarting = useMinio();
let store: Store;
let bucketFlags: string[];
let node: SailProcess;
let caddy: CaddyProcess;
let httpPort: number;
let logDir: string;

before(async () => {
  ensureCaddyBuilt();
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  bucketFlags = [
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
  ];
  await ensureDeployedApplication(store, 'shop', {});
  await ensureDeployedApplication(store, 'blog', {});
  logDir = tempDir('svc-access-log-');
  const accessLog = join(logDir, 'access.log');
  node = await startSail([
    ...bucketFlags,
    ...['--cell-bin', CELL_STANDIN, '--ingress-token', TOKEN, '--platform-domains', PLATFORM],
    ...['--observability', '--ingress-access-log', accessLog, '--observability-flush-ms', '300'],
    ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
  ]);
  httpPort = await freePort();
  const shipped = defaultCaddyfileWith([
    'admin off',
    `http_port ${httpPort}`,
    `https_port ${await freePort()}`,
    'local_certs',
    'skip_install_trust',
  ]);
  // Test-only: roll at 1 MiB so Caddy rotates the log during the run (the shipped log block
  // otherwise unchanged).
  const caddyfile = shipped.replace('mode 0644', 'mode 0644\n\t\t\troll_size 1MiB\n\t\t\troll_keep 5');
  assert.notEqual(caddyfile, shipped);
  caddy = await startCaddy(caddyfile, httpPort, {
    SVC_FLEET_ENDPOINT: node.url,
    SVC_FLEET_TOKEN: TOKEN,
    SVC_FLEET_POLL_INTERVAL: '200ms',
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_ACCESS_LOG: accessLog,
  });
});

after(async () => {
  await caddy?.stop();
  await node?.stop();
  await store?.close();
});

/** One plain-HTTP GET through Caddy; answers status and body. */
function get(
  host: string,
  path = '/',
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: httpPort, path, headers: { host, ...headers } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function send(host: string, path: string, times: number, status: number, headers = {}): Promise<void> {
  for (let i = 0; i < times; i++) {
    const answer = await get(host, path, headers);
    assert.equal(answer.status, status, `${host}${path}: ${answer.body}`);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON output read member by member.
async function metricsJson(...args: string[]): Promise<any> {
  const run = await runSvc(['metrics', ...bucketFlags, '--json', ...args]);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout);
}

test('a node observing itself with no requests is its own silence', async () => {
  const quiet = await waitFor(
    async () => {
      const out = await metricsJson();
      return out.silence?.kind === 'no-requests' ? out : null;
    },
    'a snapshot with no requests',
    WAIT_MS,
  );
  assert.deepEqual(quiet.silence.nodes, [node.nodeId]);
  const table = await runSvc(['metrics', ...bucketFlags]);
  assert.match(
    table.stdout,
    new RegExp(`^Nodes ${node.nodeId} observed themselves since \\S+ but counted no requests\\.$`, 'm'),
  );
});

test('known requests to two applications are counted exactly, across a rotation of the log', async () => {
  // Every probe through Caddy is logged and counted for its host's application: the last one
  // answers 200; any before it came while Caddy did not route the host yet and answered 308 (its
  // redirect for a host it does not serve), a 3xx of that application with no body.
  const early = { shop: [] as number[], blog: [] as number[] };
  for (const app of ['shop', 'blog'] as const) {
    await waitFor(
      async () => {
        const { status } = await get(`${app}.${PLATFORM}`);
        if (status !== 200) early[app].push(status);
        return status === 200;
      },
      `Caddy to route ${app}`,
      WAIT_MS,
    );
    assert.ok(
      early[app].every((status) => status === 308),
      `${app} before Caddy routes it: ${early[app]}`,
    );
  }
  await send(`shop.${PLATFORM}`, '/', 19, 200);
  await send(`shop.${PLATFORM}`, '/status/404', 5, 404);
  await send(`shop.${PLATFORM}`, '/status/500', 3, 500);
  await send(`blog.${PLATFORM}`, '/', 9, 200);
  await send(`blog.${PLATFORM}`, '/status/503', 2, 503);
  // No application's host: Caddy redirects it to HTTPS itself, and it is counted for nobody.
  await send(`nope.${PLATFORM}`, '/', 4, 308);

  // Enough logged bytes (Caddy logs request headers) for Caddy to roll the file at 1 MiB.
  const pad = { 'x-pad': 'p'.repeat(6_000) };
  await send(`blog.${PLATFORM}`, '/', 300, 200, pad);
  await waitFor(() => readdirSync(logDir).length > 1, 'Caddy to rotate its access log', WAIT_MS);
  await send(`shop.${PLATFORM}`, '/', 7, 200);

  const expected = {
    shop: {
      requests: 35 + early.shop.length,
      '2xx': 27,
      '3xx': early.shop.length,
      '4xx': 5,
      '5xx': 3,
      bytesOut: 27 * 'standin shop'.length + 8 * 'status 404'.length,
    },
    blog: {
      requests: 312 + early.blog.length,
      '2xx': 310,
      '3xx': early.blog.length,
      '4xx': 0,
      '5xx': 2,
      bytesOut: 310 * 'standin blog'.length + 2 * 'status 503'.length,
    },
  };
  const out = await waitFor(
    async () => {
      const m = await metricsJson('--since', '1h');
      const requests = Object.fromEntries(
        // biome-ignore lint/suspicious/noExplicitAny: see above
        m.applications.map((a: any) => [a.application, a.requests]),
      );
      return requests.shop === expected.shop.requests && requests.blog === expected.blog.requests ? m : null;
    },
    'svc metrics to count every request',
    WAIT_MS,
  ).catch(async (err) => {
    throw new Error(
      `${err.message}\n${JSON.stringify(await metricsJson(), null, 1)}\nlogs: ${readdirSync(logDir)}`,
    );
  });
  assert.equal(out.silence, undefined);
  assert.deepEqual(out.nodes, [node.nodeId]);
  assert.deepEqual(
    out.applications.map((a: { application: string }) => a.application),
    ['blog', 'shop'],
  );
  for (const app of out.applications) {
    const want = expected[app.application as 'shop' | 'blog'];
    assert.equal(app.status['2xx'], want['2xx'], app.application);
    assert.equal(app.status['4xx'], want['4xx'], app.application);
    assert.equal(app.status['5xx'], want['5xx'], app.application);
    assert.equal(app.status['3xx'], want['3xx'], app.application);
    assert.equal(app.status['1xx'] + app.status.other, 0, app.application);
    assert.equal(app.bytesOut, want.bytesOut, app.application);
    assert.equal(app.bytesIn, 0, `${app.application}: GETs carry no body`);
    assert.equal(app.errorRate, want['5xx'] / want.requests);
    // Loopback through Caddy to a local process: well under a second, and ordered.
    const { p50, p90, p99 } = app.latencyMs;
    assert.ok(p50 !== null && p50 > 0 && p50 <= 1_000, JSON.stringify(app.latencyMs));
    assert.ok(p50 <= p90! && p90! <= p99! && p99! <= 5_000, JSON.stringify(app.latencyMs));
  }

  const one = await metricsJson('--name', 'shop');
  assert.deepEqual(
    // biome-ignore lint/suspicious/noExplicitAny: see above
    one.applications.map((a: any) => [a.application, a.requests]),
    [['shop', expected.shop.requests]],
  );
  const table = await runSvc(['metrics', ...bucketFlags]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(
    table.stdout,
    /^APPLICATION\s+REQUESTS\s+2XX\s+3XX\s+4XX\s+5XX\s+ERRORS\s+IN\s+OUT\s+P50\s+P90\s+P99$/m,
  );
  for (const [app, want] of Object.entries(expected)) {
    const row = [app, want.requests, want['2xx'], want['3xx'], want['4xx'], want['5xx']].join('\\s+');
    const errors = `${((100 * want['5xx']) / want.requests).toFixed(1)}%`.replace('.', '\\.');
    assert.match(table.stdout, new RegExp(`^${row}\\s+${errors}\\s`, 'm'));
  }
});

test('a window after the last snapshot is told apart from never written', async () => {
  // Snapshots keep coming while the node runs; a window starting now has the newest ones only
  // after the next flush, so this asks about an instant in the past relative to a stopped node.
  await node.stop();
  await caddy.stop();
  const since = new Date(Date.now() + 1).toISOString();
  await waitFor(() => Date.now() > Date.parse(since) + 5, 'the clock to pass the window start');
  const out = await metricsJson('--since', since);
  assert.equal(out.silence.kind, 'outside-window');
  assert.equal(out.silence.node, node.nodeId);
  const table = await runSvc(['metrics', ...bucketFlags, '--since', since]);
  assert.match(
    table.stdout,
    /^No metrics written since \S+: the newest snapshot is from \S+ \(node [^)]+\)/m,
  );
});

test('metrics refusals: bad --since', async () => {
  for (const since of ['0s', 'soon', '2026-13-01']) {
    const run = await runSvc(['metrics', ...bucketFlags, '--since', since]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /^svc: Invalid --since: .+ \[urn:svc:invalid-input\]$/m);
  }
});
