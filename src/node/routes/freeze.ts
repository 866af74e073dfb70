// docs/api.md "Fleet freeze": POST, DELETE and GET /v1/fleet/freeze. Writes are admin-only (a
// non-admin key is `auth-scope`, enforced by the guard); reading needs any operator key.

import type { FastifyInstance } from 'fastify';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import {
  freezeDeploys,
  notFrozen,
  parseFreezeBody,
  readFreeze,
  unfreezeDeploys,
} from '../../registry/freeze.ts';
import type { NodeContext } from '../context.ts';

export async function freezeRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.post('/v1/fleet/freeze', { config: { auth: 'admin' as const } }, async (request) => {
    const reason = parseFreezeBody(request.body);
    const by = describeCaller(callerOf(request));
    const answer = await freezeDeploys(ctx.store, by, reason);
    if (answer.created) ctx.events?.emit({ kind: 'fleet.frozen', actor: by, by, reason });
    if (answer.created) ctx.log.info({ event: 'fleet.frozen', actor: by, reason }, `deploys frozen by ${by}`);
    return answer;
  });

  app.delete('/v1/fleet/freeze', { config: { auth: 'admin' as const } }, async (request) => {
    const answer = await unfreezeDeploys(ctx.store);
    const by = describeCaller(callerOf(request));
    if (answer.lifted) ctx.events?.emit({ kind: 'fleet.unfrozen', actor: by, by });
    if (answer.lifted) ctx.log.info({ event: 'fleet.unfrozen', actor: by }, `deploys unfrozen by ${by}`);
    return answer;
  });

  app.get('/v1/fleet/freeze', { config: { auth: 'operator' as const } }, async () => {
    const freeze = await readFreeze(ctx.store);
    if (!freeze) throw notFrozen();
    return { freeze };
  });
}
