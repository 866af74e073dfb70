// A view of the bucket whose listings under `_svc/apps/` are answered from the registry cache's
// last recursive listing (steady-state cost must not grow with the number of
// applications). The coordinator's deploy reaper lists the applications and then each one's
// deploys; answered here, a reaper pass costs no listing per application. Reads and writes go to
// the bucket, and every write the reaper makes is conditional on the object as it read it, so a
// listing a few seconds old can only cost a skipped or refused write, never a wrong one.
// A listing under one application is answered from that application's objects alone (grouped
// once per listing): scanning the whole listing for each of N applications made a reaper pass
// cost N times the listing, in time and in garbage (bench/RESULTS.md "Daemon memory").

import { keys } from '../../registry/keys.ts';
import type { ListOptions, ListResult, ObjectInfo, Store } from '../../store/store.ts';

export function listedAppsStore(store: Store, listing: () => readonly ObjectInfo[]): Store {
  // Keyed by the listing itself, so a grouping is dropped with the listing it was made from.
  const groups = new WeakMap<readonly ObjectInfo[], Map<string, ObjectInfo[]>>();
  const objectsUnder = (prefix: string): readonly ObjectInfo[] => {
    const objects = listing();
    const application = applicationOf(prefix);
    if (application === null) return objects;
    let byApplication = groups.get(objects);
    if (!byApplication) {
      byApplication = groupByApplication(objects);
      groups.set(objects, byApplication);
    }
    return byApplication.get(application) ?? [];
  };
  return {
    get: (key) => store.get(key),
    put: (key, body, condition) => store.put(key, body, condition),
    delete: (key, condition) => store.delete(key, condition),
    stat: (key) => store.stat(key),
    close: () => Promise.resolve(),
    description: store.description,
    list(prefix: string, options: ListOptions): Promise<ListResult> {
      if (!prefix.startsWith(keys.appsPrefix)) return store.list(prefix, options);
      return Promise.resolve(listFrom(objectsUnder(prefix), prefix, options.recursive));
    },
  };
}

/** What a listing of `prefix` answers, computed from a recursive listing that covers it. */
export function listFrom(objects: readonly ObjectInfo[], prefix: string, recursive: boolean): ListResult {
  const out: ObjectInfo[] = [];
  const prefixes = new Set<string>();
  for (const object of objects) {
    if (!object.key.startsWith(prefix)) continue;
    const rest = object.key.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (recursive || slash < 0) out.push(object);
    else prefixes.add(prefix + rest.slice(0, slash + 1));
  }
  return { objects: out, prefixes: [...prefixes].sort() };
}

/** The application a key (or prefix) under `_svc/apps/` names, when it names one in full. */
function applicationOf(key: string): string | null {
  const rest = key.slice(keys.appsPrefix.length);
  const slash = rest.indexOf('/');
  return slash < 0 ? null : rest.slice(0, slash);
}

/** Objects by the application their key names, each group in listing order. */
function groupByApplication(objects: readonly ObjectInfo[]): Map<string, ObjectInfo[]> {
  const groups = new Map<string, ObjectInfo[]>();
  for (const object of objects) {
    const application = applicationOf(object.key);
    if (application === null) continue;
    const group = groups.get(application);
    if (group) group.push(object);
    else groups.set(application, [object]);
  }
  return groups;
}
