// docs/cli.md "svc deploy [dir]" against a real `svc sail`: packing and the config byte for byte or edited,
// the success line, a failed deploy's exit, the refusals raised client-side (No node to deploy to,
// No application to deploy to, Invalid queue timeout, Invalid --var), a node's refusal re-rendered
// with its code, `--no-wait` on a full node, and `--token` with a single-use token. The runtime is
// the stand-in, except in the last test, which publishes examples/hello with the real runtime.

import assert from 'node:assert/strict';
import { chmodSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { signToken } from '../src/auth/token.ts';
import { keys } from '../src/registry/keys.ts';
import { getJson } from '../src/store/store.ts';
import { type Bucket, call, keyArg, openBucket, type Signer } from './helpers/applications.ts';
import { projectDir, standinArtifact } from './helpers/artifacts.ts';
import {
  CELL_REAL,
  CELL_STANDIN,
  postDeploy,
  settledDeploy,
  stagingEmpty,
  standinRecord,
} from './helpers/deploys.ts';
import { runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

let bucket: Bucket;
let node: SailProcess;
let admin: Signer;
let home: string;
let gates: string;

before(async () => {
  bucket = await openBucket();
  admin = await bucket.operator('op-admin', 'admin', ['*']);
  node = await bucket.sail([
    '--cell-bin',
    CELL_STANDIN,
    '--queued-tasks',
    '2',
    '--application-queued-tasks',
    '2',
    // The coordinator places a new application within a resync: short, so that svc deploy's
    // readiness watch sees a process promptly.
    '--registry-node-refresh-ms',
    '1000',
    '--registry-resync-ms',
    '1000',
  ]);
  // An operator home with no remote: only flags name the node and key.
  home = tempDir('svc-home-');
  gates = tempDir('svc-gates-');
});
after(async () => {
  await bucket?.close();
});

/** Runs `svc deploy` with this test's home, so no remote of the machine is consulted. */
function svcDeploy(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000) {
  return runSvc(['deploy', ...args], {
    env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined, ...env },
    timeoutMs,
  });
}

const CONFIG =
  '// comment kept\n{\n  "name": "shop-cli",\n  "main": "src/index.js",\n  "compatibility_date": "2025-06-01",\n  "standin": {}\n}\n';

/** A worker config the runtime's rules accept, steering the stand-in. */
function standinConfig(name: string, standin: Record<string, unknown> = {}): string {
  return JSON.stringify({ name, main: 'src/index.js', compatibility_date: '2025-06-01', standin });
}

describe('svc deploy', () => {
  test('packs the project, uploads, polls until deployed and prints the deployment', async () => {
    const dir = projectDir({
      'cell.jsonc': CONFIG,
      'src/index.js': 'export default {}',
      '.env': 'SECRET=1',
      'svc.config.jsonc': '{"secretKey":"x"}',
      'build.log': 'x',
      '.svcignore': '*.log\n',
    });
    const { code, stdout, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
    assert.equal(code, 0, stderr);
    const match = /^deployed shop-cli ([0-9a-f]{16}) \(deploy (shop-cli\.[0-9a-f]{16})\)\n$/.exec(stdout);
    assert.ok(match, stdout);
    assert.match(stderr, /svc: packed 2 files/);
    assert.match(stderr, new RegExp(`svc: deploy ${match[2]!.replace('.', '\\.')} accepted`));
    const seen = standinRecord(bucket.endpoint, 'shop-cli', match[1]!);
    assert.equal(seen.config, CONFIG, 'the config goes byte for byte');
    assert.deepEqual(seen.files, ['cell.jsonc', 'src/index.js']);
    assert.ok(stagingEmpty(node.stateDir));
  });

  test('--var and --no-bundle edit the config in memory; --env, --replicas and --node-selector reach the node', async () => {
    const dir = projectDir({ 'cell.jsonc': CONFIG, 'src/index.js': 'x' });
    const { code, stdout, stderr } = await svcDeploy([
      dir,
      '--node',
      node.url,
      '--key',
      keyArg(admin),
      '--env',
      'staging',
      '--var',
      'GREETING:Hi: there',
      '--var',
      'EMPTY:',
      '--no-bundle',
      '--replicas',
      '3',
      '--node-selector',
      'zone=eu',
    ]);
    assert.equal(code, 0, stderr);
    // No node here has zone=eu: the readiness watch says so once the placement stood 10 s.
    assert.match(stderr, /svc: shop-cli-staging [0-9a-f]{16} is deployed but placed on no node/);
    const deployment = /^deployed shop-cli-staging ([0-9a-f]{16})/.exec(stdout)?.[1];
    assert.ok(deployment, stdout);
    const seen = standinRecord(bucket.endpoint, 'shop-cli-staging', deployment);
    assert.match(seen.config, /\/\/ comment kept/);
    const parsed = (await import('jsonc-parser')).parse(seen.config);
    assert.deepEqual(parsed.vars, { GREETING: 'Hi: there', EMPTY: '' });
    assert.equal(parsed.no_bundle, true);
    assert.equal(readFileSync(join(dir, 'cell.jsonc'), 'utf8'), CONFIG, 'the project file is untouched');
    const app = await getJson<{ replicas: number; selector: unknown }>(
      bucket.store,
      keys.application('shop-cli-staging'),
    );
    assert.equal(app?.value.replicas, 3);
    assert.deepEqual(app?.value.selector, { zone: 'eu' });
  });

  test("build.command runs before packing, in build.cwd, with the project's node_modules/.bin on PATH; a failing one stops the deploy", async () => {
    // The pattern of Cloudflare's Durable Objects templates: a bare `esbuild ...` writing the client
    // bundle into the assets folder, which `wrangler deploy` runs first (docs/deploys.md "Custom builds").
    const config = (command: string, cwd?: string) =>
      JSON.stringify({
        name: 'shop-built',
        main: 'src/index.js',
        compatibility_date: '2025-06-01',
        build: { command, ...(cwd ? { cwd } : {}) },
      });
    const dir = projectDir({
      'cell.json': config('make-bundle dist/app.js', 'web'),
      'src/index.js': 'export default {}',
      'web/.keep': '',
      'node_modules/.bin/make-bundle':
        '#!/bin/sh\nmkdir -p "$(dirname "$1")" && echo "$WRANGLER_COMMAND from $(pwd)" > "$1"\n',
    });
    chmodSync(join(dir, 'node_modules/.bin/make-bundle'), 0o755);
    const { code, stdout, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /svc: running the custom build: make-bundle dist\/app\.js\n[\s\S]*svc: packed/);
    assert.equal(
      readFileSync(join(dir, 'web/dist/app.js'), 'utf8'),
      `deploy from ${realpathSync(join(dir, 'web'))}\n`,
    );
    const deployment = /^deployed shop-built ([0-9a-f]{16})/.exec(stdout)?.[1];
    assert.ok(deployment, stdout);
    assert.ok(standinRecord(bucket.endpoint, 'shop-built', deployment).files.includes('web/dist/app.js'));

    const failing = projectDir({
      'cell.json': JSON.stringify({ ...JSON.parse(config('echo half-built; exit 3')), name: 'shop-unbuilt' }),
      'src/index.js': 'export default {}',
    });
    const failed = await svcDeploy([failing, '--node', node.url, '--key', keyArg(admin)]);
    assert.equal(failed.code, 1, failed.stdout);
    assert.equal(failed.stdout, '');
    assert.match(
      failed.stderr,
      /half-built\nsvc: Custom build failed: `echo half-built; exit 3` \(build\.command of the worker config\) exited with status 3; its output is above\. Nothing was uploaded\. \[urn:svc:invalid-input\]\n$/,
    );
    assert.equal(await bucket.store.stat(keys.application('shop-unbuilt')), null);
  });

  test('a failed deploy exits 1 with the record code', async () => {
    const dir = projectDir({
      'cell.json': standinConfig('shop-cli', { fail: 'bad worker' }),
    });
    const { code, stdout, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(
      stderr,
      /^svc: Deploy failed: deploy shop-cli\.[0-9a-f]{16}: cell publish exited with 1[\s\S]*error: bad worker[\s\S]* \[urn:svc:publish-failed\]\n$/m,
    );
  });

  test('No node to deploy to', async () => {
    const dir = projectDir({ 'cell.json': '{"name":"shop-cli"}' });
    const { code, stderr } = await svcDeploy([dir, '--key', keyArg(admin)]);
    assert.equal(code, 1);
    assert.match(stderr, /^svc: No node to deploy to: .*\[urn:svc:invalid-input\]\n$/);
  });

  test('No application to deploy to: no --name and a missing, blank or invalid config name', async () => {
    for (const config of ['{}', '{"name":"  "}', '{"name":"Not_Valid"}']) {
      const dir = projectDir({ 'cell.json': config });
      const { code, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
      assert.equal(code, 1);
      assert.match(stderr, /^svc: No application to deploy to: .*\[urn:svc:invalid-input\]\n$/, config);
    }
    const dir = projectDir({ 'cell.json': '{"name":"shop-cli"}' });
    const bad = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin), '--name', 'Bad']);
    assert.match(bad.stderr, /\[urn:svc:invalid-slug\]/);
  });

  test('Invalid worker config: refused before anything is sent, at the file, line and column', async () => {
    const cases: [string, RegExp][] = [
      // A syntax error is reported as one, not as a missing name.
      ['{\n  "name": "shop-bad",\n  "main" "src/index.js"\n}\n', /cell\.jsonc:3:10: ColonExpected: /],
      [
        '{\n  "name": "shop-bad",\n  "main": "src/index.js",\n  "compatibility_date": "2025-06-01",\n    "hyperdrive": [{ "binding": "CACHE" }]\n}\n',
        /cell\.jsonc:5:5: "hyperdrive" declares bindings this runtime does not provide/,
      ],
      [
        '{\n  "name": "shop-bad",\n  "main": "src/index.js"\n}\n',
        /cell\.jsonc:1:1: "compatibility_date" is required/,
      ],
    ];
    for (const [config, expected] of cases) {
      const dir = projectDir({ 'cell.jsonc': config, 'src/index.js': 'export default {}' });
      const { code, stdout, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
      assert.equal(code, 1, stdout);
      assert.match(stderr, /^svc: Invalid worker config: .*\[urn:svc:invalid-input\]\n$/);
      assert.match(stderr, expected);
      assert.doesNotMatch(stderr, /packed|accepted/);
    }
    // Nothing reached the node: the application was never created.
    assert.equal(await bucket.store.stat(keys.application('shop-bad')), null);
  });

  test('Invalid queue timeout, Invalid --var, Invalid --replicas', async () => {
    const dir = projectDir({ 'cell.json': '{"name":"shop-cli"}' });
    const base = [dir, '--node', node.url, '--key', keyArg(admin)];
    for (const value of ['-1', 'soon', '']) {
      const { code, stderr } = await svcDeploy([...base, '--queue-timeout', value]);
      assert.equal(code, 1);
      assert.match(stderr, /^svc: Invalid queue timeout: .*\[urn:svc:invalid-input\]\n$/, value);
    }
    for (const vars of [
      ['NOCOLON'],
      ['A:1', 'A:2'],
      ['__proto__:x'],
      ['constructor:x'],
      ['prototype:x'],
      ['9x:y'],
    ]) {
      const { code, stderr } = await svcDeploy([...base, ...vars.flatMap((v) => ['--var', v])]);
      assert.equal(code, 1);
      assert.match(stderr, /^svc: Invalid --var: .*\[urn:svc:invalid-input\]\n$/, vars.join(' '));
    }
    const replicas = await svcDeploy([...base, '--replicas', '0']);
    assert.match(replicas.stderr, /^svc: Invalid --replicas: .*\[urn:svc:invalid-input\]\n$/);
  });

  test("a node's refusal is printed with the node's code", async () => {
    await call(node.url, 'POST', '/v1/fleet/freeze', { signer: admin, body: { reason: 'audit' } });
    try {
      const dir = projectDir({ 'cell.json': standinConfig('shop-cli') });
      const { code, stderr } = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin)]);
      assert.equal(code, 1);
      assert.match(stderr, /^svc: Deploys are frozen: .*audit.*\[urn:svc:deploys-frozen\]\n$/m);
      assert.doesNotMatch(stderr, /accepted/);
    } finally {
      await call(node.url, 'DELETE', '/v1/fleet/freeze', { signer: admin });
    }
  });

  test('--no-wait on a full node fails with deploy-overloaded at once', async () => {
    const gate = join(gates, 'no-wait');
    const held = [];
    try {
      // One publishes, two wait: the node's and the application's two queued places are taken.
      for (let i = 0; i < 3; i++) {
        held.push(
          await postDeploy(node.url, 'shop-full', standinArtifact({ waitFor: gate }), { signer: admin }),
        );
      }
      const dir = projectDir({ 'cell.json': standinConfig('shop-full') });
      const { code, stderr } = await svcDeploy([
        dir,
        '--node',
        node.url,
        '--key',
        keyArg(admin),
        '--no-wait',
      ]);
      assert.equal(code, 1);
      assert.match(stderr, /^svc: Deploy capacity full: .*\[urn:svc:deploy-overloaded\]\n$/m);
      assert.doesNotMatch(stderr, /waiting for a queue place/);
      // --queue-timeout 0: one try, then the refusal.
      const zero = await svcDeploy([dir, '--node', node.url, '--key', keyArg(admin), '--queue-timeout', '0']);
      assert.equal(zero.code, 1);
      assert.match(zero.stderr, /gave up after 0 s \(--queue-timeout 0\) \[urn:svc:deploy-overloaded\]/);
    } finally {
      writeFileSync(gate, '');
    }
    for (const answer of held) await settledDeploy(node.url, answer.body.id, admin);
  });

  test('a poll held by the node (wait) answers the moment the deploy moves; a malformed wait is refused', async () => {
    const gate = join(gates, 'held-poll');
    const posted = await postDeploy(node.url, 'shop-held', standinArtifact({ waitFor: gate }), {
      signer: admin,
    });
    assert.equal(posted.status, 202, JSON.stringify(posted.body));
    const id = posted.body.id as string;
    const poll = async (query: string) =>
      fetch(`${node.url}/v1/deploys/${id}?${query}`, { headers: { authorization: await admin.bearer() } });
    try {
      for (const query of ['wait=soon', 'wait=31', 'wait=1&wait=2', 'state=done']) {
        const refused = await poll(query);
        const body = await refused.json();
        assert.equal(refused.status, 400, query);
        assert.equal(body.type, 'urn:svc:invalid-input', query);
        assert.equal(body.title, 'Malformed request', query);
      }
      await waitFor(async () => (await (await poll('')).json()).state === 'uploading', `${id} uploading`);
      // The gate opens once the node took the poll (its token use is recorded before the handler
      // runs): a node that answered at once would answer uploading.
      const uses = async () =>
        (await bucket.store.list(keys.tokenUsesPrefix, { recursive: true })).objects.length;
      const before = await uses();
      const held = poll('wait=30&state=uploading');
      await waitFor(async () => (await uses()) > before, 'the held poll to reach the node');
      writeFileSync(gate, '');
      const answer = await held;
      const body = await answer.json();
      assert.equal(answer.status, 200);
      assert.equal(body.state, 'deployed', JSON.stringify(body));
      assert.equal(answer.headers.get('x-svc-wait'), 'changed');
    } finally {
      writeFileSync(gate, '');
    }
  });

  test('--token with a single-use token deploys but cannot watch', async () => {
    const dir = projectDir({ 'cell.json': standinConfig('shop-token') });
    const token = await signToken({ id: admin.id, privateKey: admin.pair.privateKey });
    const { code, stderr } = await svcDeploy([dir, '--node', node.url, '--token', token]);
    assert.equal(code, 1);
    assert.match(
      stderr,
      /^svc: Deploy accepted, but it cannot be watched: deploy shop-token\.[0-9a-f]{16} was accepted .*\[urn:svc:auth-invalid\]\n$/m,
    );
    const id = /deploy (shop-token\.[0-9a-f]{16})/.exec(stderr)![1]!;
    assert.equal((await settledDeploy(node.url, id, admin)).state, 'deployed');
  });
});

