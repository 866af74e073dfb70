// Packing a project for `svc deploy` (docs/cli.md "svc deploy"): the directory becomes a
// gzip-compressed tar written to a temporary file, so that a deploy waiting for a queue place
// re-sends the same bytes rather than packing again.
//
// What goes in: every regular file under the directory, in path order, except
//   - what the project's `.svcignore` leaves out (gitignore-style patterns, see matchesIgnore), and
//   - what is always left out: `.git/`, `.svc/`, `.wrangler/`, `node_modules/.bin/`, the svc
//     config (`svc.config.jsonc`, `svc.config.json`: it may hold bucket credentials), local
//     secrets (`.env`, `.env.*`, `.dev.vars`, `.dev.vars.*`), `.svcignore` itself, `.DS_Store`.
// Symbolic links are followed when they resolve inside the directory (pnpm's node_modules) and
// refused otherwise, so nothing outside the project is ever packed.
//
// The worker config (which one: config-resolution.ts) goes in at the root as `cell.jsonc` (or
// `cell.json`): the user's JSON byte for byte when it needs no change, else generated JSON (TOML
// converted, an environment merged, paths rebased); `--var` and `--no-bundle` edit it in memory
// with jsonc-parser (comments and layout kept). The project's files are never written.
//
// `node_modules/` goes in only as far as the build reads it (build-inputs.ts): the files the
// bundler's metafile names and the `package.json` files that resolve them, and the assets folder
// when it lies there. The assets folder goes in without what its `.assetsignore` names, but for
// the worker's own code (build-inputs.ts).

import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdtemp, readdir, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { applyEdits, modify, type ParseError, parse } from 'jsonc-parser';
// The two header classes alone, not tar's whole 84 KB bundle: `svc deploy` only writes headers.
import { Header } from 'tar/header';
import { Pax } from 'tar/pax';
import { invalidInput, Problem } from '../problem.ts';
import { BINDING_NAME_RULE, isApplicationName, isBindingName } from '../registry/names.ts';
import { compileRule, type IgnoreRule, matchesIgnore } from '../runtime-tools/ignore-patterns.ts';
import { type AssetsLeftOut, assetsFolder, assetsLeftOut } from './build-inputs.ts';
import { type ProjectConfig, type ResolveOptions, resolveProjectConfig } from './config-resolution.ts';

export { type ProjectConfig, WORKER_CONFIGS, WRANGLER_CONFIGS } from './config-resolution.ts';
export { compileRule, matchesIgnore };
export const IGNORE_FILE = '.svcignore';

/** Left out of every artifact, whatever `.svcignore` says (documented in docs/deploys.md). */
export const ALWAYS_LEFT_OUT = [
  '/.git/',
  '/.svc/',
  '/.wrangler/',
  'node_modules/.bin/',
  '/svc.config.jsonc',
  '/svc.config.json',
  '.env',
  '.env.*',
  '.dev.vars',
  '.dev.vars.*',
  `/${IGNORE_FILE}`,
  '.DS_Store',
];

/**
 * The project's worker config as the artifact carries it (config-resolution.ts: `-c`, svc's own
 * file, the deploy redirect, wrangler's files; `--env` merged); null when there is none.
 */
export function readProjectConfig(dir: string, options: ResolveOptions = {}): Promise<ProjectConfig | null> {
  return resolveProjectConfig(dir, options);
}

/** The config's `name` when it is an application name; null otherwise (missing, blank, invalid). */
export function configName(
  config: (Pick<ProjectConfig, 'file' | 'bytes'> & { name?: unknown }) | null,
): string | null {
  if (!config) return null;
  // The top-level name, as read before any environment was merged; else the artifact's own.
  const value = 'name' in config ? config : (parseConfig(config) as { name?: unknown } | undefined);
  const name = value && typeof value === 'object' ? value.name : undefined;
  return typeof name === 'string' && isApplicationName(name.trim()) ? name.trim() : null;
}

function parseConfig(config: Pick<ProjectConfig, 'bytes'>): unknown {
  const errors: ParseError[] = [];
  const value = parse(config.bytes.toString('utf8'), errors, { allowTrailingComma: true });
  return errors.length === 0 ? value : undefined;
}

