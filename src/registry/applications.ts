// docs/applications.md "The application record" and "Lifecycle", docs/api.md "Applications": the application
// record and every change to it, each one conditional write retried on a lost race. Applications are created
// only by their first deploy (`ensureApplicationForDeploy`); every other operation on a missing one is
// `not-found`. Beside it: the route bodies (application-bodies.ts), what a caller may see
// (application-view.ts) and deletion (application-deletion.ts).

import { Problem } from '../problem.ts';
import { parseJsonBody, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { markFleetChanged } from './changes.ts';
import { keys } from './keys.ts';
import type { ApplicationRecord, Replicas } from './records.ts';

/** A record as read, with the ETag its next conditional write must match. */
export interface StoredApplication {
  record: ApplicationRecord;
  etag: string;
}

/** Reads one application; null when there is none. */
export async function readApplication(store: Store, name: string): Promise<StoredApplication | null> {
  const found = await store.get(keys.application(name));
  return found ? { record: parseApplication(found.body), etag: found.etag } : null;
}

/** Reads one application; `not-found` when there is none. */
export async function getApplication(store: Store, name: string): Promise<ApplicationRecord> {
  const found = await readApplication(store, name);
  if (!found) throw applicationNotFound(name);
  return found.record;
}

/** The refusal for any operation on a missing application. */
export function applicationNotFound(name: string): Problem {
  return new Problem(
    'not-found',
    'No such application',
    `no application is named "${name}"; applications are created by their first deploy`,
  );
}

/** Every application, in name order. */
export async function listApplications(store: Store): Promise<ApplicationRecord[]> {
  const listing = await store.list(keys.appsPrefix, { recursive: false });
  const names = listing.prefixes.map((prefix) => prefix.slice(keys.appsPrefix.length, -1)).sort();
  const records = await Promise.all(names.map((name) => readApplication(store, name)));
  // An application deleted between the listing and the read is simply gone.
  return records.filter((found) => found !== null).map((found) => found.record);
}

/**
 * Applies `change` to the current record and writes it conditionally, re-reading and re-applying
 * on every lost race. `change` answers null when the record already says what it should (no
 * write); it may throw a Problem to refuse. Missing application: `not-found`.
 */
export async function updateApplication(
  store: Store,
  name: string,
  change: (current: ApplicationRecord) => ApplicationRecord | null,
  now: () => Date = () => new Date(),
): Promise<ApplicationRecord> {
  const updated = await updateJson<ApplicationRecord>(
    store,
    keys.application(name),
    (current) => {
      if (!current) throw applicationNotFound(name);
      const next = change(structuredClone(current.value));
      return next === null ? null : { put: { ...next, updatedAt: now().toISOString() } };
    },
    { parse: parseApplication },
  );
  if (updated.changed) await markFleetChanged(store, `application ${name}`);
  return updated.value!;
}

/** What a deploy asks of placement; null or absent preserves the application's setting. */
export interface PlacementIntent {
  replicas?: Replicas | null;
  nodeSelector?: Record<string, string> | null;
}

/**
 * The deploy intake's step (docs/deploys.md "Intake", order of checks):
 * creates the application on its first deploy (replicas `all` unless the deploy gives a count,
 * no selector unless it gives one), otherwise refuses a blocked one with `application-blocked`
 * and records any placement intent. A retired application stays retired: a deploy publishes but
 * does not bring it back (unretire does).
 */
export async function ensureApplicationForDeploy(
  store: Store,
  name: string,
  intent: PlacementIntent,
  by: string,
  now: () => Date = () => new Date(),
): Promise<ApplicationRecord> {
  const updated = await updateJson<ApplicationRecord>(
    store,
    keys.application(name),
    (current) => {
      if (!current) return { put: firstRecord(name, intent, by, now().toISOString()) };
      if (current.value.blocked) throw applicationBlocked(name);
      const next = applyPlacementIntent(current.value, intent);
      return next ? { put: { ...next, updatedAt: now().toISOString() } } : null;
    },
    { parse: parseApplication },
  );
  if (updated.changed) await markFleetChanged(store, `application ${name}`);
  return updated.value!;
}

/** The record an application's first deploy creates. */
function firstRecord(name: string, intent: PlacementIntent, by: string, stamp: string): ApplicationRecord {
  return {
    v: 1,
    name,
    createdAt: stamp,
    updatedAt: stamp,
    createdBy: by,
    labels: {},
    blocked: false,
    selector: intent.nodeSelector ?? null,
    replicas: intent.replicas ?? 'all',
    domains: [],
    wildcardDomains: [],
  };
}

function applyPlacementIntent(current: ApplicationRecord, intent: PlacementIntent): ApplicationRecord | null {
  let next: ApplicationRecord | null = null;
  if (intent.replicas !== undefined && intent.replicas !== null && intent.replicas !== current.replicas) {
    next = { ...current, replicas: intent.replicas };
  }
  if (
    intent.nodeSelector !== undefined &&
    intent.nodeSelector !== null &&
    !sameStringMap(intent.nodeSelector, current.selector)
  ) {
    next = { ...(next ?? current), selector: { ...intent.nodeSelector } };
  }
  return next;
}

/** The refusal for a blocked application (deploys, domain claims). */
export function applicationBlocked(name: string): Problem {
  return new Problem(
    'application-blocked',
    'Application is blocked',
    `"${name}" is blocked by an admin; nothing is deployed, claimed or served for it until it is unblocked`,
  );
}

/** Blocks (true) or unblocks (false) an application; answers the record and whether this call changed it. */
export async function setBlocked(
  store: Store,
  name: string,
  blocked: boolean,
): Promise<{ application: ApplicationRecord; changed: boolean }> {
  let changed = false;
  const application = await updateApplication(store, name, (current) => {
    changed = current.blocked !== blocked;
    return changed ? { ...current, blocked } : null;
  });
  return { application, changed };
}

/** Replaces every label; `{}` clears them. */
export async function setLabels(
  store: Store,
  name: string,
  labels: Record<string, string>,
): Promise<ApplicationRecord> {
  return updateApplication(store, name, (current) =>
    sameStringMap(current.labels, labels) ? null : { ...current, labels: { ...labels } },
  );
}

/**
 * Retires an application: it stops being served and can be unretired until `graceUntil`, after
 * which it may be deleted. Retiring again keeps the first stamp, so the grace is never extended.
 */
export async function retireApplication(
  store: Store,
  name: string,
  by: string,
  graceMs: number,
  now: () => Date = () => new Date(),
): Promise<ApplicationRecord> {
  return updateApplication(
    store,
    name,
    (current) => {
      if (current.retired) return null;
      const at = now();
      return {
        ...current,
        retired: { at: at.toISOString(), by, graceUntil: new Date(at.getTime() + graceMs).toISOString() },
      };
    },
    now,
  );
}

/** Undoes a retirement during its grace period; an application that is not retired is unchanged. */
export async function unretireApplication(
  store: Store,
  name: string,
  now: () => Date = () => new Date(),
): Promise<ApplicationRecord> {
  return updateApplication(
    store,
    name,
    (current) => {
      if (!current.retired) return null;
      if (now().getTime() > Date.parse(current.retired.graceUntil)) {
        throw new Problem(
          'invalid-input',
          'Retirement grace period is over',
          `"${name}" was retired at ${current.retired.at} and could be unretired until ${current.retired.graceUntil}; delete it and deploy again`,
        );
      }
      const { retired: _retired, ...rest } = current;
      return rest;
    },
    now,
  );
}

/** Sets or (null) clears the node selector; an unsatisfiable one is accepted and reported by assignment. */
export async function setSelector(
  store: Store,
  name: string,
  selector: Record<string, string> | null,
): Promise<ApplicationRecord> {
  return updateApplication(store, name, (current) =>
    sameSelector(current.selector, selector)
      ? null
      : { ...current, selector: selector ? { ...selector } : null },
  );
}

/** Sets how many nodes run the application; the coordinator acts on its next assignment pass. */
export async function setReplicas(
  store: Store,
  name: string,
  replicas: Replicas,
): Promise<ApplicationRecord> {
  return updateApplication(store, name, (current) =>
    current.replicas === replicas ? null : { ...current, replicas },
  );
}

function sameStringMap(a: Record<string, string>, b: Record<string, string> | null): boolean {
  if (!b) return false;
  const keysA = Object.keys(a);
  return (
    keysA.length === Object.keys(b).length && keysA.every((key) => Object.hasOwn(b, key) && a[key] === b[key])
  );
}

function sameSelector(a: Record<string, string> | null, b: Record<string, string> | null): boolean {
  if (a === null || b === null) return a === b;
  return sameStringMap(a, b);
}

/** A stored record, with the members an older writer may have left out filled, so readers need no guards. */
function parseApplication(body: Uint8Array): ApplicationRecord {
  const record = parseJsonBody<ApplicationRecord>(body);
  return {
    ...record,
    labels: record.labels ?? {},
    blocked: record.blocked === true,
    selector: record.selector ?? null,
    replicas: record.replicas ?? 'all',
    domains: record.domains ?? [],
    wildcardDomains: record.wildcardDomains ?? [],
  };
}
