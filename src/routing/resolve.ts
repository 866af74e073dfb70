// docs/adapter.md "Modules" (resolution) and docs/ingress.md "The routing document" (denied
// paths), for one fleet: how a consumer
// resolves a request against a routing document. The reference the vectors' `lookups` check, so
// the Go adapter and this file are held to the same answers.
import type { FleetRouting, Upstream } from './types.ts';

export interface Resolution {
  route: 'ok' | 'denied' | 'unknown';
  /** Document key that answered: route host, `*.<base>`, or API host; empty when none. */
  matched: string;
  application?: string;
  upstreams?: Upstream[];
}

export function resolveRequest(doc: FleetRouting, requestHost: string, path: string): Resolution {
  const host = bareHost(requestHost);
  const exact = doc.routes.find((r) => r.host === host);
  if (exact)
    return { route: 'ok', matched: host, application: exact.application, upstreams: exact.upstreams };
  if (doc.api?.hosts.includes(host)) {
    if (doc.api.denied.some((p) => path === p || path.startsWith(`${p}/`))) {
      return { route: 'denied', matched: host };
    }
    return { route: 'ok', matched: host, upstreams: doc.api.upstreams };
  }
  // Only the first label is replaced, once: two labels below a base match nothing.
  const dot = host.indexOf('.');
  if (dot > 0) {
    const key = `*${host.slice(dot)}`;
    const wild = doc.routes.find((r) => r.host === key);
    if (wild) return { route: 'ok', matched: key, application: wild.application, upstreams: wild.upstreams };
  }
  return { route: 'unknown', matched: '' };
}

/** Lowercased, port removed (a bracketed IPv6 literal keeps its brackets). */
function bareHost(requestHost: string): string {
  const lower = requestHost.toLowerCase();
  if (lower.startsWith('[')) {
    const end = lower.indexOf(']');
    return end > 0 ? lower.slice(0, end + 1) : lower;
  }
  const colon = lower.lastIndexOf(':');
  return colon < 0 ? lower : lower.slice(0, colon);
}