/** Parses `--var KEY:VALUE` flags (split at the first colon) into ordered pairs. */
export function parseVars(flags: readonly string[]): [string, string][] {
  const seen = new Set<string>();
  const vars: [string, string][] = [];
  for (const flag of flags) {
    const colon = flag.indexOf(':');
    if (colon < 0) {
      throw invalidInput(
        'Invalid --var',
        `${JSON.stringify(flag)} has no colon: give KEY:VALUE (an empty VALUE is allowed)`,
      );
    }
    const name = flag.slice(0, colon);
    if (!isBindingName(name)) {
      throw invalidInput(
        'Invalid --var',
        `${JSON.stringify(name)} is not a variable name: ${BINDING_NAME_RULE}`,
      );
    }
    if (seen.has(name)) throw invalidInput('Invalid --var', `${name} is given more than once`);
    seen.add(name);
    vars.push([name, flag.slice(colon + 1)]);
  }
  return vars;
}

/**
 * The config as the artifact carries it: the bytes unchanged with no edit, else the text with
 * `vars.<name>` set for each `--var` and `no_bundle: true` for `--no-bundle`.
 */
export function editConfig(
  config: Pick<ProjectConfig, 'file' | 'bytes'>,
  edits: { vars: [string, string][]; noBundle: boolean },
): Buffer {
  if (edits.vars.length === 0 && !edits.noBundle) return config.bytes;
  const value = parseConfig(config);
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidInput(
      'Invalid worker config',
      `${config.file} is not a JSON object (with comments allowed); --var and --no-bundle cannot edit it`,
    );
  }
  const existing = (value as { vars?: unknown }).vars;
  if (
    existing !== undefined &&
    (existing === null || typeof existing !== 'object' || Array.isArray(existing))
  ) {
    throw invalidInput(
      'Invalid worker config',
      `"vars" in ${config.file} is not an object; --var cannot add to it`,
    );
  }
  let text = config.bytes.toString('utf8');
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const formattingOptions = { insertSpaces: true, tabSize: 2, eol };
  for (const [name, varValue] of edits.vars) {
    text = applyEdits(text, modify(text, ['vars', name], varValue, { formattingOptions }));
  }
  if (edits.noBundle) text = applyEdits(text, modify(text, ['no_bundle'], true, { formattingOptions }));
  return Buffer.from(text, 'utf8');
}

/** A packed artifact on disk. */
export interface PackedArtifact {
  file: string;
  bytes: number;
  files: number;
  /** Removes the temporary file and its directory. */
  dispose(): Promise<void>;
}

interface FileEntry {
  /** Archive path, `/`-separated. */
  path: string;
  /** Where its bytes are read from; null for the in-memory config. */
  source: string | null;
  size: number;
}

/**
 * Packs `dir` into a temporary `.tar.gz`; the config at the root is `configBytes` instead of
 * what is on disk.
 */
