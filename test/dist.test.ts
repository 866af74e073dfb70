// The release bundle (docs/decisions.md: esbuild bundles dist/ for release; scripts/build-dist.ts):
// built afresh, executed directly as a release runs it (its shebang's V8 flags apply), it prints
// its version, and as `svc sail` it answers health and stops cleanly on SIGTERM (and `svc console`
// serves its assets from dist/console-assets/); dist/cell.mjs, the
// bundled runtime, publishes and serves examples/hello through dist/cell-front beside it, a static
// executable for this machine.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { CELL_VERSION } from '../runtime/src/version.ts';
import { buildDist, DIST_CELL, DIST_FRONT, DIST_SVC } from '../scripts/build-dist.ts';
import { keys } from '../src/registry/keys.ts';
import type { NodeRecord } from '../src/registry/records.ts';
import { openStore } from '../src/store/open.ts';
import { getJson } from '../src/store/store.ts';
import { SVC_VERSION } from '../src/version.ts';
import { keyArg } from './helpers/applications.ts';
import { copyProject, dirBucketEnv, EXAMPLES, fetchText } from './helpers/cell.ts';
import { startConsoleProcess } from './helpers/console.ts';
import { signerFor } from './helpers/in-process-node.ts';
import { freePort, ownRuntimePorts, runToEnd, tempDir, waitFor } from './helpers/svc.ts';

test('dist/svc.mjs runs the CLI and the daemon', async () => {
  await buildDist();
  const version = await runToEnd(DIST_SVC, ['--version']);
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout.trim(), `svc ${SVC_VERSION}`);

  const listen = `127.0.0.1:${await freePort()}`;
  const stateDir = tempDir('svc-dist-');
  const node = spawn(DIST_SVC, ['sail', '--listen', listen, '--state-dir', stateDir, ...ownRuntimePorts()], {
    env: { ...process.env, SVC_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  node.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  node.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((r) => node.on('exit', (code) => r(code)));
  try {
    await waitFor(
      () => {
        if (node.exitCode !== null) throw new Error(`dist svc sail exited ${node.exitCode}:\n${stderr}`);
        return stdout.includes(`listening on http://${listen}`);
      },
      'the bundled svc sail to listen',
      30_000,
    );
    const health = await fetch(`http://${listen}/.well-known/svc/health`);
    assert.equal(health.status, 200);
    assert.equal((await health.json()).ok, true);
    await assertConsoleAssets(`http://${listen}`);
    // The default --cell-bin is found from the bundle as from the checkout: the node record
    // carries the version the runtime reported.
    const nodeId = /as node "([^"]+)"/.exec(stdout)![1]!;
    const store = await openStore({ stateDir });
    try {
      const record = await getJson<NodeRecord>(store, keys.nodeRecord(nodeId));
      assert.match(record?.value.versions?.cell ?? '', /\S/, JSON.stringify(record?.value));
    } finally {
      await store.close();
    }
  } finally {
    node.kill('SIGTERM');
  }
  assert.equal(await exited, 0, stderr);
});

/** `dist/svc.mjs console` serves its stylesheet and scripts from dist/console-assets/ (`make dist`). */
async function assertConsoleAssets(node: string): Promise<void> {
  const console = await startConsoleProcess(
    ['--node', node, '--key', keyArg(signerFor('op-dist'))],
    {},
    DIST_SVC,
  );
  try {
    for (const [name, source] of [
      ['console.js', join(import.meta.dirname, '..', 'src', 'console', 'assets', 'console.js')],
      [
        'uPlot.iife.min.js',
        join(import.meta.dirname, '..', 'node_modules', 'uplot', 'dist', 'uPlot.iife.min.js'),
      ],
    ] as const) {
      const answer = await fetch(`${console.url}assets/${name}`);
      assert.equal(answer.status, 200, name);
      assert.equal(await answer.text(), readFileSync(source, 'utf8'), name);
    }
  } finally {
    await console.stop();
  }
}

