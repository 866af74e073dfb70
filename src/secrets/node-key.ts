// A node's sealing key (docs/decisions.md "Secrets"): an X25519 key pair in the state directory
// (`seal-key.json`, 0600), made on first start. The public half goes into the node record, so
// whoever sets a secret can seal a copy to this node; the private half never leaves the machine.

import { join } from 'node:path';
import { createStateFile, readStateFile } from '../config/state-file.ts';
import { Problem } from '../problem.ts';
import { exportSealKey, generateSealKey, importSealKey, type SealKeyPair } from './seal.ts';

export const SEAL_KEY_FILE = 'seal-key.json';

export async function ensureSealKey(stateDir: string): Promise<SealKeyPair> {
  const file = join(stateDir, SEAL_KEY_FILE);
  const existing = await readSealKey(file);
  if (existing) return existing;
  const pair = generateSealKey();
  const text = `${JSON.stringify({ v: 1, privateKey: exportSealKey(pair) }, null, 2)}\n`;
  if (await createStateFile(file, text)) return pair;
  return (await readSealKey(file))!;
}

async function readSealKey(file: string): Promise<SealKeyPair | null> {
  const text = await readStateFile(file);
  if (text === null) return null;
  let doc: { privateKey?: unknown } | undefined;
  try {
    doc = JSON.parse(text);
  } catch {
    doc = undefined;
  }
  const pair = importSealKey(doc?.privateKey);
  if (!pair) {
    throw new Problem(
      'invalid-input',
      'Unreadable sealing key',
      `${file} holds no X25519 private key; move it away to make a new one (the coordinator re-seals every secret to it)`,
    );
  }
  return pair;
}
