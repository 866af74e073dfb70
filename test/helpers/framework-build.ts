// Real framework projects for the framework-build tests (docs/deploys.md "Framework builds"):
// a project's files, with its dependencies pinned, written and installed from the npm registry
// once into a cache under `.tools/framework-builds/<name>-<hash of the files>/` (reused while
// the files are unchanged), then built once there with the project's own build script.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** Where a project of these files is installed; a change of any file is a new folder. */
export function frameworkBuildDir(name: string, files: Record<string, string>): string {
  const key = createHash('sha256').update(JSON.stringify(files)).digest('hex').slice(0, 12);
  return resolve(import.meta.dirname, '..', '..', '.tools', 'framework-builds', `${name}-${key}`);
}

/**
 * Writes and installs the project into `dir` unless it is installed already; answers why it could
 * not be installed (the registry unreachable), or null. `npmFlags` are added to `npm install`
 * (`--omit=dev` for a project svc deploys without building it, so its own toolchain is not fetched).
 */
export function installFrameworkProject(
  dir: string,
  files: Record<string, string>,
  npmFlags: readonly string[] = [],
): string | null {
  if (existsSync(join(dir, 'node_modules', '.installed'))) return null;
  rmSync(dir, { recursive: true, force: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', ...npmFlags], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 900_000,
  });
  if (npm.status !== 0) {
    return `npm install could not install the project from the registry: ${(npm.stderr || npm.error?.message || '').slice(-300)}`;
  }
  writeFileSync(join(dir, 'node_modules', '.installed'), '');
  return null;
}

/**
 * `npm run build` (or the project's `script`), once per install: the build reads nothing of svc,
 * so its output is kept with the installed project and later runs deploy it again. A build that
 * did not finish is redone from scratch (`outputs`, relative to `dir`, removed first). The build
 * runs with Cloudflare's `Request.cf` download off (CLOUDFLARE_CF_FETCH_ENABLED), so a build that
 * starts a local workerd (Astro's prerendering) looks nothing up beyond loopback, and with
 * Next.js's telemetry off (NEXT_TELEMETRY_DISABLED), which would otherwise report the build.
 */
export function buildFrameworkProject(
  dir: string,
  outputs: readonly string[],
  script = 'build',
): { status: number | null; output: string } {
  const built = join(dir, 'node_modules', '.built');
  if (existsSync(built)) return { status: 0, output: 'built by an earlier run' };
  for (const output of outputs) rmSync(join(dir, output), { recursive: true, force: true });
  const build = spawnSync('npm', ['run', script], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 600_000,
    env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: 'false', NEXT_TELEMETRY_DISABLED: '1' },
  });
  if (build.status === 0) writeFileSync(built, '');
  return { status: build.status, output: `${build.stdout}\n${build.stderr}` };
}
