// `cell publish` proves a deployment loads before it uploads anything: a worker that throws
// while its modules are evaluated (a bad import, a dynamic `require` of a Node built-in, a
// missing module) would otherwise be published, selected, and then never turn ready on any
// node. The check starts the built code in workerd, exactly as `cell serve` would (same
// generated configuration, same probe), from a private folder that is removed whatever happens.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Manifest } from '../../src/runtime-tools/layout.ts';
import { CellError } from './errors.ts';
import { Instance, killAllWorkerd, NO_SECRETS } from './instance.ts';

/** How long the check waits for the worker to answer, unless `CELL_START_TIMEOUT_MS` says. */
const DEFAULT_TIMEOUT_MS = 60_000;

/** Resolves once the worker answers its probe in workerd; throws a CellError naming why not. */
export async function proveLoads(options: {
  manifest: Manifest;
  code: ReadonlyMap<string, Uint8Array>;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}): Promise<void> {
  const raw = options.env.CELL_START_TIMEOUT_MS;
  const timeoutMs = raw && /^\d+$/.test(raw) && Number(raw) >= 1000 ? Number(raw) : DEFAULT_TIMEOUT_MS;
  // Short: workerd's Unix socket lives in it.
  const stateDir = mkdtempSync(join(options.env.CELL_STATE_DIR || tmpdir(), 'cell-check-'));
  process.on('exit', killAllWorkerd);
  try {
    const instance = await Instance.start(
      {
        store: null,
        application: options.manifest.application,
        stateDir,
        env: options.env,
        log: options.log,
        startTimeoutMs: timeoutMs,
      },
      options.manifest,
      // Secrets are the node's, handed to `cell serve` only; a worker reads them per request.
      NO_SECRETS,
      options.code,
    );
    await instance.stop();
  } catch (err) {
    const why = err instanceof CellError ? err.message : (err as Error).message;
    throw new CellError(
      `the worker cannot serve: it was started in workerd and ${why}; nothing was published`,
    );
  } finally {
    process.off('exit', killAllWorkerd);
    rmSync(stateDir, { recursive: true, force: true });
  }
}
