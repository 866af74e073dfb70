// The runner's reading of the runtime contract: the last stdout line, exit status, signals, the
// output tail, the deadline, and `cell --version`. The "runtimes" here are two-line shell scripts
// written per test, each doing exactly the one thing a test needs.

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Problem } from '../../problem.ts';
import { MAX_WARNINGS, OutputTail, RuntimeProbe, runPublish, WarningLines } from './runner.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-runner-'));

function script(name: string, body: string, mode = 0o755): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, mode);
  return path;
}

const run = (cellBin: string, timeoutMs = 10_000, outputBytes = 1000) =>
  runPublish({
    cellBin,
    cwd: dir,
    config: 'cell.json',
    env: { PATH: process.env.PATH },
    timeoutMs,
    outputBytes,
  });

async function fails(promise: Promise<unknown>, code: string, detail: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof Problem, String(err));
    assert.equal(err.code, code);
    assert.match(err.detail ?? '', detail);
    return true;
  });
}

test('the last non-empty stdout line names the deployment', async () => {
  const bin = script(
    'ok',
    `echo "building" ; echo "warn" >&2 ; echo '{"application":"shop","script":"w","deployment":"abc"}' ; echo ; test "$1 $2 $3" = "publish --config cell.json"`,
  );
  assert.deepEqual(await run(bin), { application: 'shop', script: 'w', deployment: 'abc', warnings: [] });
});

test("the runtime's `cell: warning: ` lines of stderr are kept, in order, whatever the chunking", async () => {
  const bin = script(
    'warns',
    `printf 'cell: warning: first one\ncell: progress\n' >&2 ; printf 'cell: warn' >&2 ; sleep 0.05 ; printf 'ing: second\n' >&2 ; echo '{"application":"shop","script":"w","deployment":"abc"}'`,
  );
  assert.deepEqual((await run(bin)).warnings, ['first one', 'second']);
});

test('WarningLines keeps at most MAX_WARNINGS and reads a last line without a newline', () => {
  const lines = new WarningLines();
  lines.push(
    Buffer.from(Array.from({ length: MAX_WARNINGS + 5 }, (_, i) => `cell: warning: w${i}\n`).join('')),
  );
  assert.equal(lines.done().length, MAX_WARNINGS);
  const last = new WarningLines();
  last.push(Buffer.from('x\ncell: warning: tail'));
  assert.deepEqual(last.done(), ['tail']);
});

test('the selector move is told at the deployment line, before the runtime exits, and once', async () => {
  const told = join(dir, 'told');
  // The runtime goes on (and fails the test by exiting 1) until the node was told.
  const bin = script(
    'tells',
    `echo "building"; echo '{"application":"shop","script":"w","deployment":"abc"}'; i=0; while [ ! -e ${told} ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 1; sleep 0.01; done`,
  );
  let calls = 0;
  const published = await runPublish({
    cellBin: bin,
    cwd: dir,
    config: 'cell.json',
    env: { PATH: process.env.PATH },
    timeoutMs: 30_000,
    outputBytes: 1000,
    onSelectorMoved: () => {
      calls++;
      writeFileSync(told, '');
    },
  });
  assert.equal(published.deployment, 'abc');
  assert.equal(calls, 1);
});

test('no deployment line, nothing told', async () => {
  let calls = 0;
  await fails(
    runPublish({
      cellBin: script('untold', 'echo "building"; echo \'{"other":1}\'; exit 2'),
      cwd: dir,
      config: 'cell.json',
      env: { PATH: process.env.PATH },
      timeoutMs: 10_000,
      outputBytes: 1000,
      onSelectorMoved: () => calls++,
    }),
    'publish-failed',
    /exited with 2/,
  );
  assert.equal(calls, 0);
});

test('exit 0 without a deployment line is publish-failed', async () => {
  await fails(run(script('silent', 'echo done')), 'publish-failed', /names no deployment[\s\S]*done/);
});

test('a non-zero exit or a signal is publish-failed with the output tail', async () => {
  await fails(
    run(script('bad', 'echo "compile error" >&2; exit 3')),
    'publish-failed',
    /exited with 3[\s\S]*compile error/,
  );
  await fails(run(script('killed', 'kill -9 $$')), 'publish-failed', /killed by SIGKILL/);
});

test('the output kept is the tail, at most outputBytes', async () => {
  const bin = script('loud', 'i=0; while [ $i -lt 200 ]; do echo "line $i"; i=$((i+1)); done; exit 1');
  await assert.rejects(run(bin, 10_000, 50), (err: unknown) => {
    const detail = (err as Problem).detail ?? '';
    assert.match(detail, /output \(tail\):/);
    assert.match(detail, /line 199$/);
    assert.doesNotMatch(detail, /line 100\n/);
    return true;
  });
});

test('the task deadline stops the whole process group: deploy-timeout', async () => {
  const bin = script('slow', 'sleep 30 & wait');
  const started = Date.now();
  await fails(run(bin, 200), 'deploy-timeout', /taskTimeoutMs/);
  assert.ok(Date.now() - started < 10_000);
});

test('an executable that cannot start is internal', async () => {
  await fails(run(join(dir, 'missing')), 'internal', /missing/);
});

test('OutputTail keeps the last bytes across chunks', () => {
  const tail = new OutputTail(5);
  tail.push(Buffer.from('abc'));
  tail.push(Buffer.from('defg'));
  assert.equal(tail.text(), 'cdefg');
  assert.equal(tail.truncated, true);
  const zero = new OutputTail(0);
  zero.push(Buffer.from('x'));
  assert.equal(zero.text(), '');
});

test('RuntimeProbe: `cell <version>`, or null for no runnable runtime', async () => {
  const probe = new RuntimeProbe();
  assert.equal(await probe.version(script('versioned', 'echo "cell 0.6.2"')), '0.6.2');
  assert.equal(await probe.version(script('other', 'echo "something else"')), null);
  assert.equal(await probe.version(script('failing', 'exit 1')), null);
  assert.equal(await probe.version(script('plain', 'echo "cell 1.0.0"', 0o644)), null);
  assert.equal(await probe.version(join(dir, 'absent')), null);
  assert.equal(await probe.version(dir), null);
});
