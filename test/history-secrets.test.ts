// Deployment history, rollback and secrets on a two-node fleet with the real runtime
// (runtime/bin/cell and workerd): three deploys through `svc deploy` show in `svc deployment list`
// with their caller and source; rolling back to each makes both nodes serve the old body within
// 10 s with no failed request under load; a pruned, incomplete or frozen target is refused. A
// secret set after the deploy reaches the worker on both nodes within 10 s and, later, a third
// node; no bucket object or log carries its value; removing it removes the binding.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { keys } from '../src/registry/keys.ts';
import { assertProblem, type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { projectDir } from './helpers/artifacts.ts';
import { CELL_BIN } from './helpers/cell.ts';
import { runSvc, type SailProcess, tempDir, waitFor } from './helpers/svc.ts';

const APP = 'hist';
/** How long every node may take to follow a change. */
const FOLLOW_MS = 10_000;
const SECRET = `s3cr3t-${Math.random().toString(36).slice(2)}-value`;

// The runtime's own selector look stays at its default (minutes): a rollback or a secret reaches
// every node's process only because its daemon tells it (SIGHUP), which this file checks too.
const SAIL_FLAGS = [
  '--cell-bin',
  CELL_BIN,
  '--cell-env',
  'CELL_DRAIN_MS=2000',
  '--registry-resync-ms',
  '1000',
  '--registry-node-refresh-ms',
  '1000',
];

let bucket: Bucket;
let admin: Signer;
let nodes: SailProcess[] = [];
const home = tempDir('svc-home-');
/** Everything the CLI printed during the test, grepped for the secret at the end. */
const printed: string[] = [];

function project(version: string): string {
  return projectDir({
    'cell.jsonc': JSON.stringify({
      name: APP,
      main: 'index.js',
      compatibility_date: '2025-06-01',
      vars: { GREETING: 'hi' },
    }),
    'index.js': `export default {
  fetch(request, env) {
    const path = new URL(request.url).pathname;
    if (path === '/secret') return new Response(env.API_TOKEN ?? 'unset');
    return new Response(${JSON.stringify(version)});
  },
};
`,
  });
}

async function svc(args: string[], input?: string, env: NodeJS.ProcessEnv = {}) {
  const result = await runSvc(args, {
    env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined, ...env },
    input,
    timeoutMs: 120_000,
  });
  printed.push(result.stdout, result.stderr);
  return result;
}

const bucketArgs = () => ['--endpoint', bucket.endpoint];

/** The port this node's runtime process for APP listens on, once it runs. */
async function portOf(node: SailProcess): Promise<number> {
  return waitFor<number | undefined>(
    async () => {
      const answer = await call(node.url, 'GET', '/v1/state', { signer: admin });
      const process = (answer.body.processes ?? []).find(
        (p: { application: string; ready: boolean }) => p.application === APP && p.ready,
      );
      return process?.port as number | undefined;
    },
    `${APP} ready on ${node.nodeId}`,
    120_000,
  ) as Promise<number>;
}

async function body(port: number, path = '/'): Promise<string | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5000) });
    const text = await response.text();
    return response.status === 200 ? text : null;
  } catch {
    return null;
  }
}

/** Both ports answer `expected` at `path` within the allowed time. */
async function allServe(ports: number[], expected: string, path = '/'): Promise<void> {
  const started = Date.now();
  await waitFor(
    async () => (await Promise.all(ports.map((p) => body(p, path)))).every((b) => b === expected),
    `every node to answer ${JSON.stringify(expected)} at ${path}`,
    FOLLOW_MS,
  );
  assert.ok(Date.now() - started <= FOLLOW_MS);
}

/** Requests both ports without pause until stopped; answers how many were sent and which failed. */
function load(ports: number[]): { stop(): Promise<{ sent: number; failed: string[] }> } {
  let running = true;
  let sent = 0;
  const failed: string[] = [];
  const workers = ports.flatMap((port) =>
    [0, 1].map(async () => {
      while (running) {
        sent++;
        try {
          const response = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(5000) });
          const text = await response.text();
          if (response.status !== 200 || !/^v[123]$/.test(text))
            failed.push(`${port}: ${response.status} ${text}`);
        } catch (err) {
          failed.push(`${port}: ${(err as Error).message}`);
        }
      }
    }),
  );
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
      return { sent, failed };
    },
  };
}

