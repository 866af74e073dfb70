// Deleting an application (docs/api.md "Deleting an application"): the refusal of an
// application not retired past its grace, and the removal of every key it owns. Both the node's
// route (through the coordinator) and the CLI's bucket path (holding the coordinator lease) call
// these.

import { Problem } from '../problem.ts';
import { getJson, type Store } from '../store/store.ts';
import { applicationNotFound, readApplication } from './applications.ts';
import { markFleetChanged } from './changes.ts';
import { keys } from './keys.ts';
import type { ApplicationRecord, DomainClaim } from './records.ts';

/**
 * Refuses to delete an application that is not retired past its grace, unless forced
 * (docs/api.md "Deleting an application").
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
