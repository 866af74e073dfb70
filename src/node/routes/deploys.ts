// docs/api.md "Deploys" (POST /v1/applications/:name/deploys, GET /v1/deploys/:id) and "Waiting for
// a change" (GET /v1/deploys/:id?wait=). Both routes answer node, operator and workload tokens
// (`auth: 'deploy'`); the guard authenticates in onRequest, before the header or body is read.
//
// The deploy route reads its body raw and only once every pre-body check has passed (intake.ts):
// its scope has a pass-through parser for every content type, so the body is still unread when
// the handler runs. A client that sends `Expect: 100-continue` gets the 100 only then, so a
// refused deploy never uploads its artifact. A refusal that comes with the body partly read
// closes the connection once answered.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requireScope } from '../../auth/caller.ts';
import { notFound } from '../../problem.ts';
import type { NodeContext } from '../context.ts';
import { acceptDeploy } from '../deploys/intake.ts';
import {
  abandoned,
  awaitDeployChange,
  stateFromQuery,
  WAIT_HEADER,
  waitFromQuery,
} from '../deploys/long-poll.ts';
import { publishedBy } from '../deploys/published.ts';
import {
  type AcceptorView,
  acceptorFromRecord,
  applicationOfDeployId,
  type DeployRecord,
  type DeployStatus,
  isUnmoved,
  judgeDeploy,
  ownView,
  readDeployRecord,
  readNodeRecord,
  statusOf,
} from '../deploys/records.ts';

const deployAuth = { config: { auth: 'deploy' as const } };
const INTAKE_PATH = /^\/v1\/applications\/[^/?]+\/deploys\/?(\?|$)/;
/** How long a refused upload may go on draining before its connection is closed. */
const LINGER_MS = 2_000;

export async function deployRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  answerContinueLate(app);

  await app.register(async (scope) => {
    // The artifact is read by intake, not by a parser: the parser hands the stream over unread.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    scope.post<{ Params: { name: string } }>(
      '/v1/applications/:name/deploys',
      deployAuth,
      async (request, reply) => {
        const application = request.params.name;
        requireScope(request.caller, application);
        try {
          const status = await acceptDeploy(ctx, {
            caller: request.caller,
            application,
            headers: request.headers,
            body: request.raw,
            beforeBody: () => {
              if (/100-continue/i.test(String(request.headers.expect ?? ''))) reply.raw.writeContinue();
            },
          });
          return reply.code(202).header('location', `/v1/deploys/${status.id}`).send(status);
        } catch (err) {
          closeAfterAnswer(request, reply);
          throw err;
        }
      },
    );
  });

  // With `wait`, a long poll (long-poll.ts): the answer is held until the deploy leaves `state`.
  app.get<{ Params: { id: string } }>('/v1/deploys/:id', deployAuth, async (request, reply) => {
    const id = request.params.id;
    // A value that is no deploy id names no application: the caller was verified against none.
    const application = applicationOfDeployId(id);
    if (!application) throw deployNotFound(id);
    requireScope(request.caller, application);
    const waitMs = waitFromQuery(request.query);
    const from = stateFromQuery(request.query);
    const read = async () => {
      const found = await readDeployRecord(ctx.store, application, id);
      if (!found || found.record.id !== id || found.record.application !== application)
        throw deployNotFound(id);
      return judgedStatus(ctx, found.record);
    };
    const status = await read();
    if (waitMs === undefined) return status;
    const waited = from ?? status.state;
    const answer = await awaitDeployChange(ctx, {
      id,
      status,
      from: waited,
      waitMs,
      gone: abandoned(reply.raw),
      reread: read,
    });
    reply.header(WAIT_HEADER, answer.state === waited ? 'unchanged' : 'changed');
    return answer;
  });
}

/**
 * The status a poll reports: the record, or, when it has stood still for the liveness window
 * and its node is not answering, `failed` `deploy-timeout`, or `deployed` when its publish had moved
 * the selector (the deployment's record names the deploy). Nothing is written; at most three reads.
 */
export async function judgedStatus(ctx: NodeContext, record: DeployRecord): Promise<DeployStatus> {
  const status = statusOf(record);
  const now = Date.now();
  if (!isUnmoved(record, now)) return status;
  const acceptor = await acceptorOf(ctx, record, now);
  const failure = judgeDeploy(record, acceptor, now);
  if (!failure) return status;
  // Its node died after its publish moved the selector: it deployed (two more reads).
  const published = await publishedBy(ctx.store, record);
  if (published) return { ...status, state: 'deployed', deployment: published.deployment };
  return { ...status, state: 'failed', ...failure };
}

/** What the fleet knows of the node that accepted a deploy; this node knows itself directly. */
export async function acceptorOf(
  ctx: NodeContext,
  record: DeployRecord,
  nowMs: number,
): Promise<AcceptorView> {
  if (record.node === ctx.nodeId) return ownView(ctx, record);
  return acceptorFromRecord(await readNodeRecord(ctx.store, record.node), record, nowMs);
}

function deployNotFound(id: string) {
  return notFound('No such deploy', `no deploy is recorded as ${JSON.stringify(id.slice(0, 100))}`);
}

/**
 * A refused deploy may have part of its artifact in flight: answer, let the rest drain briefly so
 * the client reads the answer rather than a reset, then close the connection.
 */
function closeAfterAnswer(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('connection', 'close');
  const raw = request.raw;
  raw.on('error', () => {});
  raw.resume();
  reply.raw.once('finish', () => {
    if (raw.complete) return;
    setTimeout(() => raw.socket?.destroy(), LINGER_MS).unref();
  });
}

const continueInstalled = new WeakSet<object>();

/**
 * Node answers `Expect: 100-continue` at once unless the server listens for `checkContinue`. Deploy
 * intake answers it itself, once its pre-body checks pass; every other request gets it at once,
 * as before.
 */
function answerContinueLate(app: FastifyInstance): void {
  const server = app.server;
  if (continueInstalled.has(server)) return;
  continueInstalled.add(server);
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    if (!(request.method === 'POST' && INTAKE_PATH.test(request.url ?? ''))) response.writeContinue();
    server.emit('request', request, response);
  });
}
