// The waiting publisher on a real node with the real runtime (docs/deploys.md "Publishing"): the
// node keeps one `cell publish --standby` waiting, each deploy is handed to it and a new one is
// started after the deploy ended, a waiting publisher that died does not cost the deploy (it is
// published one-shot), and a node that stops leaves no publisher behind.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { keyArg, openBucket } from './helpers/applications.ts';
import { copyProject, EXAMPLES } from './helpers/cell.ts';
import { CELL_REAL } from './helpers/deploys.ts';
import { groupMembers, runSvc, startSail, tempDir, waitFor } from './helpers/svc.ts';

/** The processes whose parent is `parent` and whose command line runs `cell publish --standby`. */
function standbysOf(parent: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== parent || fields[0] === 'Z') continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.includes('publish') && argv.includes('--standby')) found.push(Number(entry));
    } catch {}
  }
  return found;
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && groupMembers(pid).includes(pid);

test('each deploy is published by the waiting publisher, a dead one costs no deploy, and a stopped node leaves none', async () => {
  const bucket = await openBucket();
  const admin = await bucket.operator('op-admin', 'admin', ['*']);
  const node = await startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_REAL], {
    env: { SVC_LOG_LEVEL: 'info' },
  });
  const daemon = node.child.pid!;
  const home = tempDir('svc-home-');
  const project = copyProject(join(EXAMPLES, 'hello'));
  const deploy = async (greeting: string) => {
    const config = join(project, 'cell.jsonc');
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace(/"GREETING": "[^"]*"/, `"GREETING": "${greeting}"`),
    );
    const run = await runSvc(['deploy', project, '--node', node.url, '--key', keyArg(admin)], {
      env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      timeoutMs: 180_000,
    });
    assert.equal(run.code, 0, `${run.stderr}\n${node.log().slice(-3000)}`);
    return /deploy (\S+) accepted/.exec(run.stderr)?.[1] ?? '';
  };
  /** How the node says it ran the deploy's publish: its log line `deploy <id> publishing`. */
  const publisherOf = (id: string) => {
    const line = node
      .log()
      .split('\n')
      .find((l) => l.includes(`"deploy ${id} publishing"`));
    return line ? (JSON.parse(line) as { pid: number; publisher: string }) : null;
  };
  const waitingOtherThan = (previous: number | null) =>
    waitFor(
      () => standbysOf(daemon).find((pid) => pid !== previous) ?? null,
      () => `a waiting publisher other than ${previous}\n${node.log().slice(-3000)}`,
      60_000,
    ) as Promise<number>;
  try {
    const first = await waitingOtherThan(null);
    const firstDeploy = await deploy('Hello one');
    const used = publisherOf(firstDeploy);
    assert.equal(used?.publisher, 'standby', node.log().slice(-3000));
    assert.equal(used?.pid, first);
    // It took its one job and is gone; the node started the next.
    await waitFor(() => !alive(first), 'the used publisher to exit', 30_000);
    const second = await waitingOtherThan(first);
    assert.equal(standbysOf(daemon).length, 1, 'one publisher waits, not more');

    // A waiting publisher that died: the deploy is published one-shot, and still deployed.
    process.kill(-second, 'SIGKILL');
    await waitFor(() => groupMembers(second).length === 0, 'the killed publisher to be gone', 30_000);
    const secondDeploy = await deploy('Hello two');
    assert.equal(publisherOf(secondDeploy)?.publisher, 'one-shot');
    const third = await waitingOtherThan(second);

    // The node stops: the waiting publisher (and esbuild's service with it) goes with it.
    await node.stop();
    assert.equal(alive(third), false);
    assert.deepEqual(groupMembers(third), []);
    assert.deepEqual(standbysOf(daemon), []);
  } finally {
    await node.stop();
    await bucket.close();
  }
});
