// The node's ingress-facing routes (docs/ingress.md "The routing document", "The storage protocol
// (version 1)"; docs/api.md "Routing and storage"): the routing document in the generic and native
// formats (rendered by src/ingress/rendered-routing.ts), and the storage protocol
// (src/ingress/storage.ts). Only the ingress token reaches them.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { preferFromQuery, RenderedRouting, routingFormat } from '../../ingress/rendered-routing.ts';
import { IngressStorage } from '../../ingress/storage.ts';
import {
  checkLockName,
  checkStorageKey,
  isRecursive,
  storageKeyFromPath,
} from '../../ingress/storage-keys.ts';
import { Problem } from '../../problem.ts';
import type { NodeContext } from '../context.ts';

/** Storage objects are certificates and ACME state: small. */
const STORAGE_OBJECT_BYTES = 16 * 1024 * 1024;

/** Registers the routing and storage routes; `ctx.routing` supplies the last pass's fleet state. */
export async function ingressRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  const rendered = new RenderedRouting({ current: () => ctx.routing?.current() ?? null }, ctx);
  await app.register(async (scope) => {
    registerRoutingRoutes(scope, rendered);
    registerStorageRoutes(scope, new IngressStorage(ctx.store));
  });
}

const ingressOnly = { config: { auth: 'ingress' as const } };

/** The native format named in the path, checked against those this node renders. */
function formatOf(request: FastifyRequest): string {
  return routingFormat((request.params as { format: string }).format);
}

function registerRoutingRoutes(app: FastifyInstance, rendered: RenderedRouting): void {
  app.get('/v1/ingress/routes', ingressOnly, async (request, reply) => {
    const text = rendered.bytes('', preferFromQuery(request.query));
    return reply.type('application/json').send(text);
  });
  app.get('/v1/ingress/routes/:format', ingressOnly, async (request, reply) => {
    const format = formatOf(request);
    const text = rendered.bytes(format, preferFromQuery(request.query));
    return reply.type('application/json').send(text);
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
