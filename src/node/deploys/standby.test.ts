// The waiting publisher (standby.ts) as runPublish uses it: a publish is handed to it as a job on
// its stdin, one that is gone or was never offered leaves the publish to a one-shot process, and
// stopping it leaves no process behind. The "runtimes" are shell scripts written per test, as in
// runner.test.ts; test/deploy-standby.test.ts runs the real runtime on a real node.

import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { groupMembers, waitFor } from '../../../test/helpers/svc.ts';
import { runPublish } from './runner.ts';
import { FILL_DELAY_MS, STANDBY_READY_LINE, STANDBY_TOOK_LINE, StandbyPublisher } from './standby.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-standby-'));
const quiet = { info() {}, warn() {} };

function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/**
 * A runtime offering `publish --standby`: it says it is ready, writes its job to `<name>.job`, and
 * names itself in the deployment; one-shot it publishes "oneshot". With `child`, the waiting
 * process starts a `sleep` in its group first (as the real one starts esbuild's service).
 */
function standbyRuntime(name: string, options: { child?: boolean } = {}): string {
  return script(
    name,
    `if [ "$2" = "--standby" ]; then
  ${options.child ? 'sleep 300 &\n  echo $! > "$0.sleep"' : ''}
  echo '${STANDBY_READY_LINE}'
  cat > "$0.job"
  echo '${STANDBY_TOOK_LINE}'
  echo "{\\"application\\":\\"shop\\",\\"script\\":\\"w\\",\\"deployment\\":\\"standby-$$\\"}"
  exit 0
fi
echo '{"application":"shop","script":"w","deployment":"oneshot"}'`,
  );
}

const standbyOf = (cellBin: string) =>
  new StandbyPublisher({ cellBin, cwd: dir, env: () => ({ PATH: process.env.PATH ?? '' }), log: quiet });

const publishWith = (
  cellBin: string,
  standby: StandbyPublisher,
  onSpawn?: (pid: number, how: 'standby' | 'one-shot') => void,
) =>
  runPublish({
    cellBin,
    cwd: dir,
    config: 'cell.json',
    env: { PATH: process.env.PATH, CELL_APP: 'shop', CELL_DEPLOY: 'd-1' },
    timeoutMs: 10_000,
    outputBytes: 1000,
    standby,
    ...(onSpawn ? { onSpawn } : {}),
  });

const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');

test('a publish is handed to the waiting publisher: the same config, working directory and environment, on its stdin', async () => {
  const bin = standbyRuntime('ok');
  const standby = standbyOf(bin);
  standby.fill();
  const pid = standby.pid!;
  assert.ok(pid > 0);
  let spawned = 0;
  const published = await publishWith(bin, standby, (p) => {
    spawned = p;
  });
  assert.equal(published.deployment, `standby-${pid}`);
  assert.equal(spawned, pid, 'the publish is noted under the waiting process, as a one-shot one');
  const job = JSON.parse(readFileSync(`${bin}.job`, 'utf8'));
  assert.deepEqual(job, {
    cwd: dir,
    config: 'cell.json',
    env: { PATH: process.env.PATH, CELL_APP: 'shop', CELL_DEPLOY: 'd-1' },
  });
  // Taken: the next publish has none until the node starts another.
  assert.equal(standby.pid, undefined);
  assert.equal((await publishWith(bin, standby)).deployment, 'oneshot');
  standby.fill();
  const next = standby.pid!;
  assert.ok(next > 0 && next !== pid);
  assert.equal((await publishWith(bin, standby)).deployment, `standby-${next}`);
  await standby.stop();
});

test('after a deploy the next publisher starts a moment later, once the runtime has switched', async () => {
  const bin = standbyRuntime('soon');
  const standby = standbyOf(bin);
  const asked = Date.now();
  standby.fillSoon();
  assert.equal(standby.pid, undefined);
  await waitFor(() => standby.pid, 'the next publisher to start', 10_000);
  assert.ok(Date.now() - asked >= FILL_DELAY_MS - 5);
  await standby.stop();
});

test('a waiting publisher that died before its deploy came leaves the deploy to a one-shot publish', async () => {
  const bin = standbyRuntime('killed');
  const standby = standbyOf(bin);
  standby.fill();
  const pid = standby.pid!;
  // Ready first (it has said so), then gone.
  await waitFor(() => readyLine(pid), 'the standby to wait', 10_000);
  process.kill(pid, 'SIGKILL');
  await waitFor(() => !alive(pid), 'the standby to exit', 10_000);
  assert.equal((await publishWith(bin, standby)).deployment, 'oneshot');
  await standby.stop();
});

