// `svc deploy [dir]` (docs/cli.md "svc deploy"): refuses what the command line alone can refuse
// (deploy-flags.ts), reads and checks the worker config with the runtime's own parser, runs its
// custom build (custom-build.ts), packs the project (pack.ts), uploads it (deploy-upload.ts), then
// watches the deploy finish and the new deployment turn ready (deploy-watch.ts). The command
// itself is declared in deploy.ts.

import { join, resolve } from 'node:path';
import { encodeDeployMetadata } from '../node/deploys/metadata.ts';
import { Problem, type ProblemCode } from '../problem.ts';
import { resolveApplicationName } from '../registry/names.ts';
import {
  parseConfigSyntax,
  parseWorkerConfig,
  type WorkerConfig,
  WorkerConfigError,
} from '../runtime-tools/worker-config.ts';
import { buildDependencies } from './build-inputs.ts';
import { hasNode, resolveTarget } from './client.ts';
import { runCustomBuild } from './custom-build.ts';
import {
  checkWorkerConfigFlag,
  type DeployFlags,
  metadataFromFlags,
  parseQueueTimeout,
} from './deploy-flags.ts';
import { submit } from './deploy-upload.ts';
import { watchDeploy, watchServing } from './deploy-watch.ts';
import { formatBytes, note, say, warn } from './output.ts';
import { configName, editConfig, packProject, parseVars, readProjectConfig, shown } from './pack.ts';

export async function deployAction(dirArg: string | undefined, flags: DeployFlags): Promise<void> {
  // Everything the command line alone can refuse is refused before any file is read or sent.
  const dir = resolve(dirArg ?? '.');
  const vars = parseVars(flags.var ?? []);
  const noBundle = flags.bundle === false;
  const queueTimeoutMs = parseQueueTimeout(flags.queueTimeout ?? '600');
  const header = encodeDeployMetadata(metadataFromFlags(flags, process.env));

  checkWorkerConfigFlag(flags);
  const config = await readProjectConfig(dir, { configFile: flags.workerConfig, env: flags.env });
  if (!config) {
    throw new Problem(
      'invalid-input',
      'No worker config',
      `${shown(dir)} has no cell.jsonc, cell.json, .wrangler/deploy/config.json (a framework build's) or wrangler config (wrangler.json, wrangler.jsonc, wrangler.toml); deploy the directory that holds the worker config, or name it with -c`,
    );
  }
  for (const line of config.notes) note(line);
  if (config.convertedFrom && !config.redirectedBy) {
    note(
      `svc: no cell.jsonc in ${shown(dir)}; using ${config.convertedFrom}, converted to cell.jsonc in the artifact (the project is not changed)`,
    );
  }
  // The config is read with the runtime's own parser: a syntax error is reported as one, at its
  // line and column, before its name is looked for. Refusals and warnings are placed in the
  // user's own file, also when the artifact carries a converted or merged form of it.
  const configFile = shown(join(dir, config.source));
  const configText = config.bytes.toString('utf8');
  checkConfig(() => parseConfigSyntax(configText, configFile));
  const application = applicationName(flags, configName(config), config.source);

  const target = await resolveTarget(flags);
  if (!hasNode(target)) {
    throw new Problem(
      'invalid-input',
      'No node to deploy to',
      'pass --node <url>, or add a remote with svc remote add (or name one with --remote)',
    );
  }
  if (flags.token === undefined && !target.key) {
    throw new Problem(
      'invalid-input',
      'No operator key',
      'pass --key, set SVC_OPERATOR_KEY, add a remote with svc remote add, or present a token with --token',
    );
  }

  // Everything the runtime would refuse in the config is refused here, before anything is sent.
  let checked: WorkerConfig | undefined;
  checkConfig(() => {
    checked = parseWorkerConfig(configText, configFile, { locate: config.locate });
  });
  // The runtime sees the converted text, so its warnings would point there: ours point into the
  // user's file and stand for them.
  const converted = config.locate !== undefined;
  if (converted) for (const warning of checked?.warnings ?? []) warn(warning);
  // wrangler deploy runs the config's custom build before it bundles: so does svc, before packing.
  if (checked?.custom_build) await runCustomBuild(dir, checked.custom_build);
  const configBytes = editConfig(config, { vars, noBundle });
  const dependencies = await buildDependencies(dir, configBytes);
  const packed = await packProject(dir, config, configBytes, dependencies);
  try {
    note(
      `svc: packed ${packed.files} files (${formatBytes(packed.bytes)}) from ${shown(dir)} for ${application}`,
    );
    const accepted = await submit(target, application, header, packed, {
      wait: flags.wait !== false,
      queueTimeoutMs,
      token: flags.token,
    });
    await packed.dispose();
    note(`svc: deploy ${accepted.status.id} accepted by ${accepted.endpoint}`);
    const done = await watchDeploy(target, accepted, flags.token);
    // The runtime's warnings (config keys it ignores, ...) are the user's to read, whatever the outcome.
    for (const warning of done.warnings ?? [])
      if (!converted || !warning.startsWith('cell.jsonc:')) warn(warning);
    if (done.state === 'failed') {
      const code = (done.code ?? 'internal') as ProblemCode;
      throw new Problem(code, 'Deploy failed', `deploy ${done.id}: ${done.detail ?? 'no detail recorded'}`);
    }
    say(`deployed ${done.application} ${done.deployment ?? ''} (deploy ${done.id})`.replace('  ', ' '));
    // Published is not yet serving: say so when no placed node turns it ready.
    if (flags.token === undefined && done.deployment) {
      const verdict = await watchServing(target, accepted.endpoint, done.application, done.deployment);
      if (verdict) note(verdict);
    }
  } finally {
    await packed.dispose();
  }
}

/** Runs a step of the shared config parser; its refusal is the user's to fix (Invalid worker config). */
function checkConfig(step: () => unknown): void {
  try {
    step();
  } catch (err) {
    if (err instanceof WorkerConfigError)
      throw new Problem('invalid-input', 'Invalid worker config', err.message);
    throw err;
  }
}

function applicationName(flags: DeployFlags, fromConfig: string | null, file: string): string {
  if (flags.name !== undefined) return resolveApplicationName(flags.name, flags.env);
  if (fromConfig === null) {
    throw new Problem(
      'invalid-input',
      'No application to deploy to',
      `${file} has no usable "name" (1-63 lowercase letters or digits, single hyphens); set it there or pass --name`,
    );
  }
  return resolveApplicationName(fromConfig, flags.env);
}
