// The runtime's release (docs/runtime.md: `cell --version` prints
// `cell <version>`), kept in one place: runtime/package.json.

import { readFileSync } from 'node:fs';

/** Written in by scripts/build-dist.ts: the bundle in dist/ is not beside runtime/package.json. */
declare const CELL_BUNDLED_VERSION: string | undefined;

export const CELL_VERSION: string =
  typeof CELL_BUNDLED_VERSION === 'string'
    ? CELL_BUNDLED_VERSION
    : JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

/** The line `cell --version` prints and svc records per node and per process. */
export const CELL_VERSION_LINE = `cell ${CELL_VERSION}`;
