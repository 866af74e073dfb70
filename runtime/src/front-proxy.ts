// The front of `cell serve` (docs/runtime.md "cell serve"; docs/api.md: the application's own
// health at `/.well-known/cell/health`): it owns CELL_PORT for the whole life of the process and
// streams each request (and each WebSocket) to the workerd of the deployment being served at that
// moment, so a switch between deployments never closes the public port.

import { randomBytes } from 'node:crypto';
import { type IncomingMessage, request, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import {
  HEALTH_PATH,
  type ServeIdentity,
  SUPERVISOR_HEADER,
} from '../../src/runtime-contract/environment.ts';
import type { SelectorFollower } from './follower.ts';
import { CELL_VERSION_LINE } from './version.ts';

export class FrontProxy {
  private readonly identity: ServeIdentity;
  private readonly serving: SelectorFollower;
  private readonly otel: boolean;
  private readonly log: (line: string) => void;
  /**
   * Client sockets handed over to an upgrade (WebSocket). The HTTP server no longer manages
   * them, so `closeAllConnections` does not reach them and `close` would wait for them forever.
   */
  readonly upgraded = new Set<Socket>();
  /** When a supervisor last probed the health. */
  supervisedAtMs = Date.now();

  constructor(
    identity: ServeIdentity,
    serving: SelectorFollower,
    otel: boolean,
    log: (line: string) => void,
  ) {
    this.identity = identity;
    this.serving = serving;
    this.otel = otel;
    this.log = log;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const started = process.hrtime.bigint();
    if (this.otel) res.on('finish', () => this.span(req, res, started));
    const path = (req.url ?? '/').split('?')[0];
    if (path === HEALTH_PATH) this.health(req, res);
    else this.forward(req, res, 0);
  }

  private health(req: IncomingMessage, res: ServerResponse): void {
    if (req.headers[SUPERVISOR_HEADER]) this.supervisedAtMs = Date.now();
    const ready = this.serving.active !== null && !this.serving.stopping;
    const body: Record<string, unknown> = {
      status: this.serving.stopping ? 'stopping' : ready ? 'ready' : this.serving.status,
      application: this.identity.application,
      node: this.identity.node,
      runtime: CELL_VERSION_LINE,
    };
    if (this.serving.active) {
      body.script = this.serving.active.manifest.script;
      body.deployment = this.serving.active.manifest.deployment;
    }
    if (!ready && this.serving.lastError) body.detail = this.serving.lastError;
    const text = JSON.stringify(body);
    res.writeHead(ready ? 200 : 503, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'content-length': Buffer.byteLength(text),
    });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  private unavailable(res: ServerResponse, why: string): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = `${why}\n`;
    res.writeHead(503, {
      'content-type': 'text/plain; charset=utf-8',
      'retry-after': '1',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }

  /**
   * Streams one request to the active instance. A request without a body that fails before any
   * answer (a kept-alive socket closed under it) is sent once more, to whichever instance is
   * active by then.
   */
  private forward(req: IncomingMessage, res: ServerResponse, attempt: number): void {
    const instance = this.serving.active;
    if (!instance) {
      const why =
        this.serving.status === 'no-deployment'
          ? 'No deployment has been published yet'
          : 'The deployment is starting';
      this.unavailable(res, why);
      return;
    }
    instance.enter();
    let left = false;
    const leave = () => {
      if (!left) {
        left = true;
        instance.leave();
      }
    };
    res.once('close', leave);
    const bodiless = !req.headers['transfer-encoding'] && (req.headers['content-length'] ?? '0') === '0';
    const upstream = request({
      socketPath: instance.socketPath,
      agent: instance.agent,
      method: req.method,
      path: req.url,
      headers: withoutHopByHop(req.headers),
    });
    upstream.on('response', (answer) => {
      const headers: string[] = [];
      for (let i = 0; i < answer.rawHeaders.length; i += 2) {
        if (!HOP_BY_HOP.has(answer.rawHeaders[i]!.toLowerCase()))
          headers.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, headers);
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      if (bodiless && attempt === 0 && !req.destroyed) {
        res.removeListener('close', leave);
        leave();
        this.forward(req, res, 1);
        return;
      }
      this.log(
        `cell: ${instance.label} failed a request: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
      );
      this.unavailable(res, 'The deployment did not answer');
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (bodiless) upstream.end();
    else req.pipe(upstream);
  }

  /** WebSocket and other upgrades: the raw bytes are piped both ways to the active instance. */
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const instance = this.serving.active;
    if (!instance) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    instance.enter();
    this.upgraded.add(socket);
    const upstream = connect(instance.socketPath);
    let left = false;
    const finish = () => {
      if (left) return;
      left = true;
      this.upgraded.delete(socket);
      instance.leave();
      socket.destroy();
      upstream.destroy();
    };
    upstream.on('connect', () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', finish);
    socket.on('error', finish);
    upstream.on('close', finish);
    socket.on('close', finish);
  }

  /** CELL_OTEL=1: one span-shaped JSON line per request on stdout. */
  private span(req: IncomingMessage, res: ServerResponse, started: bigint): void {
    const parent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(
      String(req.headers.traceparent ?? ''),
    );
    const line = {
      kind: 'span',
      name: 'http.request',
      trace_id: parent?.[1] ?? randomBytes(16).toString('hex'),
      parent_span_id: parent?.[2],
      span_id: randomBytes(8).toString('hex'),
      application: this.identity.application,
      node: this.identity.node,
      deployment: this.serving.active?.manifest.deployment,
      method: req.method,
      path: (req.url ?? '/').split('?')[0],
      status: res.statusCode,
      duration_ms: Number(process.hrtime.bigint() - started) / 1e6,
      time: new Date().toISOString(),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function withoutHopByHop(headers: IncomingMessage['headers']): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}
