// docs/api.md "Operator keys": `GET /v1/operators`, `POST /v1/operators`, `DELETE /v1/operators/:id`.
// The guard has verified an operator token and re-read the caller's record for this request;
// the rules themselves live in src/auth/operators.ts.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { OperatorCaller } from '../../auth/caller.ts';
import { operatorRecordOf } from '../../auth/guard.ts';
import {
  decideRegistration,
  lineage,
  listOperators,
  parseRegistration,
  revokeOperator,
  writeOperator,
} from '../../auth/operators.ts';
import type { TrustedOperator } from '../../auth/records.ts';
import { checkOperatorId } from '../../registry/names.ts';
import type { NodeContext } from '../context.ts';

const operatorOnly = { config: { auth: 'operator' as const } };

export function operatorRoutes(app: FastifyInstance, ctx: NodeContext): void {
  app.get('/v1/operators', operatorOnly, async (request) => {
    const { caller, record } = operatorOf(request);
    const all = await listOperators(ctx.store);
    if (caller.role === 'admin') return { operators: all };
    return { operators: lineage(record, all), scoped: true };
  });

  app.post('/v1/operators', operatorOnly, async (request) => {
    const { caller } = operatorOf(request);
    const decided = decideRegistration(caller, parseRegistration(request.body));
    const operator = await writeOperator(ctx.store, decided);
    // A kid this node remembered as unknown becomes usable at once here. (The verifier is there:
    // the guard verified the caller's operator token with it.)
    ctx.auth?.verifier.forget(operator.id);
    ctx.events?.emit({
      kind: 'operator.registered',
      actor: caller.id,
      operator: operator.id,
      role: operator.role,
    });
    ctx.log.info(
      { event: 'operator.registered', operator: operator.id, role: operator.role, by: caller.id },
      `operator key ${operator.id} registered by ${caller.id}`,
    );
    return { operator };
  });

  app.delete<{ Params: { id: string } }>('/v1/operators/:id', operatorOnly, async (request) => {
    const { caller, record } = operatorOf(request);
    const id = checkOperatorId(request.params.id);
    await revokeOperator(ctx.store, caller, record, id);
    ctx.auth?.verifier.forget(id);
    ctx.events?.emit({ kind: 'operator.revoked', actor: caller.id, operator: id });
    ctx.log.info(
      { event: 'operator.revoked', operator: id, by: caller.id },
      `operator key ${id} revoked by ${caller.id}`,
    );
    return { removed: id };
  });
}

function operatorOf(request: FastifyRequest): { caller: OperatorCaller; record: TrustedOperator } {
  const record = operatorRecordOf(request);
  if (request.caller?.kind !== 'operator' || !record) {
    // The route is declared `operator`, so the guard let nothing else through.
    throw new Error('operator route reached without a verified operator');
  }
  return { caller: request.caller, record };
}
