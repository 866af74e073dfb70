// The Prometheus endpoint of `svc sail --metrics-listen` (docs/observability.md "Prometheus
// metrics"): `GET /metrics` answers the text exposition format; with `--metrics-token` it asks for
// that bearer token first (401 `auth-invalid` otherwise, as the node API refuses); anything else
// on the listener is 404. A listener of its own, apart from the node API, so that it can be bound
// to an address only the Prometheus server reaches.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { IngressTokens } from '../auth/ingress-token.ts';
import { bearerToken } from '../auth/token.ts';
import { PROBLEM_CONTENT_TYPE, Problem } from '../problem.ts';

export interface MetricsEndpointOptions {
  /** `host:port`; port 0 takes a free one. */
  listen: string;
  token?: string | undefined;
  exposition: () => Promise<string>;
  contentType: string;
  onError?: (err: unknown) => void;
}

export interface MetricsEndpoint {
  /** `http://host:port`, the port as bound. */
  url: string;
  close(): Promise<void>;
}

export async function startMetricsEndpoint(options: MetricsEndpointOptions): Promise<MetricsEndpoint> {
  // The ingress tokens' comparison: digests of one length, so timing tells nothing of the token.
  const tokens = options.token === undefined ? null : new IngressTokens([options.token]);
  const server = createServer((request, response) => {
    answer(request, response, tokens, options).catch((err) => {
      options.onError?.(err);
      sendProblem(response, new Problem('internal', 'Metrics unavailable', 'collecting the metrics failed'));
    });
  });
  const at = options.listen.lastIndexOf(':');
  const host = options.listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  await listen(server, host, Number(options.listen.slice(at + 1)));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function answer(
  request: IncomingMessage,
  response: ServerResponse,
  tokens: IngressTokens | null,
  options: MetricsEndpointOptions,
): Promise<void> {
  if (tokens && !tokens.admits(bearerToken(request.headers.authorization))) {
    return sendProblem(
      response,
      new Problem(
        'auth-invalid',
        'Token rejected',
        'GET /metrics asks for the bearer token of --metrics-token',
      ),
    );
  }
  const path = (request.url ?? '').split('?')[0];
  if (request.method !== 'GET' || path !== '/metrics') {
    return sendProblem(
      response,
      new Problem('not-found', 'Not found', 'this listener serves GET /metrics only'),
    );
  }
  const body = await options.exposition();
  response.writeHead(200, { 'content-type': options.contentType, 'content-length': Buffer.byteLength(body) });
  response.end(body);
}

function sendProblem(response: ServerResponse, problem: Problem): void {
  if (response.headersSent) return void response.destroy();
  const body = JSON.stringify(problem);
  response.writeHead(problem.status, {
    ...problem.headers,
    'content-type': PROBLEM_CONTENT_TYPE,
    'content-length': Buffer.byteLength(body),
  });
  response.end(body);
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
