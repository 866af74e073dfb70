// An adopted runtime process (process-leftovers.ts AdoptedProcess): its exit is seen at once when
// the supervisor asks (the process's runtime host connection ended), not only at the slow poll.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { waitFor } from '../../../test/helpers/svc.ts';
import { ADOPTED_POLL_MS, AdoptedProcess, processAlive } from './process-leftovers.ts';

test('an adopted process that exited is seen at the first check, once', async () => {
  assert.ok(ADOPTED_POLL_MS >= 5_000, 'the safety poll is slow: the check is what is quick');
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  const pid = child.pid!;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // A poll far longer than the test: only check() can see the exit.
  const adopted = new AdoptedProcess(pid, 3_600_000);
  let exits = 0;
  adopted.on('exit', () => exits++);
  try {
    adopted.check();
    assert.equal(exits, 0, 'still running');
    child.kill('SIGKILL');
    await exited;
    await waitFor(() => !processAlive(pid), 'the process gone');
    adopted.check();
    assert.equal(exits, 1);
    adopted.check();
    assert.equal(exits, 1, 'one exit only');
  } finally {
    adopted.release();
    child.kill('SIGKILL');
  }
});
