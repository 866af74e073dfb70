// `svc operator` (docs/cli.md "svc operator"): operator keys. keygen and show are local;
// enroll, rotate, revoke and list call the node (`/v1/operators`, client.ts); keygen
// `--register` and enroll with bucket flags write `_svc/operators/<id>.json` straight to the
// bucket, authorized by the bucket credential (admins only, never scoped).

import { rm } from 'node:fs/promises';
import type { Command } from 'commander';
import {
  DEFAULT_KEY_FILE,
  generateOperatorKey,
  keyFileDocument,
  loadOperatorKey,
  loadPublicDocument,
  newOperatorId,
  publicDocument,
  writeSecretFile,
} from '../auth/key-file.ts';
import { registerThroughBucket } from '../auth/operators.ts';
import type { TrustedOperator } from '../auth/records.ts';
import { Problem } from '../problem.ts';
import { checkOperatorId } from '../registry/names.ts';
import { callNode, type RemoteFlags, resolveTarget, type Target } from './client.ts';
import { addBucketFlags, addRemoteFlags, repeatable, withBucket } from './flags.ts';
import { loadRemotes, removeHomeKey, saveHomeKey, saveRemotes } from './operator-home.ts';
import { note, say, table, warn } from './output.ts';

export function registerOperator(program: Command): void {
  const operator = program
    .command('operator')
    .description('Operator keys: create, enroll, rotate, revoke, list');
  addBucketFlags(
    operator
      .command('keygen')
      .description('Write an operator key pair')
      .option('--out <file>', 'Key file to write', DEFAULT_KEY_FILE)
      .option('--id <id>', 'Operator id (default op-<hex>)')
      .option('--register', 'Write the public half straight to the bucket (bootstrap)')
      .option('--role <tier>', 'Only `admin` with --register'),
  ).action(keygen);
  addRemoteFlags(operator.command('show').description('Print this operator key (local only)'), {}).action(
    show,
  );
  addBucketFlags(
    operator
      .command('enroll <pubkey>')
      .description('Trust another operator key')
      .option('--remote <name>', 'Remote to act through')
      .option('--role <tier>', '`admin` or `operator`')
      .option('--apps <pattern>', 'Exact name, prefix glob such as shop-*, or *; repeatable', repeatable)
      .option('--node <url>', 'Node to reach'),
  ).action(enroll);
  addRemoteFlags(operator.command('rotate').description('Replace the signing key'))
    .option('--keep-old', 'Stop after the flip, leaving both keys trusted')
    .option('--purge-old', 'Delete the old key file once untrusted')
    .action(rotate);
  addRemoteFlags(operator.command('revoke').description('Stop trusting a key'))
    .requiredOption('--id <id>', 'Key to revoke (not your own)')
    .action(revoke);
  addRemoteFlags(operator.command('list').description('List trusted operator keys')).action(list);
}

const BUCKET_FLAGS = ['config', 'endpoint', 'region', 'bucket', 'prefix', 'accessKey', 'secretKey'] as const;

function onlyAdmin(role: string | undefined, path: string): void {
  if (role !== undefined && role !== 'admin') {
    throw new Problem(
      'invalid-input',
      'Invalid --role',
      `${path} registers admin keys only; enroll other tiers over a node`,
    );
  }
}

async function keygen(
  flags: Record<string, unknown> & { out: string; id?: string; register?: boolean; role?: string },
) {
  if (flags.role !== undefined && !flags.register) {
    throw new Problem('invalid-input', 'Invalid --role', '--role applies to --register only');
  }
  onlyAdmin(flags.role, 'keygen --register');
  const key = generateOperatorKey(
    flags.id === undefined ? newOperatorId() : checkOperatorId(flags.id, '--id'),
  );
  // The private key is on disk before anything trusts it, so a registration that lands is never
  // without its key. A refused one trusts nothing: its file goes, so a rerun starts clean.
  await writeSecretFile(flags.out, `${JSON.stringify(keyFileDocument(key), null, 2)}\n`);
  note(`wrote ${flags.out} (owner-readable only) for operator ${key.id}`);
  if (flags.register) {
    try {
      await withBucket(flags, async (store) => {
        await registerThroughBucket(store, key.id, key.pair.publicJwk);
        note(`registered ${key.id} as an admin key in ${store.description}`);
      });
    } catch (err) {
      await rm(flags.out, { force: true });
      note(`removed ${flags.out}: the key was not registered`);
      throw err;
    }
  }
  say(JSON.stringify(publicDocument(key)));
}

