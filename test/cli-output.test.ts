// The command line's own output rules (docs/cli.md "Output and exit status"): a reader that closes stdout
// ends the command quietly; a command that reads the bucket says which one when nobody named it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { runSvc, SVC_BIN, tempDir } from './helpers/svc.ts';

test('a closed stdout ends the command quietly with its own exit code', () => {
  // The reader has exited long before Node has started and writes the help.
  const run = spawnSync(
    'bash',
    ['-c', `"${process.execPath}" "${SVC_BIN}" app --help | (exit 0); echo "exit \${PIPESTATUS[0]}"`],
    { encoding: 'utf8', env: { ...process.env, SVC_STATE_DIR: tempDir() } },
  );
  assert.equal(run.stdout, 'exit 0\n');
  assert.equal(run.stderr, '', 'no stack trace');
});

test('with no bucket named, a bucket command says on stderr that it reads the embedded bucket', async () => {
  const state = tempDir();
  const env = { SVC_STATE_DIR: state, SVC_HOME: tempDir() };
  const run = await runSvc(['fleet', 'nodes'], { env, cwd: tempDir() });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(
    run.stderr,
    `svc: no bucket named (--endpoint, SVC_S3_ENDPOINT or svc.config.jsonc): using the embedded bucket ${join(state, 'bucket')}\n`,
  );
  const named = await runSvc(['fleet', 'nodes', '--endpoint', `file://${tempDir()}`], {
    env,
    cwd: tempDir(),
  });
  assert.equal(named.code, 0, named.stderr);
  assert.equal(named.stderr, '', 'a named bucket needs no word');
});