describe('svc deploy with the real runtime', () => {
  let real: SailProcess | undefined;

  before(async () => {
    real = await startSail([
      '--endpoint',
      bucket.endpoint,
      '--cell-bin',
      CELL_REAL,
      '--registry-node-refresh-ms',
      '1000',
      '--registry-resync-ms',
      '1000',
      '--node-labels',
      'role=real',
    ]);
  });
  after(async () => {
    await real?.stop();
  });

  test('a worker that throws while loading fails its deploy with its error, and no process runs for it', async () => {
    const dir = projectDir({
      'cell.jsonc': JSON.stringify({
        name: 'loadfail',
        main: 'src/index.js',
        compatibility_date: '2025-06-01',
        compatibility_flags: ['nodejs_compat'],
      }),
      'src/index.js':
        "import { helper } from './lib.js';\nexport default { fetch() { return new Response(helper()); } };\n",
      'src/lib.js':
        "const url = globalThis.DATABASE_URL;\nif (!url) throw new Error('DATABASE_URL is not set');\nexport function helper() { return url; }\n",
    });
    const { code, stdout, stderr } = await svcDeploy([dir, '--node', real!.url, '--key', keyArg(admin)]);
    assert.equal(code, 1, stdout);
    assert.equal(stdout, '');
    assert.match(stderr, /^svc: Deploy failed: deploy loadfail\.[0-9a-f]{16}: /m);
    assert.match(stderr, /Uncaught Error: DATABASE_URL is not set/);
    assert.match(stderr, /at index\.js:\d+:\d+/);
    assert.match(stderr, /\[urn:svc:publish-failed\]\n$/);
    // Nothing was selected in the bucket.
    assert.equal(await bucket.store.stat(keys.runtimeSelector('loadfail')), null);
    // The deploy created the application, but it has no deployment: after two more reconcile
    // passes the node still runs no process for it.
    const passes = async () => (await call(real!.url, 'GET', '/v1/state', { signer: admin })).body;
    const start = (await passes()).reconcile.passes;
    const state = await waitFor(async () => {
      const s = await passes();
      return s.reconcile.passes >= start + 2 ? s : null;
    }, 'two reconcile passes');
    assert.ok(
      (await getJson(bucket.store, keys.application('loadfail'))) !== null,
      'the refused deploy created the application',
    );
    assert.deepEqual(
      state.processes.filter((p: { application: string }) => p.application === 'loadfail'),
      [],
    );
  });

  test("the runtime's warnings are printed on stderr, unless silenced", async () => {
    const dir = projectDir({
      'cell.jsonc':
        '{\n  "name": "warned",\n  "main": "src/index.js",\n  "compatibility_date": "2025-06-01",\n  "mystery": 1,\n  "routes": ["warned.example/*"]\n}\n',
      'src/index.js': "export default { fetch() { return new Response('ok'); } };\n",
    });
    // Placed on the real runtime's node alone (the stand-in node reports another runtime).
    const args = [dir, '--node', real!.url, '--key', keyArg(admin), '--node-selector', 'role=real'];
    const loud = await svcDeploy(args);
    assert.equal(loud.code, 0, loud.stderr);
    assert.match(loud.stdout, /^deployed warned /);
    assert.doesNotMatch(loud.stderr, /not serv|placed on no node/, 'it serves on the real runtime node');
    assert.match(
      loud.stderr,
      /^svc: warning: cell\.jsonc:5:3: ignoring "mystery": this runtime does not use it$/m,
    );
    assert.match(
      loud.stderr,
      /^svc: warning: cell\.jsonc:6:3: ignoring "routes": svc routes by application name/m,
    );
    const quiet = await svcDeploy(args, { SVC_SILENCE_WARNINGS: '1' });
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.doesNotMatch(quiet.stderr, /warning/);
  });

  test('a deployment that publishes but cannot turn ready is reported by svc deploy, and svc app show says why', async () => {
    // Every `cell serve` of this node refuses its settings at start, so the deployment publishes
    // (publish does not read them) but never serves.
    const broken = await startSail([
      '--endpoint',
      bucket.endpoint,
      '--cell-bin',
      CELL_REAL,
      '--cell-env',
      'CELL_LEASE_TTL_MS=1',
      '--registry-node-refresh-ms',
      '1000',
      '--registry-resync-ms',
      '1000',
      '--node-labels',
      'role=broken',
    ]);
    try {
      const dir = projectDir({
        'cell.jsonc': JSON.stringify({ name: 'unready', main: 'w.js', compatibility_date: '2025-06-01' }),
        'w.js': "export default { fetch() { return new Response('ok'); } };\n",
      });
      // Placed on the broken node alone.
      const { code, stdout, stderr } = await svcDeploy(
        [dir, '--node', broken.url, '--key', keyArg(admin), '--node-selector', 'role=broken'],
        {},
        // Publishing, placement, then the runtime process exiting until it is judged crash-looping.
        120_000,
      );
      assert.equal(code, 0, stderr);
      const deployment = /^deployed unready ([0-9a-f]+) /.exec(stdout)?.[1];
      assert.ok(deployment, stdout);
      assert.match(
        stderr,
        new RegExp(
          `^svc: unready ${deployment} is deployed but not serving on any node: ${broken.nodeId}: crashloop \\(cell serve exited with 1: cell: CELL_LEASE_TTL_MS must be`,
          'm',
        ),
      );
      const show = await runSvc(
        ['app', 'show', '--name', 'unready', '--node', broken.url, '--key', keyArg(admin)],
        {
          env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
        },
      );
      assert.equal(show.code, 0, show.stderr);
      assert.match(
        show.stdout,
        new RegExp(
          `processes +${broken.nodeId}: crashloop: cell serve exited with 1: cell: CELL_LEASE_TTL_MS must be`,
        ),
      );
    } finally {
      await broken.stop();
    }
  });

  test('examples/hello publishes through runtime/bin/cell and its deployment is in the bucket', async () => {
    const hello = resolve(import.meta.dirname, '..', 'examples', 'hello');
    const { code, stdout, stderr } = await svcDeploy([
      hello,
      '--node',
      real!.url,
      '--key',
      keyArg(admin),
      '--var',
      'GREETING:Hi',
    ]);
    assert.equal(code, 0, stderr);
    const [, deployment, id] =
      /^deployed hello ([0-9a-f]+) \(deploy (hello\.[0-9a-f]{16})\)\n$/.exec(stdout) ?? [];
    assert.ok(deployment && id, stdout);
    const manifest = await bucket.store.get(keys.runtimeManifest('hello', 'hello', deployment));
    assert.ok(manifest, 'the runtime wrote the deployment manifest');
    const app = await getJson<{ deployment: string }>(bucket.store, keys.application('hello'));
    assert.equal(app?.value.deployment, deployment);
    await waitFor(() => stagingEmpty(real!.stateDir), 'staging to be emptied');
  });
});
