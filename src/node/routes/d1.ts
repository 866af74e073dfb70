// docs/api.md "D1 databases": an application's D1 databases through a node, for operators and CI
// (`svc d1`, as `wrangler d1` uses Cloudflare's REST API) and for other nodes, which send here a
// worker's query for a database this node holds (runtime/src/bindings/d1.ts). The databases are
// those the serving deployment binds (its manifest's `d1_databases`). A query runs where the
// database's lease is: here, or forwarded once to its holder.
//
// Tiers: listing and time-travel info `operator-or-workload`; a query and a restore also take a
// node token (tier `deploy`: node, operator or workload), since nodes forward workers' queries.
// The guard has checked `:name` and the caller's scope before any handler runs.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { D1Answer, D1Request } from '../../../runtime/src/bindings/d1.ts';
import { D1_BOOKMARK_HEADER } from '../../../runtime/src/bindings/d1.ts';
import { D1_LEASE_TTL_MS, type D1LeaseRecord } from '../../../runtime/src/bindings/d1-lease.ts';
import {
  D1_RETENTION_MS,
  listGenerations,
  listSegments,
  readSnapshotHeader,
} from '../../../runtime/src/bindings/d1-log.ts';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { Problem } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import type { D1DatabaseBinding } from '../../runtime-tools/layout.ts';
import { getJson, type Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { servingManifest } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };
const nodeOrScoped = { config: { auth: 'deploy' as const } };

type NameParams = { Params: { name: string } };
type DbParams = { Params: { name: string; db: string } };

export async function d1Routes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  await app.register(async (scope) => {
    // The query body is D1's own JSON, passed on as text.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string', bodyLimit: 64 * 1024 * 1024 }, (_r, body, done) =>
      done(null, body),
    );

    scope.get<NameParams>('/v1/applications/:name/d1/databases', scoped, async (request) => {
      const { name } = request.params;
      const { deployment, databases } = await databasesOf(ctx.store, name);
      const listed = [];
      for (const d of databases) {
        const lease = await getJson<D1LeaseRecord>(ctx.store, keys.runtimeD1Lease(name, d.database_name));
        const held = lease && lease.value.expires_ms > Date.now() ? lease.value.node : null;
        listed.push({ ...d, served_by: held });
      }
      return { application: name, deployment, databases: listed };
    });

    scope.post<DbParams & { Querystring: { resultsFormat?: string } }>(
      '/v1/applications/:name/d1/databases/:db/query',
      nodeOrScoped,
      async (request, reply) => {
        const { name, db } = request.params;
        const forwarded = callerOf(request).kind === 'node';
        if (!forwarded) await checkDatabase(ctx.store, name, db);
        const d1 = service(ctx);
        const answer = await d1.handle(
          {
            application: name,
            database: db,
            endpoint: '/query',
            format: request.query.resultsFormat ?? null,
            body: typeof request.body === 'string' ? request.body : '',
          },
          forwarded,
        );
        if (!forwarded) {
          const result = JSON.parse(answer.body) as { success?: boolean; error?: string } | unknown[];
          const failed = Array.isArray(result)
            ? undefined
            : result.success === false
              ? result.error
              : undefined;
          if (failed !== undefined)
            throw new Problem('invalid-input', 'The query failed', `D1_ERROR: ${failed}`);
          logD1(ctx, request, 'd1.query', name, db);
        }
        return sendAnswer(reply, answer);
      },
    );

    scope.get<DbParams>('/v1/applications/:name/d1/databases/:db/time-travel', scoped, async (request) => {
      const { name, db } = request.params;
      await checkDatabase(ctx.store, name, db);
      return timeTravelInfo(ctx.store, name, db);
    });

    scope.post<DbParams & { Body: string }>(
      '/v1/applications/:name/d1/databases/:db/time-travel/restore',
      nodeOrScoped,
      async (request, reply) => {
        const { name, db } = request.params;
        const forwarded = callerOf(request).kind === 'node';
        if (!forwarded) await checkDatabase(ctx.store, name, db);
        const timestamp = restorePoint(request.body);
        const restored = await service(ctx).restore(name, db, timestamp);
        if ('holder' in restored) {
          if (forwarded)
            throw new Problem(
              'capability-missing',
              'Database moved',
              `node ${restored.holder} holds ${db} now; retry`,
            );
          return sendAnswer(
            reply,
            await forwardTo(ctx, {
              holder: restored.holder,
              application: name,
              path: `/d1/databases/${encodeURIComponent(db)}/time-travel/restore`,
              body: JSON.stringify({ timestamp }),
              passStatus: true,
            }),
          );
        }
        logD1(ctx, request, 'd1.restore', name, db, { timestamp });
        return { application: name, database: db, restored_to_ms: timestamp, bookmark: restored.bookmark };
      },
    );
  });
}

/** An operator's query or restore, in the node's log with who sent it. */
function logD1(
  ctx: NodeContext,
  request: FastifyRequest,
  event: string,
  application: string,
  database: string,
  extra: Record<string, number> = {},
): void {
  const actor = describeCaller(callerOf(request));
  ctx.log.info(
    { event, actor, application, database, ...extra },
    `${event} on D1 database ${database} of ${application} by ${actor}`,
  );
}

function service(ctx: NodeContext) {
  if (!ctx.d1)
    throw new Problem(
      'capability-missing',
      'D1 is not running',
      'this node serves no D1 databases; retry once it is up',
    );
  return ctx.d1;
}

