// `svc app secret set|bulk|list|remove` (docs/cli.md "svc app"; design in docs/decisions.md
// "Secrets"). Like the other `svc app` commands with a bucket path, each goes through a node when
// one is named (remote flags, or `--token` with `--node`) and no bucket flag is given, else writes
// the bucket. Either way the value is sealed here, on the caller's machine, to each serving node's
// published key, and only the sealed copies leave it: through a node, the recipients are read
// from `GET .../secrets` and the copies handed to `POST .../secrets`. A value is read from
// --secret-file, standard input or a bulk file, never an argument (so it is in no process list or
// shell history), and never reaches a node's API or log.

import { readFile } from 'node:fs/promises';
import { readNodeRecords } from '../node/deploys/skew.ts';
import { isProblem, Problem } from '../problem.ts';
import { getApplication } from '../registry/applications.ts';
import { resolveApplicationName } from '../registry/names.ts';
import { NOT_SEALED_TITLE } from '../secrets/sealed-request.ts';
import {
  checkSecretName,
  checkSecretValue,
  listSecrets,
  MAX_SECRETS,
  noSealRecipients,
  type Recipient,
  readSecrets,
  recipientsOf,
  refuseVarClash,
  type SealedSecrets,
  type SecretListing,
  sealSecrets,
  updateSecrets,
  withoutSecret,
  withSealedSecrets,
} from '../secrets/secrets.ts';
import type { Store } from '../store/store.ts';
import { type AppFlags, type BucketSession, onWay as onAppWay } from './app-actions.ts';
import { callNode, resolveTarget, type Target } from './client.ts';
import { say, table } from './output.ts';

export interface SecretFlags extends AppFlags {
  secretFile?: string;
  /** A bearer token to present instead of signing (a CI job's workload token). */
  token?: string;
}

export async function secretSetAction(secret: string, flags: SecretFlags): Promise<void> {
  const name = checkSecretName(secret);
  const application = resolveApplicationName(flags.name, flags.env);
  const value = checkSecretValue(await readValue(flags.secretFile));
  const nodes = await setSecrets(application, { [name]: value }, flags);
  say(
    `secret ${name} of ${application} set, sealed to ${sealedTo(nodes)}; serving nodes pick it up within a pass`,
  );
}

/** `wrangler secret bulk`: every secret of a JSON object of NAME: "value", set in one write. */
export async function secretBulkAction(file: string, flags: SecretFlags): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  const values = await readBulkFile(file);
  const names = Object.keys(values).sort();
  const nodes = await setSecrets(application, values, flags);
  say(
    `${plural(names.length, 'secret')} of ${application} set (${names.join(', ')}), sealed to ${sealedTo(nodes)}; serving nodes pick them up within a pass`,
  );
}

export async function secretListAction(flags: SecretFlags): Promise<void> {
  const application = resolveApplicationName(flags.name, flags.env);
  const secrets = await onWay(
    flags,
    async (target) => (await callSecrets<SecretsAnswer>(target, flags, 'GET', application)).secrets,
    async ({ store }) => {
      await getApplication(store, application);
      return listSecrets((await readSecrets(store, application))?.doc ?? null);
    },
  );
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
}

export async function secretRemoveAction(secret: string, flags: SecretFlags): Promise<void> {
  const name = checkSecretName(secret);
  const application = resolveApplicationName(flags.name, flags.env);
  await onWay(
    flags,
    (target) => callSecrets(target, flags, 'DELETE', application, `/${encodeURIComponent(name)}`),
    async ({ store }) => {
      await getApplication(store, application);
      await updateSecrets(store, application, (doc) => withoutSecret(doc, name, application, new Date()));
    },
  );
  say(`secret ${name} of ${application} removed; serving nodes drop it within a pass`);
}

// ---- Setting, through a node or the bucket ----

/** What `GET /v1/applications/:name/secrets` answers. */
interface SecretsAnswer {
  application: string;
  secrets: SecretListing[];
  recipients: Recipient[];
}

/** Seals and stores the values; answers the nodes they were sealed to. */
function setSecrets(
  application: string,
  values: Record<string, string>,
  flags: SecretFlags,
): Promise<string[]> {
  return onWay(
    flags,
    (target) => setThroughNode(target, flags, application, values),
    ({ store, by }) => setThroughBucket(store, application, values, by),
  );
}

/**
 * Reads the recipients, seals to them and posts the copies; when the node answers that they are
 * not the serving nodes' keys any more, reads them again and seals once more.
 */
