// The streaming store against a real MinIO, directly and behind the fault-injecting proxy: its HEAD,
// PUT and GET go through s3-http.ts (its own requests, signed by the SDK's signer; the GET read into
// reused memory), and together they give the SDK's answers and failures (the bytes, metadata,
// ranges, conditions, retries, settled ambiguity, refusals). The GET's framing is tested against a
// stand-in bucket on a raw socket too, over plain TCP and over TLS (a certificate made by the test):
// answers MinIO never gives (chunked, malformed, cut short), and a writer that stalls.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { after, before, describe, it } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import { type Minio, useMinio } from '../../test/helpers/minio.ts';
import { type Fault, type ProxiedRequest, startS3Proxy } from '../../test/helpers/s3-proxy.ts';
import { waitFor } from '../../test/helpers/svc.ts';
import { selfSignedCertificate, trustCertificate } from '../../test/helpers/tls.ts';
import { Problem } from '../problem.ts';
import { openS3Store, type S3StoreOptions } from './s3.ts';
import { S3Body, sendBody } from './s3-http.ts';
import { CasConflict, type Store, type StreamingStore } from './store.ts';

const minioStarting = useMinio();
minioStarting.catch(() => {}); // reported by the `before` below

describe('S3 store, streaming calls (HEAD, PUT and GET through its own requests)', () => {
  let minio: Minio;
  const cleanups: (() => Promise<void>)[] = [];

  before(async () => {
    minio = await minioStarting;
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function open(extra: Partial<S3StoreOptions> = {}, fault?: (r: ProxiedRequest) => Fault) {
    const bucket = await minio.createBucket();
    const proxy = fault ? await startS3Proxy(minio.endpoint, { fault }) : null;
    const store = openS3Store({
      ...minio.bucketOptions(bucket),
      attempts: 3,
      backoffMs: 1,
      ...(proxy ? { endpoint: proxy.endpoint } : {}),
      ...extra,
    });
    cleanups.push(async () => {
      await store.close();
      await proxy?.close();
    });
    return { store, streaming: store.streaming as StreamingStore, proxy, bucket };
  }

  it('writes, heads and reads objects with metadata, whole and in ranges, under keys of any characters', async () => {
    const { store, streaming } = await open({ prefix: 'some prefix/ü' });
    const body = randomBytes(300_000);
    const key = "a b/ü+=&?#%!'()*~,;:@$/é";
    const etag = await streaming.write(
      key,
      Readable.from([body.subarray(0, 100_000), body.subarray(100_000)]),
      body.length,
      { 'svc-r2': '%7B%22a%22%3A1%7D' },
    );
    const head = await streaming.head(key);
    assert.equal(head?.etag, etag);
    assert.equal(head?.size, body.length);
    assert.deepEqual(head?.metadata, { 'svc-r2': '%7B%22a%22%3A1%7D' });
    const read = await streaming.read(key);
    assert.equal(read?.etag, etag);
    assert.deepEqual(await buffer(read!.body), body);
    const range = await streaming.read(key, { offset: 1000, length: 5000 });
    assert.equal(range?.size, 5000);
    assert.deepEqual(await buffer(range!.body), body.subarray(1000, 6000));
    // The SDK's path sees the same object.
    const seen = await store.get(key);
    assert.equal(seen?.etag, etag);
    assert.deepEqual(Buffer.from(seen!.body), body);
    assert.equal(await streaming.head('absent'), null);
    assert.equal(await streaming.read('absent'), null);
  });

  it('a whole body is written with its conditions: a failed one is a CasConflict, the object untouched', async () => {
    const { store, streaming } = await open();
    const first = await streaming.write('k', Buffer.from('one'), 3, {}, { ifNoneMatch: '*' });
    await assert.rejects(streaming.write('k', Buffer.from('two'), 3, {}, { ifNoneMatch: '*' }), CasConflict);
    await assert.rejects(streaming.write('k', Buffer.from('two'), 3, {}, { ifMatch: '"0000"' }), CasConflict);
    await assert.rejects(streaming.write('gone', Buffer.from('two'), 3, {}, { ifMatch: first }), CasConflict);
    const second = await streaming.write('k', Buffer.from('two'), 3, {}, { ifMatch: first });
    assert.notEqual(second, first);
    assert.equal(Buffer.from((await store.get('k'))!.body).toString(), 'two');
  });

  it('a stream that fails midway writes nothing', async () => {
    const { streaming } = await open();
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024));
        this.destroy(new Error('the sender went away'));
      },
    });
    await assert.rejects(streaming.write('cut', failing, 1024 * 1024, {}));
    assert.equal(await streaming.head('cut'), null);
  });

  it('reads refused with 503 are retried; a write whose answer is lost is settled as ours by its nonce', async () => {
    let gets = 0;
    let puts = 0;
    const { streaming, proxy } = await open({}, (r) => {
      if (r.method === 'GET' && gets++ < 2) return 'refuse';
      if (r.method === 'PUT' && puts++ < 1) return 'lose-answer';
      return undefined;
    });
    const etag = await streaming.write('k', Buffer.from('mine'), 4, {}, { ifNoneMatch: '*' });
    assert.equal(proxy!.seen.filter((r) => r.method === 'PUT').length, 1, 'settled by reading back');
    const read = await streaming.read('k');
    assert.equal(read?.etag, etag);
    assert.equal((await buffer(read!.body)).toString(), 'mine');
  });

  it('refused credentials are store-unavailable saying so, at once', async () => {
    const { bucket, proxy } = await open({}, () => undefined);
    const store: Store = openS3Store({
      ...minio.bucketOptions(bucket),
      endpoint: proxy!.endpoint,
      secretKey: 'wrong',
      attempts: 3,
      backoffMs: 1,
    });
    cleanups.push(() => store.close());
    await assert.rejects(store.streaming!.write('k', Buffer.from('x'), 1, {}), (err: unknown) => {
      assert.ok(err instanceof Problem, String(err));
      assert.equal(err.title, 'Bucket refused the credentials');
      assert.match(err.detail!, /answered SignatureDoesNotMatch/);
      return true;
    });
    assert.equal(proxy!.seen.filter((r) => r.method === 'PUT').length, 1);
    await assert.rejects(store.streaming!.read('k'), /SignatureDoesNotMatch/);
  });

  it('the bytes of a GET sent on from reused memory arrive whole to a slow writer, GET after GET', async () => {
    const { streaming } = await open();
    const bodies = [randomBytes(1024 * 1024), randomBytes(300_001), Buffer.alloc(0), randomBytes(65_536)];
    for (const [i, body] of bodies.entries()) await streaming.write(`o${i}`, body, body.length, {});
    for (let round = 0; round < 3; round++) {
      for (const [i, body] of bodies.entries()) {
        const read = await streaming.read(`o${i}`);
        assert.ok(read?.body instanceof S3Body, 'read by s3-http.ts');
        const out = slowWriter();
        await sendBody(read.body, out.writable);
        // Each chunk is copied only when its write is acknowledged: a piece reused before that
        // would show another piece's bytes.
        assert.ok(Buffer.concat(out.chunks).equals(body), `object ${i}, round ${round}`);
      }
    }
    const range = await streaming.read('o0', { offset: 70_000, length: 500_000 });
    const out = slowWriter();
    await sendBody(range!.body, out.writable);
    assert.ok(Buffer.concat(out.chunks).equals(bodies[0]!.subarray(70_000, 570_000)));
  });

  it('a body given up midway closes its connection; the next GET is whole', async () => {
    const { streaming } = await open();
    const body = randomBytes(1024 * 1024);
    await streaming.write('k', body, body.length, {});
    const first = await streaming.read('k');
    first!.body.destroy();
    const second = await streaming.read('k');
    const gone = new Writable({
      write(_chunk, _encoding, callback) {
        this.destroy(new Error('the reader went away'));
        callback();
      },
    });
    await assert.rejects(sendBody(second!.body, gone));
    const third = await streaming.read('k');
    assert.ok((await buffer(third!.body)).equals(body));
  });

  for (const transport of ['http', 'https'] as const)
    describe(`against a stand-in bucket over ${transport}`, () => {
      /** The stand-in's certificate over https, trusted by this process (the SDK's client too) meanwhile. */
      let tls: { key: string; cert: string } | null = null;
      let trust: { untrust: () => void } | null = null;
      before(() => {
        if (transport !== 'https') return;
        tls = selfSignedCertificate();
        trust = trustCertificate(tls.cert);
      });
      after(() => trust?.untrust());

      /** A raw server answering each request with `answer(n, socket)` (n counts from 0). */
      async function standIn(answer: (n: number, socket: Socket) => void) {
        let requests = 0;
        let connections = 0;
        const sockets = new Set<Socket>();
        const serve = (socket: Socket) => {
          connections++;
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          let seen = '';
          socket.on('data', (chunk) => {
            seen += chunk.toString('latin1');
            while (seen.includes('\r\n\r\n')) {
              seen = seen.slice(seen.indexOf('\r\n\r\n') + 4);
              answer(requests++, socket);
            }
          });
          socket.on('error', () => {});
        };
        const server = tls ? createTlsServer(tls, serve) : createServer(serve);
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const port = (server.address() as { port: number }).port;
        const store = openS3Store({
          endpoint: `${transport}://127.0.0.1:${port}`,
          region: 'us-east-1',
          bucket: 'b',
          accessKey: 'k',
          secretKey: 's',
          attempts: 2,
          backoffMs: 1,
          operationDeadlineMs: 3000,
        });
        cleanups.push(async () => {
          await store.close();
          for (const socket of sockets) socket.destroy();
          await new Promise((resolve) => server.close(resolve));
        });
        return { streaming: store.streaming!, counts: () => ({ requests, connections }) };
      }
      const head = (status: string, fields: string[]) =>
        `HTTP/1.1 ${status}\r\n${fields.join('\r\n')}\r\n\r\n`;
      const meta = ['ETag: "abc"', 'Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT', 'x-amz-meta-svc-r2: v'];

      it('a head in pieces, keep-alive: one connection, metadata as the SDK gives it', async () => {
        const { streaming, counts } = await standIn((_n, socket) => {
          const text = `${head('200 OK', [...meta, 'Content-Length: 5'])}hello`;
          // A few bytes at a time: the head and body arrive in many reads.
          const send = (at: number) => {
            if (at >= text.length || socket.destroyed) return;
            socket.write(text.slice(at, at + 7), 'latin1');
            setTimeout(() => send(at + 7), 1);
          };
          send(0);
        });
        // More GETs on the connection than an emitter's listener limit: none is left behind.
        const warnings: Error[] = [];
        const warned = (warning: Error) => warnings.push(warning);
        process.on('warning', warned);
        for (let i = 0; i < 12; i++) {
          const read = await streaming.read('k');
          assert.ok(read?.body instanceof S3Body, 'read by s3-http.ts');
          assert.equal(read?.etag, '"abc"');
          assert.equal(read?.size, 5);
          assert.deepEqual(read?.metadata, { 'svc-r2': 'v' });
          assert.equal(read?.modified.toISOString(), '2015-10-21T07:28:00.000Z');
          assert.equal((await buffer(read!.body)).toString(), 'hello');
        }
        process.off('warning', warned);
        assert.deepEqual(warnings, []);
        assert.deepEqual(counts(), { requests: 12, connections: 1 });
      });

      it('a body many times the buffers reaches a writer that stalls whole, never read further ahead than the connection may hold', async () => {
        const body = randomBytes(4 * 1024 * 1024);
        const { streaming, counts } = await standIn((_n, socket) => {
          socket.write(head('200 OK', [...meta, `Content-Length: ${body.length}`]));
          socket.write(body);
        });
        for (let i = 0; i < 2; i++) {
          const read = await streaming.read('k');
          assert.ok(read?.body instanceof S3Body, 'read by s3-http.ts');
          const out = stallingWriter();
          await sendBody(read.body, out.writable);
          assert.ok(Buffer.concat(out.chunks).equals(body), `GET ${i}`);
          // Four 64 KiB reads held over TCP; over TLS less than 256 KiB, then one more read.
          assert.ok(out.mostHeld() <= 320 * 1024, `held ${out.mostHeld()} bytes at once`);
          assert.ok(out.mostHeld() >= 64 * 1024, `held ${out.mostHeld()} bytes at once`);
        }
        // Read as a stream, too.
        assert.ok((await buffer((await streaming.read('k'))!.body)).equals(body));
        assert.deepEqual(counts(), { requests: 3, connections: 1 });
      });

      it('an answer not framed by its length goes to the SDK, which reads it', async () => {
        const { streaming, counts } = await standIn((_n, socket) => {
          socket.write(`${head('200 OK', [...meta, 'Transfer-Encoding: chunked'])}5\r\nhello\r\n0\r\n\r\n`);
        });
        const read = await streaming.read('k');
        assert.ok(!(read?.body instanceof S3Body));
        assert.equal((await buffer(read!.body)).toString(), 'hello');
        assert.equal(counts().requests, 2);
      });

      it('missing is null; a malformed head, a body cut short, a refusal are errors, retried as before', async () => {
        let mode = 'missing';
        const { streaming } = await standIn((n, socket) => {
          if (mode === 'missing') {
            const xml = '<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>';
            socket.write(`${head('404 Not Found', [`Content-Length: ${xml.length}`])}${xml}`);
          } else if (mode === 'denied') {
            const xml = '<Error><Code>AccessDenied</Code><Message>no</Message></Error>';
            socket.write(`${head('403 Forbidden', [`Content-Length: ${xml.length}`])}${xml}`);
          } else if (mode === 'malformed') socket.end('HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n');
          else if (mode === 'slow-down') socket.write(head('503 Slow Down', ['Connection: close']));
          else if (mode === 'cut')
            socket.end(`${head('200 OK', ['Content-Length: 1000000'])}${'x'.repeat(70_000)}`);
          else if (mode === 'retried') {
            if (n % 2 === 0) socket.destroy();
            else socket.write(`${head('200 OK', ['Content-Length: 2'])}ok`);
          }
        });
        assert.equal(await streaming.read('k'), null);
        mode = 'denied';
        await assert.rejects(streaming.read('k'), (err: unknown) => {
          assert.ok(err instanceof Problem);
          assert.equal(err.title, 'Bucket refused the credentials');
          return true;
        });
        mode = 'malformed';
        await assert.rejects(streaming.read('k'), (err: unknown) => {
          assert.ok(err instanceof Problem);
          assert.match(err.detail!, /HttpHeadError: the Content-Length is not a number/);
          return true;
        });
        mode = 'slow-down';
        await assert.rejects(streaming.read('k'), /Http503 \(HTTP 503\)/);
        mode = 'cut';
        const cut = await streaming.read('k');
        await assert.rejects(buffer(cut!.body), /closed before the answer ended/);
        const cutAgain = await streaming.read('k');
        await assert.rejects(sendBody(cutAgain!.body, slowWriter().writable), /ended early|closed before/);
        // A body cut short that nobody reads yet ends without throwing at the process.
        const unread = await streaming.read('k');
        await waitFor(async () => unread!.body.destroyed, 'the unread body to end', 5000);
        mode = 'retried';
        assert.equal((await buffer((await streaming.read('k'))!.body)).toString(), 'ok');
      });

      it('a bucket that sends no answer ends in the deadline of the operation', async () => {
        const { streaming } = await standIn(() => {});
        await assert.rejects(streaming.read('k'), /no answer within 3 s/);
      });
    });
});

