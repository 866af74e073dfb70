// bin/svc on a Node too old to strip TypeScript types: one line saying what is needed, or a hand-over
// to the Node fetched into .tools/node24. The "old Node" is this test's own Node behind a `node`
// script first on PATH that makes `process.versions.node` report an older version before bin/svc
// runs (a stand-in for an installed old Node, named as one), so the test does not depend on which
// Node the machine has.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SVC_BIN, tempDir, waitFor } from './helpers/svc.ts';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function executable(path: string, text: string): void {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

/** A directory holding a `node` that is this Node reporting `version` as its own. */
function nodeReporting(version: string): string {
  const dir = tempDir('svc-old-node-');
  dirs.push(dir);
  const preload = join(dir, 'report-version.mjs');
  writeFileSync(
    preload,
    `Object.defineProperty(process.versions, 'node', { value: ${JSON.stringify(version)} });\n`,
  );
  executable(
    join(dir, 'node'),
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} --import ${JSON.stringify(preload)} "$@"\n`,
  );
  return dir;
}

/** A copy of bin/svc in a tree of its own: no src/ to import, and .tools/ only when asked for. */
function lonelyCheckout(): string {
  const root = tempDir('svc-lonely-');
  dirs.push(root);
  mkdirSync(join(root, 'bin'));
  copyFileSync(SVC_BIN, join(root, 'bin', 'svc'));
  return root;
}

function run(svc: string, nodeDir: string, args: string[]) {
  return spawnSync(svc, args, {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${nodeDir}:${process.env.PATH ?? ''}` },
    timeout: 30_000,
  });
}

describe('bin/svc on an old Node', () => {
  test('without a fetched Node it prints one line saying what is needed and exits 1', () => {
    const root = lonelyCheckout();
    const result = run(join(root, 'bin', 'svc'), nodeReporting('22.17.1'), ['--version']);
    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    const lines = result.stderr.split('\n');
    assert.equal(lines.length, 2, `one line, got: ${result.stderr}`);
    assert.equal(lines[1], '');
    assert.match(
      lines[0] ?? '',
      /^svc: Node\.js 22\.18 or newer is needed: this is Node\.js 22\.17\.1 \(.+\); run `make setup` .+ \[urn:svc:capability-missing\]$/,
    );
  });

  test('with a fetched Node in .tools/node24 it hands the command over and keeps its exit status', () => {
    const root = lonelyCheckout();
    const fetchedBin = join(root, '.tools', 'node24', '.bin');
    mkdirSync(fetchedBin, { recursive: true });
    // The fetched Node is a stand-in that shows what it was asked to run.
    executable(join(fetchedBin, 'node'), '#!/bin/sh\necho "fetched node: $*"\nexit 7\n');
    const svc = join(root, 'bin', 'svc');
    const result = run(svc, nodeReporting('20.11.0'), ['app', 'list', '--json']);
    assert.equal(result.stderr, '');
    assert.equal(result.stdout, `fetched node: ${svc} app list --json\n`);
    assert.equal(result.status, 7);
  });

  test('a SIGTERM to bin/svc reaches the fetched Node, whose exit status is kept', async () => {
    const root = lonelyCheckout();
    const fetchedBin = join(root, '.tools', 'node24', '.bin');
    mkdirSync(fetchedBin, { recursive: true });
    // A stand-in daemon: says it is up, then idles until TERM, which it answers by exiting 3.
    executable(
      join(fetchedBin, 'node'),
      '#!/bin/bash\ntrap \'echo "got TERM"; exit 3\' TERM\necho ready\nwhile :; do sleep 1 & wait $!; done\n',
    );
    // Its own process group, so that whatever happens the test can stop the stand-in too.
    const svc = spawn(join(root, 'bin', 'svc'), ['sail'], {
      detached: true,
      env: { ...process.env, PATH: `${nodeReporting('20.11.0')}:${process.env.PATH ?? ''}` },
    });
    let stdout = '';
    svc.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    const exited = new Promise<number | null>((resolve) => svc.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => stdout.includes('ready'), 'the stand-in daemon to start');
      svc.kill('SIGTERM');
      assert.equal(await exited, 3);
      assert.equal(stdout, 'ready\ngot TERM\n');
    } finally {
      try {
        if (svc.pid !== undefined) process.kill(-svc.pid, 'SIGKILL');
      } catch {
        // The group is gone already: both processes exited.
      }
    }
  });

  test('Node 22.18 itself is new enough: the CLI runs', () => {
    const result = run(SVC_BIN, nodeReporting('22.18.0'), ['--version']);
    assert.equal(result.stderr, '');
    assert.match(result.stdout, /^svc \d+\.\d+\.\d+\n$/);
    assert.equal(result.status, 0);
  });
});
