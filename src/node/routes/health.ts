// GET /.well-known/svc/health (docs/api.md): public, answers the health document.

import type { FastifyInstance } from 'fastify';
import type { NodeContext } from '../context.ts';

export function healthRoutes(app: FastifyInstance, ctx: NodeContext): void {
  app.get('/.well-known/svc/health', { config: { auth: 'public' } }, async () => ({
    ok: true,
    version: ctx.version,
    node: ctx.nodeId,
  }));
}
