// What `svc deploy` reads from its command line and its environment before it touches a file:
// the flags, the queue timeout, and the deploy metadata (replicas, node selector, source) the
// `x-svc-deploy` header carries (docs/cli.md "svc deploy", docs/deploys.md "The metadata header").
// Pure: every refusal here comes before anything is read or sent.

import type { DeployMetadata, DeploySource } from '../node/deploys/metadata.ts';
import { Problem } from '../problem.ts';
import { parseReplicas } from '../registry/application-bodies.ts';

export interface DeployFlags {
  name?: string;
  env?: string;
  var?: string[];
  bundle?: boolean;
  replicas?: string;
  nodeSelector?: string[];
  wait?: boolean;
  queueTimeout?: string;
  node?: string;
  remote?: string;
  key?: string;
  config?: string;
  /** `-c`/`--worker-config`: the worker config to deploy (wrangler's `--config`). */
  workerConfig?: string;
  token?: string;
}

/**
 * `--config` is svc's own config file (svc.config.jsonc), as for every remote command; wrangler
 * users name their worker config with `--config`, so a worker config given there is refused
 * with the flag that takes it.
 */
export function checkWorkerConfigFlag(flags: DeployFlags): void {
  const given = flags.config;
  if (given === undefined || !/(^|[\\/])(wrangler|cell)\.(toml|jsonc?)$/.test(given)) return;
  throw new Problem(
    'invalid-input',
    'Invalid --config',
    `--config names svc's own config (svc.config.jsonc); give the worker config ${given} with -c ${given} (or --worker-config)`,
  );
}

/** `--queue-timeout` in milliseconds. */
export function parseQueueTimeout(value: string): number {
  const seconds = value.trim() === '' ? Number.NaN : Number(value);
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new Problem(
      'invalid-input',
      'Invalid queue timeout',
      `--queue-timeout ${JSON.stringify(value)} is not a non-negative number of seconds`,
    );
  }
  return seconds * 1000;
}

/** The deploy metadata the flags and a CI environment give: replicas, node selector, source. */
export function metadataFromFlags(flags: DeployFlags, env: NodeJS.ProcessEnv): DeployMetadata {
  const metadata: DeployMetadata = {};
  if (flags.replicas !== undefined) metadata.replicas = parseReplicasFlag(flags.replicas);
  if (flags.nodeSelector !== undefined) metadata.nodeSelector = parseSelectorFlags(flags.nodeSelector);
  const source = sourceFromEnvironment(env);
  if (source) metadata.source = source;
  return metadata;
}

function parseReplicasFlag(value: string): DeployMetadata['replicas'] {
  const parsed = parseReplicas(value === 'all' ? 'all' : /^\d+$/.test(value) ? Number(value) : Number.NaN);
  if (parsed === null) {
    throw new Problem(
      'invalid-input',
      'Invalid --replicas',
      `${JSON.stringify(value)} is neither "all" nor a whole number >= 1`,
    );
  }
  return parsed;
}

function parseSelectorFlags(pairs: readonly string[]): Record<string, string> {
  const selector: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) {
      throw new Problem(
        'invalid-input',
        'Invalid --node-selector',
        `${JSON.stringify(pair)} is not key=value`,
      );
    }
    const key = pair.slice(0, at);
    if (Object.hasOwn(selector, key)) {
      throw new Problem('invalid-input', 'Invalid --node-selector', `${key} is given more than once`);
    }
    Object.defineProperty(selector, key, {
      value: pair.slice(at + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return selector;
}

/**
 * Where the code came from, when a CI system says: GitHub Actions or GitLab CI. Elsewhere the
 * deploy carries no source.
 */
export function sourceFromEnvironment(env: NodeJS.ProcessEnv): DeploySource | undefined {
  if (env.GITHUB_ACTIONS === 'true' && env.GITHUB_REPOSITORY && env.GITHUB_REF && env.GITHUB_SHA) {
    return { provider: 'github', repo: env.GITHUB_REPOSITORY, ref: env.GITHUB_REF, commit: env.GITHUB_SHA };
  }
  if (env.GITLAB_CI === 'true' && env.CI_PROJECT_PATH && env.CI_COMMIT_REF_NAME && env.CI_COMMIT_SHA) {
    return {
      provider: 'gitlab',
      repo: env.CI_PROJECT_PATH,
      ref: env.CI_COMMIT_REF_NAME,
      commit: env.CI_COMMIT_SHA,
    };
  }
  return undefined;
}