test('a waiting publisher that ends before it says it took the job leaves the deploy to a one-shot publish', async () => {
  // It dies the moment its job arrives, as one killed just before the handover would.
  const bin = script(
    'dies',
    `if [ "$2" = "--standby" ]; then echo '${STANDBY_READY_LINE}'; cat > /dev/null; exit 1; fi
echo '{"application":"shop","script":"w","deployment":"oneshot"}'`,
  );
  const standby = standbyOf(bin);
  standby.fill();
  const pid = standby.pid!;
  const spawned: string[] = [];
  const published = await publishWith(bin, standby, (p, how) => spawned.push(`${how}:${p === pid}`));
  assert.equal(published.deployment, 'oneshot');
  assert.deepEqual(spawned, ['standby:true', 'one-shot:false']);
  await standby.stop();
});

/** Whether the process waits on its stdin (it has written its ready line and runs `cat`). */
function readyLine(pid: number): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.includes('(cat)') && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid)
        return true;
    } catch {}
  }
  return false;
}

test('a runtime without --standby publishes one-shot, and after three refusals none is started again', async () => {
  const bin = script(
    'old',
    `if [ "$2" != "--config" ]; then echo "error: unknown option '$2'" >&2; exit 1; fi
echo '{"application":"shop","script":"w","deployment":"oneshot"}'`,
  );
  const standby = standbyOf(bin);
  for (let i = 1; i <= 3; i++) {
    standby.fill();
    assert.ok(standby.pid, `start ${i}`);
    assert.equal((await publishWith(bin, standby)).deployment, 'oneshot');
  }
  await waitFor(() => standby.pid === undefined, 'the third start to fail', 10_000);
  standby.fill();
  assert.equal(standby.pid, undefined, 'a runtime that refused three times is not asked again');
  // A replaced runtime file may offer it.
  utimesSync(bin, new Date(), new Date(Date.now() + 5_000));
  standby.fill();
  assert.ok(standby.pid);
  await standby.stop();
});

test('a runtime that neither says it is ready nor exits is a refusal too: after three, deploys stop waiting for it', async () => {
  const bin = script(
    'silent',
    `if [ "$2" != "--config" ]; then exec sleep 300; fi
echo '{"application":"shop","script":"w","deployment":"oneshot"}'`,
  );
  const standby = new StandbyPublisher({
    cellBin: bin,
    cwd: dir,
    env: () => ({ PATH: process.env.PATH ?? '' }),
    log: quiet,
    readyWaitMs: 200,
  });
  const silent: number[] = [];
  for (let i = 1; i <= 3; i++) {
    standby.fill();
    silent.push(standby.pid!);
    assert.equal((await publishWith(bin, standby)).deployment, 'oneshot');
  }
  standby.fill();
  assert.equal(standby.pid, undefined);
  await waitFor(() => silent.every((pid) => !alive(pid)), 'the silent publishers to be stopped', 10_000);
  await standby.stop();
});

test('a runtime replaced while its publisher waited is not used: the deploy runs the new file one-shot', async () => {
  const bin = standbyRuntime('replaced');
  const standby = standbyOf(bin);
  standby.fill();
  const pid = standby.pid!;
  await waitFor(() => readyLine(pid), 'the standby to wait', 10_000);
  utimesSync(bin, new Date(), new Date(Date.now() + 5_000));
  assert.equal((await publishWith(bin, standby)).deployment, 'oneshot');
  await waitFor(() => !alive(pid), 'the old standby to be stopped', 10_000);
  await standby.stop();
});

test('stopping the node stops the waiting publisher and everything it started, and starts no other', async () => {
  const bin = standbyRuntime('stopped', { child: true });
  const standby = standbyOf(bin);
  standby.fill();
  const pid = standby.pid!;
  const sleeper = (await waitFor(
    () => (existsSync(`${bin}.sleep`) ? Number(readFileSync(`${bin}.sleep`, 'utf8')) : null),
    'the standby to start its child',
    10_000,
  ))!;
  assert.ok(alive(sleeper));
  await standby.stop();
  assert.equal(alive(pid), false);
  await waitFor(() => groupMembers(pid).length === 0, 'the standby group to be gone', 10_000);
  assert.equal(alive(sleeper), false);
  standby.fill();
  assert.equal(standby.pid, undefined);
});
