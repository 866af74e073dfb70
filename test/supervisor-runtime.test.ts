// The supervisor (src/node/fleet/supervisor.ts) with the real runtime: runtime/bin/cell serving
// through real workerd from a local-directory bucket. A process is ready only once the
// application answers: before anything is published `cell serve` listens but its health is 503,
// and the supervisor reports it starting; after `cell publish` of examples/hello it turns ready
// and the application answers on the reported port. Stopping takes the workerd children along.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { Supervisor } from '../src/node/fleet/supervisor.ts';
import type { ProcessStatus } from '../src/registry/records.ts';
import {
  CELL_BIN,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  isRunning,
  publish,
} from './helpers/cell.ts';
import { freePort, tempDir, waitFor } from './helpers/svc.ts';

/** Deadline for workerd to start and the selector to be followed. */
const SERVE_DEADLINE_MS = 60_000;

const bucketDir = tempDir('supervisor-bucket-');
const bucket = dirBucketEnv(bucketDir);
let supervisor: Supervisor | undefined;
after(() => supervisor?.stop());

test('a runtime process is ready only once its application answers', async () => {
  const start = await freePort();
  supervisor = new Supervisor({
    cellBin: CELL_BIN,
    cellEnv: { CELL_SELECTOR_POLL_MS: '100' },
    bindHost: '127.0.0.1',
    portRange: [start, start],
    portQuarantineMs: 600_000,
    outputBytes: 64 * 1024,
    nodeId: 'node-sup',
    bucketEnv: bucket,
    log: pino({ level: 'silent' }),
    healthPollMs: 100,
    stopGraceMs: 20_000,
  });
  const s = supervisor;
  const hello = (): ProcessStatus | undefined => s.statuses().find((p) => p.application === 'hello');
  await s.apply([{ application: 'hello' }]);

  // Serving, but nothing published: health is 503, and the supervisor has seen it and says so.
  const health = `http://127.0.0.1:${start}/.well-known/cell/health`;
  await waitFor(
    async () => (await fetchText(health))?.status === 503,
    'cell serve answering 503',
    SERVE_DEADLINE_MS,
  );
  await waitFor(() => /serving hello/.test(s.outputTail('hello') ?? ''), 'the serving line');
  const waiting = hello()!;
  assert.equal(waiting.ready, false);
  assert.equal(waiting.state, 'starting');
  assert.equal(waiting.port, start);
  assert.match(waiting.runtimeVersion, /^\d+\.\d+\.\d+/);

  const published = await publish(copyProject(join(EXAMPLES, 'hello')), 'hello', bucket);
  assert.equal(published.code, 0, published.stderr);
  const ready = await waitFor(() => hello()?.ready, 'hello ready', SERVE_DEADLINE_MS);
  assert.equal(ready, true);
  assert.equal(hello()!.state, 'ready');
  const answer = await fetchText(`http://127.0.0.1:${start}/`);
  assert.equal(answer?.status, 200);
  assert.match(answer!.body, /Hello from svc/);

  const pid = hello()!.pid!;
  const workerd = childPids(pid);
  assert.ok(workerd.length > 0, 'cell serve runs workerd');
  await s.stop();
  assert.deepEqual(s.statuses(), []);
  await waitFor(() => ![pid, ...workerd].some(isRunning), 'cell serve and workerd gone');
});

function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((n) => n > 0);
  } catch {
    return [];
  }
}
