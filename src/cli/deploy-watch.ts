// What `svc deploy` does once a node took the deploy (docs/cli.md "svc deploy"): polls the
// answered `Location` every second until the deploy is `deployed` or `failed`, then watches the
// application's processes until one serves the new deployment, or says where and why none does.

import { setTimeout as delay } from 'node:timers/promises';
import type { DeployStatus } from '../node/deploys/records.ts';
import { Problem } from '../problem.ts';
import { requestNode, type Target } from './client.ts';
import type { Accepted } from './deploy-upload.ts';
import { note } from './output.ts';

/** docs/cli.md "svc deploy [dir]": the deploy poll interval. */
export const POLL_INTERVAL_MS = 1_000;

/** How long `svc deploy` watches a new deployment turn ready on the nodes it is placed on. */
export const SERVE_WAIT_MS = 60_000;

/** How long a placement on no node must stand before the watch gives up early. */
const NOWHERE_GRACE_MS = 10_000;

/** The target with `endpoint` asked first, the other endpoints after it. */
function preferring(target: Target, endpoint: string): Target {
  return { ...target, endpoints: [endpoint, ...target.endpoints.filter((e) => e !== endpoint)] };
}

/**
 * Polls the deploy's `Location` every second until it is terminal, printing each new state. Any
 * node answers a poll: the accepting node is asked first, the other endpoints when it does not
 * answer. A single-use token given with `--token` cannot poll.
 */
export async function watchDeploy(
  target: Target,
  accepted: Accepted,
  token: string | undefined,
): Promise<DeployStatus> {
  const pollTarget = preferring(target, accepted.endpoint);
  let last = accepted.status.state;
  for (;;) {
    await delay(POLL_INTERVAL_MS);
    let status: DeployStatus;
    try {
      status = (await requestNode(pollTarget, 'GET', accepted.location, token === undefined ? {} : { token }))
        .body as DeployStatus;
    } catch (err) {
      if (token !== undefined && err instanceof Problem && err.code === 'auth-invalid') {
        throw new Problem(
          'auth-invalid',
          'Deploy accepted, but it cannot be watched',
          `deploy ${accepted.status.id} was accepted by ${accepted.endpoint}, but the token given with --token is single use and cannot also poll ${accepted.location}; poll it with a fresh token`,
        );
      }
      throw err;
    }
    if (status.state !== last) {
      last = status.state;
      if (status.state !== 'deployed' && status.state !== 'failed')
        note(`svc: deploy ${status.id} ${status.state}`);
    }
    if (status.state === 'deployed' || status.state === 'failed') return status;
  }
}

/** A process as GET /v1/applications/:name reports it. */
interface NodeProcessView {
  node: string;
  state: string;
  ready: boolean;
  deployment?: string;
  detail?: string;
}

/**
 * Watches the application's processes (GET /v1/applications/:name, every second, at most
 * SERVE_WAIT_MS) until one serves `deployment`; answers null then, else the line that says
 * where it is not serving and why. Stops early when every process failed to start it. A node
 * that cannot answer (or reports no processes at all) ends the watch quietly.
 */
export async function watchServing(
  target: Target,
  endpoint: string,
  application: string,
  deployment: string,
): Promise<string | null> {
  const pollTarget = preferring(target, endpoint);
  const deadline = Date.now() + SERVE_WAIT_MS;
  let last: NodeProcessView[] | null = null;
  let nowhereSince: number | null = null;
  for (;;) {
    try {
      const answer = await requestNode(pollTarget, 'GET', `/v1/applications/${application}`, {});
      const body = answer.body as {
        processes?: NodeProcessView[];
        placement?: { state: string; nodes: string[] };
      };
      if (!Array.isArray(body.processes)) return null;
      last = body.processes;
      // Placed on no node for a while (a node that just joined may not be weighed yet): nothing
      // will run it until the fleet or its selector changes.
      const nowhere =
        body.placement?.state === 'placed' && body.placement.nodes.length === 0 && last.length === 0;
      nowhereSince = nowhere ? (nowhereSince ?? Date.now()) : null;
      if (nowhereSince !== null && Date.now() - nowhereSince >= NOWHERE_GRACE_MS) {
        return `svc: ${application} ${deployment} is deployed but placed on no node: no live node matches its --replicas and --node-selector (see svc fleet nodes)`;
      }
    } catch {
      return null;
    }
    const serving = last.some((p) => p.ready && (p.deployment === undefined || p.deployment === deployment));
    if (serving) return null;
    const failedHere = (p: NodeProcessView) =>
      p.state === 'crashloop' || (p.detail ?? '').includes(`${deployment} failed`);
    if ((last.length > 0 && last.every(failedHere)) || Date.now() >= deadline) break;
    await delay(POLL_INTERVAL_MS);
  }
  if (last.length === 0) {
    return `svc: ${application} ${deployment} is not served: no node runs it yet (see svc app show --name ${application} and svc fleet nodes)`;
  }
  const why = last.map((p) => `${p.node}: ${p.state}${p.detail ? ` (${p.detail})` : ''}`).join('; ');
  return `svc: ${application} ${deployment} is deployed but not serving on any node: ${why}`;
}
