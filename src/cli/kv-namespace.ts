// `svc kv namespace list` and how every `svc kv` command finds its namespace (docs/cli.md
// "svc kv"): the application's namespaces are those its serving deployment binds, read from
// `GET /v1/applications/:name/kv/namespaces`; `--binding` or `--namespace-id` picks one, and may
// be left out when there is only one.

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

export interface KvFlags extends DataFlags {
  binding?: string;
  namespaceId?: string;
}

/** What `GET .../kv/namespaces` answers. */
interface NamespacesAnswer {
  application: string;
  deployment: string | null;
  namespaces: { binding: string; id: string }[];
}

/** Where a command's calls go: the node, the application, and (once resolved) the namespace. */
export type KvTarget = DataTarget<KvFlags>;

export interface KvSpaceTarget extends KvTarget {
  namespace: { id: string; binding: string | null };
}

export async function kvNamespaceListAction(flags: KvFlags): Promise<void> {
  const found = await namespaces(await dataTarget(flags));
  sayBound(found, found.namespaces, { json: flags.json, kind: 'KV namespace', idHeader: 'ID' });
}

/** The application and its one namespace the flags name; refuses when that is ambiguous or unknown. */
export async function kvSpaceTarget(flags: KvFlags): Promise<KvSpaceTarget> {
  const asked = { binding: flags.binding, id: flags.namespaceId };
  refuseBoth(asked, KV_WORDS);
  const base = await dataTarget(flags);
  const found = await namespaces(base);
  const pick = pickBound(found.namespaces, asked, found, KV_WORDS);
  return { ...base, namespace: { id: pick.id, binding: pick.binding } };
}

const KV_WORDS = {
  kind: 'KV namespace',
  field: 'kv_namespaces',
  idFlag: '--namespace-id <id>',
  idWord: 'namespace id',
  one: 'a namespace',
};

/** `shop-web's KV namespace cache (CACHE)`, for messages. */
export function describeSpace(space: KvSpaceTarget): string {
  const binding = space.namespace.binding === null ? '' : ` (${space.namespace.binding})`;
  return `KV namespace ${space.namespace.id}${binding} of ${space.application}`;
}

async function namespaces(base: KvTarget): Promise<NamespacesAnswer> {
  return (await callApplication(base, 'GET', '/kv/namespaces')).body as NamespacesAnswer;
}

/** One call under the namespace: `/v1/applications/:name/kv/namespaces/:id<rest>`. */
export function callSpace(
  space: KvSpaceTarget,
  method: string,
  rest: string,
  options: CallOptions = {},
): Promise<{ body: unknown; headers: Pick<Headers, 'get'> }> {
  return callApplication(
    space,
    method,
    `/kv/namespaces/${encodeURIComponent(space.namespace.id)}${rest}`,
    options,
  );
}
