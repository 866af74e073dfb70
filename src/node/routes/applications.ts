// docs/api.md "Applications", "Custom domains"
// and "Deleting an application": the application routes. The auth guard (src/auth/) has
// authenticated the caller, checked `:name` is an application name and enforced operator scope
// on it before any handler runs; handlers validate bodies, then do one registry operation.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  type Caller,
  describeCaller,
  narrowList,
  patternCovered,
  readView,
  requireScope,
} from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { Problem } from '../../problem.ts';
import { parseLabelsBody, parseReplicasBody, parseSelectorBody } from '../../registry/application-bodies.ts';
import { redactApplication } from '../../registry/application-view.ts';
import {
  getApplication,
  listApplications,
  retireApplication,
  setBlocked,
  setLabels,
  setReplicas,
  setSelector,
  unretireApplication,
} from '../../registry/applications.ts';
import { checkClaimHost, claimDomain, releaseDomain } from '../../registry/domains.ts';
import { checkApplicationName } from '../../registry/names.ts';
import type { ApplicationRecord } from '../../registry/records.ts';
import type { NodeContext } from '../context.ts';
import {
  abandoned,
  awaitProcessChange,
  servingFromQuery,
  WAIT_HEADER,
  waitFromQuery,
} from '../deploys/long-poll.ts';
import { deleteApplicationRoute } from './delete-application.ts';
import { rollbackRoute } from './rollback.ts';

const operator = { config: { auth: 'operator' as const } };
const admin = { config: { auth: 'admin' as const } };
const nodeOrOperator = { config: { auth: 'node-or-operator' as const } };

type NameParams = { Params: { name: string } };
type HostParams = { Params: { name: string; host: string }; Querystring: { wildcard?: string } };

