// The daemon and its runtime processes with real parts: one `svc sail` on a local-directory
// bucket running the real runtime (runtime/bin/cell, workerd) with its default idle schedule, and
// the real `svc deploy` CLI. A redeploy reaches the running process through the daemon's signal
// (the runtime's own look at the selector is minutes apart, far beyond these deadlines).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { copyProject, EXAMPLES, fetchText } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { runSvc, type SailProcess, waitFor } from './helpers/svc.ts';

/** Deadline for a deploy to be served (publish, workerd start, readiness). */
const SERVE_DEADLINE_MS = 30_000;

interface Process {
  application: string;
  port: number;
  ready: boolean;
  pid?: number;
}

let bucket: Bucket;
let admin: Signer;
let node: SailProcess;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  node = await bucket.sail(['--cell-bin', CELL_REAL]);
});
after(async () => {
  await bucket.close();
});

async function deploy(project: string, greeting: string): Promise<string> {
  const run = await runSvc(
    ['deploy', project, '--node', node.url, '--key', keyArg(admin), '--var', `GREETING:${greeting}`],
    { timeoutMs: 60_000 },
  );
  assert.equal(run.code, 0, run.stderr);
  return /^deployed \S+ ([0-9a-f]+)/.exec(run.stdout)![1]!;
}

async function processOf(application: string): Promise<Process | undefined> {
  const state = (await call(node.url, 'GET', '/v1/state', { signer: admin })).body as {
    processes: Process[];
  };
  return state.processes.find((p) => p.application === application);
}

describe('a redeploy through the node', () => {
  test('reaches the running process at once, with no per-second selector poll', async () => {
    const project = copyProject(join(EXAMPLES, 'hello'));
    await deploy(project, 'first greeting');
    const first = await waitFor(async () => {
      const p = await processOf('hello');
      return p?.ready ? p : undefined;
    }, 'hello ready');
    const body = async () => (await fetchText(`http://127.0.0.1:${first!.port}/`))?.body ?? '';
    await waitFor(
      async () => (await body()).includes('first greeting'),
      'the first greeting',
      SERVE_DEADLINE_MS,
    );

    await deploy(project, 'second greeting');
    await waitFor(
      async () => (await body()).includes('second greeting'),
      `the second greeting\n${node.log()}`,
      SERVE_DEADLINE_MS,
    );
    // The same process switched: nothing was restarted to get there.
    assert.equal((await processOf('hello'))!.pid, first!.pid);
  });
});
