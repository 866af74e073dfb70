// The services socket (docs/bindings.md "Service bindings"): the runtime host's owner-only HTTP
// listener for workerd's service bindings to other applications of the fleet. workerd's config
// injects the calling application and the target into each request (service-headers.ts); the host
// forwards the request to an upstream serving the target (service-targets.ts picks them) and
// streams the answer back. A target that does not exist or serves nowhere is answered 503 with a
// sentence saying so, which the calling worker sees as the binding's response. A JS RPC call
// (service-rpc.ts) goes the same way, with the target's RPC key added and on the RPC path.

import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { closeOwnerOnly, listenOwnerOnly } from '../host/socket.ts';
import {
  SERVICE_CALL_HEADER,
  SERVICE_CALLER_HEADER,
  SERVICE_RPC_KEY_HEADER,
  SERVICE_RPC_PATH,
  SERVICE_TARGET_HEADER,
} from './service-headers.ts';

/** Where a target application is served (`host:port` each, the nearest first), or why it is not. */
export type ServiceTarget = { upstreams: string[] } | { refused: string };

export type ServiceTargets = (application: string, caller: string) => ServiceTarget;

/** The RPC key of a target application (service-rpc.ts `applicationRpcKey`). */
export type RpcKeys = (application: string) => Promise<string>;

export interface ServiceSocket {
  path: string;
  close(): Promise<void>;
}

/** Hop-by-hop headers (RFC 9110 7.6.1), not forwarded in either direction. */
const HOP_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  SERVICE_CALLER_HEADER,
  SERVICE_TARGET_HEADER,
  SERVICE_CALL_HEADER,
  SERVICE_RPC_KEY_HEADER,
]);

export async function listenServiceSocket(
  path: string,
  targets: ServiceTargets,
  log: (line: string) => void,
  /** Told of each request as it arrives (the node's metrics count binding calls: src/metrics/). */
  observe?: (req: IncomingMessage, res: ServerResponse) => void,
  /** Absent (a runtime without the bucket's key), a JS RPC call is refused. */
  rpcKeys?: RpcKeys,
): Promise<ServiceSocket> {
  const server: Server = createServer((req, res) => {
    observe?.(req, res);
    forward(targets, rpcKeys, req, res).catch((err: unknown) => {
      log(`a service binding call failed: ${(err as Error).message}`);
      if (!res.headersSent) refuse(res, 'svc: the service binding call failed on its way to the target');
      else res.destroy();
    });
  });
  await listenOwnerOnly(server, path, 'services host');
  return {
    path,
    async close() {
      await closeOwnerOnly(server, path);
    },
  };
}

function refuse(res: ServerResponse, why: string): void {
  res.writeHead(503, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(why),
  });
  res.end(why);
}

async function forward(
  targets: ServiceTargets,
  rpcKeys: RpcKeys | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const caller = header(req, SERVICE_CALLER_HEADER);
  const target = header(req, SERVICE_TARGET_HEADER);
  if (!caller || !target) {
    req.resume();
    return refuse(res, 'svc: this socket answers only service bindings of workerd configs cell wrote');
  }
  const found = targets(target, caller);
  if ('refused' in found) {
    req.resume();
    return refuse(res, `svc: service binding to "${target}": ${found.refused}`);
  }
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers))
    if (value !== undefined && !HOP_HEADERS.has(name)) headers[name] = value;
  // Only a call the config marks as RPC (the wrapped binding's own service) gets the key, and it
  // goes to the RPC path whatever the worker asked for.
  let path = req.url ?? '/';
  if (header(req, SERVICE_CALL_HEADER) === 'rpc') {
    if (!rpcKeys) {
      req.resume();
      return refuse(res, `svc: service binding to "${target}": this runtime makes no JS RPC calls`);
    }
    headers[SERVICE_RPC_KEY_HEADER] = await rpcKeys(target);
    path = SERVICE_RPC_PATH;
  }
  // The body streams to one upstream; only a connection refused before anything was sent moves
  // on to the next (a request body cannot be sent twice).
  for (const upstream of found.upstreams) {
    const answer = await send(upstream, req, path, headers);
    if (answer === 'unreachable') continue;
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers))
      if (value !== undefined && !HOP_HEADERS.has(name)) out[name] = value;
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
    await pipeline(answer, res);
    return;
  }
  req.resume();
  refuse(res, `svc: service binding to "${target}": no node serving it answered`);
}

/** Sends the request to `upstream`; 'unreachable' when the connection failed before any byte went. */
function send(
  upstream: string,
  req: IncomingMessage,
  path: string,
  headers: Record<string, string | string[]>,
): Promise<IncomingMessage | 'unreachable'> {
  const { hostname, port } = new URL(`http://${upstream}`);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      // A fresh connection each time, so that its `connect` says the upstream took it.
      {
        host: hostname.replace(/^\[|\]$/g, ''),
        port,
        method: req.method,
        path,
        headers,
        agent: false,
      },
      resolve,
    );
    outgoing.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED') resolve('unreachable');
      else reject(err);
    });
    // A refused connection never asked for the body: only then is the next upstream tried.
    outgoing.once('socket', (socket) => socket.once('connect', () => req.pipe(outgoing)));
  });
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
