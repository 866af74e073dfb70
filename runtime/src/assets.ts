// Static assets of a deployment (docs/assets.md; stored content-addressed under `deploy-blobs/`
// with an `assets.json`, docs/runtime.md). Collecting them is a walk of the configured folder:
// every file becomes a request path mapped to the SHA-256 of its bytes, except what `.assetsignore`
// leaves out and the control files, which are never served: `.assetsignore`, and `_headers` and
// `_redirects` at the folder's root, whose rules go into `assets.json` instead (asset-rules.ts).

import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { compileRule, type IgnoreRule, matchesIgnore } from '../../src/runtime-tools/ignore-patterns.ts';
import type { AssetEntry, AssetsConfig, HeaderRule, RedirectRule } from '../../src/runtime-tools/layout.ts';
import { parseHeadersFile, parseRedirectsFile, unmatchableRules } from './asset-rules.ts';
import { isInside, sha256 } from './bundle.ts';
import { CellError } from './errors.ts';

/** Workers' own bounds on one asset and on their count. */
export const MAX_ASSET_BYTES = 25 * 1024 * 1024;
export const MAX_ASSET_FILES = 20_000;

/** Files of the assets folder's root that configure serving and are never served themselves. */
export const CONTROL_FILES = ['.assetsignore', '_headers', '_redirects'] as const;
/** A Pages-style worker that wrangler refuses to upload as a public asset unless `.assetsignore` exists. */
const PAGES_WORKER = '_worker.js';

export interface CollectedAssets {
  files: Record<string, AssetEntry>;
  /** Blob bytes by content key. */
  blobs: Map<string, Uint8Array>;
  headers: HeaderRule[];
  redirects: RedirectRule[];
  /** Lines of `_headers`/`_redirects` that were skipped, one sentence each. */
  warnings: string[];
}

/**
 * Reads every file under `directory` (which must lie inside `root`), leaving out what the
 * folder's `.assetsignore` (gitignore syntax) names, and parses its `_headers` and `_redirects`.
 */
export function collectAssets(
  root: string,
  directory: string,
  options: { htmlHandling?: AssetsConfig['html_handling'] } = {},
): CollectedAssets {
  let real: string;
  try {
    real = realpathSync(directory);
  } catch {
    throw new CellError(
      `"assets.directory" ${relative(root, directory) || '.'} does not exist in the project`,
    );
  }
  if (!isInside(realpathSync(root), real)) {
    throw new CellError(`"assets.directory" must be a folder inside the project, not ${directory}`);
  }
  const ignoreText = readOptional(join(real, '.assetsignore'));
  const ignore = ignoreRules(ignoreText ?? '');
  const files: Record<string, AssetEntry> = {};
  const blobs = new Map<string, Uint8Array>();
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(dir, entry.name);
      const rel = relative(real, path).split(sep).join('/');
      if (entry.isDirectory()) {
        if (!matchesIgnore(ignore, rel, true)) visit(path);
        continue;
      }
      if (matchesIgnore(ignore, rel, false)) continue;
      if (entry.isSymbolicLink()) {
        throw new CellError(`asset ${rel} is a symbolic link; copy the file into the assets folder instead`);
      }
      if (!entry.isFile()) continue;
      if (ignoreText === null && (rel === PAGES_WORKER || rel.startsWith(`${PAGES_WORKER}/`))) {
        throw new CellError(
          `the assets folder holds ${rel}, which would be served publicly; remove it, or add an .assetsignore file to the assets folder (listing ${PAGES_WORKER} to leave it out, or empty to serve it)`,
        );
      }
      const bytes = readFileSync(path);
      if (bytes.byteLength > MAX_ASSET_BYTES) {
        throw new CellError(
          `asset ${rel} is ${bytes.byteLength} bytes; one asset may be at most ${MAX_ASSET_BYTES}`,
        );
      }
      const blob = sha256(bytes);
      blobs.set(blob, bytes);
      files[`/${rel}`] = { blob, size: bytes.byteLength, content_type: contentType(rel) };
      if (Object.keys(files).length > MAX_ASSET_FILES) {
        throw new CellError(`the assets folder holds more than ${MAX_ASSET_FILES} files`);
      }
    }
  };
  visit(real);
  const headers = parseHeadersFile(readOptional(join(real, '_headers')) ?? '');
  const redirects = parseRedirectsFile(readOptional(join(real, '_redirects')) ?? '', {
    htmlHandling: options.htmlHandling,
  });
  return {
    files,
    blobs,
    headers: headers.rules,
    redirects: redirects.rules,
    warnings: [
      ...headers.warnings,
      ...redirects.warnings,
      ...unmatchableRules(headers.rules, redirects.rules),
    ],
  };
}

/** `.assetsignore`'s own patterns, then the control files, which no pattern can bring back. */
function ignoreRules(text: string): IgnoreRule[] {
  const fixed = CONTROL_FILES.map((name) => ({ ...compileRule(`/${name}`)!, fixed: true }));
  return [...assetsIgnorePatterns(text), ...fixed];
}

/** The patterns of an `.assetsignore` text (also what `svc deploy` leaves out when packing). */
export function assetsIgnorePatterns(text: string): IgnoreRule[] {
  return text
    .split(/\r?\n/)
    .map((line) => compileRule(line))
    .filter((rule): rule is IgnoreRule => rule !== null);
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.wasm': 'application/wasm',
  '.pdf': 'application/pdf',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mp3': 'audio/mpeg',
  '.webmanifest': 'application/manifest+json',
};

export function contentType(path: string): string {
  return TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
}
