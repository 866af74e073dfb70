// What the routes that manage a binding's data through a node share (docs/api.md "Workers KV",
// "R2 buckets"): the serving deployment's manifest, which names the application's namespaces and
// buckets; the key at the end of a path; a body over the binding's limit refused from its declared
// length; and the log line of each write.

import type { FastifyError, FastifyRequest } from 'fastify';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { Problem } from '../../problem.ts';
import { getApplication } from '../../registry/applications.ts';
import { keys } from '../../registry/keys.ts';
import { type Manifest, parseManifest } from '../../runtime-tools/layout.ts';
import type { Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { selectedDeployment } from '../deploys/published.ts';

/** The serving deployment's manifest; `deployment` null when none serves (refuses an unknown application). */
export async function servingManifest(
  store: Store,
  application: string,
): Promise<{ deployment: string | null; manifest: Manifest | null }> {
  await getApplication(store, application);
  const selected = await selectedDeployment(store, application);
  if (!selected) return { deployment: null, manifest: null };
  const object = await store.get(keys.runtimeManifest(application, selected.script, selected.deployment));
  const manifest = object ? parseManifest(object.body) : null;
  return { deployment: selected.deployment, manifest: manifest?.ok ? manifest.value : null };
}

/**
 * The key: the raw path after `marker` (`/values/`, `/objects/`), decoded here. A wildcard rather
 * than a parameter, since a 512-byte key percent-encoded is up to 1536 characters, over the
 * router's 1024 for a parameter.
 */
export function wildcardKey(request: FastifyRequest, marker: string): string {
  const path = (request.raw.url ?? '').split('?')[0] ?? '';
  const raw = path.slice(path.indexOf(marker) + marker.length);
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new Problem('invalid-input', 'Invalid key', 'Could not URL-decode key name');
  }
}

/** A route's error handler that re-says Fastify's body limit as the binding's `resource-limit`. */
export function bodyTooLarge(title: string, detail: string): (err: FastifyError) => never {
  return (err) => {
    if (err.code !== 'FST_ERR_CTP_BODY_TOO_LARGE') throw err;
    throw new Problem('resource-limit', title, detail);
  };
}

/** One log line per write: the caller and how many keys, never a key or a value. */
export function logWrite(
  ctx: NodeContext,
  request: FastifyRequest,
  event: string,
  fields: { application: string; keys: number } & Record<string, string | number>,
  where: string,
): void {
  const actor = describeCaller(callerOf(request));
  ctx.log.info(
    { event, actor, ...fields },
    `${event} of ${fields.keys} key${fields.keys === 1 ? '' : 's'} in ${where} of ${fields.application} by ${actor}`,
  );
}
