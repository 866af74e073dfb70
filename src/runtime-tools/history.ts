// Deployment history and rollback, built on what the runtime keeps (docs/runtime.md "Storage
// layout"): every deployment stays under `deploy/<script>/<version>/` until pruned, and the
// fleet-wide selector names the one that serves. History joins that layout with who made each
// deployment (src/registry/deployments.ts); rollback moves the selector with one conditional
// write, and every `cell serve` follows it as it follows a publish.

import { Problem } from '../problem.ts';
import { getApplication, updateApplication } from '../registry/applications.ts';
import { type DeploymentNote, readDeploymentNote, readDeploymentNotes } from '../registry/deployments.ts';
import { deploysFrozen, readFreeze } from '../registry/freeze.ts';
import { keys } from '../registry/keys.ts';
import { isCasConflict, type Store } from '../store/store.ts';
import { type Pointer, parseManifest, parsePointer, SCHEMA_VERSION, VERSION_PATTERN } from './layout.ts';
import { type DeploymentEntry, newestFirst, readLayout } from './prune.ts';

/** One deployment as `svc deployment list` shows it. */
export interface HistoryEntry {
  script: string;
  deployment: string;
  /** Publish time from the record; null when it has none. */
  createdMs: number | null;
  /** A manifest is present: it can serve (a folder without one is a deploy in flight). */
  complete: boolean;
  serving: boolean;
  /** The record's size, else what the folder holds. */
  bytes: number;
  deploy?: string;
  by?: string;
  source?: DeploymentNote['source'];
}

export interface History {
  application: string;
  serving: { script: string; deployment: string } | null;
  deployments: HistoryEntry[];
}

/** Every deployment of the application, newest first. */
export async function readHistory(store: Store, application: string): Promise<History> {
  const layout = await readLayout(store, application);
  const serving = layout.selector;
  // One read per deployment still in the bucket; notes of pruned ones are not read.
  const deployments = await Promise.all(
    newestFirst(layout.deployments).map(async (entry) =>
      historyEntry(entry, await readDeploymentNote(store, application, entry.version), serving),
    ),
  );
  return { application, serving, deployments };
}

function historyEntry(
  entry: DeploymentEntry,
  note: DeploymentNote | null,
  serving: History['serving'],
): HistoryEntry {
  return {
    script: entry.script,
    deployment: entry.version,
    createdMs: entry.createdMs,
    complete: entry.hasManifest,
    serving: serving?.script === entry.script && serving.deployment === entry.version,
    bytes: entry.bytes ?? entry.objects.reduce((sum, o) => sum + o.size, 0),
    ...(note ? { deploy: note.deploy, by: note.by } : {}),
    ...(note?.source ? { source: note.source } : {}),
  };
}

// ---- rollback ----

export interface RollbackOutcome {
  application: string;
  from: { script: string; deployment: string } | null;
  to: { script: string; deployment: string };
  /** False when the target already served: nothing was written. */
  changed: boolean;
}

/**
 * Moves the fleet-wide selector to `to` (a deployment version or the deploy id that made it),
 * by default to the deployment before the serving one. A rollback is a deploy: refused while
 * deploys are frozen. The selector is written once, on the ETag it was read with.
 */
export async function rollback(
  store: Store,
  input: { application: string; to?: string; nowMs: number },
): Promise<RollbackOutcome> {
  const { application } = input;
  const freeze = await readFreeze(store);
  if (freeze) throw deploysFrozen(freeze);
  await getApplication(store, application);
  const selectorKey = keys.runtimeSelector(application);
  const current = await store.get(selectorKey);
  const pointer = current ? parsePointer(current.body) : null;
  if (!current || !pointer?.ok) {
    throw new Problem(
      'not-found',
      'Nothing to roll back',
      `${application} has no serving deployment${current ? ` (${selectorKey} is unreadable)` : ''}`,
    );
  }
  const from = { script: pointer.value.script, deployment: pointer.value.deployment };
  const history = await readHistory(store, application);
  const chosen = await chooseTarget(store, history, from, input.to);
  const target = { script: chosen.script, deployment: chosen.deployment };
  if (target.script === from.script && target.deployment === from.deployment) {
    return { application, from, to: from, changed: false };
  }
  await requireServable(store, application, target);
  const next: Pointer = {
    schema_version: SCHEMA_VERSION,
    script: target.script,
    deployment: target.deployment,
    moved_ms: input.nowMs,
  };
  try {
    await store.put(selectorKey, JSON.stringify(next), { ifMatch: current.etag });
  } catch (err) {
    if (!isCasConflict(err)) throw err;
    throw new Problem(
      'cas-conflict',
      'Selector moved',
      `a deploy or another rollback of ${application} moved the selector meanwhile; look at svc deployment list and try again`,
    );
  }
  // `app show` names the serving deployment; a failure here leaves only that note stale.
  await updateApplication(store, application, (record) =>
    record.deployment === target.deployment ? null : { ...record, deployment: target.deployment },
  ).catch(() => {});
  return { application, from, to: target, changed: true };
}

async function chooseTarget(
  store: Store,
  history: History,
  from: { script: string; deployment: string },
  to: string | undefined,
): Promise<{ script: string; deployment: string }> {
  const complete = history.deployments.filter((d) => d.complete);
  if (to === undefined) {
    const index = complete.findIndex((d) => d.script === from.script && d.deployment === from.deployment);
    const before = index < 0 ? undefined : complete[index + 1];
    if (!before) {
      throw new Problem(
        'not-found',
        'Nothing to roll back to',
        `no complete deployment of ${history.application} is older than the serving ${from.deployment}`,
      );
    }
    return before;
  }
  const found = history.deployments.find((d) => d.deployment === to || d.deploy === to);
  if (found && !found.complete) {
    throw new Problem(
      'invalid-input',
      'Not a complete deployment',
      `${found.deployment} has no manifest: it is a deploy in flight or one that never finished; pick one svc deployment list shows complete`,
    );
  }
  if (found) return found;
  const pruned = VERSION_PATTERN.test(to)
    ? await readDeploymentNote(store, history.application, to)
    : // A deploy id: only a refusal gets here, so listing the notes is affordable.
      [...(await readDeploymentNotes(store, history.application)).values()].find((n) => n.deploy === to);
  if (pruned) {
    throw new Problem(
      'not-found',
      'Deployment was pruned',
      `${pruned.deployment} (deploy ${pruned.deploy}, ${pruned.deployedAt} by ${pruned.by}) is no longer in the bucket; deploy its sources again`,
    );
  }
  throw new Problem(
    'not-found',
    'No such deployment',
    `${JSON.stringify(to)} names no deployment of ${history.application}; svc deployment list shows them`,
  );
}

/** The target's manifest must be readable by this release, as `cell serve` will read it. */
async function requireServable(
  store: Store,
  application: string,
  target: { script: string; deployment: string },
): Promise<void> {
  const key = keys.runtimeManifest(application, target.script, target.deployment);
  const object = await store.get(key);
  const parsed = object ? parseManifest(object.body) : null;
  if (!parsed?.ok) {
    throw new Problem(
      'invalid-input',
      'Not a complete deployment',
      `${key} ${parsed ? `cannot be read: ${parsed.why}` : 'is gone (pruned meanwhile)'}`,
    );
  }
}
