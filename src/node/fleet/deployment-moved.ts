// Telling other nodes that an application's deployment moved (docs/fleet.md "Change marker",
// docs/api.md "Deploys"). The node that published (or rolled back) signals its own runtime process
// at once; without this, a node that also runs the application would learn of the move only at its
// next pass (up to 5 s) and its runtime a little after. So the moving node calls
// `POST /v1/applications/:name/deployment-moved` on every other live node that reports a process
// for the application, and each of those signals its own runtime. A call that fails only costs the
// speed: the application record and the change marker still carry the move to every node.

import type { NodeRecord } from '../../registry/records.ts';

/** A node that does not answer within this is left to learn of the move from the registry. */
const NUDGE_TIMEOUT_MS = 5_000;

export interface DeploymentMovedOptions {
  application: string;
  /** The other nodes' registry records (this node excluded), as the registry cache holds them. */
  nodes: readonly NodeRecord[];
  /** A fresh single-use node token per call. */
  mintToken: () => Promise<string>;
  log: { warn(details: object, message: string): void };
}

/** The live nodes other than this one that run a process for the application. */
export function nodesServing(application: string, nodes: readonly NodeRecord[]): NodeRecord[] {
  return nodes.filter(
    (node) => node.advertise && (node.processes ?? []).some((p) => p.application === application),
  );
}

/** Calls each node once, in parallel; never throws. */
export async function tellDeploymentMoved(options: DeploymentMovedOptions): Promise<void> {
  const path = `/v1/applications/${encodeURIComponent(options.application)}/deployment-moved`;
  await Promise.all(
    nodesServing(options.application, options.nodes).map(async (node) => {
      try {
        const response = await fetch(`http://${node.advertise}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${await options.mintToken()}` },
          signal: AbortSignal.timeout(NUDGE_TIMEOUT_MS),
        });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`answered ${response.status}`);
      } catch (err) {
        options.log.warn(
          { err, node: node.id, application: options.application },
          `could not tell node ${node.id} that ${options.application}'s deployment moved; it follows at its next pass`,
        );
      }
    }),
  );
}
