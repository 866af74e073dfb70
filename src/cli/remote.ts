// `svc remote` (docs/cli.md "svc remote"): the operator home's remotes (operator-home.ts). Acts
// on the home only, except `add --register`, which writes the bucket (admins only).

import type { Command } from 'commander';
import {
  checkEndpoint,
  generateOperatorKey,
  loadOperatorKey,
  type OperatorKey,
  portableDocument,
  publicDocument,
  writeSecretFile,
} from '../auth/key-file.ts';
import { registerThroughBucket } from '../auth/operators.ts';
import { Problem } from '../problem.ts';
import { repeatable, withBucket } from './flags.ts';
import {
  checkRemoteName,
  loadHomeKey,
  loadRemotes,
  operatorHome,
  removeHomeKey,
  saveHomeKey,
  saveRemotes,
} from './operator-home.ts';
import { note, say, table, warn } from './output.ts';

export function registerRemote(program: Command): void {
  const remote = program.command('remote').description("Manage remotes in the operator's home");
  remote
    .command('add [name]')
    .description('Add a remote: node endpoints and the key to sign with')
    .option('--endpoint <url>', 'Node base URL; repeatable', repeatable)
    .option('--key <name>', 'Reuse a key in this home')
    .option('--from <file>', 'Import a portable file: path or inline base64:')
    .option('--register', 'Record the public half in the registry (admins only)')
    .option('--role <role>', 'Only `admin`')
    .option('--config <file>', 'Path to svc.config.jsonc (for --register)')
    .action(addRemote);
  remote.command('list').description('List remotes').action(listRemotes);
  remote.command('remove <name>').description('Remove a remote and its key if unshared').action(removeRemote);
  remote
    .command('export <name>')
    .description('Write a portable self-contained file readable by its owner alone')
    .option('--out <file>', 'File to write (default <name>.svc-remote.json)')
    .action(exportRemote);
}

interface AddFlags {
  endpoint?: string[];
  key?: string;
  from?: string;
  register?: boolean;
  role?: string;
  config?: string;
}

async function addRemote(nameArg: string | undefined, flags: AddFlags): Promise<void> {
  const home = operatorHome();
  if (flags.key && flags.from) {
    throw new Problem(
      'invalid-input',
      'Conflicting flags',
      '--key reuses a key in this home; --from imports one: give one',
    );
  }
  if (flags.role !== undefined && !flags.register) {
    throw new Problem('invalid-input', 'Invalid --role', '--role applies to --register only');
  }
  if (flags.role !== undefined && flags.role !== 'admin') {
    throw new Problem(
      'invalid-input',
      'Invalid --role',
      'remote add --register admits admin keys only; enroll other tiers with svc operator enroll',
    );
  }
  let key: OperatorKey;
  if (flags.from) key = await loadOperatorKey(flags.from, '--from', warn);
  else if (flags.key) key = await loadHomeKey(home, flags.key);
  else key = generateOperatorKey();

  const name = checkRemoteName(nameArg ?? key.remote ?? 'default');
  const index = await loadRemotes(home);
  if (index.remotes[name]) {
    throw new Problem(
      'invalid-input',
      'Remote exists',
      `${name} is already a remote; remove it first (svc remote remove ${name})`,
    );
  }
  const endpoints = flags.endpoint?.length
    ? flags.endpoint.map((endpoint) => checkEndpoint(endpoint, '--endpoint'))
    : (key.endpoints ?? []);
  if (endpoints.length === 0) {
    throw new Problem(
      'invalid-input',
      'No endpoint',
      'give the node base URL with --endpoint <url> (repeatable)',
    );
  }

  if (flags.register) {
    await withBucket({ config: flags.config }, async (store) => {
      await registerThroughBucket(store, key.id, key.pair.publicJwk);
      note(`registered ${key.id} as an admin key in ${store.description}`);
    });
  }
  await saveHomeKey(home, key);
  index.remotes[name] = { endpoints, key: key.id };
  await saveRemotes(home, index);
  say(`remote ${name}: ${endpoints.join(' ')} (key ${key.id})`);
  if (!flags.register && !flags.key && !flags.from) {
    note(
      `the new key ${key.id} is local only; an admin trusts it with:\n  svc operator enroll '${JSON.stringify(publicDocument(key))}' --apps <name>`,
    );
  }
}

async function listRemotes(): Promise<void> {
  const home = operatorHome();
  const index = await loadRemotes(home);
  const rows = Object.entries(index.remotes).map(([name, entry]) => [
    name,
    entry.key,
    entry.endpoints.join(','),
  ]);
  if (rows.length === 0) {
    note(`no remotes in ${home}; add one with svc remote add`);
    return;
  }
  for (const line of table(['NAME', 'KEY', 'ENDPOINTS'], rows)) say(line);
}

async function removeRemote(name: string): Promise<void> {
  const home = operatorHome();
  const index = await loadRemotes(home);
  const entry = index.remotes[checkRemoteName(name)];
  if (!entry)
    throw new Problem('not-found', 'No such remote', `${JSON.stringify(name)} is not a remote in ${home}`);
  delete index.remotes[name];
  await saveRemotes(home, index);
  const shared = Object.values(index.remotes).some((other) => other.key === entry.key);
  if (!shared) await removeHomeKey(home, entry.key);
  say(`removed remote ${name}`);
  note(
    `${shared ? `key ${entry.key} kept: another remote uses it` : `key ${entry.key} deleted from ${home}`}; ` +
      `the fleet trusts it until an admin runs svc operator revoke --id ${entry.key}`,
  );
}

async function exportRemote(name: string, flags: { out?: string }): Promise<void> {
  const home = operatorHome();
  const index = await loadRemotes(home);
  const entry = index.remotes[checkRemoteName(name)];
  if (!entry)
    throw new Problem('not-found', 'No such remote', `${JSON.stringify(name)} is not a remote in ${home}`);
  const key = await loadHomeKey(home, entry.key);
  const out = flags.out ?? `${name}.svc-remote.json`;
  await writeSecretFile(out, `${JSON.stringify(portableDocument(key, name, entry.endpoints), null, 2)}\n`);
  say(out);
  note(
    `wrote ${out} (owner-readable only): it signs as ${key.id}; use it with --key ${out}, ` +
      'SVC_OPERATOR_KEY, or inline as base64:<base64 of the file>',
  );
}
