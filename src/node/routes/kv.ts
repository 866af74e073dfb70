// docs/api.md "Workers KV": an application's KV data through a node, for operators and CI jobs
// without bucket credentials (`svc kv`, as `wrangler kv` uses Cloudflare's REST API). The
// namespaces are those the serving deployment binds (its manifest's `kv_namespaces`); every read
// and write goes through the binding's own handler (runtime/src/bindings/kv.ts, without the node's
// read cache: an operator reads the bucket), so the storage format, the limits and Cloudflare's
// words for each refusal are the binding's, re-said here as problem documents.
//
// Tier `operator-or-workload`, as the secrets routes: the guard has authenticated the caller,
// checked `:name` and enforced scope on it before any handler runs.

import type { FastifyInstance } from 'fastify';
import {
  handleKv,
  KV_APPLICATION_HEADER,
  KV_LIMITS,
  KV_NAMESPACE_HEADER,
  type KvRequest,
  type KvResponse,
} from '../../../runtime/src/bindings/kv.ts';
import { Problem } from '../../problem.ts';
import type { KvNamespaceBinding } from '../../runtime-tools/layout.ts';
import type { Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { bodyTooLarge, logWrite, servingManifest, wildcardKey } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };

/** Cloudflare's bulk write limits (developers.cloudflare.com/api: "Write multiple key-value pairs"). */
export const KV_BULK_LIMITS = { maxPairs: 10_000, maxBodyBytes: 100 * 1024 * 1024 } as const;
/** How many writes of a bulk put are in flight at once. */
const BULK_WRITES_AT_ONCE = 16;

type NameParams = { Params: { name: string } };
type SpaceParams = { Params: { name: string; id: string } };
type ListQuery = { Querystring: { prefix?: string; cursor?: string; limit?: string } };
type PutQuery = { Querystring: { expiration?: string; expiration_ttl?: string; metadata?: string } };

/** The namespaces an application's serving deployment binds; `deployment` null when none serves. */
export interface KvNamespaces {
  application: string;
  deployment: string | null;
  namespaces: KvNamespaceBinding[];
}