const deployments: { version: string; deployment: string; deploy: string }[] = [];
let ports: number[] = [];

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  await bucket.operator('op-other', 'operator', ['other-*']);
  nodes = await Promise.all([
    bucket.sail(SAIL_FLAGS, { SVC_LOG_LEVEL: 'info' }),
    bucket.sail(SAIL_FLAGS, { SVC_LOG_LEVEL: 'info' }),
  ]);
});

after(async () => {
  await bucket?.close();
});

describe('deployment history and rollback', () => {
  test('three deploys are listed newest first with caller, source, size and the serving one', {
    timeout: 300_000,
  }, async () => {
    for (const [i, version] of ['v1', 'v2', 'v3'].entries()) {
      const result = await svc(
        ['deploy', project(version), '--node', nodes[0]!.url, '--key', keyArg(admin)],
        undefined,
        {
          GITHUB_ACTIONS: 'true',
          GITHUB_REPOSITORY: 'acme/hist',
          GITHUB_REF: 'refs/heads/main',
          GITHUB_SHA: `${i + 1}`.repeat(40),
        },
      );
      assert.equal(result.code, 0, result.stderr);
      const [, deployment, deploy] = /^deployed hist ([0-9a-f]+) \(deploy (hist\.[0-9a-f]{16})\)/m.exec(
        result.stdout,
      )!;
      deployments.push({ version, deployment: deployment!, deploy: deploy! });
    }
    ports = await Promise.all(nodes.map(portOf));
    await allServe(ports, 'v3');

    const listed = await svc(['deployment', 'list', '--name', APP, '--json', ...bucketArgs()]);
    assert.equal(listed.code, 0, listed.stderr);
    const history = JSON.parse(listed.stdout);
    assert.deepEqual(
      history.deployments.map((d: { deployment: string }) => d.deployment),
      deployments.map((d) => d.deployment).reverse(),
      'newest first',
    );
    for (const [i, d] of history.deployments.entries()) {
      const made = deployments[2 - i]!;
      assert.equal(d.deploy, made.deploy);
      assert.equal(d.by, 'op-admin');
      assert.deepEqual(d.source, {
        provider: 'github',
        repo: 'acme/hist',
        ref: 'refs/heads/main',
        commit: `${3 - i}`.repeat(40),
      });
      assert.equal(d.complete, true);
      assert.ok(d.bytes > 0);
      assert.equal(d.serving, i === 0);
      assert.equal(typeof d.createdMs, 'number');
    }

    const table = await svc(['deployment', 'list', '--name', APP, ...bucketArgs()]);
    assert.equal(table.code, 0, table.stderr);
    const lines = table.stdout.trim().split('\n');
    assert.match(lines[0]!, /DEPLOYMENT\s+AGE\s+DEPLOY\s+BY\s+SIZE\s+SOURCE/);
    assert.match(
      lines[1]!,
      new RegExp(
        `^\\*\\s+${deployments[2]!.deployment}\\s+\\d+[smhd]\\s+${deployments[2]!.deploy}\\s+op-admin\\s+[\\d.]+ (B|KiB)\\s+acme/hist@refs/heads/main 333333333333$`,
      ),
    );
    assert.match(lines[3]!, new RegExp(`^\\s+${deployments[0]!.deployment}\\s`));
  });

  test('rolling back to each deployment: both nodes serve it within 10 s, no request fails', {
    timeout: 300_000,
  }, async () => {
    const steps: { args: string[]; expect: string }[] = [
      // Default: the one before the serving one, through a node.
      { args: ['--node', nodes[1]!.url, '--key', keyArg(admin)], expect: 'v2' },
      // By version, through the bucket.
      { args: ['--to', deployments[0]!.deployment, ...bucketArgs()], expect: 'v1' },
      // By deploy id, through a node.
      {
        args: ['--to', deployments[2]!.deploy, '--node', nodes[0]!.url, '--key', keyArg(admin)],
        expect: 'v3',
      },
    ];
    for (const step of steps) {
      const traffic = load(ports);
      const result = await svc(['deployment', 'rollback', '--name', APP, ...step.args]);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^rolled back hist to [0-9a-f]+ \(was [0-9a-f]+\)/);
      await allServe(ports, step.expect);
      // Some more traffic once switched, then the tally.
      await waitFor(async () => (await body(ports[0]!)) === step.expect, 'still serving');
      const { sent, failed } = await traffic.stop();
      assert.deepEqual(failed, [], `failed requests during the switch to ${step.expect}`);
      assert.ok(sent > 20, `load was sent (${sent})`);
    }
    const listed = JSON.parse(
      (await svc(['deployment', 'list', '--name', APP, '--json', ...bucketArgs()])).stdout,
    );
    assert.equal(listed.serving.deployment, deployments[2]!.deployment);

    // The route names the actor in the node's log (the event's call site).
    assert.match(nodes[0]!.log(), /"event":"deployment.rolled-back"[^\n]*"actor":"op-admin"/);
  });

  test('rollback refusals: out of scope, malformed body, incomplete, unknown, frozen, pruned', {
    timeout: 120_000,
  }, async () => {
    const other = await bucket.operator('op-narrow', 'operator', ['other-*']);
    assertProblem(
      await call(nodes[0]!.url, 'POST', `/v1/applications/${APP}/rollback`, { signer: other, body: {} }),
      403,
      'auth-scope',
      'Out of scope',
    );
    assertProblem(
      await call(nodes[0]!.url, 'POST', `/v1/applications/${APP}/rollback`, {
        signer: admin,
        body: { to: 7 },
      }),
      400,
      'invalid-input',
      'Malformed request',
    );
    assertProblem(
      await call(nodes[0]!.url, 'POST', '/v1/applications/nosuch/rollback', { signer: admin, body: {} }),
      404,
      'not-found',
      'No such application',
    );

    // A folder without a manifest: a deploy in flight.
    const inFlight = `${Date.now().toString(16).padStart(12, '0')}00000000`;
    await bucket.store.put(keys.runtimeModule(APP, APP, inFlight, 'index.js'), 'export default {}');
    const incomplete = await svc([
      'deployment',
      'rollback',
      '--name',
      APP,
      '--to',
      inFlight,
      ...bucketArgs(),
    ]);
    assert.equal(incomplete.code, 1);
    assert.match(incomplete.stderr, /^svc: Not a complete deployment: .* \[urn:svc:invalid-input\]\n$/m);
    await bucket.store.delete(keys.runtimeModule(APP, APP, inFlight, 'index.js'));

    const noApp = await svc(['deployment', 'list', '--name', 'nosuch', ...bucketArgs()]);
    assert.equal(noApp.code, 1);
    assert.match(noApp.stderr, /^svc: No such application: .* \[urn:svc:not-found\]\n$/m);

    const unknown = await svc(['deployment', 'rollback', '--name', APP, '--to', 'abc123', ...bucketArgs()]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^svc: No such deployment: .* \[urn:svc:not-found\]\n$/m);

    // A rollback is a deploy: refused while deploys are frozen, on both paths.
    assert.equal(
      (await call(nodes[0]!.url, 'POST', '/v1/fleet/freeze', { signer: admin, body: {} })).status,
      200,
    );
    assertProblem(
      await call(nodes[1]!.url, 'POST', `/v1/applications/${APP}/rollback`, { signer: admin, body: {} }),
      409,
      'deploys-frozen',
      'Deploys are frozen',
    );
    const frozen = await svc(['deployment', 'rollback', '--name', APP, ...bucketArgs()]);
    assert.match(frozen.stderr, /^svc: Deploys are frozen: .* \[urn:svc:deploys-frozen\]\n$/m);
    assert.equal((await call(nodes[0]!.url, 'DELETE', '/v1/fleet/freeze', { signer: admin })).status, 200);

    // Pruned: everything but the serving (newest) one goes.
    const pruned = await svc([
      'deployment',
      'prune',
      '--name',
      APP,
      '--keep',
      '1',
      '--older-than',
      '0',
      '--yes',
      ...bucketArgs(),
    ]);
    assert.equal(pruned.code, 0, pruned.stderr);
    const refused = await call(nodes[0]!.url, 'POST', `/v1/applications/${APP}/rollback`, {
      signer: admin,
      body: { to: deployments[0]!.deployment },
    });
    assertProblem(
      refused,
      404,
      'not-found',
      'Deployment was pruned',
      new RegExp(deployments[0]!.deploy.replace('.', '\\.')),
    );
    const nothing = await svc(['deployment', 'rollback', '--name', APP, ...bucketArgs()]);
    assert.match(nothing.stderr, /^svc: Nothing to roll back to: .* \[urn:svc:not-found\]\n$/m);
    await allServe(ports, 'v3');
  });
});

