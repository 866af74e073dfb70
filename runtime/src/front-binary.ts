// Where the front binary is (`cell-front`, runtime/front/): apart from serve.ts, so that `cell
// publish`'s load check, which has the front start the worker, does not load what `cell serve`
// needs (docs/decisions.md "Start-up").

import { dirname, join } from 'node:path';

/** The variable that names the front binary, when it is not `cell-front` beside the entry script. */
export const FRONT_BIN_VARIABLE = 'CELL_FRONT_BIN';

/** The front binary: CELL_FRONT_BIN, else `cell-front` beside the entry script (bin/ or dist/). */
export function frontBinary(env: NodeJS.ProcessEnv, entry: string): string {
  return env[FRONT_BIN_VARIABLE] || join(dirname(entry), 'cell-front');
}
