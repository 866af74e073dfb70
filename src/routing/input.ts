// docs/ingress.md "The routing document" (only what is running is routed) and docs/api.md "Custom domains":
// turns the node's registry cache into the plain RoutingInput the renderer reads.
import { isNodeLive } from '../registry/liveness.ts';
import type { ApplicationRecord, DomainClaim, NodeRecord } from '../registry/records.ts';
import type { RoutingClaim, RoutingInput } from './types.ts';

export interface RegistryView {
  nodes: NodeRecord[];
  applications: ApplicationRecord[];
  /** The claim records under `_svc/domains/`. */
  claims: DomainClaim[];
  nowMs: number;
  platformDomains: string[];
  apiPublic: boolean;
  selfNodeId: string;
  /** The reader's judgement of a node (a daemon's liveness tracker); else the record's beat by `nowMs`. */
  isLive?: (node: NodeRecord) => boolean;
}

export function routingInputFromRegistry(view: RegistryView): RoutingInput {
  return {
    nodes: view.nodes.map((n) => ({
      id: n.id,
      address: n.advertise,
      state: n.state,
      live: view.isLive ? view.isLive(n) : isNodeLive(n, view.nowMs),
      processes: n.processes.map((p) => ({ application: p.application, port: p.port, ready: p.ready })),
    })),
    applications: view.applications.map((a) => ({
      name: a.name,
      blocked: a.blocked,
      retired: a.retired !== undefined,
    })),
    claims: completedClaims(view.applications, view.claims),
    platformDomains: view.platformDomains,
    apiPublic: view.apiPublic,
    selfNodeId: view.selfNodeId,
  };
}

// Claims are written referent-first (claim record, then the host listed on the application), so a
// crash between the two leaves a claim "nothing routes to". Only a host both sides agree on is
// routed, and covers subdomains only once both say so: a half-finished claim stays unrouted and a
// half-finished upgrade routes as the exact claim it was.
function completedClaims(applications: ApplicationRecord[], claims: DomainClaim[]): RoutingClaim[] {
  const byHost = new Map(claims.map((c) => [c.host, c]));
  const out: RoutingClaim[] = [];
  for (const app of applications) {
    const wildcards = new Set(app.wildcardDomains);
    for (const host of app.domains) {
      const record = byHost.get(host);
      if (record?.application !== app.name) continue;
      out.push({ host, application: app.name, wildcard: record.wildcard && wildcards.has(host) });
    }
  }
  return out;
}
