// `POST /v1/applications/:name/rollback` (docs/deploys.md "History and rollback"): moves the application's
// fleet-wide selector back to an earlier deployment. Operator token, application scope (the
// guard checks both before the handler runs). Body optional: `{ to?: <deployment or deploy id> }`.

import type { FastifyInstance } from 'fastify';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { invalidInput } from '../../problem.ts';
import { rollback } from '../../runtime-tools/history.ts';
import type { NodeContext } from '../context.ts';

const operator = { config: { auth: 'operator' as const } };

/** The optional body: nothing, or an object with an optional non-empty `to`. */
export function parseRollbackBody(body: unknown): string | undefined {
  if (body === undefined || body === null || body === '') return undefined;
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalidInput('Malformed request', 'the body must be a JSON object { "to"?: string }');
  const to = (body as { to?: unknown }).to;
  if (to === undefined) return undefined;
  if (typeof to !== 'string' || !/^[a-z0-9.-]{1,100}$/.test(to))
    throw invalidInput('Malformed request', '`to` must name a deployment version or a deploy id');
  return to;
}

export async function rollbackRoute(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.post<{ Params: { name: string } }>('/v1/applications/:name/rollback', operator, async (request) => {
    const caller = callerOf(request);
    const name = request.params.name;
    const to = parseRollbackBody(request.body);
    const outcome = await rollback(ctx.store, { application: name, to, nowMs: Date.now() });
    const actor = describeCaller(caller);
    // The rollback event, naming the actor (docs/observability.md).
    ctx.events?.emit({
      kind: 'deployment.rolled-back',
      application: name,
      actor,
      from: outcome.from,
      to: outcome.to,
      changed: outcome.changed,
    });
    ctx.log.info(
      {
        event: 'deployment.rolled-back',
        application: name,
        actor,
        from: outcome.from,
        to: outcome.to,
        changed: outcome.changed,
      },
      `deployment of ${name} rolled back to ${outcome.to.deployment} by ${actor}`,
    );
    if (outcome.changed) {
      // This node's runtime process looks at the selector now; other nodes follow the record.
      ctx.fleet?.selectorMoved(name);
      ctx.fleet?.changed();
    }
    return outcome;
  });
}