export async function kvRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  await app.register(async (scope) => {
    // A value is bytes whatever its content type; the bulk body is parsed here, bounded by its own limit.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    scope.get<NameParams>('/v1/applications/:name/kv/namespaces', scoped, async (request) =>
      namespacesOf(ctx.store, request.params.name),
    );

    scope.get<SpaceParams & ListQuery>(
      '/v1/applications/:name/kv/namespaces/:id/keys',
      scoped,
      async (request) => {
        const { name, id } = request.params;
        await checkNamespace(ctx.store, name, id);
        const query = new URLSearchParams({ key_count_limit: String(listLimit(request.query.limit)) });
        if (request.query.prefix !== undefined) query.set('prefix', request.query.prefix);
        if (request.query.cursor !== undefined) query.set('cursor', request.query.cursor);
        const answer = answered(await handleKv(ctx.store, kvRequest(name, id, 'GET', `/?${query}`)));
        const page = JSON.parse(Buffer.from(answer.body ?? '').toString('utf8')) as {
          keys: { name: string; expiration?: number; metadata?: string }[];
          list_complete: boolean;
          cursor?: string;
        };
        return {
          application: name,
          namespace: id,
          keys: page.keys.map((key) => ({
            name: key.name,
            ...(key.expiration !== undefined ? { expiration: key.expiration } : {}),
            ...(key.metadata !== undefined ? { metadata: metadataValue(key.metadata) } : {}),
          })),
          list_complete: page.list_complete,
          ...(page.cursor !== undefined ? { cursor: page.cursor } : {}),
        };
      },
    );

    const valuePath = '/v1/applications/:name/kv/namespaces/:id/values/*';

    scope.get<SpaceParams>(valuePath, scoped, async (request, reply) => {
      const { name, id } = request.params;
      const key = wildcardKey(request, '/values/');
      await checkNamespace(ctx.store, name, id);
      const answer = await handleKv(ctx.store, kvRequest(name, id, 'GET', keyTarget(key)));
      if (answer.status === 404)
        throw new Problem('not-found', 'No such key', `${JSON.stringify(key)} is not in KV namespace ${id}`);
      const found = answered(answer);
      const expiration = found.headers?.['cf-expiration'];
      if (expiration !== undefined) reply.header('svc-kv-expiration', expiration);
      return reply.type('application/octet-stream').send(Buffer.from(found.body ?? ''));
    });

    scope.put<SpaceParams & PutQuery>(
      valuePath,
      { ...scoped, bodyLimit: KV_LIMITS.maxValueBytes, errorHandler: valueTooLarge },
      async (request) => {
        const { name, id } = request.params;
        const key = wildcardKey(request, '/values/');
        await checkNamespace(ctx.store, name, id);
        const value = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
        const put = { key, value, ...request.query };
        answered(await handleKv(ctx.store, putRequest(name, id, put)));
        logWrite(ctx, request, 'kv.put', { application: name, namespace: id, keys: 1 }, `KV namespace ${id}`);
        return { application: name, namespace: id, key };
      },
    );

    scope.delete<SpaceParams>(valuePath, scoped, async (request) => {
      const { name, id } = request.params;
      const key = wildcardKey(request, '/values/');
      await checkNamespace(ctx.store, name, id);
      answered(await handleKv(ctx.store, kvRequest(name, id, 'DELETE', keyTarget(key))));
      logWrite(
        ctx,
        request,
        'kv.delete',
        { application: name, namespace: id, keys: 1 },
        `KV namespace ${id}`,
      );
      return { application: name, namespace: id, key, deleted: true };
    });

    scope.put<SpaceParams>(
      '/v1/applications/:name/kv/namespaces/:id/bulk',
      { ...scoped, bodyLimit: KV_BULK_LIMITS.maxBodyBytes, errorHandler: bulkTooLarge },
      async (request) => {
        const { name, id } = request.params;
        const pairs = parseBulk((request.body as Buffer | undefined) ?? Buffer.alloc(0));
        await checkNamespace(ctx.store, name, id);
        const written = await bulkPut(ctx.store, name, id, pairs);
        logWrite(
          ctx,
          request,
          'kv.bulk-put',
          { application: name, namespace: id, keys: written },
          `KV namespace ${id}`,
        );
        return { application: name, namespace: id, written };
      },
    );
  });
}

/** The namespaces the serving deployment binds, in its manifest's order. */
export async function namespacesOf(store: Store, application: string): Promise<KvNamespaces> {
  const { deployment, manifest } = await servingManifest(store, application);
  const namespaces = manifest?.kv_namespaces ?? [];
  return { application, deployment, namespaces: namespaces.map(({ binding, id }) => ({ binding, id })) };
}

/** Refuses a namespace id the serving deployment does not bind. */
async function checkNamespace(store: Store, application: string, id: string): Promise<void> {
  const { deployment, namespaces } = await namespacesOf(store, application);
  if (namespaces.some((n) => n.id === id)) return;
  const known = namespaces.map((n) => `${n.id} (${n.binding})`).join(', ');
  throw new Problem(
    'not-found',
    'No such KV namespace',
    deployment === null
      ? `${application} has no serving deployment; deploy one whose kv_namespaces binds ${JSON.stringify(id)}`
      : `${JSON.stringify(id)} is not bound by the serving deployment ${deployment} of ${application}${known ? ` (its namespaces: ${known})` : ' (it binds no KV namespace)'}`,
  );
}

