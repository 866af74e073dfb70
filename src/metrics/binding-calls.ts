// Binding calls of the node's Prometheus metrics (docs/observability.md "Prometheus metrics":
// svc_binding_calls_total, svc_binding_call_duration_seconds): each request workerd sends to the
// runtime host's bindings and services sockets is seen as it arrives and counted once its answer
// is sent, by application, kind and outcome. The kind and the application come from the headers
// workerd's config injects (a worker cannot set them); the outcome from the answer's status.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { KV_APPLICATION_HEADER } from '../../runtime/src/bindings/kv.ts';
import { R2_APPLICATION_HEADER } from '../../runtime/src/bindings/r2-headers.ts';
import { SERVICE_CALLER_HEADER } from '../../runtime/src/bindings/service-headers.ts';
import { isApplicationName } from '../registry/names.ts';

export type BindingKind = 'kv' | 'r2' | 'service';
export type BindingOutcome = 'ok' | 'not-found' | 'refused' | 'error';

/** The header naming the calling application, for each kind of binding. */
const APPLICATION_HEADERS: [string, BindingKind][] = [
  [KV_APPLICATION_HEADER, 'kv'],
  [R2_APPLICATION_HEADER, 'r2'],
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
    res.once('close', () => {
      counted({
        application,
        kind: found[1],
        // An answer cut off before its end failed, whatever its status said.
        outcome: res.writableFinished ? outcomeOf(res.statusCode) : 'error',
        seconds: (performance.now() - started) / 1000,
      });
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
