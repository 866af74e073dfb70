// svc.config.jsonc: the lowest-precedence settings source (docs/cli.md "svc sail": flags win
// over environment, which wins over the config file). Also carries the CLI's `remote` pin.

import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { type ParseError, parse, printParseErrorCode } from 'jsonc-parser';
import { Problem } from '../problem.ts';
import { settingSpecs } from './settings.ts';

export const DEFAULT_CONFIG_FILE = 'svc.config.jsonc';

/** A parsed config file; `path` is undefined when none was found. */
export interface ConfigFile {
  path?: string;
  data: Record<string, unknown>;
}

/**
 * Loads the config file named by `--config`, else `SVC_CONFIG`, else `./svc.config.jsonc`
 * when it exists. A named file that is missing or malformed is refused; so is a key svc
 * does not know, since a misspelt setting would otherwise be ignored silently.
 */
export function loadConfigFile(
  explicit: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ConfigFile {
  const named = explicit ?? env.SVC_CONFIG;
  const path = resolve(named ?? DEFAULT_CONFIG_FILE);
  if (!existsSync(path)) {
    if (named) throw new Problem('invalid-input', 'Config file not found', `${path} does not exist`);
    return { data: {} };
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Problem('invalid-input', 'Config file unreadable', `${path}: ${(err as Error).message}`);
  }
  const errors: ParseError[] = [];
  const data: unknown = parse(text, errors, { allowTrailingComma: true });
  if (errors.length > 0) {
    const first = errors[0]!;
    throw new Problem(
      'invalid-input',
      'Malformed config file',
      `${path} at offset ${first.offset}: ${printParseErrorCode(first.error)}`,
    );
  }
  if (!data || typeof data !== 'object' || Array.isArray(data)) {
    throw new Problem('invalid-input', 'Malformed config file', `${path} must hold a JSON object`);
  }
  checkKnownKeys(path, data as Record<string, unknown>);
  return { path, data: data as Record<string, unknown> };
}

const knownPaths = new Set(settingSpecs.map((spec) => spec.path));
const knownGroups = new Set(settingSpecs.map((spec) => spec.path.split('.')[0]));

function checkKnownKeys(path: string, data: Record<string, unknown>): void {
  for (const [group, value] of Object.entries(data)) {
    if (group === 'remote') {
      if (typeof value !== 'string')
        throw new Problem('invalid-input', 'Invalid setting remote', `${path}: expected a remote name`);
      continue;
    }
    if (!knownGroups.has(group) || !value || typeof value !== 'object' || Array.isArray(value)) {
      throw new Problem(
        'invalid-input',
        `Unknown setting ${group}`,
        `${path}: svc has no setting group "${group}" (see docs/configuration.md)`,
      );
    }
    for (const name of Object.keys(value)) {
      if (!knownPaths.has(`${group}.${name}`)) {
        throw new Problem(
          'invalid-input',
          `Unknown setting ${group}.${name}`,
          `${path}: see docs/configuration.md for the settings svc reads`,
        );
      }
    }
  }
}
