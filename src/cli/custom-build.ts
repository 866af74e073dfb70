// wrangler's custom build in `svc deploy` (docs/deploys.md "Custom builds"): the config's
// `build.command` runs in a shell before the project is packed, as `wrangler deploy` runs it, so
// a project whose build writes its client bundle or its worker deploys with the same one command.

import { spawn } from 'node:child_process';
import { delimiter, dirname, join, resolve } from 'node:path';
import { Problem } from '../problem.ts';
import type { CustomBuild } from '../runtime-tools/worker-config.ts';
import { note } from './output.ts';

/**
 * Runs `build.command` through the shell in `build.cwd` (relative to the project) or the project,
 * its output on stderr (stdout stays svc's result). wrangler is run through npx or an npm script,
 * which put the project's `node_modules/.bin` folders on PATH, and the templates' commands count on
 * that (`esbuild ...`): svc, run directly, puts them there itself. `WRANGLER_COMMAND=deploy` as
 * wrangler sets it.
 */
export async function runCustomBuild(projectDir: string, build: CustomBuild): Promise<void> {
  const cwd = resolve(projectDir, build.cwd ?? '.');
  note(`svc: running the custom build: ${build.command}`);
  const child = spawn(build.command, {
    shell: true,
    cwd,
    stdio: ['ignore', process.stderr, process.stderr],
    env: { ...process.env, WRANGLER_COMMAND: 'deploy', PATH: withProjectBins(cwd, process.env.PATH) },
  });
  const outcome = await new Promise<{ code: number | null; signal: string | null; error?: Error }>((done) => {
    child.once('error', (error) => done({ code: null, signal: null, error }));
    child.once('close', (code, signal) => done({ code, signal }));
  });
  if (outcome.code === 0) return;
  const how = outcome.error
    ? `could not start in ${cwd} (${outcome.error.message})`
    : outcome.signal
      ? `was stopped by ${outcome.signal}`
      : `exited with status ${outcome.code}`;
  throw new Problem(
    'invalid-input',
    'Custom build failed',
    `\`${build.command}\` (build.command of the worker config) ${how}; its output is above. Nothing was uploaded.`,
  );
}

/** `<dir>/node_modules/.bin` for the folder and each above it, nearest first, before PATH (npm's order). */
function withProjectBins(dir: string, path: string | undefined): string {
  const bins: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    bins.push(join(at, 'node_modules', '.bin'));
    if (dirname(at) === at) break;
  }
  return [...bins, ...(path ? [path] : [])].join(delimiter);
}
