// An echo worker on the real runtime behind the real Caddy build, and a client that streams a
// request body to it piece by piece while it reads the echo (test/streaming.test.ts,
// bench/streaming.bench.ts). `cell publish` + `cell serve` (the Go front and real workerd) on
// the local-directory bucket; svc-caddy with the image's default Caddyfile (its global options,
// full duplex among them), test ports and one plain-HTTP site straight to the front, so no
// fleet is needed.

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { type CaddyProcess, defaultCaddyfileWith, ensureCaddyBuilt, startCaddy } from './caddy.ts';
import { type CellProcess, dirBucketEnv, fetchText, publish, startCell } from './cell.ts';
import { freePort, tempDir, waitFor } from './svc.ts';

const PIECE_DEADLINE_MS = 10_000;
const SERVE_DEADLINE_MS = 30_000;

export const ECHO_WORKER = `// Answers at once and sends back each piece of the request body as it arrives.
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

export type Framing = 'chunked' | 'content-length';

/** The pieces an exchange sends, `piece 0\n` on. */
export function echoPieces(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `piece ${i}\n`);
}

/**
 * POSTs the pieces to `url` one at a time, each once the echo of the one before has come back
 * (and, with `paceMs`, no sooner than that after the one before was sent); answers the whole echo
 * and how long each piece took to come back.
 */
export async function echoInLockstep(
  url: string,
  framing: Framing,
  pieces: string[],
  paceMs = 0,
): Promise<{ echo: string; latenciesMs: number[] }> {
  const total = pieces.join('');
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  if (framing === 'content-length') headers['content-length'] = String(Buffer.byteLength(total));
  // A kept-alive connection, as browsers and proxies keep them: a server that means to reuse the
  // connection is the one that reads away the rest of the body (with `connection: close` Go's
  // does not), so this is where the loss showed.
  const agent = new Agent({ keepAlive: true });
  const req = httpRequest(url, { method: 'POST', headers, agent });
  const failed = new Promise<never>((_, reject) => req.on('error', reject));
  failed.catch(() => {});
  const answered = new Promise<IncomingMessage>((resolve) => req.on('response', resolve));
  try {
    req.flushHeaders();
    let arrivals: Arrivals | undefined;
    const latenciesMs: number[] = [];
    let sent = '';
    let previous = 0;
    for (const [i, piece] of pieces.entries()) {
      const due = previous + paceMs - Date.now();
      if (paceMs > 0 && previous > 0 && due > 0) await new Promise((r) => setTimeout(r, due));
      const started = Date.now();
      previous = started;
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
      latenciesMs.push(Date.now() - started);
    }
    req.end();
    await arrivals!.until(() => arrivals!.ended, 'the end of the answer');
    return { echo: arrivals!.text, latenciesMs };
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

/** The echo worker served by a runtime process, and by Caddy in front of it. */
export interface EchoPath {
  front: string;
  caddy: string;
  stop(): Promise<void>;
}

export async function startEchoPath(): Promise<EchoPath> {
  ensureCaddyBuilt();
  const bucketDir = tempDir('cell-streaming-bucket-');
  const bucket = dirBucketEnv(bucketDir);
  const project = tempDir('cell-echo-');
  mkdirSync(join(project, 'src'));
  writeFileSync(join(project, 'src', 'index.js'), ECHO_WORKER);
  writeFileSync(
    join(project, 'cell.jsonc'),
    JSON.stringify({ name: 'echo', main: 'src/index.js', compatibility_date: '2025-06-01' }),
  );
  let cell: CellProcess | undefined;
  let caddy: CaddyProcess | undefined;
  const stop = async () => {
    await caddy?.stop();
    await cell?.stop();
    rmSync(bucketDir, { recursive: true, force: true });
    rmSync(project, { recursive: true, force: true });
  };
  try {
    const published = await publish(project, 'echo', bucket);
    assert.equal(published.code, 0, published.stderr);
    const serving = await startCell('echo', 'node-a', bucket);
    cell = serving;
    await waitFor(
      async () => (await fetchText(`${serving.url}/.well-known/cell/health`))?.status === 200,
      () => `cell to serve the echo worker\n${serving.stderr()}`,
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
      `http://:${probe} {\n\treverse_proxy 127.0.0.1:${serving.port}\n}\n`,
    );
    caddy = await startCaddy(caddyfile, probe, {
      // The svc app needs a fleet to start; none answers here and none is asked for.
      SVC_FLEET_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      SVC_FLEET_TOKEN: 'streaming-test-0123456789abcdef',
      SVC_ACCESS_LOG: join(tempDir('svc-caddy-log-'), 'access.log'),
    });
    return { front: serving.url, caddy: `http://127.0.0.1:${probe}`, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
