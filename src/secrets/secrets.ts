// An application's secrets in the bucket (docs/decisions.md "Secrets"): one document at
// `_svc/apps/<name>/secrets.json` holding, per secret, when and by whom it changed and one copy
// sealed to each node's key (seal.ts). No value is ever stored in the clear; the document is
// changed with conditional writes retried on a lost race.

import { Problem } from '../problem.ts';
import { markFleetChanged } from '../registry/changes.ts';
import { keys } from '../registry/keys.ts';
import { isNodeServing } from '../registry/liveness.ts';
import { BINDING_NAME_RULE, isBindingName } from '../registry/names.ts';
import type { NodeRecord } from '../registry/records.ts';
import { getJson, parseJsonBody, type Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { isSealPublicKey, open, type SealedCopy, type SealKeyPair, seal } from './seal.ts';

/** The most bytes one secret value may hold (wrangler allows 5 KiB; certificates need more). */
export const MAX_SECRET_BYTES = 32 * 1024;
/** The most secrets one application may hold. */
export const MAX_SECRETS = 100;

export interface SecretEntry {
  changedAt: string;
  by: string;
  /** Node id → the copy sealed to that node's key. */
  sealed: Record<string, SealedCopy>;
}

export interface SecretsDocument {
  v: 1;
  application: string;
  updatedAt: string;
  secrets: Record<string, SecretEntry>;
}

/** A node that can receive copies: its id and published sealing key. */
export interface Recipient {
  node: string;
  key: string;
}

export function checkSecretName(name: string): string {
  if (!isBindingName(name)) {
    throw new Problem(
      'invalid-input',
      'Invalid secret name',
      `${JSON.stringify(name)}: ${BINDING_NAME_RULE}`,
    );
  }
  return name;
}

export function checkSecretValue(value: string): string {
  if (value.length === 0)
    throw new Problem(
      'invalid-input',
      'Empty secret',
      'the value read is empty; give it on standard input or with --secret-file',
    );
  if (Buffer.byteLength(value) > MAX_SECRET_BYTES)
    throw new Problem(
      'resource-limit',
      'Secret too large',
      `a secret holds at most ${MAX_SECRET_BYTES} bytes`,
    );
  return value;
}

/** Serving nodes that publish a sealing key, in id order. */
export function recipientsOf(nodes: readonly NodeRecord[], nowMs: number): Recipient[] {
  return nodes
    .filter((n) => isNodeServing(n, nowMs) && isSealPublicKey(n.sealKey))
    .map((n) => ({ node: n.id, key: n.sealKey! }))
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

export async function readSecrets(
  store: Store,
  application: string,
): Promise<{ doc: SecretsDocument; etag: string } | null> {
  const found = await getJson<unknown>(store, keys.appSecrets(application));
  return found ? { doc: checkSecretsDocument(found.value, application), etag: found.etag } : null;
}

/** The stored document as read; `store-nonconforming` when it is none. */
function checkSecretsDocument(value: unknown, application: string): SecretsDocument {
  const doc = value as SecretsDocument | null;
  if (doc?.v !== 1 || !doc.secrets || typeof doc.secrets !== 'object') {
    throw new Problem(
      'store-nonconforming',
      'Unreadable secrets',
      `${keys.appSecrets(application)} is not a secrets document`,
    );
  }
  return doc;
}

/**
 * Applies `change` to the document and writes it on the ETag it was read with, again on a lost
 * race. `change` answers the next document, or null to leave it as it is. A document with no
 * secret left is deleted. Answers the document stored now (null when there is none).
 */
export async function updateSecrets(
  store: Store,
  application: string,
  change: (doc: SecretsDocument | null) => SecretsDocument | null,
): Promise<SecretsDocument | null> {
  const updated = await updateJson<SecretsDocument>(
    store,
    keys.appSecrets(application),
    (current) => {
      const next = change(current?.value ?? null);
      if (!next) return null;
      return Object.keys(next.secrets).length === 0 ? { delete: true } : { put: next };
    },
    { parse: (body) => checkSecretsDocument(parseJsonBody(body), application) },
  );
  // Nodes read secrets from their registry listing, which they renew when the marker moves.
  if (updated.changed) await markFleetChanged(store, `secrets ${application}`);
  return updated.value;
}

/** Sets one secret, sealed to every recipient. */
export function withSecret(
  doc: SecretsDocument | null,
  input: { application: string; name: string; value: string; by: string; recipients: Recipient[]; now: Date },
): SecretsDocument {
  const { application, name, value, recipients } = input;
  const base = doc ?? { v: 1, application, updatedAt: '', secrets: {} };
  if (!Object.hasOwn(base.secrets, name) && Object.keys(base.secrets).length >= MAX_SECRETS) {
    throw new Problem(
      'resource-limit',
      'Too many secrets',
      `${application} already holds ${MAX_SECRETS} secrets`,
    );
  }
  const sealed: Record<string, SealedCopy> = {};
  for (const r of recipients) sealed[r.node] = seal(value, r.key, { application, name, node: r.node });
  const at = input.now.toISOString();
  return {
    ...base,
    updatedAt: at,
    secrets: { ...base.secrets, [name]: { changedAt: at, by: input.by, sealed } },
  };
}

/** Removes one secret; `not-found` when there is none of that name. */
export function withoutSecret(doc: SecretsDocument | null, name: string, application: string, now: Date) {
  if (!doc || !Object.hasOwn(doc.secrets, name)) {
    throw new Problem('not-found', 'No such secret', `${application} has no secret ${name}`);
  }
  const { [name]: _gone, ...rest } = doc.secrets;
  return { ...doc, updatedAt: now.toISOString(), secrets: rest };
}

/** Every value this node can open, and the names it holds no copy of (yet). */
export function openSecrets(
  doc: SecretsDocument,
  own: { node: string; pair: SealKeyPair },
): { values: Record<string, string>; missing: string[] } {
  const values: Record<string, string> = {};
  const missing: string[] = [];
  for (const name of Object.keys(doc.secrets).sort()) {
    const copy = doc.secrets[name]!.sealed[own.node];
    const value = copy ? open(copy, own.pair, { application: doc.application, name, node: own.node }) : null;
    if (value === null) missing.push(name);
    else values[name] = value;
  }
  return { values, missing };
}

/**
 * Copies for recipients that hold none (or one sealed to a key they no longer have), made from
 * what this node can open. Answers the next document, or null when nothing is missing or this
 * node can open none of what is.
 */
export function resealed(
  doc: SecretsDocument,
  own: { node: string; pair: SealKeyPair },
  recipients: readonly Recipient[],
): SecretsDocument | null {
  let changed = false;
  const secrets: Record<string, SecretEntry> = {};
  for (const [name, entry] of Object.entries(doc.secrets)) {
    const stale = recipients.filter((r) => entry.sealed[r.node]?.key !== r.key);
    const mine = entry.sealed[own.node];
    const value =
      stale.length > 0 && mine
        ? open(mine, own.pair, { application: doc.application, name, node: own.node })
        : null;
    if (value === null) {
      secrets[name] = entry;
      continue;
    }
    const sealed = { ...entry.sealed };
    for (const r of stale)
      sealed[r.node] = seal(value, r.key, { application: doc.application, name, node: r.node });
    secrets[name] = { ...entry, sealed };
    changed = true;
  }
  return changed ? { ...doc, secrets } : null;
}
