// Flag declarations shared by several commands (docs/cli.md "Flag groups"), built
// from the one settings table so a flag, its environment variable and its config path
// never drift apart.

import { join } from 'node:path';
import { type Command, Option } from 'commander';
import { loadConfigFile } from '../config/file.ts';
import { resolveSettings, type SettingSpec, type Settings, settingSpecs } from '../config/settings.ts';
import type { Store } from '../store/store.ts';
import { note } from './output.ts';

/** Collector for repeatable flags: each occurrence appends. */
export function repeatable(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Declares one setting's flag on a command (booleans get their `--no-` twin). */
export function addSettingFlag(command: Command, spec: SettingSpec): void {
  if (spec.kind === 'bool') {
    command.addOption(new Option(`--${spec.flag}`, `${spec.help} [env ${spec.env}]`));
    command.addOption(new Option(`--no-${spec.flag}`, `Turn off --${spec.flag}`));
    return;
  }
  const option = new Option(`--${spec.flag} <value>`, `${spec.help} [env ${spec.env}]`);
  if (spec.kind === 'list' || spec.kind === 'pairs') option.argParser(repeatable);
  command.addOption(option);
}

const byFlag = new Map(settingSpecs.map((spec) => [spec.flag, spec]));

/** The spec for a flag name; throws on a typo in the program's own declarations. */
export function settingFor(flag: string): SettingSpec {
  const spec = byFlag.get(flag);
  if (!spec) throw new Error(`no setting has the flag --${flag}`);
  return spec;
}

/**
 * Opens the bucket a command's settings name. With none named anywhere, the command reads the
 * embedded bucket under the state directory, as a one-machine `svc sail` does; it says so on
 * stderr, since an empty answer from a bucket nobody meant is easy to take for the fleet's.
 */
export async function openCommandBucket(settings: Settings): Promise<Store> {
  // Loaded on use: commands that never touch the bucket do not load its clients.
  const { openStore } = await import('../store/open.ts');
  if (!settings.bucket.endpoint?.trim()) {
    note(
      `svc: no bucket named (--endpoint, SVC_S3_ENDPOINT or svc.config.jsonc): using the embedded bucket ${join(settings.node.stateDir, 'bucket')}`,
    );
  }
  return openStore({ ...settings.bucket, stateDir: settings.node.stateDir });
}

/** Opens the bucket the command's bucket flags, environment and config file name; closes it after. */
export async function withBucket<T>(
  flags: Record<string, unknown>,
  work: (store: Store) => Promise<T>,
): Promise<T> {
  return withBucketOf(settingsFromCommand(flags), work);
}

/** {@link withBucket} for a command that has resolved its settings already. */
export async function withBucketOf<T>(settings: Settings, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openCommandBucket(settings);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/** Declares `--config` and the bucket flags (docs/cli.md "Flag groups"). */
export function addBucketFlags(command: Command): Command {
  command.option('--config <file>', 'Path to svc.config.jsonc [env SVC_CONFIG]');
  for (const spec of settingSpecs.filter((s) => s.group === 'bucket')) addSettingFlag(command, spec);
  return command;
}

/** Declares settings flags by name. */
export function addSettingFlags(command: Command, flags: readonly string[]): Command {
  for (const flag of flags) addSettingFlag(command, settingFor(flag));
  return command;
}

/** Declares the remote flags (docs/cli.md "Flag groups"). */
export function addRemoteFlags(command: Command, options: { config?: boolean } = {}): Command {
  if (options.config !== false)
    command.option('--config <file>', 'Path to svc.config.jsonc, read for its `remote` pin');
  command.option('--remote <name>', "Remote out of the operator's home [env SVC_REMOTE]");
  command.option('--node <url>', "Node to reach instead of the remote's first endpoint");
  command.option('--key <key>', 'Key file, portable file, or inline base64: value [env SVC_OPERATOR_KEY]');
  return command;
}

/** Declares `--name` and `--env` (docs/cli.md "Flag groups"). */
export function addNameFlags(command: Command, required: boolean): Command {
  const name = new Option('--name <name>', 'Application');
  if (required) name.makeOptionMandatory();
  command.addOption(name);
  command.option('--env <env>', 'Address the application <name>-<env> instead');
  return command;
}

/**
 * Resolves settings for a command from its parsed flags, the environment and the config
 * file. Only the settings the command declares are read from flags; the rest still come
 * from environment and file, so `svc health` finds the listen address `sail` would use.
 */
export function settingsFromCommand(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv = process.env,
): Settings {
  const file = loadConfigFile(flags.config as string | undefined, env);
  return resolveSettings({ flags, env, file: file.data, filePath: file.path });
}
