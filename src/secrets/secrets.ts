// An application's secrets in the bucket (docs/decisions.md "Secrets"): one document at
// `_svc/apps/<name>/secrets.json` holding, per secret, when and by whom it changed and one copy
// sealed to each node's key (seal.ts). No value is ever stored in the clear; the document is
// changed with conditional writes retried on a lost race. Whoever seals (the command line on the
// caller's machine, through the bucket or through a node's secret routes) hands over only sealed
// copies; `withSealedSecrets` is the one way they enter the document.

import { Problem } from '../problem.ts';
import { markFleetChanged } from '../registry/changes.ts';
import { keys } from '../registry/keys.ts';
import { isNodeServing } from '../registry/liveness.ts';
import { BINDING_NAME_RULE, isBindingName } from '../registry/names.ts';
import type { NodeRecord } from '../registry/records.ts';
import { parseManifest, parsePointer } from '../runtime-tools/layout.ts';
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

/** `emptyHint` says where the value came from, for the refusal of an empty one. */
export function checkSecretValue(
  value: string,
  emptyHint = 'the value read is empty; give it on standard input or with --secret-file',
): string {
  if (value.length === 0) throw new Problem('invalid-input', 'Empty secret', emptyHint);
  if (Buffer.byteLength(value) > MAX_SECRET_BYTES)
    throw new Problem(
      'resource-limit',
      'Secret too large',
      `a secret holds at most ${MAX_SECRET_BYTES} bytes`,
    );
  return value;
}

/** No serving node publishes a sealing key: nothing could open a secret set now. */
export function noSealRecipients(): Problem {
  return new Problem(
    'capability-missing',
    'No node to seal the secret to',
    'no serving node publishes a sealing key; start the fleet (or upgrade its nodes) and set the secret again',
  );
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

/** Secret name -> node id -> the copy sealed to that node: what a caller hands over. */
export type SealedSecrets = Record<string, Record<string, SealedCopy>>;

/** Seals each value to every recipient, each copy bound to its place. */
export function sealSecrets(
  application: string,
  values: Record<string, string>,
  recipients: readonly Recipient[],
): SealedSecrets {
  const sealed: SealedSecrets = {};
  for (const [name, value] of Object.entries(values)) {
    sealed[checkSecretName(name)] = Object.fromEntries(
      recipients.map((r) => [r.node, seal(value, r.key, { application, name, node: r.node })]),
    );
  }
  return sealed;
}

/** Sets the sealed secrets, replacing any of the same names; `resource-limit` past MAX_SECRETS. */
export function withSealedSecrets(
  doc: SecretsDocument | null,
  input: { application: string; sealed: SealedSecrets; by: string; now: Date },
): SecretsDocument {
  const { application, sealed } = input;
  const base = doc ?? { v: 1, application, updatedAt: '', secrets: {} };
  const added = Object.keys(sealed).filter((name) => !Object.hasOwn(base.secrets, name)).length;
  if (Object.keys(base.secrets).length + added > MAX_SECRETS) {
    throw new Problem(
      'resource-limit',
      'Too many secrets',
      `${application} would hold ${Object.keys(base.secrets).length + added} secrets; it may hold ${MAX_SECRETS}`,
    );
  }
  const at = input.now.toISOString();
  const secrets = { ...base.secrets };
  for (const [name, copies] of Object.entries(sealed)) {
    secrets[name] = { changedAt: at, by: input.by, sealed: copies };
  }
  return { ...base, updatedAt: at, secrets };
}

/** Sets one secret, sealed to every recipient. */
export function withSecret(
  doc: SecretsDocument | null,
  input: { application: string; name: string; value: string; by: string; recipients: Recipient[]; now: Date },
): SecretsDocument {
  const sealed = sealSecrets(input.application, { [input.name]: input.value }, input.recipients);
  return withSealedSecrets(doc, { application: input.application, sealed, by: input.by, now: input.now });
}

/** Removes one secret; `not-found` when there is none of that name. */
export function withoutSecret(doc: SecretsDocument | null, name: string, application: string, now: Date) {
  if (!doc || !Object.hasOwn(doc.secrets, name)) {
    throw new Problem('not-found', 'No such secret', `${application} has no secret ${name}`);
  }
  const { [name]: _gone, ...rest } = doc.secrets;
  return { ...doc, updatedAt: now.toISOString(), secrets: rest };
}

/** What a listing shows of one secret: never a value. */
export interface SecretListing {
  name: string;
  changedAt: string;
  by: string;
  /** The nodes holding a copy. */
  nodes: string[];
}

/** The document's secrets in name order, as `secret list` and the node's listing route show them. */
export function listSecrets(doc: SecretsDocument | null): SecretListing[] {
  return Object.entries(doc?.secrets ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, entry]) => ({
      name,
      changedAt: entry.changedAt,
      by: entry.by,
      nodes: Object.keys(entry.sealed).sort(),
    }));
}

/** A secret and a var of one name cannot both bind: refused against the serving deployment's vars. */
export async function refuseVarClash(
  store: Store,
  application: string,
  names: readonly string[],
): Promise<void> {
  const selector = await store.get(keys.runtimeSelector(application));
  const pointer = selector ? parsePointer(selector.body) : null;
  if (!pointer?.ok) return;
  const object = await store.get(
    keys.runtimeManifest(application, pointer.value.script, pointer.value.deployment),
  );
  const manifest = object ? parseManifest(object.body) : null;
  if (!manifest?.ok) return;
  const clash = names.find((name) => Object.hasOwn(manifest.value.vars, name));
  if (clash !== undefined) {
    throw new Problem(
      'invalid-input',
      'Secret and var share a name',
      `${clash} is a var of the serving deployment ${pointer.value.deployment} of ${application}; drop the var from the worker config (or --var) and deploy, or choose another name`,
    );
  }
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
