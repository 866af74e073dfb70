// The node API's HTTP server (docs/api.md "Routes", "Conventions", "Error codes"): Fastify
// with one JSON parser bounded by `api.jsonBytes`, every failure a problem document, and
// route plugins registered per concern.

import http from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import { authGuard } from '../auth/guard.ts';
import { verifyWorkloadToken } from '../auth/workload.ts';
import { isProblem, PROBLEM_CONTENT_TYPE, Problem } from '../problem.ts';
import type { NodeContext } from './context.ts';
import { authState } from './identity-service.ts';
import { applicationRoutes } from './routes/applications.ts';
import { d1Routes } from './routes/d1.ts';
import { deployRoutes } from './routes/deploys.ts';
import { freezeRoutes } from './routes/freeze.ts';
import { healthRoutes } from './routes/health.ts';
import { ingressRoutes } from './routes/ingress.ts';
import { kvRoutes } from './routes/kv.ts';
import { objectRoutes } from './routes/objects.ts';
import { operatorRoutes } from './routes/operators.ts';
import { queueRoutes } from './routes/queues.ts';
import { r2Routes } from './routes/r2.ts';
import { secretRoutes } from './routes/secrets.ts';
import { stateRoutes } from './routes/state.ts';
import { tailRoutes } from './routes/tail.ts';

/** A route plugin: registers one concern's routes against the shared context. */
export type RoutePlugin = (app: FastifyInstance, ctx: NodeContext) => void | Promise<void>;

const routePlugins: RoutePlugin[] = [
  healthRoutes,
  ingressRoutes,
  operatorRoutes,
  applicationRoutes,
  secretRoutes,
  kvRoutes,
  d1Routes,
  r2Routes,
  queueRoutes,
  objectRoutes,
  freezeRoutes,
  deployRoutes,
  stateRoutes,
  tailRoutes,
];

/** Builds the server with every route plugin; the caller listens. */
export async function buildServer(
  ctx: NodeContext,
  plugins: RoutePlugin[] = routePlugins,
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: false,
    bodyLimit: ctx.settings.api.jsonBytes,
    forceCloseConnections: true,
    return503OnClosing: true,
    // Requests Node's parser refuses before Fastify sees them answer problem documents too.
    clientErrorHandler: answerClientError,
    // A path parameter may be a custom host (253 characters, more once percent-encoded).
    routerOptions: { maxParamLength: 1024 },
    // Router failures (a parameter over that, bad percent-encoding) answer problem documents too.
    frameworkErrors: (err, request, reply) =>
      sendProblem(
        reply,
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new Problem('invalid-input', 'Malformed request', 'a path segment is over 1024 characters')
          : // On the storage protocol the path is a key: its refusal is the key's (docs/ingress.md).
            new Problem(
              'invalid-input',
              isStorageKeyPath(request.url) ? 'Invalid storage key' : 'Malformed request',
              'the path is not valid percent-encoding',
            ),
      ),
  });
  installJsonParser(app, ctx.settings.api.jsonBytes);
  app.setErrorHandler((err, request, reply) => {
    const problem = toProblem(err);
    if (problem.status >= 500 && !isProblem(err)) ctx.log.error({ err, url: request.url }, 'request failed');
    return sendProblem(reply, problem);
  });
  app.setNotFoundHandler((request, reply) => {
    const problem = new Problem(
      'not-found',
      'No such route',
      `${request.method} ${request.url.split('?')[0]} is not a route of this node`,
    );
    return sendProblem(reply, problem);
  });
  // Authentication runs in onRequest, before any body is read, for every route below.
  authGuard(app, {
    store: ctx.store,
    log: ctx.log,
    auth: () => authState(ctx),
    // The context owns the workload verifier, so its issuer cache is shared by every request.
    verifyWorkloadToken: (token, application) => verifyWorkloadToken(ctx, token, application),
  });
  for (const plugin of plugins) await plugin(app, ctx);
  return app;
}

function isStorageKeyPath(url: string): boolean {
  return url.startsWith('/v1/storage/objects/') || url.startsWith('/v1/storage/locks/');
}

/**
 * Node's HTTP parser refused a request (headers over its limit, a malformed request line). The
 * answer is a problem document like every other: headers over the limit are almost always an
 * oversized bearer token, so that is `auth-invalid`; anything else is `invalid-input`.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const problem =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new Problem(
          'auth-invalid',
          'Token rejected',
          `the request headers are over ${http.maxHeaderSize} bytes; a bearer token is far shorter`,
        )
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new Problem('invalid-input', 'Request timed out', 'the request was not received in time')
        : new Problem('invalid-input', 'Malformed request', 'the request is not valid HTTP/1.1');
  if (socket.writable) {
    const body = JSON.stringify(problem);
    socket.write(
      `HTTP/1.1 ${problem.status} ${http.STATUS_CODES[problem.status]}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** Answers a problem document with exactly `application/problem+json` (a Buffer keeps Fastify from adding a charset). */
export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  return reply
    .code(problem.status)
    .headers(problem.headers)
    .header('content-type', PROBLEM_CONTENT_TYPE)
    .send(Buffer.from(JSON.stringify(problem)));
}

/** JSON control bodies: bounded, and malformed JSON is `invalid-input`, never a 500. */
function installJsonParser(app: FastifyInstance, limit: number): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    /^application\/([a-z0-9.+-]+\+)?json$/,
    { parseAs: 'string', bodyLimit: limit },
    (_req, body, done) => {
      const text = body as string;
      if (text.trim() === '') return done(null, undefined);
      try {
        done(null, JSON.parse(text));
      } catch {
        done(
          new Problem('invalid-input', 'Malformed JSON body', 'the request body is not valid JSON'),
          undefined,
        );
      }
    },
  );
}

/** Maps anything thrown in a handler to the problem it answers with. */
export function toProblem(err: unknown): Problem {
  if (isProblem(err)) return err;
  const fastifyError = err as FastifyError;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem(
        'resource-limit',
        'Request body too large',
        'the body is over the api.jsonBytes limit (--json-bytes)',
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Problem('invalid-input', 'Unsupported content type', 'send application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new Problem(
        'invalid-input',
        'Invalid content-length',
        'the content-length does not match the body',
      );
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new Problem('invalid-input', 'Malformed request', fastifyError.message);
  }
  return new Problem('internal', 'Internal error', 'the node failed to answer; see its log');
}
