// `svc kv namespace list` and how every `svc kv` command finds its namespace (docs/cli.md
// "svc kv"): the application's namespaces are those its serving deployment binds, read from
// `GET /v1/applications/:name/kv/namespaces`; `--binding` or `--namespace-id` picks one, and may
// be left out when there is only one.

import { Problem } from '../problem.ts';
import { resolveApplicationName } from '../registry/names.ts';
import type { AppFlags } from './app-actions.ts';
import { type CallOptions, callNode, requestNode, resolveTarget, type Target } from './client.ts';
import { say, table } from './output.ts';

export interface KvFlags extends AppFlags {
  binding?: string;
  namespaceId?: string;
  /** A bearer token to present instead of signing (a CI job's workload token). */
  token?: string;
}

/** What `GET .../kv/namespaces` answers. */
interface NamespacesAnswer {
  application: string;
  deployment: string | null;
  namespaces: { binding: string; id: string }[];
}

/** Where a command's calls go: the node, the application, and (once resolved) the namespace. */
export interface KvTarget {
  target: Target;
  flags: KvFlags;
  application: string;
}

export interface KvSpaceTarget extends KvTarget {
  namespace: { id: string; binding: string | null };
}

export async function kvNamespaceListAction(flags: KvFlags): Promise<void> {
  const found = await namespaces(await kvTarget(flags));
  if (flags.json) {
    say(JSON.stringify(found, null, 2));
    return;
  }
  if (found.namespaces.length === 0) {
    say(
      found.deployment === null
        ? `${found.application} has no serving deployment, so no KV namespace.`
        : `The serving deployment ${found.deployment} of ${found.application} binds no KV namespace.`,
    );
    return;
  }
  for (const line of table(
    ['BINDING', 'ID'],
    found.namespaces.map((n) => [n.binding, n.id]),
  ))
    say(line);
}

export async function kvTarget(flags: KvFlags): Promise<KvTarget> {
  const application = resolveApplicationName(flags.name, flags.env);
  return { target: await resolveTarget(flags), flags, application };
}

/** The application and its one namespace the flags name; refuses when that is ambiguous or unknown. */
export async function kvSpaceTarget(flags: KvFlags): Promise<KvSpaceTarget> {
  if (flags.binding !== undefined && flags.namespaceId !== undefined)
    throw new Problem(
      'invalid-input',
      'Ambiguous KV namespace',
      'give --binding or --namespace-id, not both',
    );
  const base = await kvTarget(flags);
  const { application, deployment, namespaces: bound } = await namespaces(base);
  const list = bound.map((n) => `${n.binding} (${n.id})`).join(', ');
  const pick =
    flags.binding !== undefined
      ? bound.find((n) => n.binding === flags.binding)
      : flags.namespaceId !== undefined
        ? bound.find((n) => n.id === flags.namespaceId)
        : bound.length === 1
          ? bound[0]
          : undefined;
  if (pick) return { ...base, namespace: { id: pick.id, binding: pick.binding } };
  if (bound.length === 0)
    throw new Problem(
      'not-found',
      'No KV namespace',
      deployment === null
        ? `${application} has no serving deployment; deploy one whose kv_namespaces binds a namespace`
        : `the serving deployment ${deployment} of ${application} binds no KV namespace (kv_namespaces)`,
    );
  if (flags.binding === undefined && flags.namespaceId === undefined)
    throw new Problem(
      'invalid-input',
      'Several KV namespaces',
      `${application} binds ${list}; choose one with --binding <NAME> or --namespace-id <id>`,
    );
  const asked =
    flags.binding !== undefined ? `binding ${flags.binding}` : `namespace id ${flags.namespaceId}`;
  throw new Problem('not-found', 'No such KV namespace', `${application} has no ${asked}; it binds ${list}`);
}

/** `shop-web's KV namespace cache (CACHE)`, for messages. */
export function describeSpace(space: KvSpaceTarget): string {
  const binding = space.namespace.binding === null ? '' : ` (${space.namespace.binding})`;
  return `KV namespace ${space.namespace.id}${binding} of ${space.application}`;
}

function namespaces(base: KvTarget): Promise<NamespacesAnswer> {
  return callNode(base.target, 'GET', `${applicationPath(base.application)}/kv/namespaces`, {
    ...tokenOf(base.flags),
  }) as Promise<NamespacesAnswer>;
}

/** One call under the namespace: `/v1/applications/:name/kv/namespaces/:id<rest>`. */
export async function callSpace(
  space: KvSpaceTarget,
  method: string,
  rest: string,
  options: CallOptions = {},
): Promise<{ body: unknown; headers: Headers }> {
  const path = `${applicationPath(space.application)}/kv/namespaces/${encodeURIComponent(space.namespace.id)}${rest}`;
  const answer = await requestNode(space.target, method, path, { ...options, ...tokenOf(space.flags) });
  return { body: answer.body, headers: answer.headers };
}

function applicationPath(application: string): string {
  return `/v1/applications/${encodeURIComponent(application)}`;
}

function tokenOf(flags: KvFlags): { token?: string } {
  return flags.token === undefined ? {} : { token: flags.token };
}
