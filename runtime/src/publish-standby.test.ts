// `cell publish --standby` with the real runtime: it says it is ready, then runs the job it reads
// from stdin exactly as `cell publish` (same output, same refusal of a worker that cannot load),
// with the job's environment in place of its own; stdin ending without a job publishes nothing.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { keys } from '../../src/registry/keys.ts';
import { openDirStore } from '../../src/store/dir.ts';
import { getJson } from '../../src/store/store.ts';
import { CELL_BIN, copyProject, dirBucketEnv, EXAMPLES } from '../../test/helpers/cell.ts';
import { tempDir } from '../../test/helpers/svc.ts';
import { STANDBY_READY_LINE, STANDBY_TOOK_LINE, type StandbyJob } from './publish-standby.ts';

const DEADLINE_MS = 60_000;

/** Starts a standby, waits for its ready line, hands it `job` (or closes stdin), and runs it to its end. */
async function standby(
  env: NodeJS.ProcessEnv,
  job: StandbyJob | string | null,
): Promise<{ code: number | null; stdout: string; stderr: string; readyFirst: boolean }> {
  const child = spawn(process.execPath, [CELL_BIN, 'publish', '--standby'], {
    cwd: tempDir('cell-standby-'),
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), DEADLINE_MS);
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes(`${STANDBY_READY_LINE}\n`)) resolve();
    });
    child.once('exit', () => reject(new Error(`the standby exited before it was ready:\n${stderr}`)));
  });
  child.stdin.end(job === null ? '' : typeof job === 'string' ? job : JSON.stringify(job));
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  clearTimeout(killer);
  return { code, stdout, stderr, readyFirst: stdout.startsWith(`${STANDBY_READY_LINE}\n`) };
}

const store = (bucketDir: string) => openDirStore(bucketDir);

const baseEnv = (bucketDir: string) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
  ...dirBucketEnv(bucketDir),
});

test('a standby publisher runs the job it is handed as cell publish, in its folder and with its environment', async () => {
  const bucketDir = tempDir('cell-standby-bucket-');
  const project = copyProject(join(EXAMPLES, 'hello'));
  // Started without an application: the job brings it, and the deploy id the record notes.
  const run = await standby(baseEnv(bucketDir), {
    cwd: project,
    config: 'cell.jsonc',
    env: { ...baseEnv(bucketDir), CELL_APP: 'hello', CELL_DEPLOY: 'dep-standby-1' },
  });
  assert.equal(run.code, 0, run.stderr);
  assert.ok(run.readyFirst);
  const lines = run.stdout.trimEnd().split('\n');
  assert.deepEqual(lines.slice(0, 2), [STANDBY_READY_LINE, STANDBY_TOOK_LINE], run.stdout);
  assert.equal(lines.length, 3, run.stdout);
  const published = JSON.parse(lines[2]!) as { application: string; script: string; deployment: string };
  assert.equal(published.application, 'hello');
  const store = await openDirStore(bucketDir);
  const selector = await getJson<{ deployment: string }>(store, keys.runtimeSelector('hello'));
  assert.equal(selector?.value.deployment, published.deployment);
  const record = await getJson<{ deploy?: string }>(
    store,
    keys.runtimeRecord('hello', published.script, published.deployment),
  );
  assert.equal(record?.value.deploy, 'dep-standby-1');
});

test('a standby publisher refuses a worker that cannot load, as cell publish does: nothing is selected', async () => {
  const bucketDir = tempDir('cell-standby-bucket-');
  const project = copyProject(join(EXAMPLES, 'hello'));
  writeFileSync(join(project, 'src', 'index.js'), 'throw new Error("boom at load");\nexport default {};\n');
  const run = await standby(baseEnv(bucketDir), {
    cwd: project,
    env: { ...baseEnv(bucketDir), CELL_APP: 'hello' },
  });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /cell: the worker cannot serve: .*boom at load/s);
  assert.equal(run.stdout, `${STANDBY_READY_LINE}\n${STANDBY_TOOK_LINE}\n`);
  const store = await openDirStore(bucketDir);
  assert.equal(await store.get(keys.runtimeSelector('hello')), null);
});

test('a standby publisher whose stdin ends without a job exits 0 having done nothing; a malformed job is refused', async () => {
  const bucketDir = tempDir('cell-standby-bucket-');
  const none = await standby(baseEnv(bucketDir), null);
  assert.equal(none.code, 0, none.stderr);
  assert.equal(none.stdout, `${STANDBY_READY_LINE}\n`);
  assert.deepEqual((await (await store(bucketDir)).list('', { recursive: true })).objects, []);
  const bad = await standby(baseEnv(bucketDir), '{"cwd": 3}');
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /cell: cell publish --standby needs a job/);
});
