// The bindings socket (docs/bindings.md "KV namespaces"): the runtime socket's rules (owner-only,
// a stale file replaced, a listening host never displaced), and workerd's KV requests carried
// over HTTP to the KV service, a value past 25 MiB refused by its declared length.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openDirStore } from '../../../src/store/dir.ts';
import { listenKvSocket } from './kv-socket.ts';

function call(
  socketPath: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; statusText: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode!, statusText: res.statusMessage!, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('the bindings socket', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kv-sock-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const names = { 'cell-kv-application': 'shop', 'cell-kv-namespace': 'data' };

  it('is owner-only, carries KV requests, replaces a stale file and never displaces a listening host', async () => {
    const store = await openDirStore(join(dir, 'bucket'));
    const path = join(dir, 'bindings.sock');
    writeFileSync(path, ''); // what a killed host leaves
    const socket = await listenKvSocket(path, store, () => {});
    try {
      assert.equal(statSync(path).mode & 0o777, 0o600);
      assert.equal((await call(path, 'PUT', '/k%20y?urlencoded=true', names, 'value')).status, 200);
      assert.deepEqual(await call(path, 'GET', '/k%20y?urlencoded=true', names), {
        status: 200,
        statusText: 'OK',
        body: 'value',
      });
      const big = await call(path, 'PUT', '/big?urlencoded=true', {
        ...names,
        'content-length': String(25 * 1024 * 1024 + 1),
      });
      assert.equal(big.status, 413);
      assert.equal(big.statusText, 'Value length of 26214401 exceeds limit of 26214400.');
      await assert.rejects(
        listenKvSocket(path, store, () => {}),
        new RegExp(`another KV bindings host is listening on ${path}: one svc sail per state directory`),
      );
    } finally {
      await socket.close();
      await store.close();
    }
    assert.throws(() => statSync(path), /ENOENT/);
  });

  it('answers 503 when the bucket fails, never 500', async () => {
    const store = await openDirStore(join(dir, 'bucket-2'));
    // A stand-in at the Store interface: a bucket whose reads fail.
    const failing = Object.assign(Object.create(store), {
      get: async () => {
        throw new Error('connection refused');
      },
    });
    const lines: string[] = [];
    const path = join(dir, 'failing.sock');
    const socket = await listenKvSocket(path, failing, (line) => lines.push(line));
    try {
      const answer = await call(path, 'GET', '/k?urlencoded=true', names);
      assert.equal(answer.status, 503);
      assert.equal(answer.statusText, 'the bucket did not answer the KV request');
      assert.deepEqual(lines, ['a KV request failed: connection refused']);
    } finally {
      await socket.close();
      await store.close();
    }
  });
});
