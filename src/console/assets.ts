// The console's static files (docs/console.md "How it is built"): its own stylesheet and script
// beside this module, and uPlot's build from its npm package. `make dist` copies all of them into
// dist/console-assets/ (scripts/build-dist.ts), which a bundled svc finds beside itself; the
// images carry the source tree and node_modules, where a checkout finds them. Read once at start.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** Served name, where a checkout has it, and its content type. */
export const CONSOLE_ASSETS: readonly { name: string; source: string; type: string }[] = [
  { name: 'console.css', source: 'console.css', type: 'text/css; charset=utf-8' },
  { name: 'console.js', source: 'console.js', type: 'text/javascript; charset=utf-8' },
  { name: 'uPlot.min.css', source: 'uplot/dist/uPlot.min.css', type: 'text/css; charset=utf-8' },
  {
    name: 'uPlot.iife.min.js',
    source: 'uplot/dist/uPlot.iife.min.js',
    type: 'text/javascript; charset=utf-8',
  },
];

/** The folder `make dist` fills, beside the bundle. */
export const DIST_ASSETS_FOLDER = 'console-assets';

/** Where a checkout keeps an asset: ours beside this module, a package's in node_modules. */
export function checkoutPath(source: string): string {
  return source.includes('/')
    ? createRequire(import.meta.url).resolve(source)
    : join(import.meta.dirname, 'assets', source);
}

export function loadAssets(): Map<string, Asset> {
  const bundled = join(import.meta.dirname, DIST_ASSETS_FOLDER);
  const fromDist = existsSync(bundled);
  const out = new Map<string, Asset>();
  for (const asset of CONSOLE_ASSETS) {
    const body = readFileSync(fromDist ? join(bundled, asset.name) : checkoutPath(asset.source));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    out.set(asset.name, { body, type: asset.type, etag });
  }
  return out;
}