describe('secrets', () => {
  test('a secret set after deploy reaches the worker on both nodes within 10 s', {
    timeout: 120_000,
  }, async () => {
    await allServe(ports, 'unset', '/secret');
    const set = await svc(
      ['app', 'secret', 'set', 'API_TOKEN', '--name', APP, ...bucketArgs()],
      `${SECRET}\n`,
    );
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /^secret API_TOKEN of hist set, sealed to 2 nodes/);
    await allServe(ports, SECRET, '/secret');
    // The deployment did not change: no redeploy.
    assert.equal(await body(ports[0]!), 'v3');
    // Stored sealed: the secrets document is there and no raw object holds the value.
    const bucketDir = new URL(bucket.endpoint).pathname;
    const files = filesUnder(bucketDir);
    assert.ok(
      files.some((f) => f.includes(`/_svc/apps/${APP}/secrets.json`)),
      'the secrets document is stored',
    );
    assert.deepEqual(
      files.filter((f) => contentOf(f).includes(SECRET)),
      [],
    );

    // Handed over in an owner-only file: no process of the runtime carries it in argv or env.
    for (const node of nodes) {
      const file = join(node.stateDir, 'secrets', `${APP}.json`);
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const state = await call(node.url, 'GET', '/v1/state', { signer: admin });
      const pid: number = state.body.processes.find(
        (p: { application: string }) => p.application === APP,
      ).pid;
      for (const each of [pid, ...descendants(pid)]) {
        for (const what of ['cmdline', 'environ']) {
          // A workerd that exited (a drained deployment) since the listing is skipped.
          const text = procFile(each, what);
          if (text === null) continue;
          assert.ok(!text.includes(SECRET), `/proc/${each}/${what}`);
          if (what === 'environ' && each === pid) assert.match(text, /CELL_SECRETS_FILE=/);
        }
      }
    }

    const listed = await svc(['app', 'secret', 'list', '--name', APP, '--json', ...bucketArgs()]);
    const doc = JSON.parse(listed.stdout);
    assert.equal(doc.secrets.length, 1);
    assert.equal(doc.secrets[0].name, 'API_TOKEN');
    assert.deepEqual(doc.secrets[0].nodes, nodes.map((n) => n.nodeId).sort());
    assert.match(doc.secrets[0].changedAt, /^\d{4}-\d\d-\d\dT/);
  });

  test('secret refusals: a var of the same name, a bad name, an empty value, a missing application', async () => {
    const clash = await svc(['app', 'secret', 'set', 'GREETING', '--name', APP, ...bucketArgs()], 'x');
    assert.equal(clash.code, 1);
    assert.match(
      clash.stderr,
      /^svc: Secret and var share a name: GREETING .* \[urn:svc:invalid-input\]\n$/m,
    );
    // The other way round: a deploy adding a var named like a secret fails, and nothing moves.
    const shadow = await svc([
      'deploy',
      project('v4'),
      '--var',
      'API_TOKEN:plain',
      '--node',
      nodes[1]!.url,
      '--key',
      keyArg(admin),
    ]);
    assert.equal(shadow.code, 1);
    assert.match(
      shadow.stderr,
      /^svc: Deploy failed: deploy hist\.[0-9a-f]{16}: [\s\S]*API_TOKEN is both a var in [\s\S]* and a secret of hist[\s\S]*\[urn:svc:publish-failed\]\n$/m,
    );
    assert.equal(await body(ports[1]!), 'v3');
    const badName = await svc(['app', 'secret', 'set', '9bad', '--name', APP, ...bucketArgs()], 'x');
    assert.match(badName.stderr, /^svc: Invalid secret name: .* \[urn:svc:invalid-input\]\n$/m);
    const blank = await svc(['app', 'secret', 'set', 'EMPTY', '--name', APP, ...bucketArgs()], '');
    assert.match(blank.stderr, /^svc: Empty secret: .* \[urn:svc:invalid-input\]\n$/m);
    const missing = await svc(['app', 'secret', 'set', 'X', '--name', 'nosuch', ...bucketArgs()], 'x');
    assert.match(missing.stderr, /^svc: No such application: .* \[urn:svc:not-found\]\n$/m);
    const noFile = await svc([
      'app',
      'secret',
      'set',
      'X',
      '--name',
      APP,
      '--secret-file',
      '/nonexistent/x',
      ...bucketArgs(),
    ]);
    assert.match(
      noFile.stderr,
      /^svc: Unreadable secret file: \/nonexistent\/x: ENOENT \[urn:svc:invalid-input\]\n$/m,
    );
    const big = await svc(
      ['app', 'secret', 'set', 'BIG', '--name', APP, ...bucketArgs()],
      'x'.repeat(40_000),
    );
    assert.match(big.stderr, /^svc: Secret too large: .* \[urn:svc:resource-limit\]\n$/m);
    // A bucket with the application but no serving node: nothing to seal to.
    const empty = await openBucket();
    try {
      await empty.application('lonely');
      const lonely = await svc(
        ['app', 'secret', 'set', 'X', '--name', 'lonely', '--endpoint', empty.endpoint],
        'x',
      );
      assert.equal(lonely.code, 1);
      assert.match(
        lonely.stderr,
        /^svc: No node to seal the secret to: .* \[urn:svc:capability-missing\]\n$/m,
      );
    } finally {
      await empty.close();
    }
    const notThere = await svc(['app', 'secret', 'remove', 'NOPE', '--name', APP, ...bucketArgs()]);
    assert.match(notThere.stderr, /^svc: No such secret: .* \[urn:svc:not-found\]\n$/m);
  });

  test('a node that joins later reads it; removing it removes the binding', {
    timeout: 180_000,
  }, async () => {
    const late = await bucket.sail(SAIL_FLAGS, { SVC_LOG_LEVEL: 'info' });
    nodes.push(late);
    const latePort = await portOf(late);
    await waitFor(
      async () => (await body(latePort, '/secret')) === SECRET,
      'the late node to read the secret',
      60_000,
    );

    // Changed from a file: every node follows without a redeploy.
    const file = join(tempDir('svc-secret-'), 'token');
    writeFileSync(file, `${SECRET}-2\n`);
    const traffic = load([...ports, latePort]);
    const changed = await svc([
      'app',
      'secret',
      'set',
      'API_TOKEN',
      '--name',
      APP,
      '--secret-file',
      file,
      ...bucketArgs(),
    ]);
    assert.equal(changed.code, 0, changed.stderr);
    await allServe([...ports, latePort], `${SECRET}-2`, '/secret');
    // The deployment restarted with its new secrets beside itself: no request failed meanwhile.
    const { sent, failed } = await traffic.stop();
    assert.deepEqual(failed, [], 'failed requests while the secret changed');
    assert.ok(sent > 20, `load was sent (${sent})`);

    const removed = await svc(['app', 'secret', 'remove', 'API_TOKEN', '--name', APP, ...bucketArgs()]);
    assert.equal(removed.code, 0, removed.stderr);
    await allServe([...ports, latePort], 'unset', '/secret');
    const listed = await svc(['app', 'secret', 'list', '--name', APP, ...bucketArgs()]);
    assert.match(listed.stdout, /^No secrets for hist\.$/m);
  });

  test('no bucket object, log, record or CLI output carries a value', () => {
    const bucketDir = new URL(bucket.endpoint).pathname;
    const found: string[] = [];
    for (const file of filesUnder(bucketDir)) {
      if (contentOf(file).includes(SECRET)) found.push(file);
    }
    for (const node of nodes) if (node.log().includes(SECRET)) found.push(`log of ${node.nodeId}`);
    for (const [i, text] of printed.entries()) if (text.includes(SECRET)) found.push(`CLI output ${i}`);
    assert.deepEqual(found, []);
    // The test did look at something: the bucket holds the deploy records and the secrets' history.
    assert.ok(filesUnder(bucketDir).some((f) => f.includes('/deploys/')));
  });
});

/** A /proc file of a process, or null once the process is gone. */
function procFile(pid: number, name: string): string | null {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Every process below `pid` (the workerd processes under cell serve). */
function descendants(pid: number): number[] {
  let out: string;
  try {
    out = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
  } catch {
    return [];
  }
  const children = out
    .split('\n')
    .map((line) => Number(line.trim()))
    .filter((n) => n > 0);
  return children.flatMap((child) => [child, ...descendants(child)]);
}

/** Every file below `dir`; one renamed away meanwhile (a write's temporary file) is skipped. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    let directory: boolean;
    try {
      directory = statSync(path).isDirectory();
    } catch {
      continue;
    }
    if (directory) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

/** A file's bytes; empty when it was renamed away since it was listed. */
function contentOf(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch {
    return Buffer.alloc(0);
  }
}
