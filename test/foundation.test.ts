// The command line's foundations (docs/cli.md "Output and exit status") against real `svc` processes: help order, the deprecated aliases,
// sail's listening line and health, health against a stopped node, settings refusals,
// bounded JSON bodies and problem documents.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freePort, runSvc, type SailProcess, startSail, tempDir } from './helpers/svc.ts';

test("svc --help lists the top-level commands in the spec order, then the bindings' data commands", async () => {
  const { code, stdout } = await runSvc(['--help']);
  assert.equal(code, 0);
  const names = [...stdout.matchAll(/^ {2}([a-z][a-z0-9]*)\b/gm)]
    .map((m) => m[1])
    .filter((n) => n !== 'help');
  assert.deepEqual(names, [
    'sail',
    'health',
    'remote',
    'operator',
    'fleet',
    'app',
    'deploy',
    'deployment',
    'trust',
    'metrics',
    'traces',
    'wg',
    'kv',
    'r2',
    'd1',
    'queues',
    'objects',
    'tail',
    'console',
  ]);
  assert.doesNotMatch(stdout, /\bup\b|\bkeygen\b/, 'hidden aliases stay hidden');
});

test('svc up prints a deprecation line, then runs sail', async () => {
  const { code, stderr } = await runSvc(['up', '--json-bytes', 'lots']);
  assert.equal(code, 1);
  assert.match(stderr, /`svc up` is deprecated.*use `svc sail`/);
  assert.match(stderr, /svc: Invalid setting api\.jsonBytes: --json-bytes: .* \[urn:svc:invalid-input\]/);
});

test('malformed settings are refused naming the setting and the source', async () => {
  const fromEnv = await runSvc(['sail'], { env: { SVC_REGISTRY_RESYNC_MS: 'soon' } });
  assert.equal(fromEnv.code, 1);
  assert.match(
    fromEnv.stderr,
    /^svc: Invalid setting registry\.resyncMs: SVC_REGISTRY_RESYNC_MS: .*\[urn:svc:invalid-input\]\n$/,
  );
  const fromFlag = await runSvc(['sail', '--listen', 'nowhere']);
  assert.match(fromFlag.stderr, /Invalid setting node\.listen/);
});

test('an unknown flag is an invalid-input line, exit 1', async () => {
  const { code, stderr } = await runSvc(['sail', '--no-such-flag']);
  assert.equal(code, 1);
  assert.match(
    stderr,
    /^svc: Invalid command line: unknown option '--no-such-flag' \[urn:svc:invalid-input\]/,
  );
});

test('svc health against a stopped node fails with the spec line', async () => {
  const port = await freePort();
  const { code, stdout, stderr } = await runSvc(['health', '--listen', `127.0.0.1:${port}`]);
  assert.equal(code, 1);
  assert.equal(stdout, '');
  assert.equal(
    stderr,
    `svc: Node is not answering: nothing answered at http://127.0.0.1:${port}/.well-known/svc/health within 2 s [urn:svc:not-found]\n`,
  );
});

describe('a running node', () => {
  let node: SailProcess;
  before(async () => {
    node = await startSail(['--json-bytes', '64']);
  });
  after(async () => {
    await node?.stop();
  });

  test('prints its listening line and answers health', async () => {
    assert.match(node.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(`${node.url}/.well-known/svc/health`);
    assert.equal(response.status, 200);
    const body = await response.json();
    assert.deepEqual(Object.keys(body).sort(), ['node', 'ok', 'version']);
    assert.equal(body.ok, true);
    assert.equal(body.node, node.nodeId);
  });

  test('svc health resolves the listen address from the environment', async () => {
    const { code, stdout } = await runSvc(['health'], { env: { SVC_LISTEN: node.listen } });
    assert.equal(code, 0);
    assert.equal(JSON.parse(stdout).node, node.nodeId);
  });

  test('an unknown route answers a not-found problem document', async () => {
    const response = await fetch(`${node.url}/v1/nothing-here`);
    assert.equal(response.status, 404);
    assert.equal(response.headers.get('content-type'), 'application/problem+json');
    const body = await response.json();
    assert.equal(body.type, 'urn:svc:not-found');
    assert.equal(body.status, 404);
    assert.equal(typeof body.title, 'string');
  });

  test('the node keeps its generated id across restarts', async () => {
    const stateDir = tempDir();
    const first = await startSail([], { stateDir });
    await first.stop();
    const second = await startSail([], { stateDir });
    await second.stop();
    assert.equal(second.nodeId, first.nodeId);
    assert.match(first.nodeId, /^node-[0-9a-f]{8}$/);
  });

  test('SIGINT stops the node cleanly', async () => {
    const other = await startSail();
    assert.equal(await other.stop('SIGINT'), 0);
  });
});
