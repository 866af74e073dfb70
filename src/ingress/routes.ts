// The node's ingress-facing routes (spec 2 "Endpoints", "Storage protocol v1", "Errors";
// spec 1 "Storage and ingress routes"): the routing document in the generic and native
// formats, and the storage protocol. Only the ingress token reaches them.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { NodeContext } from '../node/context.ts';
import { Problem } from '../problem.ts';
import { renderProxyb, serializeProxyb } from '../routing/proxyb.ts';
import { renderRouting, resolvePrefer, serializeRouting } from '../routing/render.ts';
import type { RoutingInput } from '../routing/types.ts';
import { IngressStorage } from './storage.ts';
import { checkLockName, checkStorageKey, isRecursive, storageKeyFromPath } from './storage-keys.ts';

/** Where the routes find the fleet state of the last reconcile pass; null until the first pass. */
export interface RoutingSource {
  current(): RoutingInput | null;
}

/** The native formats the node renders, by name. */
const formats: Record<string, (input: RoutingInput, prefer: string | undefined, ctx: NodeContext) => string> =
  {
    proxyb: (input, prefer, ctx) =>
      serializeProxyb(
        renderProxyb(renderRouting(input, prefer), {
          entryPoints: ctx.settings.ingress.entryPoints,
          preferNode: resolvePrefer(prefer, input.selfNodeId),
        }),
      ),
  };

/** Storage objects are certificates and ACME state: small. */
const STORAGE_OBJECT_BYTES = 16 * 1024 * 1024;

/** Registers the routing and storage routes; `ctx.routing` supplies the last pass's fleet state. */
export async function ingressRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  const routing: RoutingSource = { current: () => ctx.routing?.current() ?? null };
  await app.register(async (scope) => {
    registerRoutingRoutes(scope, ctx, routing);
    registerStorageRoutes(scope, new IngressStorage(ctx.store));
  });
}

const ingressOnly = { config: { auth: 'ingress' as const } };

function routingInputOrDraining(routing: RoutingSource, ctx: NodeContext): RoutingInput {
  const input = routing.current();
  if (!input) {
    throw new Problem(
      'draining',
      'Routing is not known yet',
      `node ${ctx.nodeId} has not completed its first reconcile pass`,
    );
  }
  return input;
}

function preferOf(request: FastifyRequest): string | undefined {
  const prefer = (request.query as Record<string, unknown>).prefer;
  return typeof prefer === 'string' ? prefer : undefined;
}

function registerRoutingRoutes(app: FastifyInstance, ctx: NodeContext, routing: RoutingSource): void {
  app.get('/v1/ingress/routes', ingressOnly, async (request, reply) => {
    const input = routingInputOrDraining(routing, ctx);
    return reply.type('application/json').send(serializeRouting(renderRouting(input, preferOf(request))));
  });
  app.get('/v1/ingress/routes/:format', ingressOnly, async (request, reply) => {
    const { format } = request.params as { format: string };
    const render = Object.hasOwn(formats, format) ? formats[format] : undefined;
    if (!render) {
      throw new Problem(
        'not-found',
        'Unknown routing format',
        `this node renders: ${Object.keys(formats).join(', ')}`,
      );
    }
    const input = routingInputOrDraining(routing, ctx);
    return reply.type('application/json').send(render(input, preferOf(request), ctx));
  });
}

/** The raw path after a route prefix, without the query, still percent-encoded. */
function rawTail(request: FastifyRequest, prefix: string): string {
  const path = (request.raw.url ?? '').split('?')[0] ?? '';
  return path.slice(prefix.length);
}

function checkVersionHeader(request: FastifyRequest): void {
  const version = request.headers['x-svc-storage-version'];
  if (version === undefined || version === '' || version === '1') return;
  throw new Problem(
    'invalid-input',
    'Unsupported storage protocol version',
    `X-Svc-Storage-Version ${JSON.stringify(version)}; this node speaks 1`,
  );
}

function missing(key: string): Problem {
  return new Problem('not-found', 'No such key', `nothing is stored at ${JSON.stringify(key)}`);
}

function noContent(reply: FastifyReply): FastifyReply {
  return reply.code(204).send();
}

function registerStorageRoutes(app: FastifyInstance, storage: IngressStorage): void {
  // Values are bytes whatever their content type, so this scope reads every body raw.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    '*',
    { parseAs: 'buffer', bodyLimit: STORAGE_OBJECT_BYTES },
    (_request, body, done) => {
      done(null, body);
    },
  );
  app.addHook('preHandler', async (request) => {
    if (request.url.startsWith('/v1/storage/')) checkVersionHeader(request);
  });

  const objectsPrefix = '/v1/storage/objects/';
  app.put('/v1/storage/objects/*', ingressOnly, async (request, reply) => {
    const key = storageKeyFromPath(rawTail(request, objectsPrefix));
    const body = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
    await storage.put(key, body);
    return noContent(reply);
  });
  app.get('/v1/storage/objects/*', ingressOnly, async (request, reply) => {
    const key = storageKeyFromPath(rawTail(request, objectsPrefix));
    const value = await storage.get(key);
    if (!value) throw missing(key);
    return reply.type('application/octet-stream').send(Buffer.from(value));
  });
  app.delete('/v1/storage/objects/*', ingressOnly, async (request, reply) => {
    const key = storageKeyFromPath(rawTail(request, objectsPrefix));
    if (!(await storage.delete(key))) throw missing(key);
    return noContent(reply);
  });
  app.get('/v1/storage/list', ingressOnly, async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const prefix = typeof query.prefix === 'string' ? query.prefix : '';
    if (prefix !== '') checkStorageKey(prefix);
    const found = await storage.list(prefix, isRecursive(query.recursive));
    if (found.length === 0) throw missing(prefix);
    return reply.type('application/json').send(JSON.stringify(found));
  });
  app.get('/v1/storage/stat', ingressOnly, async (request) => {
    const query = request.query as Record<string, unknown>;
    const key = checkStorageKey(typeof query.key === 'string' ? query.key : '');
    const stat = await storage.stat(key);
    if (!stat) throw missing(key);
    return stat;
  });
  const locksPrefix = '/v1/storage/locks/';
  app.post('/v1/storage/locks/*', ingressOnly, async (request, reply) => {
    const name = checkLockName(storageKeyFromPath(rawTail(request, locksPrefix)));
    const token = request.headers['x-svc-lock-token'];
    await storage.acquire(name, typeof token === 'string' && token !== '' ? token : undefined);
    return noContent(reply);
  });
  app.delete('/v1/storage/locks/*', ingressOnly, async (request, reply) => {
    const name = checkLockName(storageKeyFromPath(rawTail(request, locksPrefix)));
    await storage.release(name);
    return noContent(reply);
  });
}
