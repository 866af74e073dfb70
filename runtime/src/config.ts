// The worker config on the runtime's side: where it is (`--config`, else `cell.jsonc`, else
// `cell.json`) and reading it. The rules themselves live in one parser shared with `svc deploy`
// (src/runtime-tools/worker-config.ts), so the CLI refuses before upload exactly what the
// runtime would refuse here.

import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  CONFIG_FILES,
  type ModuleRule,
  type ParseOptions,
  parseWorkerConfig as parseShared,
  RULE_TYPES,
  type WorkerConfig,
  WorkerConfigError,
} from '../../src/runtime-tools/worker-config.ts';
import { CellError } from './errors.ts';

export { CONFIG_FILES, type ModuleRule, RULE_TYPES, type WorkerConfig };

/** Finds the config: the given path (relative to `cwd`), else `cell.jsonc`, else `cell.json`. */
export function findConfig(cwd: string, given: string | undefined): string {
  if (given !== undefined) {
    const path = resolve(cwd, given);
    if (!existsSync(path)) {
      throw new CellError(`no worker config at ${path}: add cell.jsonc (or cell.json) at the project root`);
    }
    return path;
  }
  for (const name of CONFIG_FILES) {
    const path = join(cwd, name);
    if (existsSync(path)) return path;
  }
  throw new CellError(`no worker config in ${cwd}: add cell.jsonc (or cell.json) at the project root`);
}

/** Reads and checks the config; refusals and warnings name it as `shownAs` (default: its path). */
export function readWorkerConfig(
  path: string,
  options: ParseOptions & { shownAs?: string } = {},
): WorkerConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CellError(`cannot read the worker config ${path}: ${(err as Error).message}`);
  }
  return parseWorkerConfig(text, options.shownAs ?? path, options);
}

/** The shared parser, its refusals as the runtime's own failures. */
export function parseWorkerConfig(text: string, file: string, options: ParseOptions = {}): WorkerConfig {
  try {
    return parseShared(text, file, options);
  } catch (err) {
    if (err instanceof WorkerConfigError) throw new CellError(err.message, { cause: err });
    throw err;
  }
}
