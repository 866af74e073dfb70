// docs/observability.md "Prometheus metrics": binding calls by application, kind and outcome, as
// the runtime host's real bindings and services sockets answer them (KV and R2 on a directory
// bucket, D1 on SQLite over the in-memory store double, a service binding forwarded to a loopback server or refused), counted into the node's
// registry and read back through the strict text-format parser.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { D1Service } from '../../runtime/src/bindings/d1.ts';
import { listenD1Socket } from '../../runtime/src/bindings/d1-socket.ts';
import { listenKvSocket } from '../../runtime/src/bindings/kv-socket.ts';
import { listenServiceSocket } from '../../runtime/src/bindings/service.ts';
import { MemoryStore } from '../../test/helpers/memory-store.ts';
import { parseExposition, samplesOf, seriesValue } from '../../test/helpers/prometheus.ts';
import { openDirStore } from '../store/dir.ts';
import { NodeMetrics } from './node-metrics.ts';

/** One request over a Unix socket; answers the status once the whole answer is read. */
function call(socketPath: string, method: string, path: string, headers: Record<string, string>, body = '') {
  return new Promise<number>((resolve, reject) => {
    const req = request({ socketPath, method, path, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('binding calls', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-binding-calls-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('KV and R2 calls are counted by application, kind and outcome; a request naming no application is not', async () => {
    const metrics = new NodeMetrics('node-1', () => ({}));
    const store = await openDirStore(join(dir, 'bucket'));
    const path = join(dir, 'bindings.sock');
    const socket = await listenKvSocket(path, store, () => {}, metrics.observeBindingCall);
    const kv = { 'cell-kv-application': 'shop', 'cell-kv-namespace': 'data' };
    const r2 = { 'cell-r2-application': 'blog', 'cell-r2-bucket': 'files' };
    try {
      assert.equal(await call(path, 'PUT', '/k?urlencoded=true', kv, 'v'), 200);
      assert.equal(await call(path, 'GET', '/k?urlencoded=true', kv), 200);
      assert.equal(await call(path, 'GET', '/missing?urlencoded=true', kv), 404);
      assert.equal(await call(path, 'GET', `/${'k'.repeat(513)}?urlencoded=true`, kv), 414);
      assert.equal(await call(path, 'GET', '/k?urlencoded=true', {}), 400);
      const get = JSON.stringify({ version: 1, method: 'get', object: 'absent' });
      assert.equal(await call(path, 'GET', '/', { ...r2, 'cf-r2-request': get }), 404);
      assert.equal(
        await call(path, 'PUT', '/', { ...r2, 'content-length': String(101 * 1024 * 1024 + 1) }),
        400,
      );
    } finally {
      await socket.close();
      await store.close();
    }
    const families = parseExposition(await metrics.exposition());
    const calls = (labels: Record<string, string>) =>
      seriesValue(families, 'svc_binding_calls_total', labels);
    assert.equal(calls({ application: 'shop', kind: 'kv', outcome: 'ok' }), 2);
    assert.equal(calls({ application: 'shop', kind: 'kv', outcome: 'not-found' }), 1);
    assert.equal(calls({ application: 'shop', kind: 'kv', outcome: 'refused' }), 1);
    assert.equal(calls({ application: 'blog', kind: 'r2', outcome: 'not-found' }), 1);
    assert.equal(calls({ application: 'blog', kind: 'r2', outcome: 'refused' }), 1);
    const counted = samplesOf(families, 'svc_binding_calls_total');
    assert.equal(
      counted.reduce((sum, s) => sum + s.value, 0),
      6,
      'the request naming no application is not counted',
    );
    const seconds = 'svc_binding_call_duration_seconds';
    assert.equal(seriesValue(families, seconds, { kind: 'kv' }, `${seconds}_count`), 4);
    assert.equal(seriesValue(families, seconds, { kind: 'r2' }, `${seconds}_count`), 2);
  });

  test("D1 calls: ok when the queries ran, error for D1's failure result", async () => {
    const metrics = new NodeMetrics('node-1', () => ({}));
    const d1 = new D1Service({
      store: new MemoryStore(),
      node: 'node-1',
      dataDir: join(dir, 'd1'),
      log: () => {},
    });
    const path = join(dir, 'd1.sock');
    const socket = await listenD1Socket(path, d1, () => {}, metrics.observeBindingCall);
    const names = { 'cell-d1-application': 'shop', 'cell-d1-database': 'main' };
    const query = (sql: string) => call(path, 'POST', '/query', names, JSON.stringify({ sql }));
    try {
      assert.equal(await query('CREATE TABLE t (n)'), 200);
      assert.equal(await query('INSERT INTO t VALUES (1)'), 200);
      assert.equal(await query('SELECT nothing FROM nowhere'), 200);
    } finally {
      await socket.close();
      await d1.close();
    }
    const families = parseExposition(await metrics.exposition());
    const calls = (outcome: string) =>
      seriesValue(families, 'svc_binding_calls_total', { application: 'shop', kind: 'd1', outcome });
    assert.equal(calls('ok'), 2);
    assert.equal(calls('error'), 1);
  });

  test('a service binding call is counted under the caller: the target answering, or the host refusing', async () => {
    const metrics = new NodeMetrics('node-1', () => ({}));
    const target = createServer((req, res) => {
      res.writeHead(req.url === '/boom' ? 500 : 200);
      res.end('target');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    const upstream = `127.0.0.1:${(target.address() as AddressInfo).port}`;
    const path = join(dir, 'services.sock');
    const socket = await listenServiceSocket(
      path,
      (application) =>
        application === 'api' ? { upstreams: [upstream] } : { refused: 'no such application' },
      () => {},
      metrics.observeBindingCall,
    );
    const to = (application: string) => ({
      'cell-service-caller': 'shop',
      'cell-service-target': application,
    });
    try {
      assert.equal(await call(path, 'GET', '/', to('api')), 200);
      assert.equal(await call(path, 'GET', '/boom', to('api')), 500);
      assert.equal(await call(path, 'GET', '/', to('ghost')), 503);
    } finally {
      await socket.close();
      await new Promise((resolve) => target.close(resolve));
    }
    const families = parseExposition(await metrics.exposition());
    const calls = (outcome: string) =>
      seriesValue(families, 'svc_binding_calls_total', { application: 'shop', kind: 'service', outcome });
    assert.equal(calls('ok'), 1);
    assert.equal(calls('error'), 2);
  });
});
