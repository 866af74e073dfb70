// docs/api.md "R2 buckets": an application's R2 objects through a node, for operators and CI jobs
// without bucket credentials (`svc r2`, as `wrangler r2 object` uses Cloudflare's API). The
// buckets are those the serving deployment binds (its manifest's `r2_buckets`); every call is
// turned into the request workerd would send and answered by the binding's own handler
// (runtime/src/bindings/r2.ts), so the storage layout, the limits and R2's words for each refusal
// are the binding's, re-said here as problem documents.
//
// Tier `operator-or-workload`, as the KV routes: the guard has authenticated the caller, checked
// `:name` and enforced scope on it before any handler runs.

import type { FastifyInstance, FastifyReply } from 'fastify';
import { handleR2, R2_LIMITS, type R2Request, type R2Response } from '../../../runtime/src/bindings/r2.ts';
import { R2_APPLICATION_HEADER, R2_BUCKET_HEADER } from '../../../runtime/src/bindings/r2-headers.ts';
import { Problem } from '../../problem.ts';
import type { R2BucketBinding } from '../../runtime-tools/layout.ts';
import type { Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { bodyTooLarge, logWrite, servingManifest, wildcardKey } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };

type NameParams = { Params: { name: string } };
type BucketParams = { Params: { name: string; bucket: string } };
type ListQuery = { Querystring: { prefix?: string; delimiter?: string; cursor?: string; limit?: string } };
type PutQuery = { Querystring: { custom_metadata?: string } };

/** The buckets an application's serving deployment binds; `deployment` null when none serves. */
export interface R2Buckets {
  application: string;
  deployment: string | null;
  buckets: R2BucketBinding[];
}

/** An object's metadata as workerd's wire carries it (r2.ts `wireObject`). */
interface WireObject {
  name: string;
  size: number;
  etag: string;
  uploaded: number;
  httpFields?: { contentType?: string };
  customFields?: { k: string; v: string }[];
}

export async function r2Routes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  await app.register(async (scope) => {
    // A value is bytes whatever its content type; the content type is kept as the object's.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    scope.get<NameParams>('/v1/applications/:name/r2/buckets', scoped, async (request) =>
      bucketsOf(ctx.store, request.params.name),
    );

    scope.get<BucketParams & ListQuery>(
      '/v1/applications/:name/r2/buckets/:bucket/objects',
      scoped,
      async (request) => {
        const { name, bucket } = request.params;
        await checkBucket(ctx.store, name, bucket);
        const { prefix, delimiter, cursor, limit } = request.query;
        const page = JSON.parse(
          metadataOf(
            await call(ctx.store, name, bucket, {
              method: 'list',
              // The binding refuses what is not a whole number from 1 to 1000, in R2's words.
              ...(limit !== undefined ? { limit: /^\d+$/.test(limit) ? Number(limit) : -1 } : {}),
              ...(prefix !== undefined ? { prefix } : {}),
              ...(delimiter !== undefined ? { delimiter } : {}),
              ...(cursor !== undefined ? { cursor } : {}),
              include: [0, 1],
            }),
          ).toString('utf8'),
        ) as { objects: WireObject[]; truncated: boolean; cursor?: string; delimitedPrefixes: string[] };
        return {
          application: name,
          bucket,
          objects: page.objects.map(objectOf),
          delimited_prefixes: page.delimitedPrefixes,
          truncated: page.truncated,
          ...(page.cursor !== undefined ? { cursor: page.cursor } : {}),
        };
      },
    );

    const objectPath = '/v1/applications/:name/r2/buckets/:bucket/objects/*';

    scope.get<BucketParams>(objectPath, scoped, async (request, reply) => {
      const { name, bucket } = request.params;
      const key = wildcardKey(request, '/objects/');
      await checkBucket(ctx.store, name, bucket);
      const answer = await call(ctx.store, name, bucket, { method: 'get', object: key });
      const metadata = metadataOf(answer);
      const object = JSON.parse(metadata.toString('utf8')) as WireObject;
      return sendObject(reply, object, Buffer.from(answer.body.subarray(metadata.byteLength)));
    });

    scope.put<BucketParams & PutQuery>(
      objectPath,
      { ...scoped, bodyLimit: R2_LIMITS.maxValueBytes, errorHandler: valueTooLarge },
      async (request) => {
        const { name, bucket } = request.params;
        const key = wildcardKey(request, '/objects/');
        const customFields = customFieldsOf(request.query.custom_metadata);
        await checkBucket(ctx.store, name, bucket);
        const value = (request.body as Buffer | undefined) ?? Buffer.alloc(0);
        const contentType = request.headers['content-type'];
        const put = {
          method: 'put',
          object: key,
          ...(contentType ? { httpFields: { contentType } } : {}),
          customFields,
        };
        const answer = await call(ctx.store, name, bucket, put, value);
        const object = JSON.parse(metadataOf(answer).toString('utf8')) as WireObject;
        logWrite(ctx, request, 'r2.put', { application: name, bucket, keys: 1 }, `R2 bucket ${bucket}`);
        return { application: name, bucket, object: objectOf(object) };
      },
    );

    scope.delete<BucketParams>(objectPath, scoped, async (request) => {
      const { name, bucket } = request.params;
      const key = wildcardKey(request, '/objects/');
      await checkBucket(ctx.store, name, bucket);
      await call(ctx.store, name, bucket, { method: 'delete', object: key }, new Uint8Array());
      logWrite(ctx, request, 'r2.delete', { application: name, bucket, keys: 1 }, `R2 bucket ${bucket}`);
      return { application: name, bucket, key, deleted: true };
    });
  });
}