/**
 * A writer that first acknowledges nothing, until what it was given stops growing for 50 turns of
 * the event loop (the connection, with the rest of the body waiting in the kernel, stopped
 * reading), then acknowledges each write a moment later, copying it only then. It records the
 * most bytes it held unacknowledged at once.
 */
function stallingWriter(): { writable: Writable; chunks: Buffer[]; mostHeld: () => number } {
  const chunks: Buffer[] = [];
  let most = 0;
  let stalled: (() => void) | null = null;
  const writable = new Writable({
    highWaterMark: 16,
    write(chunk: Buffer, _encoding, callback) {
      const acknowledge = () =>
        setImmediate(() => {
          most = Math.max(most, writable.writableLength);
          chunks.push(Buffer.from(chunk));
          callback();
        });
      if (chunks.length > 0 || stalled) return acknowledge();
      stalled = acknowledge;
      let seen = -1;
      let still = 0;
      const watch = () => {
        const held = writable.writableLength;
        still = held === seen ? still + 1 : 0;
        seen = held;
        if (still < 50) return setImmediate(watch);
        most = Math.max(most, held);
        acknowledge();
      };
      setImmediate(watch);
    },
  });
  return { writable, chunks, mostHeld: () => most };
}

/** A writer that acknowledges each write a moment later and only then copies what it was given. */
function slowWriter(): { writable: Writable; chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  const writable = new Writable({
    highWaterMark: 16,
    write(chunk: Buffer, _encoding, callback) {
      setImmediate(() => {
        chunks.push(Buffer.from(chunk));
        callback();
      });
    },
  });
  return { writable, chunks };
}