function restorePoint(body: unknown): number {
  let doc: { timestamp?: unknown } = {};
  try {
    doc = JSON.parse(typeof body === 'string' ? body : '{}');
  } catch {}
  const at = typeof doc.timestamp === 'string' ? Date.parse(doc.timestamp) : Number(doc.timestamp);
  if (!Number.isFinite(at))
    throw new Problem(
      'invalid-input',
      'Invalid restore point',
      'give "timestamp" as an RFC 3339 time or Unix milliseconds',
    );
  if (at > Date.now())
    throw new Problem('invalid-input', 'Invalid restore point', 'the timestamp is in the future');
  if (at < Date.now() - D1_RETENTION_MS)
    throw new Problem(
      'invalid-input',
      'Invalid restore point',
      'svc keeps 7 days of history; give a time within them',
    );
  return at;
}

/** What time travel can reach: the oldest snapshot's time, the newest write, the bookmark. */
async function timeTravelInfo(store: Store, application: string, database: string) {
  const ref = { store, application, database };
  const generations = await listGenerations(ref);
  const oldest = generations[0] === undefined ? null : await readSnapshotHeader(ref, generations[0]);
  const newest = generations.at(-1);
  const segments = newest === undefined ? [] : await listSegments(ref, newest);
  return {
    application,
    database,
    generations: generations.length,
    segments_in_newest: segments.length,
    earliest_ms: oldest?.time_ms ?? null,
    retention_days: D1_RETENTION_MS / (24 * 3600 * 1000),
  };
}

function sendAnswer(reply: FastifyReply, answer: D1Answer) {
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value);
  return reply.code(answer.status).send(answer.body);
}

/** The databases the serving deployment binds, one entry per database name. */
async function databasesOf(store: Store, application: string) {
  const { deployment, manifest } = await servingManifest(store, application);
  const seen = new Map<string, D1DatabaseBinding>();
  for (const d of manifest?.d1_databases ?? []) if (!seen.has(d.database_name)) seen.set(d.database_name, d);
  return { deployment, databases: [...seen.values()] };
}

async function checkDatabase(store: Store, application: string, database: string): Promise<void> {
  const { deployment, databases } = await databasesOf(store, application);
  if (databases.some((d) => d.database_name === database)) return;
  const known = databases.map((d) => `${d.database_name} (${d.binding})`).join(', ');
  throw new Problem(
    'not-found',
    'No such D1 database',
    deployment === null
      ? `${application} has no serving deployment; deploy one whose d1_databases binds ${JSON.stringify(database)}`
      : `${JSON.stringify(database)} is not bound by the serving deployment ${deployment} of ${application}${known ? ` (its databases: ${known})` : ' (it binds no D1 database)'}`,
  );
}

/** What a forward sends where: the holder, the route path after the application, the body. */
interface Forward {
  holder: string;
  application: string;
  path: string;
  body: string;
  query?: string;
  /** Answer the holder's status and body as they are (a restore); else a failure is D1's. */
  passStatus?: boolean;
  /** Holders' addresses already read, with when each was read: a query needs no bucket read. */
  addresses?: Map<string, { advertise: string; readMs: number }>;
}

/** How long a holder's address read from its node record is used before it is read again. */
const ADDRESS_TTL_MS = 30_000;

/**
 * Sends a D1 request once to the node holding the database, under a fresh node token, and
 * answers what it answered (the runtime host's `forward`, and a restore sent to the wrong node).
 */
export async function forwardTo(ctx: NodeContext, forward: Forward): Promise<D1Answer> {
  const { holder } = forward;
  const unreachable = (why: string): D1Answer => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      success: false,
      error: `the database is served by node ${holder}, ${why}; retry`,
    }),
  });
  const advertise = await addressOf(ctx, holder, forward.addresses);
  if (!advertise || !ctx.mintNodeToken) return unreachable('which this node cannot reach');
  let response: Response;
  try {
    response = await fetch(
      `http://${advertise}/v1/applications/${encodeURIComponent(forward.application)}${forward.path}${forward.query ?? ''}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${await ctx.mintNodeToken()}`, 'content-type': 'application/json' },
        body: forward.body,
        signal: AbortSignal.timeout(D1_LEASE_TTL_MS * 3),
      },
    );
  } catch (err) {
    forward.addresses?.delete(holder);
    return unreachable(`which did not answer (${(err as Error).message})`);
  }
  if (!response.ok && !forward.passStatus) {
    const problem = (await response.json().catch(() => ({}))) as { title?: string; detail?: string };
    return unreachable(`which answered ${response.status} ${problem.title ?? ''}: ${problem.detail ?? ''}`);
  }
  const headers: Record<string, string> = {
    'content-type': response.headers.get('content-type') ?? 'application/json',
  };
  const bookmark = response.headers.get(D1_BOOKMARK_HEADER);
  if (bookmark) headers[D1_BOOKMARK_HEADER] = bookmark;
  return { status: response.status, headers, body: await response.text() };
}

async function addressOf(
  ctx: NodeContext,
  holder: string,
  addresses: Forward['addresses'],
): Promise<string | undefined> {
  const known = addresses?.get(holder);
  if (known && Date.now() - known.readMs < ADDRESS_TTL_MS) return known.advertise;
  const record = await getJson<{ advertise?: string }>(ctx.store, keys.nodeRecord(holder));
  const advertise = record?.value.advertise;
  if (advertise) addresses?.set(holder, { advertise, readMs: Date.now() });
  return advertise;
}

/** The runtime host's `forward` for this node: a worker's query to the database's holder. */
export function forwardQuery(ctx: NodeContext) {
  const addresses = new Map<string, { advertise: string; readMs: number }>();
  return (holder: string, request: D1Request): Promise<D1Answer> =>
    forwardTo(ctx, {
      holder,
      application: request.application,
      path: `/d1/databases/${encodeURIComponent(request.database)}/query`,
      body: request.body,
      query: request.format ? `?resultsFormat=${encodeURIComponent(request.format)}` : '',
      addresses,
    });
}