/** The buckets the serving deployment binds, in its manifest's order. */
export async function bucketsOf(store: Store, application: string): Promise<R2Buckets> {
  const { deployment, manifest } = await servingManifest(store, application);
  const buckets = manifest?.r2_buckets ?? [];
  return {
    application,
    deployment,
    buckets: buckets.map(({ binding, bucket_name }) => ({ binding, bucket_name })),
  };
}

/** Refuses a bucket name the serving deployment does not bind. */
async function checkBucket(store: Store, application: string, bucket: string): Promise<void> {
  const { deployment, buckets } = await bucketsOf(store, application);
  if (buckets.some((b) => b.bucket_name === bucket)) return;
  const known = buckets.map((b) => `${b.bucket_name} (${b.binding})`).join(', ');
  throw new Problem(
    'not-found',
    'No such R2 bucket',
    deployment === null
      ? `${application} has no serving deployment; deploy one whose r2_buckets binds ${JSON.stringify(bucket)}`
      : `${JSON.stringify(bucket)} is not bound by the serving deployment ${deployment} of ${application}${known ? ` (its buckets: ${known})` : ' (it binds no R2 bucket)'}`,
  );
}

/**
 * One call of the binding, sent as workerd sends it: head, get and list as a GET whose
 * `cf-r2-request` header holds the request's JSON (its UTF-8 read as Latin-1, as Node reads a
 * header); put and delete as a PUT whose body is the JSON, then the value.
 */
async function call(
  store: Store,
  application: string,
  bucket: string,
  body: Record<string, unknown>,
  value?: Uint8Array,
): Promise<R2Response> {
  const json = Buffer.from(JSON.stringify({ version: 1, ...body }), 'utf8');
  const names = { [R2_APPLICATION_HEADER]: application, [R2_BUCKET_HEADER]: bucket };
  const request: R2Request =
    value === undefined
      ? {
          method: 'GET',
          headers: { ...names, 'cf-r2-request': json.toString('latin1') },
          body: new Uint8Array(),
        }
      : {
          method: 'PUT',
          headers: { ...names, 'cf-r2-metadata-size': String(json.byteLength) },
          body: Buffer.concat([json, value]),
        };
  return answered(await handleR2(store, request));
}

/** The JSON part of an answer: its first `cf-r2-metadata-size` bytes. */
function metadataOf(answer: R2Response): Buffer {
  return Buffer.from(answer.body.subarray(0, Number(answer.headers['cf-r2-metadata-size'] ?? 0)));
}

/** A 2xx answer of the binding's handler, or its refusal (`cf-r2-error`) as a problem document. */
function answered(answer: R2Response): R2Response {
  if (answer.status >= 200 && answer.status < 300) return answer;
  const error = JSON.parse(answer.headers['cf-r2-error'] ?? '{}') as { v4code?: number; message?: string };
  const words = `${error.message ?? `R2 answered ${answer.status}`} (${error.v4code ?? answer.status})`;
  const refusal = REFUSALS[error.v4code ?? 0];
  if (refusal) throw new Problem(refusal.code, refusal.title, words);
  throw new Problem('invalid-input', 'Invalid R2 request', words);
}

/** R2's v4 codes (Miniflare's words) as svc's problem code and a short title. */
const REFUSALS: Record<number, { code: 'invalid-input' | 'not-found' | 'resource-limit'; title: string }> = {
  10007: { code: 'not-found', title: 'No such object' },
  10020: { code: 'invalid-input', title: 'Invalid key' },
  10022: { code: 'invalid-input', title: 'Invalid limit' },
  10012: { code: 'resource-limit', title: 'Metadata too large' },
  100100: { code: 'resource-limit', title: 'Value too large' },
};

/** `custom_metadata`: a JSON object of strings, as R2's customMetadata. */
function customFieldsOf(raw: string | undefined): { k: string; v: string }[] {
  if (raw === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = null;
  }
  if (
    !parsed ||
    typeof parsed !== 'object' ||
    Array.isArray(parsed) ||
    !Object.values(parsed).every((v) => typeof v === 'string')
  )
    throw new Problem(
      'invalid-input',
      'Invalid metadata',
      'custom_metadata must be a JSON object whose values are strings',
    );
  return Object.entries(parsed as Record<string, string>).map(([k, v]) => ({ k, v }));
}

/** An object as the routes answer it. */
function objectOf(object: WireObject) {
  return {
    key: object.name,
    size: object.size,
    etag: object.etag,
    uploaded: new Date(object.uploaded).toISOString(),
    ...(object.httpFields?.contentType !== undefined ? { content_type: object.httpFields.contentType } : {}),
    custom_metadata: Object.fromEntries((object.customFields ?? []).map(({ k, v }) => [k, v])),
  };
}

function sendObject(reply: FastifyReply, object: WireObject, bytes: Buffer): FastifyReply {
  return reply
    .header('etag', `"${object.etag}"`)
    .header('last-modified', new Date(object.uploaded).toUTCString())
    .type(object.httpFields?.contentType ?? 'application/octet-stream')
    .send(bytes);
}

const valueTooLarge = bodyTooLarge(
  'Value too large',
  `an R2 object put through a node is at most ${R2_LIMITS.maxValueBytes} bytes (100 MiB)`,
);
