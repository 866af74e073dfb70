// A node's identity (docs/identity.md "Key files"; docs/bucket-layout.md "`_svc/`: identity"): an
// Ed25519 key pair kept in the state directory, its public half published at
// `_svc/nodes/<id>.json` at every daemon start, and the fresh token a node signs for each
// call it makes to another node.

import { join } from 'node:path';
import { createStateFile, readStateFile } from '../config/state-file.ts';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import type { Store } from '../store/store.ts';
import { updateJson } from '../store/update.ts';
import { generateSigningKey, type SigningKeyPair, signingKeyFromJwk } from './ed25519.ts';
import { asNodeKeyRecord, type NodeKeyRecord } from './records.ts';
import { signToken } from './token.ts';
import { readJson } from './verifier.ts';

export const NODE_KEY_FILE = 'node-key.json';

/** Answers the node's key pair from `<stateDir>/node-key.json`, making one (0600) on first start. */
export async function ensureNodeKey(stateDir: string): Promise<SigningKeyPair> {
  const file = join(stateDir, NODE_KEY_FILE);
  const existing = await readNodeKey(file);
  if (existing) return existing;
  const pair = generateSigningKey();
  const text = `${JSON.stringify({ v: 1, privateKey: pair.privateJwk }, null, 2)}\n`;
  if (await createStateFile(file, text)) return pair;
  return (await readNodeKey(file))!;
}

/** The key kept in the file; null when there is no file; refused when the file holds no key. */
async function readNodeKey(file: string): Promise<SigningKeyPair | null> {
  const text = await readStateFile(file);
  if (text === null) return null;
  const pair = signingKeyFromJwk((safeParse(text) as { privateKey?: unknown } | undefined)?.privateKey);
  if (!pair) {
    throw new Problem(
      'invalid-input',
      'Unreadable node key',
      `${file} holds no Ed25519 private key; move it away to make a new one`,
    );
  }
  return pair;
}

/**
 * Publishes the node's public half. Operator and node ids share one keyspace and the
 * verifier looks operators up first, so a node whose id names an operator key could never
 * authenticate: refused at start. An unchanged record is not rewritten.
 */
export async function publishNodeKey(
  store: Store,
  nodeId: string,
  pair: SigningKeyPair,
): Promise<NodeKeyRecord> {
  if ((await readJson(store, keys.operator(nodeId))) !== undefined) {
    throw new Problem(
      'reference-held',
      'Node id taken',
      `an operator key is registered as ${JSON.stringify(nodeId)}; start the node with another --node-id`,
    );
  }
  const record: NodeKeyRecord = {
    v: 1,
    id: nodeId,
    publicKey: pair.publicJwk,
    publishedAt: new Date().toISOString(),
  };
  // A state directory wiped and restarted under the same id brings a new key: it replaces the
  // old one (or an unreadable record), conditionally, so two racing starts settle on one.
  const updated = await updateJson<NodeKeyRecord | null>(
    store,
    keys.nodeKey(nodeId),
    (current) => (current?.value?.publicKey.x === pair.publicJwk.x ? null : { put: record }),
    { parse: (body) => asNodeKeyRecord(safeParse(Buffer.from(body).toString('utf8')), nodeId) },
  );
  return updated.value!;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A fresh token signed by this node for one call to another node (tokens are single use:
 * sign one per request). Refused with `capability-missing` when the node has no key.
 */
export async function mintNodeToken(ctx: { nodeId: string; nodeKey?: SigningKeyPair }): Promise<string> {
  if (!ctx.nodeKey) {
    throw new Problem(
      'capability-missing',
      'No signing key',
      `node ${ctx.nodeId} has no signing key to call other nodes with`,
    );
  }
  return signToken({ id: ctx.nodeId, privateKey: ctx.nodeKey.privateKey });
}
