// Static assets of a deployment (docs/runtime.md: assets stored
// content-addressed under `deploy-blobs/` with an `assets.json`). Collecting them is a walk of
// the configured folder; every file becomes a request path mapped to the SHA-256 of its bytes.

import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import type { AssetEntry } from '../../src/runtime-tools/layout.ts';
import { isInside, sha256 } from './bundle.ts';
import { CellError } from './errors.ts';

/** Workers' own bounds on one asset and on their count. */
export const MAX_ASSET_BYTES = 25 * 1024 * 1024;
export const MAX_ASSET_FILES = 20_000;

export interface CollectedAssets {
  files: Record<string, AssetEntry>;
  /** Blob bytes by content key. */
  blobs: Map<string, Uint8Array>;
}

/**
 * Reads every file under `directory` (which must lie inside `root`). `.assetsignore` is honoured
 * as wrangler does for its simple forms: one pattern a line, `#` comments, `*` within a name, a
 * trailing `/` for folders; the file itself is never served.
 */
export function collectAssets(root: string, directory: string): CollectedAssets {
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
  const ignore = readIgnore(real);
  const files: Record<string, AssetEntry> = {};
  const blobs = new Map<string, Uint8Array>();
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(dir, entry.name);
      const rel = relative(real, path).split(sep).join('/');
      if (entry.isSymbolicLink()) {
        throw new CellError(`asset ${rel} is a symbolic link; copy the file into the assets folder instead`);
      }
      if (entry.isDirectory()) {
        if (!ignore(`${rel}/`)) visit(path);
        continue;
      }
      if (!entry.isFile() || rel === '.assetsignore' || ignore(rel)) continue;
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
  return { files, blobs };
}

function readIgnore(dir: string): (rel: string) => boolean {
  let text = '';
  try {
    text = readFileSync(join(dir, '.assetsignore'), 'utf8');
  } catch {
    return () => false;
  }
  const patterns = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const folder = line.endsWith('/');
      const body = line.replace(/^\//, '').replace(/\/$/, '');
      const source = body
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[^/]*');
      // A pattern without a slash matches a name at any depth; with one, a path from the root.
      const anchored = body.includes('/') ? `^${source}` : `(^|/)${source}`;
      return { folder, regex: new RegExp(`${anchored}${folder ? '/' : '(/|$)'}`) };
    });
  // Folders are tested as `rel/`, so a folder pattern matches the folder and everything in it.
  return (rel) => patterns.some(({ regex }) => regex.test(rel));
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
