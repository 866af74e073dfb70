// docs/api.md "Deleting an application" (`DELETE /v1/applications/:name[?force=1]`): deletion is coordinator-gated and any node
// accepts it. (1) This node holds the lease: it does the work. (2) Nobody holds it: this node
// offers itself once, then does the work or finds who won. (3) Another node holds it: the request
// is forwarded once under a fresh node token and the coordinator's answer returned verbatim.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Caller, describeCaller } from '../../auth/caller.ts';
import { Problem } from '../../problem.ts';
import { checkDeletable, deleteApplicationData } from '../../registry/application-deletion.ts';
import { getApplication } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import type { NodeRecord } from '../../registry/records.ts';
import { getJson } from '../../store/store.ts';
import type { LeaseGate, NodeContext } from '../context.ts';

/** Marks a deletion one node has already forwarded, so it is never forwarded twice. */
export const FORWARDED_HEADER = 'x-svc-forwarded';

/** How long a forwarded deletion may take before this node gives up on the coordinator. */
const FORWARD_TIMEOUT_MS = 30_000;

/** What the route needs from the rest of the daemon; the route wires the real ones. */
export interface DeletionDeps {
  lease: LeaseGate | undefined;
  /** A fresh single-use node token; throws when this node has no signing key. */
  mintNodeToken: (() => Promise<string>) | undefined;
}

/** `?force=1` and `?force=true` force; any other value does not. */
export function isForced(value: unknown): boolean {
  return value === '1' || value === 'true';
}

export async function deleteApplicationRoute(
  app: FastifyInstance,
  ctx: NodeContext,
  deps?: DeletionDeps,
): Promise<void> {
  app.delete<{ Params: { name: string }; Querystring: { force?: string } }>(
    '/v1/applications/:name',
    { config: { auth: 'node-or-operator' as const } },
    async (request, reply) => {
      const caller = (request as FastifyRequest & { caller?: Caller }).caller;
      const forwarded = caller?.kind === 'node' && request.headers[FORWARDED_HEADER] === '1';
      const answer = await deleteThroughCoordinator(ctx, deps ?? defaultDeps(ctx), request, reply, forwarded);
      // Recorded by the node the caller reached, naming the caller (not the forwarding node).
      if (!forwarded && reply.statusCode < 300) {
        ctx.events?.emit({
          kind: 'application.deleted',
          application: request.params.name,
          ...(caller ? { actor: describeCaller(caller) } : {}),
          force: isForced(request.query.force),
        });
      }
      return answer;
    },
  );
}

function defaultDeps(ctx: NodeContext): DeletionDeps {
  return { lease: ctx.lease, mintNodeToken: ctx.mintNodeToken };
}

async function deleteThroughCoordinator(
  ctx: NodeContext,
  deps: DeletionDeps,
  request: FastifyRequest<{ Params: { name: string }; Querystring: { force?: string } }>,
  reply: FastifyReply,
  forwarded: boolean,
): Promise<unknown> {
  const { name } = request.params;
  const force = isForced(request.query.force);
  const lease = deps.lease;
  if (!lease) {
    throw new Problem(
      'capability-missing',
      'This node cannot delete applications',
      'it runs no coordinator lease',
    );
  }
  if (lease.isCoordinator()) return deleteHere(ctx, name, force);
  if (lease.view() === null) {
    await lease.tryAcquire();
    if (lease.isCoordinator()) return deleteHere(ctx, name, force);
  }
  const holder = lease.view();
  if (!holder) {
    throw new Problem(
      'draining',
      'No node is coordinating',
      'nobody holds the coordinator lease and this node could not take it; retry shortly',
    );
  }
  if (forwarded) {
    throw new Problem(
      'draining',
      'Not the coordinator',
      `this deletion was forwarded here, but the lease is held by ${holder.node}; retry`,
    );
  }
  return forward(ctx, deps, request, reply, holder.node);
}

async function deleteHere(ctx: NodeContext, name: string, force: boolean): Promise<{ deleted: string[] }> {
  checkDeletable(await getApplication(ctx.store, name), force);
  const deleted = await deleteApplicationData(ctx.store, name);
  ctx.log.info(
    { event: 'application.deleted', application: name, force, keys: deleted.length },
    `deleted ${name}`,
  );
  return { deleted };
}

/** Sends the deletion once to the coordinator and answers exactly what it answered. */
async function forward(
  ctx: NodeContext,
  deps: DeletionDeps,
  request: FastifyRequest<{ Params: { name: string }; Querystring: { force?: string } }>,
  reply: FastifyReply,
  coordinator: string,
): Promise<FastifyReply> {
  let token: string;
  try {
    if (!deps.mintNodeToken) throw new Error('no node token minter');
    token = await deps.mintNodeToken();
  } catch {
    throw new Problem(
      'capability-missing',
      'Cannot reach the coordinator',
      `this node has no signing key to forward the deletion to the coordinator ${coordinator}; send it to ${coordinator}`,
    );
  }
  const record = await getJson<NodeRecord>(ctx.store, keys.nodeRecord(coordinator));
  if (!record?.value.advertise) {
    throw new Problem(
      'capability-missing',
      'Cannot reach the coordinator',
      `the coordinator ${coordinator} has no registered address`,
    );
  }
  const query = request.query.force === undefined ? '' : `?force=${encodeURIComponent(request.query.force)}`;
  const url = `http://${record.value.advertise}/v1/applications/${encodeURIComponent(request.params.name)}${query}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}`, [FORWARDED_HEADER]: '1' },
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
  } catch (err) {
    ctx.log.warn({ err, coordinator, url }, 'forwarding a deletion failed');
    throw new Problem(
      'capability-missing',
      'Cannot reach the coordinator',
      `the coordinator ${coordinator} at ${record.value.advertise} did not answer; retry`,
    );
  }
  const body = Buffer.from(await response.arrayBuffer());
  // The coordinator's write: this node's listings show it at once, as for a change made here.
  if (response.ok) ctx.fleet?.changed();
  const type = response.headers.get('content-type');
  if (type) reply.header('content-type', type);
  const retryAfter = response.headers.get('retry-after');
  if (retryAfter) reply.header('retry-after', retryAfter);
  return reply.code(response.status).send(body);
}
