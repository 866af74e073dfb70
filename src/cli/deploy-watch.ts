// What `svc deploy` does once a node took the deploy (docs/deploys.md "svc deploy"): polls the
// answered `Location` until the deploy is `deployed` or `failed`, then watches the application's
// processes until one serves the new deployment, or says where and why none does. A poll that
// fails for want of a node or the bucket is no outcome: the deploy goes on without the watcher,
// so polling goes on too, for up to POLL_OUTAGE_MS without an answer.
//
// Each poll is a long poll (docs/api.md "Waiting for a change"): the node holds its answer until
// what the command last saw changes. A poll starts no sooner than POLL_INTERVAL_MS after the one
// before it, unless that one was held by its node and ended by a change: a node that ignores the
// wait is polled every second, as before, and one that honours it is asked again at once.

import { setTimeout as delay } from 'node:timers/promises';
import { WAIT_HEADER } from '../node/deploys/long-poll.ts';
import type { DeployStatus } from '../node/deploys/records.ts';
import { Problem, renderFailureLine } from '../problem.ts';
import { type NodeAnswer, requestNode, type Target } from './client.ts';
import type { Accepted } from './deploy-upload.ts';
import { note } from './output.ts';

/** docs/cli.md "svc deploy [dir]": the deploy poll interval. */
export const POLL_INTERVAL_MS = 1_000;

/**
 * How long polling goes on while no poll is answered (no node answers, or the bucket does not):
 * past it, the command fails with the last failure, saying the deploy's outcome is unknown.
 */
export const POLL_OUTAGE_MS = 300_000;

/** How long `svc deploy` watches a new deployment turn ready on the nodes it is placed on. */
export const SERVE_WAIT_MS = 60_000;

/** How long a placement on no node must stand before the watch gives up early. */
const NOWHERE_GRACE_MS = 10_000;

/** How long a poll of the deploy asks its node to hold the answer while nothing changes. */
export const DEPLOY_WAIT_S = 10;
/** As DEPLOY_WAIT_S, for the processes. */
export const SERVING_WAIT_S = 5;

/**
 * Spaces polls: the next one starts POLL_INTERVAL_MS after the one before started, or at once
 * when that one was held by its node and ended by a change.
 */
class PollPacer {
  /** When the last poll started. */
  startedAt = Number.NEGATIVE_INFINITY;
  #changed = false;

  /** Waits until the next poll is due, and notes that it starts now. */
  async next(): Promise<void> {
    const due = this.#changed ? 0 : this.startedAt + POLL_INTERVAL_MS - Date.now();
    if (due > 0) await delay(due);
    this.startedAt = Date.now();
    this.#changed = false;
  }

  /** Notes what the node said of its answer: held and ended by a change, or not. */
  answered(answer: NodeAnswer): void {
    this.#changed = answer.headers.get(WAIT_HEADER) === 'changed';
  }
}

/** The target with `endpoint` asked first, the other endpoints after it. */
function preferring(target: Target, endpoint: string): Target {
  return { ...target, endpoints: [endpoint, ...target.endpoints.filter((e) => e !== endpoint)] };
}

/**
 * Polls the deploy's `Location` until it is terminal, printing each new state. Any node answers a
 * poll: the accepting node is asked first, the other endpoints when it does not answer. A
 * single-use token given with `--token` cannot poll.
 */
