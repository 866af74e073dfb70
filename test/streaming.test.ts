// Request and answer bodies stream at once (docs/runtime.md "The request path"), through the real
// runtime (`cell publish` + `cell serve`: the Go front and real workerd, on the local-directory
// bucket) and through the real Caddy build in front of it (the image's default Caddyfile, whose
// global options enable full duplex, with test ports and one test-only plain-HTTP site that
// reverse-proxies to the front). The worker echoes the request body as it reads it. Each piece
// is sent only once the one before has come back, so a path that holds the answer until the body
// ends, or that drops or reorders a piece, fails; chunked and Content-Length bodies both.

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './helpers/caddy.ts';
import { type CellProcess, dirBucketEnv, fetchText, publish, startCell } from './helpers/cell.ts';
import { freePort, tempDir, waitFor } from './helpers/svc.ts';

const PIECES = 8;
const PIECE_DEADLINE_MS = 10_000;
const SERVE_DEADLINE_MS = 30_000;

const ECHO_WORKER = `// Answers at once and sends back each piece of the request body as it arrives.
export default {
  async fetch(request) {
    if (request.method !== 'POST') return new Response('post a body to have it echoed\\n');
    return new Response(request.body.pipeThrough(new TransformStream()), {
      headers: { 'content-type': 'application/octet-stream' },
    });
  },
};
`;

/** The answer's bytes as they arrive, and a wait for them to reach a length. */
class Arrivals {
  text = '';
  ended = false;
  private waiters: (() => void)[] = [];

  constructor(response: IncomingMessage) {
    response.setEncoding('utf8');
    response.on('data', (piece: string) => {
      this.text += piece;
      this.wake();
    });
    response.on('end', () => {
      this.ended = true;
      this.wake();
    });
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  /** Resolves once `check` holds, after each arrival; rejects after the deadline. */
  async until(check: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + PIECE_DEADLINE_MS;
    while (!check()) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out waiting for ${what}; received so far ${JSON.stringify(this.text)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

/**
 * POSTs the pieces to `url` one at a time, each once the echo of the one before has come back;
 * answers the whole echo and the longest wait for a piece's echo (a figure, not asserted).
 */
async function echoInLockstep(
  url: string,
  framing: 'chunked' | 'content-length',
): Promise<{ echo: string; slowestMs: number }> {
  const pieces = Array.from({ length: PIECES }, (_, i) => `piece ${i}\n`);
  const total = pieces.join('');
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  if (framing === 'content-length') headers['content-length'] = String(Buffer.byteLength(total));
  // A kept-alive connection, as browsers and proxies keep them: a server that means to reuse the
  // connection is the one that reads away the rest of the body (with \`connection: close\` Go's
  // does not), so this is where the loss showed.
  const agent = new Agent({ keepAlive: true });
  const req = httpRequest(url, { method: 'POST', headers, agent });
  const failed = new Promise<never>((_, reject) => req.on('error', reject));
  failed.catch(() => {});
  const answered = new Promise<IncomingMessage>((resolve) => req.on('response', resolve));
  try {
    req.flushHeaders();
    let arrivals: Arrivals | undefined;
    let slowestMs = 0;
    let sent = '';
    for (const [i, piece] of pieces.entries()) {
      const started = Date.now();
      req.write(piece);
      sent += piece;
      if (!arrivals) {
        const response = await Promise.race([
          answered,
          failed,
          timeout(`the answer's headers after piece 0`),
        ]);
        assert.equal(response.statusCode, 200);
        arrivals = new Arrivals(response);
      }
      const expected = sent;
      await arrivals.until(() => arrivals!.text.length >= expected.length, `the echo of piece ${i}`);
      // In order and whole: what came back is exactly what was sent so far.
      assert.equal(arrivals.text, expected, `after piece ${i}`);
      slowestMs = Math.max(slowestMs, Date.now() - started);
    }
    req.end();
    await arrivals!.until(() => arrivals!.ended, 'the end of the answer');
    return { echo: arrivals!.text, slowestMs };
  } finally {
    req.destroy();
    agent.destroy();
  }
}

function timeout(what: string): Promise<never> {
  return new Promise((_, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), PIECE_DEADLINE_MS);
    timer.unref();
  });
}

describe('a request body streams to the worker while its answer streams back', () => {
  let bucketDir: string;
  let cell: CellProcess;
  let caddy: CaddyProcess;
  let viaCaddy: string;

  before(async () => {
    ensureCaddyBuilt();
    bucketDir = tempDir('cell-streaming-bucket-');
    const bucket = dirBucketEnv(bucketDir);
    const project = tempDir('cell-echo-');
    mkdirSync(join(project, 'src'));
    writeFileSync(join(project, 'src', 'index.js'), ECHO_WORKER);
    writeFileSync(
      join(project, 'cell.jsonc'),
      JSON.stringify({ name: 'echo', main: 'src/index.js', compatibility_date: '2025-06-01' }),
    );
    const published = await publish(project, 'echo', bucket);
    assert.equal(published.code, 0, published.stderr);
    cell = await startCell('echo', 'node-a', bucket);
    await waitFor(
      async () => (await fetchText(`${cell.url}/.well-known/cell/health`))?.status === 200,
      `cell to serve the echo worker\n${cell.stderr()}`,
      SERVE_DEADLINE_MS,
    );
    const probe = await freePort();
    const caddyfile = defaultCaddyfileWith(
      [
        'admin off',
        `http_port ${await freePort()}`,
        `https_port ${await freePort()}`,
        'local_certs',
        'skip_install_trust',
      ],
      // Test-only: a plain-HTTP site straight to the front, so no fleet is needed; the global
      // options (full duplex among them) are the shipped ones.
      `http://:${probe} {\n\treverse_proxy 127.0.0.1:${cell.port}\n}\n`,
    );
    caddy = await startCaddy(caddyfile, probe, {
      // The svc app needs a fleet to start; none answers here and none is asked for.
      SVC_FLEET_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      SVC_FLEET_TOKEN: 'streaming-test-0123456789abcdef',
      SVC_ACCESS_LOG: join(tempDir('svc-caddy-log-'), 'access.log'),
    });
    viaCaddy = `http://127.0.0.1:${probe}`;
  });

  after(async () => {
    await caddy?.stop();
    await cell?.stop();
    if (bucketDir) rmSync(bucketDir, { recursive: true, force: true });
  });

  for (const framing of ['chunked', 'content-length'] as const) {
    it(`through the front, a ${framing} body`, async (t) => {
      const { echo, slowestMs } = await echoInLockstep(`${cell.url}/echo`, framing);
      assert.equal(echo, Array.from({ length: PIECES }, (_, i) => `piece ${i}\n`).join(''));
      t.diagnostic(`slowest echo of a piece: ${slowestMs} ms`);
    });

    it(`through Caddy and the front, a ${framing} body`, async (t) => {
      const { echo, slowestMs } = await echoInLockstep(`${viaCaddy}/echo`, framing);
      assert.equal(echo, Array.from({ length: PIECES }, (_, i) => `piece ${i}\n`).join(''));
      t.diagnostic(`slowest echo of a piece: ${slowestMs} ms`);
    });
  }
});