export async function packProject(
  dir: string,
  config: Pick<ProjectConfig, 'file'>,
  configBytes: Buffer,
  dependencies: ReadonlySet<string> = new Set(),
): Promise<PackedArtifact> {
  const ignore = await loadIgnore(dir);
  const leftOutAssets = await assetsLeftOut(dir, configBytes, dependencies);
  const assets = await assetsFolder(dir, configBytes);
  const entries = await collectFiles(dir, ignore, dependencies, leftOutAssets, assets);
  const rest = entries.filter((entry) => entry.path !== config.file);
  const files: FileEntry[] = [{ path: config.file, source: null, size: configBytes.length }, ...rest];
  const out = await mkdtemp(join(tmpdir(), 'svc-deploy-'));
  const file = join(out, 'artifact.tar.gz');
  const dispose = () => rm(out, { recursive: true, force: true });
  try {
    const tar = new PassThrough();
    const writing = pipeline(tar, createGzip({ level: 6 }), createWriteStream(file, { mode: 0o600 }));
    for (const entry of files) {
      await writeBlock(tar, headerBlocks(entry.path, entry.size));
      if (entry.source === null) {
        await writeBlock(tar, configBytes);
      } else {
        let written = 0;
        for await (const chunk of createReadStream(entry.source)) {
          written += (chunk as Buffer).length;
          if (written > entry.size) break;
          await writeBlock(tar, chunk as Buffer);
        }
        if (written !== entry.size) {
          throw new Problem(
            'invalid-input',
            'Project changed while packing',
            `${entry.path} changed size; run svc deploy again`,
          );
        }
      }
      const pad = (512 - (entry.size % 512)) % 512;
      if (pad) await writeBlock(tar, Buffer.alloc(pad));
    }
    await writeBlock(tar, Buffer.alloc(1024));
    tar.end();
    await writing;
    return { file, bytes: (await stat(file)).size, files: files.length, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

function writeBlock(stream: PassThrough, block: Buffer): Promise<void> {
  if (stream.write(block)) return Promise.resolve();
  return new Promise((resolve) => stream.once('drain', resolve));
}

/** A ustar header for one regular file, preceded by a pax header when the path needs one. */
function headerBlocks(path: string, size: number): Buffer {
  const fields = {
    path,
    type: 'File' as const,
    size,
    mode: 0o644,
    mtime: new Date(0),
    uid: 0,
    gid: 0,
    uname: '',
    gname: '',
  };
  const block = Buffer.alloc(512);
  const header = new Header(fields);
  const needPax = header.encode(block, 0);
  if (!needPax) return block;
  // The ustar block keeps what fits; the pax record before it carries the whole path.
  return Buffer.concat([new Pax({ path, size, mtime: new Date(0) }).encode(), block]);
}

// ---- .svcignore ----

async function loadIgnore(dir: string): Promise<IgnoreRule[]> {
  const always = ALWAYS_LEFT_OUT.map((pattern) => compileRule(pattern)!);
  const text = await readFile(join(dir, IGNORE_FILE), 'utf8').catch(() => '');
  const own = text
    .split(/\r?\n/)
    .map((line) => compileRule(line))
    .filter((rule): rule is IgnoreRule => rule !== null);
  // The fixed list is applied last and cannot be negated: secrets never ship.
  return [...own, ...always.map((rule) => ({ ...rule, fixed: true }))];
}

/** Whether a path lies in a `node_modules` folder. */
function inNodeModules(path: string): boolean {
  return path === 'node_modules' || path.startsWith('node_modules/') || path.includes('/node_modules/');
}

/**
 * Every file the ignore rules keep; below `node_modules` only the paths in `dependencies` (the
 * build's own reads), the assets folder (`assets`), and the folders leading to them; in the
 * assets folder not what its `.assetsignore` leaves out.
 */
async function collectFiles(
  root: string,
  rules: IgnoreRule[],
  dependencies: ReadonlySet<string>,
  leftOutAssets: AssetsLeftOut | null,
  assets: string | null,
): Promise<FileEntry[]> {
  const inAssets = (path: string) => assets !== null && (path === assets || path.startsWith(`${assets}/`));
  const leadsToAssets = (path: string) => assets?.startsWith(`${path}/`) === true;
  const rootReal = await realpath(root);
  const leading = new Set<string>();
  for (const path of dependencies) {
    for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1))
      leading.add(path.slice(0, at));
  }
  const files: FileEntry[] = [];
  const walk = async (dir: string, rel: string, ancestors: Set<string>) => {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const path = rel ? `${rel}/${name}` : name;
      const full = join(dir, name);
      let info = await lstat(full);
      if (info.isSymbolicLink()) {
        // A link is looked at only when its own path is not left out.
        if (matchesIgnore(rules, path, false) && matchesIgnore(rules, path, true)) continue;
        const target = await realpath(full).catch(() => null);
        if (!target || !(target === rootReal || target.startsWith(rootReal + sep))) {
          throw new Problem(
            'invalid-input',
            'Link out of the project',
            `${path} links outside ${root}; an artifact carries only the project's own files (leave it out in ${IGNORE_FILE})`,
          );
        }
        info = await stat(full);
      }
      if (info.isDirectory()) {
        if (matchesIgnore(rules, path, true)) continue;
        if (inNodeModules(path) && !leading.has(path) && !inAssets(path) && !leadsToAssets(path)) continue;
        const real = await realpath(full);
        if (ancestors.has(real)) continue; // a link cycle
        await walk(full, path, new Set([...ancestors, real]));
      } else if (info.isFile()) {
        if (matchesIgnore(rules, path, false)) continue;
        if (inNodeModules(path) && !dependencies.has(path) && !inAssets(path)) continue;
        if (leftOutAssets?.(path)) continue;
        files.push({ path, source: full, size: info.size });
      }
      // Sockets, fifos and devices are not project files: skipped.
    }
  };
  await walk(root, '', new Set([rootReal]));
  return files;
}

/** The relative form of a path for messages. */
export function shown(dir: string): string {
  const rel = relative(process.cwd(), dir);
  return rel === '' ? '.' : rel.startsWith('..') ? dir : rel;
}