test('dist/cell.mjs publishes and serves examples/hello, and examples/d1 with its database process', async () => {
  await buildDist();
  // The runtime's own version, not svc's: a node on the bundle and a node on the checkout must
  // report the same runtime, or the fleet sees a version skew that is not there.
  const version = await runToEnd(DIST_CELL, ['--version']);
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout.trim(), `cell ${CELL_VERSION}`);
  // `cell serve` execs the front it finds beside its entry script: dist/cell-front, built here.
  accessSync(DIST_FRONT, constants.X_OK);
  assert.deepEqual(elfBuild(readFileSync(DIST_FRONT)), { machine: ELF_MACHINES[process.arch], static: true });
  const bucket = dirBucketEnv(tempDir('cell-dist-bucket-'));
  const publish = await runToEnd(DIST_CELL, ['publish'], {
    cwd: copyProject(join(EXAMPLES, 'hello')),
    env: { ...bucket, CELL_APP: 'hello' },
    timeoutMs: 60_000,
  });
  assert.equal(publish.code, 0, publish.stderr);
  assert.match(publish.stdout, /"deployment":"[0-9a-f]+"/);
  const port = await freePort();
  const serve = spawn(DIST_CELL, ['serve'], {
    env: { ...process.env, ...bucket, CELL_APP: 'hello', CELL_NODE: 'n', CELL_PORT: String(port) },
    stdio: 'ignore',
  });
  const exited = new Promise((r) => serve.on('exit', r));
  try {
    await waitFor(
      async () => (await fetchText(`http://127.0.0.1:${port}/`))?.body.includes('Hello from svc'),
      'the bundled runtime serving hello',
      30_000,
    );
  } finally {
    serve.kill('SIGTERM');
  }
  assert.equal(await exited, 0);

  // D1 runs each open database in a process of its own, dist/d1-process.mjs beside the bundle.
  const d1Publish = await runToEnd(DIST_CELL, ['publish'], {
    cwd: copyProject(join(EXAMPLES, 'd1')),
    env: { ...bucket, CELL_APP: 'd1' },
    timeoutMs: 60_000,
  });
  assert.equal(d1Publish.code, 0, d1Publish.stderr);
  const d1Port = await freePort();
  const d1Serve = spawn(DIST_CELL, ['serve'], {
    env: { ...process.env, ...bucket, CELL_APP: 'd1', CELL_NODE: 'n', CELL_PORT: String(d1Port) },
    stdio: 'ignore',
  });
  const d1Exited = new Promise((r) => d1Serve.on('exit', r));
  try {
    await waitFor(
      async () => (await fetchText(`http://127.0.0.1:${d1Port}/insert?v=bundled`))?.body.includes('"id"'),
      'the bundled runtime writing to D1',
      30_000,
    );
    const count = await fetchText(`http://127.0.0.1:${d1Port}/count`);
    assert.deepEqual(JSON.parse(count!.body).values.slice(0, 1), ['bundled']);
  } finally {
    d1Serve.kill('SIGTERM');
  }
  assert.equal(await d1Exited, 0);
});

/** ELF's e_machine for the architectures svc runs on. */
const ELF_MACHINES: Record<string, number> = { x64: 0x3e, arm64: 0xb7 };

/**
 * A 64-bit little-endian ELF file's machine, and whether it is static: no program header of type
 * PT_INTERP (3), which names the dynamic loader a FROM-scratch image would not have.
 */
function elfBuild(file: Buffer): { machine: number; static: boolean } {
  assert.equal(file.subarray(0, 6).toString('latin1'), '\x7fELF\x02\x01', 'a 64-bit little-endian ELF file');
  const headers = Number(file.readBigUInt64LE(32));
  const size = file.readUInt16LE(54);
  const types = Array.from({ length: file.readUInt16LE(56) }, (_, i) =>
    file.readUInt32LE(headers + i * size),
  );
  return { machine: file.readUInt16LE(18), static: !types.includes(3) };
}