/** Metadata as the JSON value it was written as; text no put wrote (an edited object) as it is. */
function metadataValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function listLimit(raw: string | undefined): number {
  if (raw === undefined) return KV_LIMITS.maxListKeys;
  const limit = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (limit >= 1 && limit <= KV_LIMITS.maxListKeys) return limit;
  throw new Problem(
    'invalid-input',
    'Invalid limit',
    `limit ${JSON.stringify(raw)} must be a whole number from 1 to ${KV_LIMITS.maxListKeys}`,
  );
}

function keyTarget(key: string): string {
  return `/${encodeURIComponent(key)}?urlencoded=true`;
}

function kvRequest(
  application: string,
  namespace: string,
  method: string,
  target: string,
  extra: { headers?: Record<string, string>; body?: Uint8Array } = {},
): KvRequest {
  return {
    method,
    target,
    headers: { [KV_APPLICATION_HEADER]: application, [KV_NAMESPACE_HEADER]: namespace, ...extra.headers },
    body: extra.body ?? new Uint8Array(),
  };
}

interface KvPut {
  key: string;
  value: Uint8Array;
  expiration?: string;
  expiration_ttl?: string;
  /** The metadata's JSON text. */
  metadata?: string;
}

/** A put as workerd sends it: expiration in the query, the metadata's UTF-8 bytes as a Latin-1 header. */
function putRequest(application: string, namespace: string, put: KvPut): KvRequest {
  const query = new URLSearchParams({ urlencoded: 'true' });
  if (put.expiration !== undefined) query.set('expiration', put.expiration);
  if (put.expiration_ttl !== undefined) query.set('expiration_ttl', put.expiration_ttl);
  const headers: Record<string, string> =
    put.metadata === undefined
      ? {}
      : { 'cf-kv-metadata': Buffer.from(put.metadata, 'utf8').toString('latin1') };
  return kvRequest(application, namespace, 'PUT', `/${encodeURIComponent(put.key)}?${query}`, {
    headers,
    body: put.value,
  });
}

/** A 2xx answer of the binding's handler, or its refusal as a problem document. */
function answered(answer: KvResponse, where = ''): KvResponse {
  if (answer.status >= 200 && answer.status < 300) return answer;
  const words = answer.statusText ?? `KV answered ${answer.status}`;
  const detail = where ? `${where}: ${words}` : words;
  if (answer.status === 413) return refuse('resource-limit', titleOf(words), detail);
  return refuse('invalid-input', titleOf(words), detail);
}

function refuse(code: 'invalid-input' | 'resource-limit', title: string, detail: string): never {
  throw new Problem(code, title, detail);
}

/** A short title per kind of refusal, from the binding's (Cloudflare's) words. */
function titleOf(words: string): string {
  if (words.startsWith('Value length')) return 'Value too large';
  if (words.startsWith('Metadata length')) return 'Metadata too large';
  if (words.startsWith('UTF-8 encoded length')) return 'Key too long';
  if (/^Invalid expiration/.test(words)) return 'Invalid expiration';
  if (/metadata/i.test(words)) return 'Invalid metadata';
  if (/cursor/i.test(words)) return 'Invalid cursor';
  if (/key/i.test(words)) return 'Invalid key';
  return 'Invalid KV request';
}

const valueTooLarge = bodyTooLarge(
  'Value too large',
  `a KV value is at most ${KV_LIMITS.maxValueBytes} bytes (25 MiB)`,
);

const bulkTooLarge = bodyTooLarge(
  'Request body too large',
  `a bulk put is at most ${KV_BULK_LIMITS.maxBodyBytes} bytes (100 MiB); split it`,
);

// ---- Bulk put ----

/**
 * One pair of a bulk put, in wrangler's and Cloudflare's format: `value` a string (base64 when
 * `base64` is true), `expiration`/`expiration_ttl` seconds, `metadata` any JSON value.
 */
interface BulkPair {
  key: string;
  value: string;
  expiration?: number;
  expiration_ttl?: number;
  metadata?: unknown;
  base64?: boolean;
}