export async function watchDeploy(
  target: Target,
  accepted: Accepted,
  token: string | undefined,
  options: { outageMs?: number } = {},
): Promise<DeployStatus> {
  const outageMs = options.outageMs ?? POLL_OUTAGE_MS;
  const pollTarget = preferring(target, accepted.endpoint);
  const id = accepted.status.id;
  let last = accepted.status.state;
  let answeredAt = Date.now();
  let outage = false;
  const pacer = new PollPacer();
  for (;;) {
    await pacer.next();
    let answer: NodeAnswer;
    try {
      answer = await requestNode(pollTarget, 'GET', accepted.location, {
        query: { wait: DEPLOY_WAIT_S, state: last },
        ...(token === undefined ? {} : { token }),
      });
    } catch (err) {
      if (token !== undefined && err instanceof Problem && err.code === 'auth-invalid') {
        throw new Problem(
          'auth-invalid',
          'Deploy accepted, but it cannot be watched',
          `deploy ${id} was accepted by ${accepted.endpoint}, but the token given with --token is single use and cannot also poll ${accepted.location}; poll it with a fresh token`,
        );
      }
      if (!isTransient(err)) throw err;
      const silentMs = Date.now() - answeredAt;
      if (silentMs >= outageMs) {
        throw new Problem(
          err.code,
          'Deploy outcome unknown',
          `deploy ${id} was accepted, but no poll of ${accepted.location} was answered for ${Math.round(silentMs / 1000)} s (last: ${failureText(err)}); it may still have deployed: see svc app show --name ${accepted.status.application}`,
        );
      }
      if (!outage) {
        outage = true;
        note(`svc: deploy ${id}: the poll failed (${failureText(err)}); polling on`);
      }
      continue;
    }
    const status = answer.body as DeployStatus;
    pacer.answered(answer);
    answeredAt = Date.now();
    if (outage) {
      outage = false;
      note(`svc: deploy ${id}: the poll is answered again`);
    }
    if (status.state !== last) {
      last = status.state;
      if (status.state !== 'deployed' && status.state !== 'failed')
        note(`svc: deploy ${status.id} ${status.state}`);
    }
    if (status.state === 'deployed' || status.state === 'failed') return status;
  }
}

/**
 * A failure that says nothing of the deploy: no node answered, or one answered that it (or the
 * bucket behind it) cannot answer now. Anything else (the deploy or the caller refused) is final.
 */
function isTransient(err: unknown): err is Problem {
  if (!(err instanceof Problem)) return false;
  return err.status >= 500 || err.status === 429 || err.title === NO_ANSWER_TITLE;
}

/** A failure as the CLI prints it, without the leading `svc: `. */
function failureText(err: unknown): string {
  return renderFailureLine(err).replace(/^svc: /, '');
}

/** The title requestNode gives a call that no endpoint answered at all. */
const NO_ANSWER_TITLE = 'Node is not answering';

/** A process as GET /v1/applications/:name reports it. */
interface NodeProcessView {
  node: string;
  state: string;
  ready: boolean;
  deployment?: string;
  detail?: string;
}

/**
 * Watches the application's processes (GET /v1/applications/:name, long polls paced as the
 * deploy's, at most SERVE_WAIT_MS) until one serves `deployment`; answers null then, else the line
 * that says where it is not serving and why. Stops early when every process failed to start it.
 * A node that cannot answer (or reports no processes at all) ends the watch quietly.
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
  const pacer = new PollPacer();
  for (;;) {
    await pacer.next();
    try {
      // Held no longer than until the watch or the placement's grace would end, so either is
      // judged on time.
      const until = Math.min(deadline, nowhereSince === null ? deadline : nowhereSince + NOWHERE_GRACE_MS);
      const waitS = Math.min(SERVING_WAIT_S, Math.max(0, Math.ceil((until - Date.now()) / 1_000)));
      const answer = await requestNode(pollTarget, 'GET', `/v1/applications/${application}`, {
        query: { wait: waitS, serving: deployment },
      });
      const body = answer.body as {
        processes?: NodeProcessView[];
        placement?: { state: string; nodes: string[] };
      };
      if (!Array.isArray(body.processes)) return null;
      pacer.answered(answer);
      last = body.processes;
      // Placed on no node for a while (a node that just joined may not be weighed yet): nothing
      // will run it until the fleet or its selector changes.
      const nowhere =
        body.placement?.state === 'placed' && body.placement.nodes.length === 0 && last.length === 0;
      // Held by its node without a change, the answer stood since the poll started.
      const stoodSince = answer.headers.get(WAIT_HEADER) === 'unchanged' ? pacer.startedAt : Date.now();
      nowhereSince = nowhere ? (nowhereSince ?? stoodSince) : null;
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
  }
  if (last.length === 0) {
    return `svc: ${application} ${deployment} is not served: no node runs it yet (see svc app show --name ${application} and svc fleet nodes)`;
  }
  const why = last.map((p) => `${p.node}: ${p.state}${p.detail ? ` (${p.detail})` : ''}`).join('; ');
  return `svc: ${application} ${deployment} is deployed but not serving on any node: ${why}`;
}