async function show(flags: RemoteFlags) {
  // Local only: a key named here needs no remote, so none is chosen (or asked for).
  const key = flags.key ?? process.env.SVC_OPERATOR_KEY;
  const target = key
    ? { key: await loadOperatorKey(key, flags.key ? '--key' : 'SVC_OPERATOR_KEY', warn) }
    : await resolveTarget(flags);
  if (!target.key) {
    throw new Problem(
      'invalid-input',
      'No operator key',
      'pass --key, set SVC_OPERATOR_KEY, or add a remote with svc remote add',
    );
  }
  say(JSON.stringify(publicDocument(target.key), null, 2));
  note(
    `operator ${target.key.id} from ${target.key.source}; this is its public half, safe to share: ` +
      'an admin trusts it with svc operator enroll <this document>',
  );
}

async function enroll(
  pubkey: string,
  flags: Record<string, unknown> & RemoteFlags & { role?: string; apps?: string[] },
): Promise<void> {
  const doc = await loadPublicDocument(pubkey, '<pubkey>');
  if (flags.role !== undefined && flags.role !== 'admin' && flags.role !== 'operator') {
    throw new Problem('invalid-input', 'Invalid --role', '--role is admin or operator');
  }
  if (BUCKET_FLAGS.some((name) => flags[name] !== undefined)) {
    // The bucket ceremony: seeds and recovers admins, never scoped.
    onlyAdmin(flags.role, 'the bucket ceremony');
    if (flags.apps !== undefined) {
      throw new Problem(
        'invalid-input',
        'The bucket ceremony is never scoped',
        'it registers admin keys reaching every application; drop --apps, or enroll over a node without bucket flags',
      );
    }
    const record = await withBucket(flags, (store) => registerThroughBucket(store, doc.id, doc.publicKey));
    say(`enrolled ${record.id} as admin for * (through the bucket)`);
    return;
  }
  if (flags.role !== 'admin' && flags.apps === undefined) {
    throw new Problem(
      'invalid-input',
      'Scope required',
      'an operator-tier key needs --apps (exact name, prefix glob such as shop-*, or *; repeatable)',
    );
  }
  const target = await resolveTarget(flags);
  const body: Record<string, unknown> = {
    id: doc.id,
    publicKey: doc.publicKey,
    applications: flags.apps ?? ['*'],
  };
  if (flags.role !== undefined) body.role = flags.role;
  const { operator } = (await callNode(target, 'POST', '/v1/operators', { body })) as {
    operator: TrustedOperator;
  };
  say(`enrolled ${operator.id} as ${operator.role} for ${operator.applications.join(' ')}`);
}

