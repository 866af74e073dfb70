// The fleet change marker (docs/fleet.md "Change marker"). Every writer of the registry (the
// node's API routes and the CLI's bucket path share the functions of src/registry/, which call
// this after their write lands) rewrites one small object, `_svc/fleet/changed.json`, with a fresh
// body and so a fresh ETag. Every node's reconcile pass reads only its ETag (one HEAD) and
// re-lists the registry only when it moved: a change reaches every node within one pass, and an
// idle fleet pays one HEAD per node per pass whatever the number of applications.
//
// Ordering is what makes it correct: the writer bumps *after* its write, and a reader notes the
// ETag *before* it lists. A reader whose listing missed a write therefore noted an ETag older
// than the bump that follows the write, and sees the marker move on its next pass.

import { randomUUID } from 'node:crypto';
import { putJson, type Store } from '../store/store.ts';
import { keys } from './keys.ts';

/** The marker's body: only its ETag matters to readers; the rest is for people reading the bucket. */
export interface FleetChangeMarker {
  v: 1;
  at: string;
  /** What changed, e.g. `application shop`, `domain shop.example.com`, `operator op-1`. */
  what: string;
  /** Makes every body (and so every ETag) distinct, even for two bumps in one millisecond. */
  nonce: string;
}

type Listener = (what: string) => void;
const listeners = new Set<Listener>();

/**
 * Tells the fleet that the registry changed: rewrites the marker (every node re-lists on its
 * next pass) and tells this process's own fleet service at once (it re-lists and runs a pass
 * now). Call it after the write landed. Best effort: the change itself is already written, and a
 * node that misses a bump still learns of it at its periodic full re-read (`registry-resync-ms`),
 * so a failed bump is not the caller's failure.
 */
export async function markFleetChanged(store: Store, what: string): Promise<void> {
  await bumpFleetMarker(store, what);
  for (const listener of listeners) listener(what);
}

/** Rewrites the marker only (the reconcile loop's own placement writes: it needs no nudge). */
export async function bumpFleetMarker(store: Store, what: string): Promise<boolean> {
  const marker: FleetChangeMarker = { v: 1, at: new Date().toISOString(), what, nonce: randomUUID() };
  try {
    await putJson(store, keys.fleetChanged, marker);
    return true;
  } catch {
    return false;
  }
}

/** Runs `listener` on every change this process makes; answers the unsubscribe. */
export function onFleetChanged(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
