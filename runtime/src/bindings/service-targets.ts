// Where a service binding to another application goes (docs/bindings.md "Service bindings"): the
// upstreams the fleet state of the node's last reconcile pass lists for the target, this node's
// first, as the routing document lists them for the ingress (docs/ingress.md "The routing
// document"). Any application of the fleet may be bound; one that does not exist, is retired or
// blocked, or has no ready process on a live node is refused with a sentence saying which.

import type { RoutingInput } from '../../../src/routing/types.ts';
import type { ServiceTarget } from './service.ts';

export function serviceTarget(input: RoutingInput | null, application: string): ServiceTarget {
  if (!input) return { refused: 'this node has not read the fleet state yet; try again shortly' };
  const app = input.applications.find((a) => a.name === application);
  if (!app || app.retired) return { refused: `no application "${application}" exists in this fleet` };
  if (app.blocked) return { refused: `application "${application}" is blocked` };
  const upstreams: string[] = [];
  const nodes = [...input.nodes].sort(
    (a, b) => Number(b.id === input.selfNodeId) - Number(a.id === input.selfNodeId),
  );
  for (const node of nodes) {
    if (!node.live || node.state === 'draining') continue;
    const host = new URL(`http://${node.address}`).hostname;
    for (const p of node.processes)
      if (p.application === application && p.ready) upstreams.push(`${host}:${p.port}`);
  }
  if (upstreams.length === 0)
    return { refused: `application "${application}" is not serving on any node of this fleet` };
  return { upstreams };
}

/** For a runtime without a node daemon (`cell serve` alone): no fleet to reach. */
export function noFleet(): ServiceTarget {
  return {
    refused:
      'this runtime runs without a node daemon, which alone knows where other applications are served (svc sail)',
  };
}
