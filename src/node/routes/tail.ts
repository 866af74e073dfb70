// GET /v1/applications/:name/tail (docs/api.md "Live tail", docs/observability.md "svc tail"): a
// live stream of the application's requests, console lines, uncaught exceptions and runtime
// lines, one JSON record a line, from every node that runs it. Called by an operator, this node
// follows its own runtime process and asks every other node running the application for its
// own; called by a node (that fan-out), it follows its own process only.
//
// Tier `node-or-operator`: the guard has checked `:name` and an operator's scope before the handler.

import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../auth/guard.ts';
import { filterQuery, parseFilters, type TailFilters } from '../../observability/tail.ts';
import {
  followLocal,
  followPeer,
  type Peer,
  TailOutput,
  type TailSource,
  tailSocketPath,
} from '../../observability/tail-sources.ts';
import { Problem } from '../../problem.ts';
import { readApplication } from '../../registry/applications.ts';
import type { NodeContext } from '../context.ts';
import { readNodeRecord } from '../deploys/records.ts';

type TailRequest = {
  Params: { name: string };
  Querystring: Record<string, string | string[] | undefined>;
};

/** How often the nodes running the application are looked at again (from memory, no bucket call). */
const PEER_LOOK_MS = 2_000;

export async function tailRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.get<TailRequest>(
    '/v1/applications/:name/tail',
    { config: { auth: 'node-or-operator' } },
    async (request, reply) => {
      const { name } = request.params;
      const filters = parseFilters(request.query);
      const caller = callerOf(request);
      if (caller.kind !== 'node' && !(await readApplication(ctx.store, name)))
        throw new Problem(
          'not-found',
          'No such application',
          `there is no application ${JSON.stringify(name)}`,
        );
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
      });
      raw.flushHeaders();
      const where = { node: ctx.nodeId, application: name };
      const out = new TailOutput(raw, where);
      const sources: TailSource[] = [];
      if (wanted(filters, ctx.nodeId))
        sources.push(followLocal(tailSocketPath(ctx.settings.node.stateDir, name), where, filters, out));
      const stopPeers = caller.kind === 'node' ? () => {} : followPeers(ctx, name, filters, out);
      request.raw.socket.on('close', () => {
        for (const source of sources) source.stop();
        stopPeers();
      });
    },
  );
}

function wanted(filters: TailFilters, node: string): boolean {
  return filters.node === undefined || filters.node.includes(node);
}

/** Follows every other node that runs the application, as they come; answers how to stop. */
function followPeers(
  ctx: NodeContext,
  application: string,
  filters: TailFilters,
  out: TailOutput,
): () => void {
  const mint = ctx.mintNodeToken;
  if (!mint || !ctx.fleet) return () => {};
  const path = `/v1/applications/${encodeURIComponent(application)}/tail`;
  const query = filterQuery(filters);
  const followed = new Map<string, TailSource>();
  const looking = new Set<string>();
  const serving = () =>
    new Set(
      (ctx.fleet?.processesOf(application) ?? [])
        .map((p) => p.node)
        .filter((node) => node !== ctx.nodeId && wanted(filters, node)),
    );
  let current = serving();
  let stopped = false;
  const look = () => {
    current = serving();
    for (const node of current) {
      if (followed.has(node) || looking.has(node)) continue;
      looking.add(node);
      void readNodeRecord(ctx.store, node)
        .then((record) => {
          if (stopped || !record?.advertise || followed.has(node)) return;
          const peer: Peer = { id: node, advertise: record.advertise };
          followed.set(
            node,
            followPeer(
              peer,
              path,
              { node: ctx.nodeId, application },
              {
                mintToken: mint,
                query,
                // A node that restarts keeps its record: it is followed until it no longer runs the application.
                stillServes: () => {
                  const still = current.has(node);
                  if (!still) followed.delete(node);
                  return still;
                },
                out,
              },
            ),
          );
        })
        .catch(() => {})
        .finally(() => looking.delete(node));
    }
  };
  look();
  const timer = setInterval(look, PEER_LOOK_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
    for (const source of followed.values()) source.stop();
  };
}
