// The Prometheus metrics as a real Prometheus server sees them (docs/observability.md "Prometheus
// metrics"): two real `svc sail` nodes on MinIO running the real runtime (workerd), each behind its
// own real svc-caddy whose access log it follows, serve examples/kv on both nodes; a real
// `prometheus` (scripts/install-prometheus.sh) scrapes both metrics listeners with the bearer
// token, and its query API answers the daemon series and the application's requests, processes
// and binding calls from each node, under their node and instance. It loads the alert rules the
// page documents, which evaluate without error, and `promtool check rules` accepts them;
// `promtool check metrics` accepts both nodes' scrapes.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson, type Store } from '../src/store/store.ts';
import { keyArg } from './helpers/applications.ts';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { copyProject, EXAMPLES } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { signerFor, trustOperator } from './helpers/in-process-node.ts';
import { useMinio } from './helpers/minio.ts';
import {
  ensurePrometheusInstalled,
  type PrometheusServer,
  promtool,
  type QueryResult,
  startPrometheus,
} from './helpers/prometheus-server.ts';
import { freePort, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const INGRESS_TOKEN = 'prometheus-server-0123456789abcdef';
const METRICS_TOKEN = 'scrape-server-0123456789abcdef';
const PLATFORM = 'svc.test';
const APP = 'kv';
const HOST = `${APP}.${PLATFORM}`;
const SERVE_DEADLINE_MS = 120_000;
const SCRAPED_DEADLINE_MS = 60_000;
const DOC = resolve(import.meta.dirname, '..', 'docs', 'observability.md');

interface Node {
  sail: SailProcess;
  caddy: CaddyProcess;
  /** `host:port` of its metrics listener, the scrape target. */
  target: string;
  httpPort: number;
  /** The port its kv runtime process serves on. */
  appPort: number;
}

const minioStarting = useMinio();
const admin = signerFor('admin-key');
let store: Store;
const nodes: Node[] = [];
let prometheus: PrometheusServer | null = null;

before(async () => {
  ensureCaddyBuilt();
  ensurePrometheusInstalled();
  const minio = await minioStarting;
  const options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  await trustOperator(store, admin);
  const bucketFlags = [
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', options.secretKey],
  ];
  const started = await Promise.all(
    [0, 1].map(async () => {
      const accessLog = join(tempDir('svc-access-log-'), 'access.log');
      const target = `127.0.0.1:${await freePort()}`;
      const sail = await startSail([
        ...bucketFlags,
        ...['--cell-bin', CELL_REAL, '--ingress-token', INGRESS_TOKEN, '--platform-domains', PLATFORM],
        ...['--observability', '--ingress-access-log', accessLog],
        ...['--registry-resync-ms', '1000', '--registry-node-refresh-ms', '1000'],
        ...['--metrics-listen', target, '--metrics-token', METRICS_TOKEN],
      ]);
      return { sail, target, accessLog };
    }),
  );
  for (const { sail, target, accessLog } of started) {
    const httpPort = await freePort();
    const caddyfile = defaultCaddyfileWith([
      'admin off',
      `http_port ${httpPort}`,
      `https_port ${await freePort()}`,
      'local_certs',
      'skip_install_trust',
    ]);
    const caddy = await startCaddy(caddyfile, httpPort, {
      SVC_FLEET_ENDPOINT: sail.url,
      SVC_FLEET_TOKEN: INGRESS_TOKEN,
      SVC_FLEET_POLL_INTERVAL: '200ms',
      SVC_FLEET_HTTP_REDIRECT: 'off',
      SVC_ACCESS_LOG: accessLog,
    });
    nodes.push({ sail, caddy, target, httpPort, appPort: 0 });
  }
  const deployed = await runSvc(
    [
      'deploy',
      copyProject(join(EXAMPLES, 'kv')),
      '--node',
      nodes[0]!.sail.url,
      '--key',
      keyArg(admin),
    ].concat(['--replicas', 'all']),
    {
      env: { SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      timeoutMs: SERVE_DEADLINE_MS,
    },
  );
  assert.equal(deployed.code, 0, deployed.stderr);
  for (const node of nodes) node.appPort = await readyPort(node.sail);
});

after(async () => {
  await prometheus?.stop();
  await Promise.all(nodes.map((node) => node.caddy.stop()));
  await Promise.all(nodes.map((node) => node.sail.stop()));
  await store?.close();
});

/** The port of the node's ready kv process, from its node record. */
function readyPort(sail: SailProcess): Promise<number> {
  return waitFor(
    async () => {
      const record = await getJson<NodeRecord>(store, keys.nodeRecord(sail.nodeId));
      return record?.value.processes?.find((p) => p.application === APP && p.ready)?.port;
    },
    () => `${APP} to be ready on ${sail.nodeId}\n${sail.log().slice(-3000)}`,
    SERVE_DEADLINE_MS,
  ) as Promise<number>; // waitFor answers only a truthy value
}

/** One plain-HTTP GET to a loopback port with this Host; answers the status. */
function get(port: number, path: string, host = HOST): Promise<number> {
  return new Promise((resolveStatus, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolveStatus(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The YAML of the page's code block in "Prometheus metrics" that starts with `start`. */
function documented(start: string): string {
  const text = readFileSync(DOC, 'utf8');
  const section = text.slice(text.indexOf('\n## Prometheus metrics\n'));
  const block = /```yaml\n([\s\S]*?)```/g;
  for (let found = block.exec(section); found; found = block.exec(section))
    if (found[1]!.startsWith(start)) return found[1]!;
  throw new Error(`docs/observability.md "Prometheus metrics" has no YAML block starting ${start}`);
}

/** A query's answer by node id: each series' value, and its labels. */
async function byNode(
  promql: string,
): Promise<Map<string, { value: number; labels: Record<string, string> }>> {
  const result: QueryResult[] = await prometheus!.query(promql);
  return new Map(result.map((r) => [r.metric.node!, { value: Number(r.value[1]), labels: r.metric }]));
}

test('promtool check rules accepts the documented alert rules', () => {
  const rules = join(tempDir('svc-rules-'), 'rules.yml');
  writeFileSync(rules, documented('groups:'));
  const checked = promtool(['check', 'rules', rules]);
  assert.equal(checked.status, 0, checked.output);
  assert.match(checked.output, /SUCCESS: 4 rules found/);
});

test('a Prometheus server scrapes both nodes: daemon, request, process and binding series under each node', async () => {
  // Each node's own process: one KV put and one read of a key that does not exist.
  for (const node of nodes) {
    assert.equal(await get(node.appPort, `/put?key=shared&value=${node.sail.nodeId}`), 200);
    assert.equal(await get(node.appPort, '/get?key=absent'), 200);
  }
  // Through each node's ingress: reads until Caddy routes the host, two more, and one path the
  // worker answers 404. Every answer is noted: Caddy logs each, and its node counts each.
  const answered = new Map(nodes.map((n) => [n.sail.nodeId, [] as number[]]));
  for (const node of nodes) {
    const statuses = answered.get(node.sail.nodeId)!;
    const read = async (path: string) => {
      statuses.push(await get(node.httpPort, path));
      return statuses.at(-1);
    };
    await waitFor(
      async () => (await read('/get?key=shared')) === 200,
      `Caddy to route ${HOST}`,
      SCRAPED_DEADLINE_MS,
    );
    assert.equal(await read('/get?key=shared'), 200);
    assert.equal(await read('/get?key=shared'), 200);
    assert.equal(await read('/nothing'), 404);
  }
  const answers = (id: string, statusClass: string) =>
    answered.get(id)!.filter((status) => `${String(status)[0]}xx` === statusClass).length;
  // Each 200 of a read through an ingress was one KV get that found the key.
  const readsFound = [...answered.values()].flat().filter((status) => status === 200).length;
  const scrapeConfig = documented('scrape_configs:')
    .replace('scrape_interval: 15s', 'scrape_interval: 1s')
    .replace('/etc/prometheus/svc-metrics-token', 'token')
    .replace(/targets: \[.*\]/, `targets: [${nodes.map((n) => `'${n.target}'`).join(', ')}]`);
  const rules = documented('groups:');
  const config = `global:\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n${scrapeConfig}`;
  assert.match(config, /credentials_file: token/);
  prometheus = await startPrometheus(config, { token: METRICS_TOKEN, 'rules.yml': rules });
  const ids = nodes.map((n) => n.sail.nodeId).sort();
  const ofBoth = (series: Map<string, unknown>) => ids.every((id) => series.has(id));
  const requests = (statusClass: string) =>
    byNode(`svc_http_requests_total{application="${APP}",status_class="${statusClass}"}`);
  const binding = (outcome: string) =>
    byNode(`svc_binding_calls_total{application="${APP}",kind="kv",outcome="${outcome}"}`);

  // Until every series of both nodes is in, as the last scrape saw it.
  await waitFor(
    async () => {
      const counted = [
        await requests('2xx'),
        await requests('4xx'),
        await binding('ok'),
        await binding('not-found'),
        await byNode('svc_reconcile_pass_duration_seconds_count{outcome="ok"}'),
      ];
      return (
        counted.every(ofBoth) &&
        ids.every(
          (id) =>
            counted[0]!.get(id)!.value === answers(id, '2xx') &&
            counted[1]!.get(id)!.value === answers(id, '4xx'),
        )
      );
    },
    () => `both nodes' series in Prometheus\n${prometheus!.log()}`,
    SCRAPED_DEADLINE_MS,
  );

  const targets = await prometheus.query('up{job="svc"}');
  assert.deepEqual(
    targets.map((t) => [t.metric.instance, t.value[1]]).sort(),
    nodes.map((n) => [n.target, '1']).sort(),
  );

  // Every node's series carries its node id and its own scrape target.
  const instances = new Map(nodes.map((n) => [n.sail.nodeId, n.target]));
  const checkLabels = (series: Map<string, { labels: Record<string, string> }>, what: string) => {
    assert.deepEqual([...series.keys()].sort(), ids, what);
    for (const [id, { labels }] of series) {
      assert.equal(labels.instance, instances.get(id), what);
      assert.equal(labels.job, 'svc', what);
    }
  };

  const passes = await byNode('svc_reconcile_pass_duration_seconds_count{outcome="ok"}');
  checkLabels(passes, 'reconcile passes');
  for (const { value } of passes.values()) assert.ok(value > 0);
  const bucketGets = await byNode('svc_bucket_requests_total{operation="get",outcome="ok"}');
  checkLabels(bucketGets, 'bucket requests');
  for (const { value } of bucketGets.values()) assert.ok(value > 0);
  checkLabels(await byNode('svc_bucket_request_duration_seconds_count{operation="put"}'), 'bucket puts');

  const held = await byNode('svc_coordinator_lease_held');
  checkLabels(held, 'lease held');
  assert.deepEqual(
    [...held.values()].map((h) => h.value).sort(),
    [0, 1],
    'exactly one node holds the coordinator lease',
  );
  const fence = await byNode('svc_coordinator_lease_fence');
  checkLabels(fence, 'lease fence');
  const fences = new Set([...fence.values()].map((f) => f.value));
  assert.equal(fences.size, 1, 'both nodes see the same fence');
  assert.ok([...fences][0]! >= 1);
  const queue = await byNode('svc_deploy_queue_depth');
  checkLabels(queue, 'deploy queue');
  for (const { value } of queue.values()) assert.equal(value, 0);
  const deploys = await prometheus.query(`sum(svc_deploys_total{application="${APP}",outcome="deployed"})`);
  assert.equal(deploys[0]?.value[1], '1', 'the one deploy, counted by the node that accepted it');

  // Per application, from each node.
  const processes = await byNode(`svc_runtime_processes{application="${APP}"}`);
  checkLabels(processes, 'processes');
  for (const { value } of processes.values()) assert.equal(value, 1);
  const memory = await byNode(`svc_runtime_process_resident_memory_bytes{application="${APP}"}`);
  checkLabels(memory, 'process memory');
  // workerd and cell-front together hold more than 10 MiB.
  for (const { value } of memory.values()) assert.ok(value > 10 * 1024 * 1024, `${value} bytes`);
  const cpu = await byNode(`svc_runtime_process_cpu_seconds_total{application="${APP}"}`);
  checkLabels(cpu, 'process CPU');
  for (const { value } of cpu.values()) assert.ok(value > 0);

  checkLabels(await requests('2xx'), 'requests 2xx');
  checkLabels(await requests('4xx'), 'requests 4xx');
  const latency = await byNode(`svc_http_request_duration_seconds_count{application="${APP}"}`);
  checkLabels(latency, 'request latency');
  for (const [id, { value }] of latency) assert.equal(value, answered.get(id)!.length);
  const inf = await byNode(`svc_http_request_duration_seconds_bucket{application="${APP}",le="+Inf"}`);
  for (const [id, { value }] of inf) assert.equal(value, answered.get(id)!.length);

  // Binding calls: the two puts and the reads through the ingresses found the key, the two reads
  // of `absent` did not; each node counted the calls its own process made.
  const ok = await binding('ok');
  const notFound = await binding('not-found');
  checkLabels(ok, 'binding calls ok');
  checkLabels(notFound, 'binding calls not-found');
  const sum = (series: Map<string, { value: number }>) =>
    [...series.values()].reduce((s, v) => s + v.value, 0);
  assert.equal(sum(ok), 2 + readsFound);
  assert.deepEqual(
    [...notFound.values()].map((v) => v.value),
    [1, 1],
  );
  const callSeconds = await prometheus.query('sum(svc_binding_call_duration_seconds_count{kind="kv"})');
  assert.equal(callSeconds[0]?.value[1], String(2 + readsFound + 2));

  // The documented rules are loaded and evaluate. With a coordinator, no 5xx, both nodes answering
  // and no restarts, none fires once both nodes are scraped (an evaluation between the first
  // scrapes of the two may see only the node without the lease, and SvcNoCoordinator pends).
  let loaded: { name: string; health: string; state: string; lastError?: string }[] = [];
  const evaluated = await waitFor(
    async () => {
      const data = (await prometheus!.api('/api/v1/rules')) as { groups: { rules: typeof loaded }[] };
      loaded = data.groups.flatMap((g) => g.rules);
      return loaded.length > 0 && loaded.every((r) => r.health === 'ok' && r.state === 'inactive')
        ? loaded
        : undefined;
    },
    'the rules to be evaluated, neither firing',
    SCRAPED_DEADLINE_MS,
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(loaded)}`);
  });
  assert.deepEqual(
    evaluated!.map((r) => [r.name, r.health, r.state, r.lastError ?? '']),
    [
      ['SvcApplicationErrors', 'ok', 'inactive', ''],
      ['SvcNoCoordinator', 'ok', 'inactive', ''],
      ['SvcNodeUnscraped', 'ok', 'inactive', ''],
      ['SvcRuntimeRestarting', 'ok', 'inactive', ''],
    ],
  );
});

test("promtool check metrics accepts both nodes' scrapes", async () => {
  for (const node of nodes) {
    const response = await fetch(`http://${node.target}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.match(text, /^svc_binding_calls_total\{/m);
    const checked = promtool(['check', 'metrics'], text);
    assert.equal(checked.status, 0, checked.output);
    assert.equal(checked.output.trim(), '');
  }
});
