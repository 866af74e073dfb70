// `svc app secret set|list|remove` (docs/cli.md "svc app"; design in docs/decisions.md
// "Secrets"): bucket path only. The value is read from --secret-file or standard input (never an
// argument, so it is in no process list or shell history), sealed here to each serving node's
// key, and only the sealed copies are written: the value never reaches a node's API or log.

import { readFile } from 'node:fs/promises';
import { readNodeRecords } from '../node/deploys/skew.ts';
import { Problem } from '../problem.ts';
import { getApplication } from '../registry/applications.ts';
import { keys } from '../registry/keys.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { parseManifest, parsePointer } from '../runtime-tools/layout.ts';
import {
  checkSecretName,
  checkSecretValue,
  readSecrets,
  recipientsOf,
  updateSecrets,
  withoutSecret,
  withSecret,
} from '../secrets/secrets.ts';
import type { Store } from '../store/store.ts';
import { bucketActor } from './app-actions.ts';
import { withBucket } from './flags.ts';
import { say, table } from './output.ts';

export interface SecretFlags extends Record<string, unknown> {
  name: string;
  env?: string;
  secretFile?: string;
  json?: boolean;
}

export async function secretSetAction(secret: string, flags: SecretFlags): Promise<void> {
  const name = checkSecretName(secret);
  const application = resolveApplicationName(flags.name, flags.env);
  const value = checkSecretValue(await readValue(flags.secretFile));
  await withBucket(flags, async (store) => {
    await getApplication(store, application);
    await refuseVarClash(store, application, name);
    const recipients = recipientsOf(await readNodeRecords(store), Date.now());
    if (recipients.length === 0) {
      throw new Problem(
        'capability-missing',
        'No node to seal the secret to',
        'no serving node publishes a sealing key; start the fleet (or upgrade its nodes) and set the secret again',
      );
    }
    const by = bucketActor();
    await updateSecrets(store, application, (doc) =>
      withSecret(doc, { application, name, value, by, recipients, now: new Date() }),
    );
    say(
      `secret ${name} of ${application} set, sealed to ${recipients.length} node${recipients.length === 1 ? '' : 's'} (${recipients.map((r) => r.node).join(', ')}); serving nodes pick it up within a pass`,
    );
  });
}

export async function secretListAction(flags: SecretFlags): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  await withBucket(flags, async (store) => {
    await getApplication(store, application);
    const found = await readSecrets(store, application);
    const secrets = Object.entries(found?.doc.secrets ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([secret, entry]) => ({
        name: secret,
        changedAt: entry.changedAt,
        by: entry.by,
        nodes: Object.keys(entry.sealed).sort(),
      }));
    if (flags.json) {
      say(JSON.stringify({ application, secrets }, null, 2));
      return;
    }
    if (secrets.length === 0) {
      say(`No secrets for ${application}.`);
      return;
    }
    const rows = secrets.map((s) => [s.name, s.changedAt, s.by, s.nodes.join(',')]);
    for (const line of table(['NAME', 'CHANGED', 'BY', 'SEALED FOR'], rows)) say(line);
  });
}

export async function secretRemoveAction(secret: string, flags: SecretFlags): Promise<void> {
  const name = checkSecretName(secret);
  const application = resolveApplicationName(flags.name, flags.env);
  await withBucket(flags, async (store) => {
    await getApplication(store, application);
    await updateSecrets(store, application, (doc) => withoutSecret(doc, name, application, new Date()));
    say(`secret ${name} of ${application} removed; serving nodes drop it within a pass`);
  });
}

/** The value: the file's bytes, else standard input; one trailing newline is dropped from either. */
async function readValue(file: string | undefined): Promise<string> {
  let text: string;
  if (file !== undefined) {
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new Problem(
        'invalid-input',
        'Unreadable secret file',
        `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  } else {
    if (process.stdin.isTTY) process.stderr.write('Type the secret, then Ctrl-D:\n');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  }
  return text.replace(/\r?\n$/, '');
}

/** A secret and a var of one name cannot both bind: refused against the serving deployment's vars. */
async function refuseVarClash(store: Store, application: string, name: string): Promise<void> {
  const selector = await store.get(keys.runtimeSelector(application));
  const pointer = selector ? parsePointer(selector.body) : null;
  if (!pointer?.ok) return;
  const object = await store.get(
    keys.runtimeManifest(application, pointer.value.script, pointer.value.deployment),
  );
  const manifest = object ? parseManifest(object.body) : null;
  if (manifest?.ok && Object.hasOwn(manifest.value.vars, name)) {
    throw new Problem(
      'invalid-input',
      'Secret and var share a name',
      `${name} is a var of the serving deployment ${pointer.value.deployment} of ${application}; drop the var from the worker config (or --var) and deploy, or choose another name`,
    );
  }
}
