// docs/api.md "Durable Objects": an application's Durable Objects through a node, for operators
// and CI jobs without bucket credentials (`svc objects`): the classes its serving deployment
// declares (its manifest's `durable_objects`), each with how many objects the bucket keeps for it
// (runtime/src/bindings/objects-storage.ts: one LIST per namespace), the classes a
// `deleted_classes` migration removed that still have stored objects, and the node holding the
// application's objects now (its objects lease). Deleting a class's objects removes their stored
// history; a class the serving deployment still declares is refused, since its holder serves them.
//
// Tier `operator-or-workload`, as the KV routes: the guard has authenticated the caller, checked
// `:name` and enforced scope on it before any handler runs.

import type { FastifyInstance } from 'fastify';
import type { OwnerLeaseRecord } from '../../../runtime/src/bindings/owner-lease.ts';
import { describeCaller } from '../../auth/caller.ts';
import { callerOf } from '../../auth/guard.ts';
import { Problem } from '../../problem.ts';
import { keys } from '../../registry/keys.ts';
import type { DurableObjectsManifest } from '../../runtime-tools/layout.ts';
import { getJson, type Store } from '../../store/store.ts';
import type { NodeContext } from '../context.ts';
import { servingManifest } from './binding-data.ts';

const scoped = { config: { auth: 'operator-or-workload' as const } };

type NameParams = { Params: { name: string } };
type ClassParams = { Params: { name: string; class: string } };

/** One class as `GET .../objects` lists it. */
export interface ObjectClassView {
  class_name: string;
  /** The folder its objects are stored under (the class's first name, kept across renames). */
  storage_key: string;
  /** `live`: the serving deployment declares it; `deleted`: a `deleted_classes` migration removed it. */
  state: 'live' | 'deleted';
  sql: boolean;
  /** The binding names that reach it. */
  bindings: string[];
  /** Objects with stored storage in the bucket. */
  objects: number;
}

/** The answer of `GET /v1/applications/:name/objects`. */
export interface ObjectsAnswer {
  application: string;
  /** The serving deployment, whose manifest names the classes; null before the first. */
  deployment: string | null;
  /** The node holding the application's objects lease now, and until when (its clock). */
  holder: { node: string; until_ms: number } | null;
  classes: ObjectClassView[];
}

export async function objectRoutes(app: FastifyInstance, ctx: NodeContext): Promise<void> {
  app.get<NameParams>('/v1/applications/:name/objects', scoped, async (request) => {
    const { name } = request.params;
    const { deployment, manifest } = await servingManifest(ctx.store, name);
    const objects = manifest?.durable_objects;
    const views: ObjectClassView[] = [];
    for (const c of objects?.classes ?? [])
      views.push({
        class_name: c.class_name,
        storage_key: c.storage_key,
        state: 'live',
        sql: c.sql,
        bindings: (objects?.bindings ?? []).filter((b) => b.class_name === c.class_name).map((b) => b.name),
        objects: await storedObjects(ctx.store, name, c.storage_key),
      });
    for (const c of objects?.deleted ?? []) {
      const count = await storedObjects(ctx.store, name, c.storage_key);
      if (count > 0) views.push({ ...c, state: 'deleted', sql: false, bindings: [], objects: count });
    }
    const answer: ObjectsAnswer = {
      application: name,
      deployment,
      holder: await holderOf(ctx.store, name),
      classes: views,
    };
    return answer;
  });

  app.delete<ClassParams>('/v1/applications/:name/objects/classes/:class', scoped, async (request) => {
    const { name, class: className } = request.params;
    const { manifest } = await servingManifest(ctx.store, name);
    const storageKey = deletableClass(name, manifest?.durable_objects, className);
    const prefix = keys.runtimeObjectsNamespacePrefix(name, storageKey);
    const stored = await ctx.store.list(prefix, { recursive: true });
    const objects = new Set(
      stored.objects
        .map((o) => o.key.slice(prefix.length).split('/')[0])
        .filter((f) => f !== keys.runtimeObjectsAlarmsFile),
    ).size;
    for (const o of stored.objects) await ctx.store.delete(o.key);
    const actor = describeCaller(callerOf(request));
    ctx.log.info(
      { event: 'objects.class-deleted', actor, application: name, class: className, objects },
      `objects.class-deleted: ${objects} objects of class ${className} of ${name} by ${actor}`,
    );
    return { application: name, class_name: className, storage_key: storageKey, deleted_objects: objects };
  });
}

/** The storage key of a class whose objects may be deleted: one a `deleted_classes` migration removed. */
function deletableClass(
  application: string,
  objects: DurableObjectsManifest | undefined,
  className: string,
): string {
  if (objects?.classes.some((c) => c.class_name === className))
    throw new Problem(
      'reference-held',
      'Durable Object class in use',
      `the serving deployment of ${application} declares ${className}, whose objects its holder serves: deploy a deleted_classes migration for it, which deletes them too`,
    );
  const deleted = objects?.deleted.find((c) => c.class_name === className);
  if (!deleted)
    throw new Problem(
      'not-found',
      'No such Durable Object class',
      `the serving deployment of ${application} names no class ${JSON.stringify(className)}${objects?.deleted.length ? ` (deleted classes: ${objects.deleted.map((c) => c.class_name).join(', ')})` : ''}`,
    );
  return deleted.storage_key;
}

/** Objects with stored storage in a namespace (its alarms' file is not an object). */
async function storedObjects(store: Store, application: string, storageKey: string): Promise<number> {
  const listed = await store.list(keys.runtimeObjectsNamespacePrefix(application, storageKey), {
    recursive: false,
  });
  return listed.prefixes.filter((p) => !p.endsWith(`/${keys.runtimeObjectsAlarmsFile}/`)).length;
}

/** The node holding the application's objects, while its lease is unexpired. */
async function holderOf(
  store: Store,
  application: string,
): Promise<{ node: string; until_ms: number } | null> {
  const lease = await getJson<OwnerLeaseRecord>(store, keys.runtimeObjectsLease(application));
  if (!lease || lease.value.expires_ms <= Date.now()) return null;
  return { node: lease.value.node, until_ms: lease.value.expires_ms };
}
