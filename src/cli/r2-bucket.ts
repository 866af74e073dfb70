// `svc r2 bucket list` and how every `svc r2 object` command finds its bucket (docs/cli.md
// "svc r2"): the application's buckets are those its serving deployment binds, read from
// `GET /v1/applications/:name/r2/buckets`; `--binding` or `--bucket` picks one, and may be left out
// when there is only one.

import {
  callApplication,
  type DataFlags,
  type DataTarget,
  dataTarget,
  pickBound,
  refuseBoth,
  sayBound,
} from './binding-data.ts';
import type { CallOptions } from './client.ts';

export interface R2Flags extends DataFlags {
  binding?: string;
  bucket?: string;
}

/** What `GET .../r2/buckets` answers. */
interface BucketsAnswer {
  application: string;
  deployment: string | null;
  buckets: { binding: string; bucket_name: string }[];
}

export interface R2BucketTarget extends DataTarget<R2Flags> {
  bucket: { name: string; binding: string };
}

const R2_WORDS = {
  kind: 'R2 bucket',
  field: 'r2_buckets',
  idFlag: '--bucket <bucket_name>',
  idWord: 'bucket',
  one: 'a bucket',
};

export async function r2BucketListAction(flags: R2Flags): Promise<void> {
  const found = await buckets(await dataTarget(flags));
  sayBound(found, boundOf(found), { json: flags.json, kind: 'R2 bucket', idHeader: 'BUCKET' });
}

/** The application and its one bucket the flags name; refuses when that is ambiguous or unknown. */
export async function r2BucketTarget(flags: R2Flags): Promise<R2BucketTarget> {
  const asked = { binding: flags.binding, id: flags.bucket };
  refuseBoth(asked, R2_WORDS);
  const base = await dataTarget(flags);
  const found = await buckets(base);
  const pick = pickBound(boundOf(found), asked, found, R2_WORDS);
  return { ...base, bucket: { name: pick.id, binding: pick.binding } };
}

/** `R2 bucket files (FILES) of shop-web`, for messages. */
export function describeBucket(space: R2BucketTarget): string {
  return `R2 bucket ${space.bucket.name} (${space.bucket.binding}) of ${space.application}`;
}

/** The buckets as bindings with an id: the bucket_name. */
function boundOf(found: BucketsAnswer): { binding: string; id: string }[] {
  return found.buckets.map((b) => ({ binding: b.binding, id: b.bucket_name }));
}

async function buckets(base: DataTarget<R2Flags>): Promise<BucketsAnswer> {
  return (await callApplication(base, 'GET', '/r2/buckets')).body as BucketsAnswer;
}

/** One call under the bucket: `/v1/applications/:name/r2/buckets/:bucket<rest>`. */
export function callBucket(
  space: R2BucketTarget,
  method: string,
  rest: string,
  options: CallOptions = {},
): Promise<{ body: unknown; headers: Pick<Headers, 'get'> }> {
  return callApplication(
    space,
    method,
    `/r2/buckets/${encodeURIComponent(space.bucket.name)}${rest}`,
    options,
  );
}
