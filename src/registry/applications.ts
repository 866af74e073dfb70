// docs/api.md "ApplicationRecord", "States and transitions: Application" and "Applications (common
// rules)": the application record and every change to it, each one conditional write retried
// on a lost race. Applications are created only by their first deploy
// (`ensureApplicationForDeploy`); every other operation on a missing one is `not-found`.

import { invalidInput, Problem } from '../problem.ts';
import { getJson, parseJsonBody, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { markFleetChanged } from './changes.ts';
import { keys } from './keys.ts';
import type { ApplicationRecord, DomainClaim, Replicas } from './records.ts';

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
 * The deploy intake's step (docs/api.md "POST /v1/applications/:name/deploys", order of checks):
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

/** The view a caller gets: admins see everything; others lose the fleet-owned `labels`. */
export function redactApplication(
  record: ApplicationRecord,
  admin: boolean,
): ApplicationRecord | Omit<ApplicationRecord, 'labels'> {
  if (admin) return record;
  const { labels: _labels, ...rest } = record;
  return rest;
}

/**
 * Refuses to delete an application that is not retired past its grace, unless forced
 * (docs/api.md "DELETE /v1/applications/:name").
 */
export function checkDeletable(record: ApplicationRecord, force: boolean, nowMs: number = Date.now()): void {
  if (force) return;
  if (!record.retired) {
    throw new Problem(
      'invalid-input',
      'Application is not retired',
      `retire "${record.name}" first and delete it once its grace period is over, or force the deletion`,
    );
  }
  if (nowMs <= Date.parse(record.retired.graceUntil)) {
    throw new Problem(
      'invalid-input',
      'Retirement grace period is not over',
      `"${record.name}" can be deleted after ${record.retired.graceUntil}, or now by forcing the deletion`,
    );
  }
}

/**
 * Removes every store key of one application and answers them sorted: its domain claims, the
 * runtime's `fleets/<name>/` prefix, its deploys, deployments, placement and trust policy, and the
 * record itself last, so that a deletion cut short is finished by running it again.
 */
export async function deleteApplicationData(store: Store, name: string): Promise<string[]> {
  const found = await readApplication(store, name);
  if (!found) throw applicationNotFound(name);
  const deleted: string[] = [];
  const remove = async (key: string) => {
    if (await store.delete(key)) deleted.push(key);
  };
  for (const key of await claimKeysHeldBy(store, name, found.record)) await remove(key);
  const runtime = await store.list(keys.fleetPrefix(name), { recursive: true });
  for (const object of runtime.objects) await remove(object.key);
  const own = await store.list(keys.appPrefix(name), { recursive: true });
  const recordKey = keys.application(name);
  for (const object of own.objects) if (object.key !== recordKey) await remove(object.key);
  await remove(recordKey);
  await markFleetChanged(store, `application ${name}`);
  return deleted.sort();
}

/** Claim keys whose record names this application, whether or not the record lists the host. */
async function claimKeysHeldBy(store: Store, name: string, record: ApplicationRecord): Promise<string[]> {
  const listing = await store.list(keys.domainClaimsPrefix, { recursive: true });
  const listed = new Set(record.domains.map((host) => keys.domainClaim(host)));
  const held: string[] = [];
  for (const object of listing.objects) {
    const claim = await getJson<DomainClaim>(store, object.key).catch(() => null);
    if (claim?.value.application === name || (listed.has(object.key) && !claim)) held.push(object.key);
  }
  return held;
}

// ---- Request bodies (docs/api.md "Applications (common rules)") ----

/** `{ labels: object of string values }`. */
export function parseLabelsBody(body: unknown): Record<string, string> {
  const labels = memberOf(body, 'labels', 'Invalid labels', '{"labels": {"key": "value"}}');
  if (!isStringMap(labels)) {
    throw invalidInput(
      'Invalid labels',
      '`labels` must be an object whose values are strings; {} clears them',
    );
  }
  return labels;
}

/** `{ selector: object string to string | null }`; omission is refused. */
export function parseSelectorBody(body: unknown): Record<string, string> | null {
  const selector = memberOf(
    body,
    'selector',
    'Invalid selector',
    '{"selector": {"key": "value"}} or {"selector": null}',
  );
  if (selector === null) return null;
  if (!isStringMap(selector)) {
    throw invalidInput(
      'Invalid selector',
      '`selector` must be an object whose values are strings, or null to clear it',
    );
  }
  return selector;
}

/** `{ replicas: 'all' | whole number >= 1 }`; null or omission is refused (there is no default). */
export function parseReplicasBody(body: unknown): Replicas {
  const replicas = memberOf(body, 'replicas', 'Invalid replicas', '{"replicas": "all"} or {"replicas": 3}');
  const parsed = parseReplicas(replicas);
  if (parsed === null) {
    throw invalidInput(
      'Invalid replicas',
      `\`replicas\` must be "all" or a whole number >= 1, got ${describe(replicas)}`,
    );
  }
  return parsed;
}

/** `all` or a whole number >= 1 (as a JSON number); null for anything else. */
export function parseReplicas(value: unknown): Replicas | null {
  if (value === 'all') return 'all';
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) return value;
  return null;
}

function memberOf(body: unknown, member: string, title: string, example: string): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidInput(title, `send a JSON object such as ${example}`);
  }
  if (!Object.hasOwn(body, member) || (body as Record<string, unknown>)[member] === undefined) {
    throw invalidInput(title, `\`${member}\` is required, e.g. ${example}`);
  }
  return (body as Record<string, unknown>)[member];
}

function isStringMap(value: unknown): value is Record<string, string> {
  return (
    !!value &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every((entry) => typeof entry === 'string')
  );
}

function describe(value: unknown): string {
  return value === undefined ? 'nothing' : JSON.stringify(value);
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