async function rotate(flags: RemoteFlags & { keepOld?: boolean; purgeOld?: boolean }): Promise<void> {
  if (flags.keepOld && flags.purgeOld) {
    throw new Problem(
      'invalid-input',
      'Conflicting flags',
      '--purge-old deletes a key --keep-old keeps trusted; give one',
    );
  }
  if (process.env.SVC_OPERATOR_KEY) {
    throw new Problem(
      'invalid-input',
      'Rotate acts on a remote',
      'rotate replaces the key a remote of this home signs with; unset SVC_OPERATOR_KEY',
    );
  }
  if (flags.key !== undefined) {
    throw new Problem(
      'invalid-input',
      'Rotate acts on a remote',
      `rotate replaces the key ${flags.remote ? `remote ${flags.remote}` : 'a remote of this home'} signs with; drop --key`,
    );
  }
  const target = await resolveTarget(flags);
  if (!target.remote || target.keySource !== 'remote' || !target.key) {
    throw new Problem(
      'invalid-input',
      'No remote to rotate',
      'add one with svc remote add, or name it with --remote',
    );
  }
  const old = target.key;
  const next = generateOperatorKey();
  // Kept in the home first: if anything below fails, the new key is not lost.
  await saveHomeKey(target.home, next);
  let registered: TrustedOperator;
  try {
    ({ operator: registered } = (await callNode(target, 'POST', '/v1/operators', {
      body: { id: next.id, publicKey: next.pair.publicJwk, supersedes: old.id },
    })) as { operator: TrustedOperator });
  } catch (err) {
    await removeHomeKey(target.home, next.id);
    throw err;
  }
  const nextTarget: Target = { ...target, key: next };
  await proveKey(nextTarget, old.id);

  // The flip: every remote of this home that signed with the old key now signs with the new.
  const index = await loadRemotes(target.home);
  const flipped: string[] = [];
  for (const [name, entry] of Object.entries(index.remotes)) {
    if (entry.key === old.id) {
      entry.key = next.id;
      flipped.push(name);
    }
  }
  await saveRemotes(target.home, index);
  say(`rotated ${old.id} -> ${next.id} (${registered.role}; remotes ${flipped.join(', ')})`);
  if (flags.keepOld) {
    note(`old key ${old.id} is still trusted; revoke it with svc operator revoke --id ${old.id}`);
    return;
  }
  await callNode(nextTarget, 'DELETE', `/v1/operators/${encodeURIComponent(old.id)}`);
  say(`revoked ${old.id}`);
  if (flags.purgeOld) {
    await removeHomeKey(target.home, old.id);
    note(`deleted the old key file of ${old.id}`);
  }
}

/** Signs a call with the new key before anything depends on it. */
async function proveKey(target: Target, oldId: string): Promise<void> {
  const newId = target.key!.id;
  try {
    const { operators } = (await callNode(target, 'GET', '/v1/operators')) as {
      operators: TrustedOperator[];
    };
    if (operators.some((record) => record.id === newId)) return;
  } catch (err) {
    throw new Problem(
      'auth-invalid',
      'New key not proven',
      `${newId} is registered but a node did not accept it (${(err as Error).message}); ` +
        `the remote still signs with ${oldId}, which stays trusted`,
    );
  }
  throw new Problem('auth-invalid', 'New key not proven', `${newId} does not appear in its own lineage`);
}

async function revoke(flags: RemoteFlags & { id: string }): Promise<void> {
  const id = checkOperatorId(flags.id, '--id');
  const target = await resolveTarget(flags);
  if (target.key?.id === id) {
    throw new Problem(
      'invalid-input',
      'Cannot revoke your own key',
      'a key never revokes itself; rotate instead (svc operator rotate)',
    );
  }
  const { removed } = (await callNode(target, 'DELETE', `/v1/operators/${encodeURIComponent(id)}`)) as {
    removed: string;
  };
  say(`revoked ${removed}`);
  note(
    'every node drops the key within one reconcile pass (about 5 s; at most 60 s if the bucket misses the change marker)',
  );
}

async function list(flags: RemoteFlags): Promise<void> {
  const target = await resolveTarget(flags);
  const { operators, scoped } = (await callNode(target, 'GET', '/v1/operators')) as {
    operators: TrustedOperator[];
    scoped?: true;
  };
  const rows = operators.map((record) => [
    record.id === target.key?.id ? `${record.id} (you)` : record.id,
    record.role,
    record.applications.join(','),
    record.supersedes ?? '-',
    record.registeredBy || '-',
  ]);
  for (const line of table(['ID', 'ROLE', 'APPLICATIONS', 'SUPERSEDES', 'REGISTERED BY'], rows)) say(line);
  if (scoped) note("showing this key's rotation lineage only");
}