const BULK_FIELDS = new Set(['key', 'value', 'expiration', 'expiration_ttl', 'metadata', 'base64']);

/** The body as a list of pairs, each field checked for its type; the limits are the binding's. */
export function parseBulk(body: Uint8Array): BulkPair[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    throw new Problem('invalid-input', 'Malformed JSON body', 'the request body is not valid JSON');
  }
  if (!Array.isArray(parsed))
    throw malformedBulk(
      'the body must be an array of { key, value, expiration?, expiration_ttl?, metadata?, base64? }',
    );
  if (parsed.length > KV_BULK_LIMITS.maxPairs)
    throw new Problem(
      'resource-limit',
      'Too many pairs',
      `${parsed.length} pairs; a bulk put writes at most ${KV_BULK_LIMITS.maxPairs}`,
    );
  return parsed.map((item, i) => checkPair(item, i));
}

function checkPair(item: unknown, i: number): BulkPair {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    throw malformedBulk(`item ${i} is not an object`);
  const pair = item as Record<string, unknown>;
  const unknownField = Object.keys(pair).find((field) => !BULK_FIELDS.has(field));
  if (unknownField !== undefined) throw malformedBulk(`item ${i} has an unknown field "${unknownField}"`);
  if (typeof pair.key !== 'string') throw malformedBulk(`item ${i}: "key" must be a string`);
  if (typeof pair.value !== 'string')
    throw malformedBulk(`item ${i} (${pair.key}): "value" must be a string`);
  for (const field of ['expiration', 'expiration_ttl'] as const) {
    if (pair[field] !== undefined && typeof pair[field] !== 'number')
      throw malformedBulk(`item ${i} (${pair.key}): "${field}" must be a number of seconds`);
  }
  if (pair.base64 !== undefined && typeof pair.base64 !== 'boolean')
    throw malformedBulk(`item ${i} (${pair.key}): "base64" must be true or false`);
  return pair as unknown as BulkPair;
}

function malformedBulk(detail: string): Problem {
  return new Problem('invalid-input', 'Malformed bulk body', detail);
}

/**
 * Writes every pair, or none when one is refused: each pair first goes through the binding's put
 * against a store that only records what it would write, so every refusal comes before the first
 * write. A bucket failure part-way leaves the pairs written before it (Cloudflare's bulk write is
 * not atomic either); the same body may be sent again.
 */
async function bulkPut(
  store: Store,
  application: string,
  namespace: string,
  pairs: BulkPair[],
): Promise<number> {
  const writes: { key: string; body: Uint8Array }[] = [];
  const recorder = {
    put: async (key: string, body: Uint8Array) => {
      writes.push({ key, body });
      return { etag: '' };
    },
  } as unknown as Store;
  for (const [i, pair] of pairs.entries()) {
    const value = pair.base64 ? decodeBase64(pair.value, i, pair.key) : Buffer.from(pair.value, 'utf8');
    const put: KvPut = {
      key: pair.key,
      value,
      ...(pair.expiration !== undefined ? { expiration: String(pair.expiration) } : {}),
      ...(pair.expiration_ttl !== undefined ? { expiration_ttl: String(pair.expiration_ttl) } : {}),
      ...(pair.metadata !== undefined ? { metadata: JSON.stringify(pair.metadata) } : {}),
    };
    answered(await handleKv(recorder, putRequest(application, namespace, put)), `item ${i} (${pair.key})`);
  }
  for (let next = 0; next < writes.length; next += BULK_WRITES_AT_ONCE) {
    await Promise.all(writes.slice(next, next + BULK_WRITES_AT_ONCE).map((w) => store.put(w.key, w.body)));
  }
  return writes.length;
}

function decodeBase64(value: string, i: number, key: string): Buffer {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 === 1)
    throw malformedBulk(`item ${i} (${key}): "value" is not base64, though "base64" is true`);
  return Buffer.from(value, 'base64');
}
