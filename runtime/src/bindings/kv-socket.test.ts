// The bindings socket (docs/bindings.md "KV namespaces", "R2 buckets"): the runtime socket's rules
// (owner-only, a stale file replaced, a listening host never displaced), workerd's KV requests
// carried over HTTP to the KV service, a value past 25 MiB refused by its declared length, and
// requests with the R2 headers carried to the R2 service on the same listener; an R2 get's bytes
// passed on from an https bucket as they arrive, and cut short, never ended, when the bucket's
// connection closes midway.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import { openDirStore } from '../../../src/store/dir.ts';
import { openS3Store } from '../../../src/store/s3.ts';
import { selfSignedCertificate, trustCertificate } from '../../../test/helpers/tls.ts';
import { listenKvSocket } from './kv-socket.ts';

function call(
  socketPath: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; statusText: string; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          statusText: res.statusMessage!,
          body: text,
          headers: res.headers,
        }),
      );
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
      const read = await call(path, 'GET', '/k%20y?urlencoded=true', names);
      assert.deepEqual([read.status, read.statusText, read.body], [200, 'OK', 'value']);
      const big = await call(path, 'PUT', '/big?urlencoded=true', {
        ...names,
        'content-length': String(25 * 1024 * 1024 + 1),
      });
      assert.equal(big.status, 413);
      assert.equal(big.statusText, 'Value length of 26214401 exceeds limit of 26214400.');
      await assert.rejects(
        listenKvSocket(path, store, () => {}),
        new RegExp(`another bindings host is listening on ${path}: one svc sail per state directory`),
      );
    } finally {
      await socket.close();
      await store.close();
    }
    assert.throws(() => statSync(path), /ENOENT/);
  });

  it('carries a request with the R2 headers to R2, on the same listener, and refuses an R2 value past 100 MiB by its declared length', async () => {
    const store = await openDirStore(join(dir, 'bucket-r2'));
    const path = join(dir, 'both.sock');
    const socket = await listenKvSocket(path, store, () => {});
    const r2 = { 'cell-r2-application': 'shop', 'cell-r2-bucket': 'data' };
    try {
      const json = JSON.stringify({ version: 1, method: 'put', object: 'k' });
      const put = await call(
        path,
        'PUT',
        '/',
        { ...r2, 'cf-r2-metadata-size': String(json.length) },
        `${json}hello`,
      );
      assert.equal(put.status, 200);
      const got = await call(path, 'GET', '/', {
        ...r2,
        'cf-r2-request': JSON.stringify({ version: 1, method: 'get', object: 'k' }),
      });
      assert.equal(got.status, 200);
      const size = Number(got.headers['cf-r2-metadata-size']);
      assert.equal(JSON.parse(got.body.slice(0, size)).etag, '5d41402abc4b2a76b9719d911017c592');
      assert.equal(got.body.slice(size), 'hello');
      // The same key through KV is another namespace's: absent.
      assert.equal((await call(path, 'GET', '/k?urlencoded=true', names)).status, 404);
      const big = await call(path, 'PUT', '/', { ...r2, 'content-length': String(101 * 1024 * 1024 + 1) });
      assert.equal(big.status, 400);
      assert.deepEqual(JSON.parse(String(big.headers['cf-r2-error'])), {
        version: 1,
        v4code: 100100,
        message: 'Your proposed upload exceeds the maximum allowed object size.',
      });
    } finally {
      await socket.close();
      await store.close();
    }
  });

  it('answers 503 when the bucket fails, never 500 (KV and R2)', async () => {
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
      const r2 = await call(path, 'GET', '/', {
        'cell-r2-application': 'shop',
        'cell-r2-bucket': 'data',
        'cf-r2-request': JSON.stringify({ version: 1, method: 'head', object: 'k' }),
      });
      assert.equal(r2.status, 503);
      assert.equal(JSON.parse(String(r2.headers['cf-r2-error'])).v4code, 10001);
      assert.deepEqual(lines, [
        'a KV request failed: connection refused',
        'an R2 request failed: connection refused',
      ]);
    } finally {
      await socket.close();
      await store.close();
    }
  });
  it('passes an R2 get on from an https bucket as it arrives, and cuts the answer short when the bucket closes midway', async () => {
    const tls = selfSignedCertificate();
    const trust = trustCertificate(tls.cert);
    const body = randomBytes(1024 * 1024);
    const record = encodeURIComponent(JSON.stringify({ version: 'a'.repeat(32), uploaded: 0 }));
    let gets = 0;
    const sockets = new Set<Socket>();
    // A stand-in bucket: every GET answers the object; the second sends 300,000 bytes and closes.
    const bucket = createTlsServer(tls, (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
      socket.on('data', (chunk) => {
        if (!chunk.includes('\r\n\r\n')) return;
        const cut = gets++ === 1;
        socket.write(
          `HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: ${body.length}\r\nx-amz-meta-svc-r2: ${record}\r\n\r\n`,
        );
        if (cut) socket.end(body.subarray(0, 300_000));
        else socket.write(body);
      });
    });
    await new Promise<void>((resolve) => bucket.listen(0, '127.0.0.1', resolve));
    const store = openS3Store({
      endpoint: `https://127.0.0.1:${(bucket.address() as AddressInfo).port}`,
      bucket: 'b',
      accessKey: 'k',
      secretKey: 's',
      attempts: 1,
    });
    const path = join(dir, 'https.sock');
    const socket = await listenKvSocket(path, store, () => {});
    const get = () =>
      new Promise<{ declared: number; bytes: Buffer }>((resolve, reject) => {
        const req = request(
          {
            socketPath: path,
            path: '/',
            headers: {
              'cell-r2-application': 'shop',
              'cell-r2-bucket': 'data',
              'cf-r2-request': JSON.stringify({ version: 1, method: 'get', object: 'k' }),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', reject);
            res.on('end', () => {
              const bytes = Buffer.concat(chunks);
              const size = Number(res.headers['cf-r2-metadata-size']);
              if (!res.complete) reject(new Error('the answer ended incomplete'));
              else
                resolve({
                  declared: Number(res.headers['content-length']) - size,
                  bytes: bytes.subarray(size),
                });
            });
          },
        );
        req.on('error', reject);
        req.end();
      });
    try {
      const whole = await get();
      assert.equal(whole.declared, body.length);
      assert.ok(whole.bytes.equals(body));
      // The caller sees its answer fail, never 300,000 bytes as a whole object.
      await assert.rejects(get(), /aborted/);
    } finally {
      await socket.close();
      await store.close();
      for (const open of sockets) open.destroy();
      await new Promise((resolve) => bucket.close(resolve));
      trust.untrust();
    }
  });
});