export async function setThroughNode(
  target: Target,
  flags: SecretFlags,
  application: string,
  values: Record<string, string>,
): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    const { recipients } = await callSecrets<SecretsAnswer>(target, flags, 'GET', application);
    if (recipients.length === 0) throw noSealRecipients();
    const body = { secrets: asBody(sealSecrets(application, values, recipients)) };
    try {
      const answer = await callSecrets<{ nodes: string[] }>(target, flags, 'POST', application, '', body);
      return answer.nodes;
    } catch (err) {
      // A node joined, left or took a new key between the two calls: read the recipients again, once.
      const moved = isProblem(err) && err.code === 'invalid-input' && err.title === NOT_SEALED_TITLE;
      if (!moved || attempt > 1) throw err;
    }
  }
}

async function setThroughBucket(
  store: Store,
  application: string,
  values: Record<string, string>,
  by: string,
): Promise<string[]> {
  await getApplication(store, application);
  await refuseVarClash(store, application, Object.keys(values));
  const recipients = recipientsOf(await readNodeRecords(store), Date.now());
  if (recipients.length === 0) throw noSealRecipients();
  const sealed = sealSecrets(application, values, recipients);
  await updateSecrets(store, application, (doc) =>
    withSealedSecrets(doc, { application, sealed, by, now: new Date() }),
  );
  return recipients.map((r) => r.node);
}

function asBody(sealed: SealedSecrets): Record<string, { sealed: SealedSecrets[string] }> {
  return Object.fromEntries(Object.entries(sealed).map(([name, copies]) => [name, { sealed: copies }]));
}

/** One call to `/v1/applications/:name/secrets<rest>`, signed, or with `--token` when given. */
async function callSecrets<T>(
  target: Target,
  flags: SecretFlags,
  method: string,
  application: string,
  rest = '',
  body?: unknown,
): Promise<T> {
  const path = `/v1/applications/${encodeURIComponent(application)}/secrets${rest}`;
  return (await callNode(target, method, path, {
    ...(body === undefined ? {} : { body }),
    ...(flags.token === undefined ? {} : { token: flags.token }),
  })) as T;
}

/** As every `svc app` command with a bucket path; a `--token` is presented to a node, so it goes to one. */
async function onWay<T>(
  flags: SecretFlags,
  viaNode: (target: Target) => Promise<T>,
  viaBucket: (session: BucketSession) => Promise<T>,
): Promise<T> {
  if (flags.token !== undefined) return viaNode(await resolveTarget(flags));
  return onAppWay(flags, viaNode, viaBucket);
}

// ---- Reading values ----

/** The value: the file's bytes, else standard input; one trailing newline is dropped from either. */
async function readValue(file: string | undefined): Promise<string> {
  let text: string;
  if (file !== undefined) {
    text = await readText(file, 'Unreadable secret file');
  } else {
    if (process.stdin.isTTY) process.stderr.write('Type the secret, then Ctrl-D:\n');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    text = Buffer.concat(chunks).toString('utf8');
  }
  return text.replace(/\r?\n$/, '');
}

/** A bulk file: one JSON object of binding name -> non-empty string, taken as written. */
export async function readBulkFile(file: string): Promise<Record<string, string>> {
  const text = await readText(file, 'Unreadable secrets file');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw invalidFile(`${file} is not JSON (${(err as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalidFile(`${file} holds ${kindOf(parsed)}; it must hold one object of "NAME": "value"`);
  }
  const entries = Object.entries(parsed);
  if (entries.length === 0) throw invalidFile(`${file} names no secret`);
  if (entries.length > MAX_SECRETS) {
    throw new Problem(
      'resource-limit',
      'Too many secrets',
      `${file} names ${entries.length} secrets; an application may hold ${MAX_SECRETS}`,
    );
  }
  const values: Record<string, string> = {};
  for (const [name, value] of entries) {
    checkSecretName(name);
    if (typeof value !== 'string') {
      throw invalidFile(`the value of ${name} in ${file} is ${kindOf(value)}; every value must be a string`);
    }
    values[name] = checkSecretValue(value, `the value of ${name} in ${file} is empty`);
  }
  return values;
}

async function readText(file: string, title: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new Problem(
      'invalid-input',
      title,
      `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

function invalidFile(detail: string): Problem {
  return new Problem('invalid-input', 'Invalid secrets file', detail);
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function sealedTo(nodes: readonly string[]): string {
  return `${plural(nodes.length, 'node')} (${nodes.join(', ')})`;
}