/** Registers every `/v1/applications` route. */
export async function applicationRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.get('/v1/applications', operator, async (request) => {
    const caller = callerOf(request);
    // From the registry cache where the fleet service keeps one, not a read of every record.
    const records = ctx.fleet ? await ctx.fleet.applications() : await listApplications(ctx.store);
    const narrowed = narrowList(caller, records, (record) => record.name);
    const applications = narrowed.items.map((record) => redactApplication(record, !narrowed.redact));
    return narrowed.scoped ? { applications, scoped: true } : { applications };
  });

  app.get<NameParams>('/v1/applications/:name', operator, async (request, reply) => {
    const { caller, name } = target(request);
    // With `wait`, a long poll on the processes (docs/api.md "Waiting for a change").
    const waitMs = waitFromQuery(request.query);
    const serving = servingFromQuery(request.query);
    const found = answer(caller, await getApplication(ctx.store, name));
    // Beside the record: where it runs and, where it does not turn ready, why (from the node
    // records this node keeps). An addition to the spec's answer.
    const fleet = ctx.fleet;
    if (!fleet) return found;
    const where = () => {
      const placement = fleet.placements().find((p) => p.application === name);
      return {
        processes: fleet.processesOf(name),
        ...(placement ? { placement: { state: placement.state, nodes: placement.nodes } } : {}),
      };
    };
    if (waitMs === undefined) return { ...found, ...where() };
    const { view, changed } = await awaitProcessChange(where, serving, waitMs, abandoned(reply.raw));
    reply.header(WAIT_HEADER, changed ? 'changed' : 'unchanged');
    return { ...found, ...view };
  });

  for (const [action, blocked] of [
    ['block', true],
    ['unblock', false],
  ] as const) {
    app.post<NameParams>(`/v1/applications/:name/${action}`, admin, async (request) => {
      const { caller, name } = target(request);
      const { application, changed } = await setBlocked(ctx.store, name, blocked);
      // Each block and unblock emits one event naming the actor.
      ctx.events?.emit({
        kind: `application.${action}ed`,
        application: name,
        actor: describeCaller(caller),
        changed,
      });
      ctx.log.info(
        { event: `application.${action}ed`, application: name, actor: describeCaller(caller), changed },
        `application ${name} ${action}ed by ${describeCaller(caller)}`,
      );
      return answer(caller, application);
    });
  }

  app.post<NameParams>('/v1/applications/:name/labels', admin, async (request) => {
    const { caller, name } = target(request);
    const labels = parseLabelsBody(request.body);
    const record = await setLabels(ctx.store, name, labels);
    ctx.events?.emit({
      kind: 'application.labels',
      application: name,
      actor: describeCaller(caller),
      labels,
    });
    return answer(caller, record);
  });

  app.post<NameParams>('/v1/applications/:name/retire', nodeOrOperator, async (request) => {
    const { caller, name } = target(request);
    const grace = ctx.settings.applications.retireGraceMs;
    const record = await retireApplication(ctx.store, name, describeCaller(caller), grace);
    ctx.events?.emit({ kind: 'application.retired', application: name, actor: describeCaller(caller) });
    return answer(caller, record);
  });

  app.post<NameParams>('/v1/applications/:name/unretire', nodeOrOperator, async (request) => {
    const { caller, name } = target(request);
    const record = await unretireApplication(ctx.store, name);
    ctx.events?.emit({ kind: 'application.unretired', application: name, actor: describeCaller(caller) });
    return answer(caller, record);
  });

  app.post<NameParams>('/v1/applications/:name/selector', nodeOrOperator, async (request) => {
    const { caller, name } = target(request);
    const selector = parseSelectorBody(request.body);
    const record = await setSelector(ctx.store, name, selector);
    ctx.events?.emit({
      kind: 'application.selector',
      application: name,
      actor: describeCaller(caller),
      selector,
    });
    return answer(caller, record);
  });

  // Another node moved the application's deployment (docs/api.md "Deploys"): the runtime process
  // here looks at the selector now rather than after this node's next pass.
  app.post<NameParams>('/v1/applications/:name/deployment-moved', nodeOrOperator, async (request) => {
    const { caller, name } = target(request);
    checkApplicationName(name);
    const signalled = (ctx.fleet?.processesOf(name) ?? []).some((p) => p.node === ctx.nodeId);
    ctx.fleet?.deploymentMovedElsewhere(name);
    ctx.log.info(
      { event: 'deployment.moved-elsewhere', application: name, by: describeCaller(caller), signalled },
      `${describeCaller(caller)} moved the deployment of ${name}`,
    );
    return { application: name, signalled };
  });

  app.post<NameParams>('/v1/applications/:name/replicas', nodeOrOperator, async (request) => {
    const { caller, name } = target(request);
    const replicas = parseReplicasBody(request.body);
    const record = await setReplicas(ctx.store, name, replicas);
    ctx.events?.emit({
      kind: 'application.replicas',
      application: name,
      actor: describeCaller(caller),
      replicas,
    });
    return answer(caller, record);
  });

  app.post<HostParams>('/v1/applications/:name/domains/:host', operator, async (request) => {
    const { caller, name } = target(request);
    const host = checkClaimHost(request.params.host, ctx.settings.platform.domains);
    // Only `1` counts (docs/api.md); `true`, `yes` and the rest claim the host alone.
    const wildcard = request.query.wildcard === '1';
    if (wildcard) requireWildcardScope(caller, name);
    const claimed = await claimDomain(ctx.store, {
      application: name,
      host,
      wildcard,
      by: describeCaller(caller),
      reaches: (holder) => readView(caller).reaches(holder),
      platformDomains: ctx.settings.platform.domains,
    });
    ctx.events?.emit({
      kind: 'domain.claimed',
      application: name,
      actor: describeCaller(caller),
      host,
      wildcard,
    });
    return { ...claimed, application: redactFor(caller, claimed.application) };
  });

  app.delete<HostParams>('/v1/applications/:name/domains/:host', operator, async (request) => {
    const { caller, name } = target(request);
    // Not against the platform domains: a claim made before a domain became the platform's
    // must still be releasable.
    const host = checkClaimHost(request.params.host, []);
    const released = await releaseDomain(ctx.store, name, host, ctx.settings.platform.domains);
    ctx.events?.emit({ kind: 'domain.released', application: name, actor: describeCaller(caller), host });
    return { ...released, application: redactFor(caller, released.application) };
  });

  await deleteApplicationRoute(app, ctx);
  await rollbackRoute(app, ctx);
}

/** The caller and `:name`, with scope re-checked (no I/O; the guard already refused out-of-scope calls). */
function target(request: FastifyRequest<{ Params: { name: string } }>): { caller: Caller; name: string } {
  const caller = callerOf(request);
  requireScope(caller, request.params.name);
  return { caller, name: request.params.name };
}

function answer(caller: Caller, record: ApplicationRecord) {
  return { application: redactFor(caller, record) };
}

function redactFor(caller: Caller, record: ApplicationRecord) {
  return redactApplication(record, !readView(caller).redact);
}

/** `wildcard=1` also hands `<env>.<host>` to `<name>-<env>`: the key must reach `<name>-*`. */
function requireWildcardScope(caller: Caller, name: string): void {
  const covered = caller.kind === 'operator' && patternCovered(caller.applications, `${name}-*`);
  if (!covered) {
    throw new Problem(
      'auth-scope',
      'Out of scope',
      `claiming subdomains needs a key that reaches every application "${name}-*"`,
    );
  }
}
