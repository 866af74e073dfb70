// Who made each runtime deployment, kept beside the application (`_svc/apps/<name>/deployments/
// <version>.json`). Deploy records carry the caller too, but the reaper deletes them after seven
// days; a deployment lives until pruned, and its history (`svc deployment list`) must still say
// who deployed it and from what source. Written once by the node that ran the publish.

import { getJson, putJson, type Store } from '../store/store.ts';
import { keys } from './keys.ts';
import type { DeploySource } from './records.ts';

/** One deployment's provenance. */
export interface DeploymentNote {
  v: 1;
  application: string;
  script: string;
  deployment: string;
  /** The deploy that produced it. */
  deploy: string;
  /** The verified caller, as describeCaller renders it (`op-…`, `<issuer>#<subject>`, a node id). */
  by: string;
  deployedAt: string;
  source?: DeploySource;
}

export async function writeDeploymentNote(store: Store, note: DeploymentNote): Promise<void> {
  await putJson(store, keys.deployment(note.application, note.deployment), note);
}

/** One deployment's note; null when there is none or it is unreadable. */
export async function readDeploymentNote(
  store: Store,
  application: string,
  deployment: string,
): Promise<DeploymentNote | null> {
  try {
    const note = (await getJson<DeploymentNote>(store, keys.deployment(application, deployment)))?.value;
    return note && note.deployment === deployment && typeof note.by === 'string' ? note : null;
  } catch {
    // Not JSON: history shows the deployment without its provenance.
    return null;
  }
}

/** Every note of the application, by deployment version; an unreadable note is left out. */
export async function readDeploymentNotes(
  store: Store,
  application: string,
): Promise<Map<string, DeploymentNote>> {
  const notes = new Map<string, DeploymentNote>();
  const listing = await store.list(keys.deploymentsPrefix(application), { recursive: true });
  await Promise.all(
    listing.objects.map(async (object) => {
      try {
        const found = await getJson<DeploymentNote>(store, object.key);
        const note = found?.value;
        if (note && typeof note.deployment === 'string' && typeof note.by === 'string')
          notes.set(note.deployment, note);
      } catch {
        // Not JSON: history shows the deployment without its provenance.
      }
    }),
  );
  return notes;
}
