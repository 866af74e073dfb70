// docs/observability.md "Prometheus metrics": the registry's series, read back through a strict
// parser of the text format; events counted as they pass the sink; requests by status class and
// latency; bucket requests by operation and outcome through the store wrapper (a real directory
// bucket); the two settings.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { type Family, parseExposition, samplesOf, seriesValue } from '../../test/helpers/prometheus.ts';
import { waitFor } from '../../test/helpers/svc.ts';
import { refuses, tempStore } from '../../test/helpers/temp-store.ts';
import { resolveSettings } from '../config/settings.ts';
import type { EventInput } from '../observability/events.ts';
import { CasConflict } from '../store/store.ts';
import { type DaemonState, NodeMetrics } from './node-metrics.ts';
import { meteredStore } from './store.ts';

function daemonState(): DaemonState {
  return {
    lease: { isCoordinator: () => true },
    fleet: {
      coordinator: () => ({ fence: 7 }),
      processes: () => [
        { application: 'shop', ready: true },
        { application: 'blog', ready: false },
      ],
    },
    deploys: { limits: { counts: () => ({ node: { pending: 3, active: 1, staged: 0 } }) } },
  };
}

async function scrape(metrics: NodeMetrics) {
  return parseExposition(await metrics.exposition());
}

describe('the registry', () => {
  test('scrape-time gauges read the daemon; every series carries the node', async () => {
    const metrics = new NodeMetrics('node-1', daemonState);
    const families = await scrape(metrics);
    assert.equal(metrics.registry.contentType, 'text/plain; version=0.0.4; charset=utf-8');
    assert.equal(seriesValue(families, 'svc_coordinator_lease_held', { node: 'node-1' }), 1);
    assert.equal(seriesValue(families, 'svc_coordinator_lease_fence'), 7);
    assert.equal(seriesValue(families, 'svc_deploy_queue_depth'), 3);
    assert.equal(seriesValue(families, 'svc_deploy_active'), 1);
    assert.equal(seriesValue(families, 'svc_runtime_processes', { application: 'shop' }), 1);
    assert.equal(seriesValue(families, 'svc_runtime_process_ready', { application: 'shop' }), 1);
    assert.equal(seriesValue(families, 'svc_runtime_process_ready', { application: 'blog' }), 0);
    assert.equal(families.get('svc_runtime_processes')?.type, 'gauge');
    assert.ok(seriesValue(families, 'process_resident_memory_bytes') > 0);
    assert.equal(families.get('process_cpu_seconds_total')?.type, 'counter');
    for (const family of families.values())
      for (const sample of family.samples) assert.equal(sample.labels.node, 'node-1', sample.name);
  });

  test('a daemon part not started yet reads as nothing held, queued or running', async () => {
    const families = await scrape(new NodeMetrics('node-1', () => ({})));
    assert.equal(seriesValue(families, 'svc_coordinator_lease_held'), 0);
    assert.equal(seriesValue(families, 'svc_coordinator_lease_fence'), 0);
    assert.equal(seriesValue(families, 'svc_deploy_queue_depth'), 0);
    assert.deepEqual(samplesOf(families, 'svc_runtime_processes'), []);
  });

  test('a process that went away leaves no series behind', async () => {
    const processes = [{ application: 'shop', ready: true }];
    const state = daemonState();
    state.fleet!.processes = () => processes;
    const metrics = new NodeMetrics('node-1', () => state);
    assert.equal(seriesValue(await scrape(metrics), 'svc_runtime_processes', { application: 'shop' }), 1);
    processes.pop();
    assert.deepEqual(samplesOf(await scrape(metrics), 'svc_runtime_processes'), []);
  });

  test("a process's CPU and memory are its group's; one that has no pid or is gone has none", async () => {
    // The supervisor's runtime processes lead their own process group: so does this sleeper.
    const sleeper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
      detached: true,
      stdio: 'ignore',
    });
    try {
      const state = daemonState();
      state.fleet!.processes = () => [
        { application: 'shop', ready: true, pid: sleeper.pid! },
        { application: 'blog', ready: false },
        { application: 'gone', ready: false, pid: 2 ** 22 + 1 },
      ];
      const metrics = new NodeMetrics('node-1', () => state);
      const memory = 'svc_runtime_process_resident_memory_bytes';
      const cpu = 'svc_runtime_process_cpu_seconds_total';
      // Until the child has made its own group and started Node, it is not counted (or barely).
      const f = (await waitFor(async () => {
        const families = await scrape(metrics);
        const bytes = samplesOf(families, memory, memory, { application: 'shop' })[0]?.value ?? 0;
        return bytes > 1024 * 1024 ? families : undefined;
      }, 'the sleeper to be counted')) as Map<string, Family>; // waitFor answers only a truthy value
      assert.ok(seriesValue(f, cpu, { application: 'shop' }) >= 0);
      assert.equal(f.get(memory)?.type, 'gauge');
      assert.equal(f.get(cpu)?.type, 'counter');
      assert.deepEqual(
        samplesOf(f, memory).map((s) => s.labels.application),
        ['shop'],
        'no series for a process without a pid, or gone',
      );
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  test('events are counted as they pass the sink, and every one is passed on', async () => {
    const metrics = new NodeMetrics('node-1', daemonState);
    const passed: EventInput[] = [];
    const sink = metrics.tee({ emit: (event) => passed.push(event) });
    const events: EventInput[] = [
      { kind: 'reconcile.pass', ms: 40, ok: true, desired: 1 },
      { kind: 'reconcile.pass', ms: 2_000, ok: false, error: 'bucket down', desired: 1 },
      { kind: 'coordinator.acquired', fence: 3 },
      { kind: 'coordinator.lost', why: 'expired', fence: 3 },
      { kind: 'deploy.deployed', application: 'shop', deploy: 'd1', deployment: 'x' },
      { kind: 'deploy.failed', application: 'shop', deploy: 'd2', code: 'publish-failed' },
      { kind: 'deploy.failed', application: 'shop', deploy: 'd3', code: 'deploy-timeout' },
      { kind: 'process.exited', application: 'blog', why: 'exit 1', restarts: 0 },
      { kind: 'process.crash-looping', application: 'blog', why: 'exit 1', restarts: 3 },
      { kind: 'process.ready', application: 'blog', port: 24000 },
      { kind: 'application.blocked', application: 'shop' },
    ];
    for (const event of events) sink.emit(event);
    assert.deepEqual(passed, events);
    const f = await scrape(metrics);
    const pass = 'svc_reconcile_pass_duration_seconds';
    assert.equal(seriesValue(f, pass, { outcome: 'ok' }, `${pass}_count`), 1);
    assert.equal(seriesValue(f, pass, { outcome: 'ok' }, `${pass}_sum`), 0.04);
    assert.equal(seriesValue(f, pass, { outcome: 'ok', le: '0.05' }, `${pass}_bucket`), 1);
    assert.equal(seriesValue(f, pass, { outcome: 'ok', le: '0.025' }, `${pass}_bucket`), 0);
    assert.equal(seriesValue(f, pass, { outcome: 'error' }, `${pass}_count`), 1);
    assert.equal(seriesValue(f, 'svc_coordinator_lease_changes_total', { outcome: 'acquired' }), 1);
    assert.equal(seriesValue(f, 'svc_coordinator_lease_changes_total', { outcome: 'lost' }), 1);
    assert.equal(seriesValue(f, 'svc_deploys_total', { application: 'shop', outcome: 'deployed' }), 1);
    assert.equal(seriesValue(f, 'svc_deploys_total', { application: 'shop', outcome: 'failed' }), 2);
    assert.equal(seriesValue(f, 'svc_runtime_process_restarts_total', { application: 'blog' }), 2);
  });

  test('requests by application and status class, latency in seconds, body bytes', async () => {
    const metrics = new NodeMetrics('node-1', daemonState);
    const served = [
      { status: 200, durationMs: 4, bytesIn: 0, bytesOut: 100 },
      { status: 204, durationMs: 40, bytesIn: 10, bytesOut: 0 },
      { status: 503, durationMs: 40_000, bytesIn: 0, bytesOut: 5 },
      { status: 0, durationMs: 1, bytesIn: 0, bytesOut: 0 },
    ];
    for (const request of served) metrics.served('shop', request);
    const f = await scrape(metrics);
    const requests = (status_class: string) =>
      seriesValue(f, 'svc_http_requests_total', { application: 'shop', status_class });
    assert.equal(requests('2xx'), 2);
    assert.equal(requests('5xx'), 1);
    assert.equal(requests('other'), 1);
    const seconds = 'svc_http_request_duration_seconds';
    const bucket = (le: string) => seriesValue(f, seconds, { application: 'shop', le }, `${seconds}_bucket`);
    assert.equal(bucket('0.005'), 2);
    assert.equal(bucket('0.05'), 3);
    assert.equal(bucket('30'), 3);
    assert.equal(bucket('+Inf'), 4);
    assert.equal(seriesValue(f, seconds, { application: 'shop' }, `${seconds}_count`), 4);
    assert.equal(seriesValue(f, 'svc_http_request_body_bytes_total', { application: 'shop' }), 10);
    assert.equal(seriesValue(f, 'svc_http_response_body_bytes_total', { application: 'shop' }), 105);
  });
});

describe('the bucket wrapper', () => {
  test('each request is counted by operation and outcome, and answers as the store does', async () => {
    const metrics = new NodeMetrics('node-1', daemonState);
    const store = meteredStore(await tempStore(), metrics);
    try {
      assert.equal(await store.get('a/b'), null);
      const etag = await store.put('a/b', 'x', { ifNoneMatch: '*' });
      await assert.rejects(store.put('a/b', 'y', { ifNoneMatch: '*' }), CasConflict);
      assert.equal((await store.get('a/b'))?.etag, etag);
      assert.equal((await store.list('a/', { recursive: true })).objects.length, 1);
      assert.equal((await store.stat('a/b'))?.size, 1);
      assert.equal(await store.delete('a/b'), true);
      assert.equal(await store.delete('a/b'), false);
      await refuses(() => store.get('../x'), 'invalid-input', 'Invalid bucket key');
      const f = await scrape(metrics);
      const count = (operation: string, outcome: string) =>
        seriesValue(f, 'svc_bucket_requests_total', { operation, outcome });
      assert.equal(count('get', 'not-found'), 1);
      assert.equal(count('get', 'ok'), 1);
      assert.equal(count('get', 'error'), 1);
      assert.equal(count('put', 'ok'), 1);
      assert.equal(count('put', 'conflict'), 1);
      assert.equal(count('list', 'ok'), 1);
      assert.equal(count('stat', 'ok'), 1);
      assert.equal(count('delete', 'ok'), 1);
      assert.equal(count('delete', 'not-found'), 1);
      const seconds = 'svc_bucket_request_duration_seconds';
      assert.equal(seriesValue(f, seconds, { operation: 'get' }, `${seconds}_count`), 3);
      assert.match(store.description, /^file:\/\//);
    } finally {
      await store.close();
    }
  });
});

describe('the settings', () => {
  const resolve = (flags: Record<string, unknown>, env: NodeJS.ProcessEnv = {}, file: unknown = {}) =>
    resolveSettings({ flags, env, file, filePath: 'svc.config.jsonc' });

  test('off by default; from a flag, the environment or the file', () => {
    assert.deepEqual(resolve({}).metrics, {});
    assert.equal(resolve({ metricsListen: '127.0.0.1:9311' }).metrics.listen, '127.0.0.1:9311');
    assert.deepEqual(resolve({}, { SVC_METRICS_LISTEN: '[::1]:9311', SVC_METRICS_TOKEN: 'abc' }).metrics, {
      listen: '[::1]:9311',
      token: 'abc',
    });
    assert.equal(resolve({}, {}, { metrics: { listen: '0.0.0.0:9311' } }).metrics.listen, '0.0.0.0:9311');
  });

  test('refusals: a malformed address, a token without a listener, a token with a space', async () => {
    await refuses(
      () => resolve({ metricsListen: '9311' }),
      'invalid-input',
      'Invalid setting metrics.listen',
    );
    await refuses(() => resolve({ metricsToken: 'abc' }), 'invalid-input', 'Invalid setting metrics.token');
    await refuses(
      () => resolve({ metricsListen: '127.0.0.1:9311', metricsToken: 'a b' }),
      'invalid-input',
      'Invalid setting metrics.token',
    );
  });
});
