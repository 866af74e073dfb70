// The Prometheus endpoint end to end (docs/observability.md "Prometheus metrics"): a real
// `svc sail` on MinIO with --metrics-listen and --metrics-token, following the access log of the
// real svc-caddy build in front of it (the shipped Caddyfile, test ports). Runtime processes come
// from the cell stand-in (test/helpers/cell-standin.ts, named as such: it honours the runtime
// contract's `serve` and `publish`; its `/status/NNN` answers that status). A scrape parses as the
// text format (test/helpers/prometheus.ts, and `promtool check metrics`), carries
// the daemon's series, and after a deploy and a few requests the deploy's outcome, the runtime
// process and the application's requests by status class; the token is asked for; and a node
// without the setting listens on nothing but its API.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { ensureDeployedApplication } from './helpers/applications.ts';
import { standinArtifact } from './helpers/artifacts.ts';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { CELL_STANDIN, postDeploy, settledDeploy } from './helpers/deploys.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import { type Family, parseExposition, samplesOf, seriesValue } from './helpers/prometheus.ts';
import { promtool } from './helpers/prometheus-server.ts';
import { freePort, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const INGRESS_TOKEN = 'prometheus-e2e-0123456789abcdef';
const METRICS_TOKEN = 'scrape-0123456789abcdef';
const PLATFORM = 'svc.test';
const WAIT_MS = 30_000;
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const minioStarting = useMinio();
const admin = signerFor('admin-key');
let store: Store;
let node: SailProcess;
let bare: SailProcess;
let caddy: CaddyProcess;
let httpPort: number;
let metricsUrl: string;

before(async () => {
  ensureCaddyBuilt();
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  await trustOperator(store, admin);
  await ensureDeployedApplication(store, 'shop', {});
  const accessLog = join(tempDir('svc-access-log-'), 'access.log');
  const metricsListen = `127.0.0.1:${await freePort()}`;
  metricsUrl = `http://${metricsListen}/metrics`;
  node = await startSail([
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
    ...['--cell-bin', CELL_STANDIN, '--ingress-token', INGRESS_TOKEN, '--platform-domains', PLATFORM],
    ...['--observability', '--ingress-access-log', accessLog, '--observability-flush-ms', '300'],
    ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
    ...['--metrics-listen', metricsListen, '--metrics-token', METRICS_TOKEN],
  ]);
  bare = await startSail([
    ...['--endpoint', `file://${join(tempDir('svc-bare-'), 'bucket')}`, '--cell-bin', CELL_STANDIN],
  ]);
  httpPort = await freePort();
  const caddyfile = defaultCaddyfileWith([
    'admin off',
    `http_port ${httpPort}`,
    `https_port ${await freePort()}`,
    'local_certs',
    'skip_install_trust',
  ]);
  caddy = await startCaddy(caddyfile, httpPort, {
    SVC_FLEET_ENDPOINT: node.url,
    SVC_FLEET_TOKEN: INGRESS_TOKEN,
    SVC_FLEET_POLL_INTERVAL: '200ms',
    SVC_FLEET_HTTP_REDIRECT: 'off',
    SVC_ACCESS_LOG: accessLog,
  });
});

after(async () => {
  await caddy?.stop();
  await Promise.all([node?.stop(), bare?.stop()]);
  await store?.close();
});

async function scrapeText(authorization = `Bearer ${METRICS_TOKEN}`) {
  const response = await fetch(metricsUrl, { headers: { authorization } });
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

async function scrape(): Promise<Map<string, Family>> {
  const got = await scrapeText();
  assert.equal(got.status, 200, got.text);
  assert.equal(got.type, CONTENT_TYPE);
  return parseExposition(got.text);
}

/** The value of a series, or 0 while it does not exist yet. */
function valueOr0(
  families: Map<string, Family>,
  family: string,
  labels: Record<string, string>,
  name = family,
) {
  return samplesOf(families, family, name, labels)[0]?.value ?? 0;
}

/** One plain-HTTP GET through Caddy; answers the status. */
function get(host: string, path = '/'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: httpPort, path, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a scrape is the text format and carries the daemon series, under the node id', async () => {
  const passes = 'svc_reconcile_pass_duration_seconds';
  const families = (await waitFor(
    async () => {
      const f = await scrape();
      const coordinates = valueOr0(f, 'svc_coordinator_lease_held', {}) === 1;
      return coordinates && valueOr0(f, passes, {}, `${passes}_count`) > 0 ? f : null;
    },
    'the node to coordinate and reconcile',
    WAIT_MS,
  )) as Map<string, Family>; // waitFor answers only a truthy value
  assert.ok(seriesValue(families, 'svc_coordinator_lease_fence') >= 1);
  assert.ok(valueOr0(families, 'svc_bucket_requests_total', { operation: 'put', outcome: 'ok' }) > 0);
  assert.ok(valueOr0(families, 'svc_bucket_requests_total', { operation: 'list', outcome: 'ok' }) > 0);
  assert.equal(families.get('svc_bucket_request_duration_seconds')?.type, 'histogram');
  assert.equal(seriesValue(families, 'svc_deploy_queue_depth'), 0);
  assert.ok(seriesValue(families, 'process_resident_memory_bytes') > 0);
  assert.ok(seriesValue(families, 'process_cpu_seconds_total') > 0);
  for (const family of families.values())
    for (const sample of family.samples) assert.equal(sample.labels.node, node.nodeId, sample.name);
});

test('after a deploy and requests: its outcome, the process, requests by status class', async () => {
  const deploy = await postDeploy(node.url, 'shop', standinArtifact(), { signer: admin });
  assert.equal(deploy.status, 202, JSON.stringify(deploy.body));
  assert.equal((await settledDeploy(node.url, deploy.body.id, admin)).state, 'deployed');
  await waitFor(async () => (await get(`shop.${PLATFORM}`)) === 200, 'Caddy to route shop', WAIT_MS);
  for (const [path, status] of [
    ['/', 200],
    ['/', 200],
    ['/status/404', 404],
    ['/status/404', 404],
    ['/status/500', 500],
  ] as const)
    assert.equal(await get(`shop.${PLATFORM}`, path), status);
  const shop = { application: 'shop' };
  const requests = (f: Map<string, Family>, status_class: string) =>
    valueOr0(f, 'svc_http_requests_total', { ...shop, status_class });
  const families = (await waitFor(
    async () => {
      const f = await scrape();
      return requests(f, '2xx') >= 3 && requests(f, '4xx') === 2 && requests(f, '5xx') === 1 ? f : null;
    },
    'the requests to be counted',
    WAIT_MS,
  )) as Map<string, Family>; // waitFor answers only a truthy value
  const seconds = 'svc_http_request_duration_seconds';
  const counted = samplesOf(families, 'svc_http_requests_total', 'svc_http_requests_total', shop);
  const total = counted.reduce((sum, sample) => sum + sample.value, 0);
  assert.equal(seriesValue(families, seconds, shop, `${seconds}_count`), total);
  assert.equal(seriesValue(families, seconds, { ...shop, le: '+Inf' }, `${seconds}_bucket`), total);
  assert.ok(seriesValue(families, 'svc_http_response_body_bytes_total', shop) >= 2 * 'standin shop'.length);
  assert.equal(seriesValue(families, 'svc_deploys_total', { ...shop, outcome: 'deployed' }), 1);
  assert.equal(seriesValue(families, 'svc_runtime_processes', shop), 1);
  assert.equal(seriesValue(families, 'svc_runtime_process_ready', shop), 1);
});

test('the token is asked for: none, another, or another scheme is 401', async () => {
  for (const authorization of ['', 'Bearer scrape-wrong', `Basic ${METRICS_TOKEN}`]) {
    const got = await scrapeText(authorization);
    assert.equal(got.status, 401, authorization);
    assert.equal(got.type, 'application/problem+json');
    const doc = JSON.parse(got.text);
    assert.equal(doc.type, 'urn:svc:auth-invalid');
    assert.equal(doc.title, 'Token rejected');
  }
  const other = await fetch(metricsUrl.replace('/metrics', '/'), {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  assert.equal(other.status, 404);
  assert.equal(JSON.parse(await other.text()).type, 'urn:svc:not-found');
});

test('without --metrics-listen a node listens on its API alone', () => {
  const port = (url: string) => Number(new URL(url).port);
  assert.deepEqual(
    listeningPorts(node.child.pid!),
    [port(node.url), port(metricsUrl)].sort((a, b) => a - b),
  );
  assert.deepEqual(listeningPorts(bare.child.pid!), [port(bare.url)]);
});

test('promtool check metrics accepts a scrape', async () => {
  const { text } = await scrapeText();
  const checked = promtool(['check', 'metrics'], text);
  assert.equal(checked.status, 0, checked.output);
  assert.equal(checked.output.trim(), '');
});

/** The TCP ports a process listens on, from its socket descriptors and /proc/net/tcp{,6}. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // The descriptor closed while listed.
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ip:port in hex; st 0A is LISTEN; the inode is the tenth field.
      if (fields[3] === '0A' && inodes.has(fields[9]!))
        ports.add(Number.parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}
