// Binding calls of the node's Prometheus metrics (docs/observability.md "Prometheus metrics":
// svc_binding_calls_total, svc_binding_call_duration_seconds): each request workerd sends to the
// runtime host's bindings, services and D1 sockets is seen as it arrives and counted once its
// answer is sent, by application, kind and outcome. The kind and the application come from the
// headers workerd's config injects (a worker cannot set them); the outcome from the answer's status,
// or for D1, which answers a failed query 200 as Cloudflare's D1 does, from its commit token.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { D1_BOOKMARK_HEADER } from '../../runtime/src/bindings/d1.ts';
import { KV_APPLICATION_HEADER } from '../../runtime/src/bindings/kv.ts';
import { D1_APPLICATION_HEADER, R2_APPLICATION_HEADER } from '../../runtime/src/bindings/r2-headers.ts';
import { SERVICE_CALLER_HEADER } from '../../runtime/src/bindings/service-headers.ts';
import { isApplicationName } from '../registry/names.ts';

export type BindingKind = 'kv' | 'r2' | 'd1' | 'service';
export type BindingOutcome = 'ok' | 'not-found' | 'refused' | 'error';

/** The header naming the calling application, for each kind of binding. */
const APPLICATION_HEADERS: [string, BindingKind][] = [
  [KV_APPLICATION_HEADER, 'kv'],
  [R2_APPLICATION_HEADER, 'r2'],
  [D1_APPLICATION_HEADER, 'd1'],
  [SERVICE_CALLER_HEADER, 'service'],
];

export interface BindingCall {
  application: string;
  kind: BindingKind;
  outcome: BindingOutcome;
  seconds: number;
}

/**
 * An observer for the binding sockets: it calls `counted` once per call when its answer is sent or
 * the connection closes. A request naming no application (which the socket refuses) is not counted.
 */
export function bindingCallObserver(
  counted: (call: BindingCall) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const found = APPLICATION_HEADERS.find(([header]) => req.headers[header] !== undefined);
    const application = found ? req.headers[found[0]] : undefined;
    if (!found || !isApplicationName(application)) return;
    const started = performance.now();
    const ran = found[1] === 'd1' ? d1Ran(res) : null;
    res.once('close', () => {
      // An answer cut off before its end failed, whatever its status said.
      let outcome: BindingOutcome = 'error';
      if (res.writableFinished) outcome = ran ? (ran() ? 'ok' : 'error') : outcomeOf(res.statusCode);
      counted({ application, kind: found[1], outcome, seconds: (performance.now() - started) / 1000 });
    });
  };
}

/**
 * 404 is a key or object that does not exist (KV, R2), other 4xx a call the binding refused (a
 * key too long, a value too large), 5xx the bucket or the target application failing. For a
 * service binding the status is the target's answer, or the host's 503 when it reached none.
 */
function outcomeOf(status: number): BindingOutcome {
  if (status === 404) return 'not-found';
  if (status >= 500) return 'error';
  return status >= 400 ? 'refused' : 'ok';
}

/**
 * Whether a D1 answer says its queries ran: it carries their commit token, where D1's failure
 * result (a statement that failed, a database that could not be reached) carries none. The socket
 * hands its headers to writeHead whole, which keeps them out of getHeader: they are read on the way.
 */
function d1Ran(res: ServerResponse): () => boolean {
  let ran = false;
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    const headers = args.find((arg) => typeof arg === 'object' && arg !== null);
    ran = headers !== undefined && !Array.isArray(headers) && D1_BOOKMARK_HEADER in headers;
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
  return () => ran || res.hasHeader(D1_BOOKMARK_HEADER);
}
