// The runtime contract (docs/runtime.md), end to end with the real
// `cell` executable, real workerd and a real bucket (the local directory here; the same tests
// run against MinIO in test/runtime-minio.test.ts): publish then serve the example, follow a
// second publish under load without a failed request, health only once ready, SIGTERM, and
// publish refusals a user can act on.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { newVersion } from '../runtime/src/publish.ts';
import { keys } from '../src/registry/keys.ts';
import { openDirStore } from '../src/store/dir.ts';
import {
  type BucketEnv,
  type CellProcess,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  fetchText,
  isRunning,
  publish,
  runCell,
  startCell,
} from './helpers/cell.ts';
import { tempDir, waitFor } from './helpers/svc.ts';

const HEALTH = '/.well-known/cell/health';
/** Deadline for a deployment to be served after its publish (workerd start included). */
const FOLLOW_DEADLINE_MS = 30_000;

/** A worker that names its version and can hold a request open, for the switch test. */
function versionedProject(version: string): string {
  const dir = tempDir('cell-versioned-');
  writeFileSync(
    join(dir, 'cell.json'),
    JSON.stringify({
      name: 'api',
      main: 'worker.js',
      compatibility_date: '2025-06-01',
      vars: { VERSION: version },
    }),
  );
  writeFileSync(
    join(dir, 'worker.js'),
    `export default {
      async fetch(request, env) {
        const url = new URL(request.url);
        if (url.pathname === '/slow') await new Promise((r) => setTimeout(r, Number(url.searchParams.get('ms'))));
        return new Response(env.VERSION);
      },
    };\n`,
  );
  return dir;
}

async function health(cell: CellProcess): Promise<{ status: number; body: Record<string, unknown> } | null> {
  const answer = await fetchText(`${cell.url}${HEALTH}`);
  return answer ? { status: answer.status, body: JSON.parse(answer.body) } : null;
}

async function waitServing(cell: CellProcess, deployment: string): Promise<void> {
  await waitFor(
    async () => {
      const h = await health(cell);
      return h?.status === 200 && h.body.deployment === deployment;
    },
    () => `cell to serve ${deployment}\n${cell.stderr()}`,
    FOLLOW_DEADLINE_MS,
  );
}

/** Writes a deployment of one module and selects it, as `cell publish` would but without its checks. */
async function writeUncheckedDeployment(
  bucketDir: string,
  application: string,
  source: string,
): Promise<string> {
  const store = await openDirStore(bucketDir);
  const deployment = newVersion();
  const bytes = new TextEncoder().encode(source);
  await store.put(keys.runtimeModule(application, application, deployment, 'w.js'), bytes);
  const manifest = {
    schema_version: 1,
    required_features: ['modules'],
    application,
    script: application,
    deployment,
    created_ms: Date.now(),
    runtime: 'cell 0.8.1',
    main_module: 'w.js',
    modules: [
      {
        name: 'w.js',
        type: 'esm',
        size: bytes.byteLength,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      },
    ],
    compatibility_date: '2025-06-01',
    compatibility_flags: [],
    vars: {},
    assets: null,
  };
  await store.put(keys.runtimeManifest(application, application, deployment), JSON.stringify(manifest));
  const pointer = { schema_version: 1, script: application, deployment, moved_ms: Date.now() };
  await store.put(keys.runtimeSelector(application), JSON.stringify(pointer));
  await store.close();
  return deployment;
}

describe('cell', () => {
  let bucketDir: string;
  let bucket: BucketEnv;
  const running: CellProcess[] = [];
  const serve = async (app: string, node: string, env: NodeJS.ProcessEnv = {}) => {
    const cell = await startCell(app, node, bucket, env);
    running.push(cell);
    return cell;
  };

  before(() => {
    bucketDir = tempDir('cell-bucket-');
    bucket = dirBucketEnv(bucketDir);
  });
  after(async () => {
    // SIGTERM: each cell stops its own workerd (a SIGKILL would leave it running).
    await Promise.all(running.map((cell) => cell.stop('SIGTERM')));
    rmSync(bucketDir, { recursive: true, force: true });
  });

  it('prints its version', async () => {
    const result = await runCell(['--version']);
    assert.equal(result.code, 0);
    assert.equal(result.stdout, 'cell 0.8.1\n');
  });

  it('publishes examples/hello and serves its var and its asset through workerd', async () => {
    const cell = await serve('hello', 'node-a');
    // `starting` until its first look at the selector has answered, then `no-deployment`.
    const before = await waitFor(async () => {
      const h = await health(cell);
      return h?.body.status === 'no-deployment' ? h : null;
    }, 'health before any deployment');
    assert.equal(before!.status, 503);
    const nothing = await fetchText(`${cell.url}/`);
    assert.deepEqual(nothing, { status: 503, body: 'No deployment has been published yet\n' });

    const result = await publish(join(EXAMPLES, 'hello'), 'hello', bucket);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.published!.application, 'hello');
    assert.equal(result.published!.script, 'hello');
    assert.match(result.published!.deployment, /^[0-9a-f]+$/);

    await waitServing(cell, result.published!.deployment);
    const page = await fetchText(`${cell.url}/`);
    assert.equal(page!.status, 200);
    assert.match(page!.body, /Hello from svc!/);
    const asset = await fetchText(`${cell.url}/hello.txt`);
    assert.equal(asset!.status, 200);
    assert.equal(asset!.body, readFileSync(join(EXAMPLES, 'hello', 'public', 'hello.txt'), 'utf8'));

    // The node lease names the node and runs ahead of the clock.
    const store = await openDirStore(bucketDir);
    const lease = JSON.parse(
      new TextDecoder().decode((await store.get(keys.runtimeNodeLease('hello', 'node-a')))!.body),
    );
    assert.equal(lease.node, 'node-a');
    assert.ok(lease.expires_ms > Date.now());
    // The layout: manifest, assets.json, record, selector and the script's pointer.
    const v = result.published!.deployment;
    for (const key of [
      keys.runtimeManifest('hello', 'hello', v),
      keys.runtimeAssetsIndex('hello', 'hello', v),
      keys.runtimeRecord('hello', 'hello', v),
      keys.runtimeSelector('hello'),
      keys.runtimeScriptPointer('hello', 'hello'),
    ]) {
      assert.ok(await store.stat(key), `${key} is written`);
    }
    const manifest = JSON.parse(
      new TextDecoder().decode((await store.get(keys.runtimeManifest('hello', 'hello', v)))!.body),
    );
    assert.equal(manifest.schema_version, 1);
    assert.deepEqual(manifest.required_features, ['modules', 'assets']);
    await store.close();
  });

  it('serves the var a deploy overrides, as svc deploy --var writes it into the config', async () => {
    const project = copyProject(join(EXAMPLES, 'hello'));
    const config = readFileSync(join(project, 'cell.jsonc'), 'utf8').replace(
      '"Hello from svc"',
      '"Hi from a --var"',
    );
    writeFileSync(join(project, 'cell.jsonc'), config);
    const cell = await serve('hello-var', 'node-a');
    const result = await publish(project, 'hello-var', bucket, ['--config', 'cell.jsonc']);
    assert.equal(result.code, 0, result.stderr);
    await waitServing(cell, result.published!.deployment);
    assert.match((await fetchText(`${cell.url}/`))!.body, /Hi from a --var!/);
  });

  it('serves the catalog example: routing, bundled modules, a JSON var, a static front end', async () => {
    const result = await publish(join(EXAMPLES, 'catalog'), 'catalog', bucket);
    assert.equal(result.code, 0, result.stderr);
    const cell = await serve('catalog', 'node-a');
    await waitServing(cell, result.published!.deployment);
    assert.deepEqual(JSON.parse((await fetchText(`${cell.url}/api`))!.body), {
      store: 'The svc catalog',
      features: { search: true, pageSize: 3 },
    });
    assert.equal(JSON.parse((await fetchText(`${cell.url}/api/products/p-2`))!.body).name, 'Enamel mug');
    const quote = await fetchText(`${cell.url}/api/quote`, {
      method: 'POST',
      body: JSON.stringify({ items: [{ id: 'p-1', quantity: 2 }] }),
    });
    assert.equal(JSON.parse(quote!.body).total, 3600);
    assert.equal((await fetchText(`${cell.url}/api/products`, { method: 'DELETE' }))!.status, 405);
    const index = await fetchText(`${cell.url}/`);
    assert.match(index!.body, /<title>Catalog<\/title>/);
  });

  it('follows a second publish while requests run, failing none, finishing the one in flight', async () => {
    const first = await publish(versionedProject('one'), 'switch', bucket);
    assert.equal(first.code, 0, first.stderr);
    const cell = await serve('switch', 'node-a');
    await waitServing(cell, first.published!.deployment);

    const seen = new Set<string>();
    const failures: string[] = [];
    let stop = false;
    let requests = 0;
    const loop = async () => {
      while (!stop) {
        requests++;
        const answer = await fetchText(`${cell.url}/`);
        if (answer?.status === 200) seen.add(answer.body);
        else failures.push(answer ? `${answer.status} ${answer.body}` : 'no answer');
      }
    };
    const loops = Array.from({ length: 4 }, loop);
    // A request held open across the switch must be answered by the deployment it reached.
    const inFlight = fetchText(`${cell.url}/slow?ms=1500`);
    await waitFor(() => requests > 20, 'the load loop to run');

    const second = await publish(versionedProject('two'), 'switch', bucket);
    assert.equal(second.code, 0, second.stderr);
    await waitFor(
      () => seen.has('two'),
      () => `the second deployment to answer\n${cell.stderr()}`,
      FOLLOW_DEADLINE_MS,
    );
    const countAtSwitch = requests;
    await waitFor(() => requests > countAtSwitch + 50, 'more requests after the switch');
    stop = true;
    await Promise.all(loops);

    assert.deepEqual(failures, []);
    assert.deepEqual([...seen].sort(), ['one', 'two']);
    assert.deepEqual(await inFlight, { status: 200, body: 'one' });
    assert.equal((await health(cell))!.body.deployment, second.published!.deployment);
    // The old workerd is stopped once drained: one instance remains.
    await waitFor(() => cell.children().length === 1, 'the old workerd to stop');
  });

  it('with its default schedule follows a publish on SIGHUP, not by polling, and takes a long lease', async () => {
    const first = await publish(versionedProject('hup-one'), 'hup', bucket);
    assert.equal(first.code, 0, first.stderr);
    // The default schedule (no CELL_SELECTOR_POLL_MS, no CELL_LEASE_TTL_MS): a safety poll of
    // minutes, so within this test only a SIGHUP can make the process look again.
    const cell = await serve('hup', 'node-h', { CELL_SELECTOR_POLL_MS: '' });
    await waitServing(cell, first.published!.deployment);
    const store = await openDirStore(bucketDir);
    const lease = await store.get(keys.runtimeNodeLease('hup', 'node-h'));
    const { expires_ms: expiresMs, renewed_ms: renewedMs } = JSON.parse(Buffer.from(lease!.body).toString());
    assert.ok(expiresMs - renewedMs >= 10 * 60_000, `a long lease, got ${expiresMs - renewedMs} ms`);
    await store.close();

    const second = await publish(versionedProject('hup-two'), 'hup', bucket);
    assert.equal(second.code, 0, second.stderr);
    cell.child.kill('SIGHUP');
    await waitServing(cell, second.published!.deployment);
    assert.equal((await fetchText(`${cell.url}/`))!.body, 'hup-two');
    assert.equal(isRunning(cell.child.pid!), true);
  });

  it('answers health only once the deployment answers, and keeps serving through a broken deployment', async () => {
    // cell publish refuses a worker that throws while loading, so the broken deployment is
    // written straight into the bucket, as a deployment that loads elsewhere but not here would be.
    const brokenSource = 'throw new Error("cannot start");\nexport default { fetch() {} };\n';
    await writeUncheckedDeployment(bucketDir, 'ready', brokenSource);
    const cell = await serve('ready', 'node-a', { CELL_RETRY_MS: '200' });
    await waitFor(
      async () => (await health(cell))?.body.status === 'failed',
      () => `a failed start\n${cell.stderr()}`,
    );
    const h = await health(cell);
    assert.equal(h!.status, 503);
    assert.match(String(h!.body.detail), /cannot start/);

    const good = await publish(versionedProject('fixed'), 'ready', bucket);
    await waitServing(cell, good.published!.deployment);
    assert.equal((await fetchText(`${cell.url}/`))!.body, 'fixed');

    // A broken deployment published over a good one never replaces it.
    const again = await writeUncheckedDeployment(bucketDir, 'ready', brokenSource);
    await waitFor(() => cell.stderr().includes(`${again} failed to start`), 'the broken start');
    assert.equal((await fetchText(`${cell.url}/`))!.body, 'fixed');
    assert.equal((await health(cell))!.status, 200);
  });

  it('exits cleanly on SIGTERM: exit 0, workerd stopped, lease released', async () => {
    const result = await publish(versionedProject('bye'), 'term', bucket);
    const cell = await startCell('term', 'node-t', bucket);
    await waitServing(cell, result.published!.deployment);
    const workerd = cell.children();
    assert.equal(workerd.length, 1);
    const store = await openDirStore(bucketDir);
    assert.ok(await store.stat(keys.runtimeNodeLease('term', 'node-t')));
    assert.deepEqual(await cell.stop('SIGTERM'), { code: 0, signal: null });
    assert.equal(isRunning(workerd[0]!), false);
    assert.equal(await store.stat(keys.runtimeNodeLease('term', 'node-t')), null);
    assert.match(cell.stderr(), /stopped term/);
    await store.close();
  });

  it('refuses a port another process holds: exit 1, the reason named, no private folder left', async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const port = (holder.address() as AddressInfo).port;
    const stateDir = tempDir('cell-state-');
    try {
      const cell = await startCell('busy', 'node-b', bucket, {
        CELL_PORT: String(port),
        CELL_STATE_DIR: stateDir,
      });
      await waitFor(() => cell.child.exitCode !== null, 'cell serve to give up');
      assert.deepEqual(await cell.stop(), { code: 1, signal: null });
      assert.match(cell.stderr(), new RegExp(`cell: cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
      assert.deepEqual(readdirSync(stateDir), []);
    } finally {
      holder.close();
    }
  });

  it('stops within its bound with a WebSocket open, and leaves no private folder behind', async () => {
    const project = tempDir('cell-socket-');
    writeFileSync(
      join(project, 'cell.json'),
      JSON.stringify({ name: 'socket', main: 'w.js', compatibility_date: '2025-06-01' }),
    );
    writeFileSync(
      join(project, 'w.js'),
      `export default {
        fetch(request) {
          if (request.headers.get('upgrade') !== 'websocket') return new Response('plain');
          const [client, server] = Object.values(new WebSocketPair());
          server.accept();
          server.addEventListener('message', (event) => server.send('echo ' + event.data));
          return new Response(null, { status: 101, webSocket: client });
        },
      };\n`,
    );
    const result = await publish(project, 'socket', bucket);
    assert.equal(result.code, 0, result.stderr);
    const stateDir = tempDir('cell-state-');
    const cell = await startCell('socket', 'node-w', bucket, { CELL_STATE_DIR: stateDir });
    await waitServing(cell, result.published!.deployment);
    const socket = new WebSocket(`ws://127.0.0.1:${cell.port}/chat`);
    const echoed = new Promise<string>((resolveEcho, reject) => {
      socket.addEventListener('message', (event) => resolveEcho(String(event.data)));
      socket.addEventListener('error', () => reject(new Error('the WebSocket failed')));
    });
    await new Promise((resolveOpen) => socket.addEventListener('open', resolveOpen));
    socket.send('hi');
    assert.equal(await echoed, 'echo hi');
    const closed = new Promise((resolveClose) => socket.addEventListener('close', resolveClose));
    // The helper SIGKILLs after 30 s: a clean exit 0 means cell ended on its own, within its
    // 10 s bound for requests, not when it was killed.
    assert.deepEqual(await cell.stop('SIGTERM'), { code: 0, signal: null });
    await closed;
    assert.deepEqual(readdirSync(stateDir), [], 'the private folder is removed');
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('stops the workerd a killed cell left behind when the next cell starts', async () => {
    const stateDir = tempDir('cell-state-');
    const result = await publish(versionedProject('orphan'), 'orphan', bucket);
    const killed = await startCell('orphan', 'node-o', bucket, { CELL_STATE_DIR: stateDir });
    await waitServing(killed, result.published!.deployment);
    const [workerd] = killed.children();
    await killed.stop('SIGKILL');
    assert.equal(isRunning(workerd!), true, 'SIGKILL leaves workerd running');
    const next = await serve('orphan', 'node-o', { CELL_STATE_DIR: stateDir });
    await waitFor(
      () => !isRunning(workerd!),
      () => `the orphan to be stopped\n${next.stderr()}`,
    );
    await waitServing(next, result.published!.deployment);
  });

  it('publishes with no_bundle and an assets-only project', async () => {
    const plain = tempDir('cell-nobundle-');
    writeFileSync(
      join(plain, 'cell.json'),
      JSON.stringify({ main: 'src/index.js', compatibility_date: '2025-06-01', no_bundle: true }),
    );
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(plain, 'src'));
    writeFileSync(
      join(plain, 'src', 'index.js'),
      "import { word } from './word.js';\nexport default { fetch() { return new Response(word); } };\n",
    );
    writeFileSync(join(plain, 'src', 'word.js'), "export const word = 'unbundled';\n");
    const nb = await publish(plain, 'plain', bucket);
    assert.equal(nb.code, 0, nb.stderr);
    const store = await openDirStore(bucketDir);
    const manifest = JSON.parse(
      new TextDecoder().decode(
        (await store.get(keys.runtimeManifest('plain', 'plain', nb.published!.deployment)))!.body,
      ),
    );
    assert.deepEqual(
      manifest.modules.map((m: { name: string }) => m.name),
      ['index.js', 'word.js'],
    );

    const site = tempDir('cell-site-');
    writeFileSync(
      join(site, 'cell.json'),
      JSON.stringify({ compatibility_date: '2025-06-01', assets: { directory: 'www' } }),
    );
    mkdirSync(join(site, 'www', 'docs'), { recursive: true });
    writeFileSync(join(site, 'www', 'index.html'), '<h1>home</h1>');
    writeFileSync(join(site, 'www', 'docs', 'index.html'), '<h1>docs</h1>');
    const st = await publish(site, 'site', bucket);
    assert.equal(st.code, 0, st.stderr);

    const a = await serve('plain', 'node-a');
    const b = await serve('site', 'node-a');
    await waitServing(a, nb.published!.deployment);
    await waitServing(b, st.published!.deployment);
    assert.equal((await fetchText(`${a.url}/`))!.body, 'unbundled');
    assert.equal((await fetchText(`${b.url}/`))!.body, '<h1>home</h1>');
    assert.equal((await fetchText(`${b.url}/docs/`))!.body, '<h1>docs</h1>');
    const redirect = await fetch(`${b.url}/docs`, { redirect: 'manual' });
    assert.equal(redirect.status, 307);
    assert.equal(redirect.headers.get('location'), '/docs/');
    assert.equal((await fetchText(`${b.url}/missing`))!.status, 404);
    await store.close();
  });

  describe('publish refusals exit non-zero with a message a user can act on', () => {
    const refuse = async (
      files: Record<string, string>,
      env: Record<string, string> = {},
      args: string[] = [],
    ) => {
      const dir = tempDir('cell-refuse-');
      for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
      const result = await runCell(['publish', ...args], {
        cwd: dir,
        env: { ...bucket, CELL_APP: 'refused', ...env },
      });
      assert.equal(result.code, 1, result.stdout);
      assert.equal(result.stdout, '', 'no deployment is named');
      return result.stderr.trim();
    };

    it('a missing config', async () => {
      assert.match(await refuse({}), /^cell: no worker config in .*: add cell\.jsonc \(or cell\.json\)/);
      assert.match(
        await refuse({}, {}, ['--config', 'cell.jsonc']),
        /^cell: no worker config at .*cell\.jsonc/,
      );
    });

    it('a top-level env key', async () => {
      const line = await refuse({
        'cell.jsonc': '{"main":"w.js","compatibility_date":"2025-06-01","env":{"staging":{"vars":{}}}}',
        'w.js': 'export default {}',
      });
      assert.match(line, /"env" is not supported: svc addresses an environment as its own application/);
    });

    it('a syntax error in the worker, named by file and line', async () => {
      const dir = tempDir('cell-syntax-');
      writeFileSync(
        join(dir, 'cell.json'),
        JSON.stringify({ main: 'w.js', compatibility_date: '2025-06-01' }),
      );
      writeFileSync(join(dir, 'w.js'), 'export default {\n  fetch() { return new Response("x" }\n};\n');
      const result = await runCell(['publish'], { cwd: dir, env: { ...bucket, CELL_APP: 'refused' } });
      assert.equal(result.code, 1);
      assert.match(result.stderr, /cell: the worker does not build:/);
      assert.match(result.stderr, /\nw\.js:2:\d+: Expected "\)" but found "}"/);
      // Nothing was written for the refused application.
      const store = await openDirStore(bucketDir);
      assert.deepEqual((await store.list(keys.fleetPrefix('refused'), { recursive: true })).objects, []);
      await store.close();
    });

    it('a worker that throws while loading, with its error and where; nothing is written', async () => {
      const stateDir = tempDir('cell-state-');
      const line = await refuse(
        {
          'cell.json': JSON.stringify({
            main: 'w.js',
            compatibility_date: '2025-06-01',
            compatibility_flags: ['nodejs_compat'],
          }),
          'w.js':
            "import { helper } from './lib.js';\nexport default { fetch() { return new Response(helper()); } };\n",
          'lib.js':
            "const url = globalThis.DATABASE_URL;\nif (!url) throw new Error('DATABASE_URL is not set');\nexport function helper() { return url; }\n",
        },
        { CELL_STATE_DIR: stateDir },
      );
      assert.match(
        line,
        /cell: the worker cannot serve: it was started in workerd and .*Uncaught Error: DATABASE_URL is not set/s,
      );
      assert.match(line, /at w\.js:\d+:\d+/);
      assert.match(line, /nothing was published/);
      const store = await openDirStore(bucketDir);
      assert.deepEqual((await store.list(keys.fleetPrefix('refused'), { recursive: true })).objects, []);
      await store.close();
      assert.deepEqual(readdirSync(stateDir), [], 'the check leaves no folder behind');
      rmSync(stateDir, { recursive: true, force: true });
    });

    it('a syntax error with no_bundle', async () => {
      const line = await refuse({
        'cell.json': JSON.stringify({ main: 'w.js', compatibility_date: '2025-06-01', no_bundle: true }),
        'w.js': 'export default { fetch( };\n',
      });
      assert.match(line, /^cell: the worker does not parse:\nw\.js:1:24: Expected identifier but found "}"/);
    });

    it('a config that is no JSONC, a missing main, an application name, a bucket', async () => {
      assert.match(await refuse({ 'cell.json': '{ "main": }' }), /cell\.json:1:\d+: ValueExpected/);
      assert.match(
        await refuse({ 'cell.json': JSON.stringify({ main: 'nope.js', compatibility_date: '2025-06-01' }) }),
        /"main" names nope\.js, which does not exist/,
      );
      assert.match(
        await refuse({ 'cell.json': JSON.stringify({ main: '../x.js', compatibility_date: '2025-06-01' }) }),
        /inside the project/,
      );
      const ok = {
        'cell.json': JSON.stringify({ main: 'w.js', compatibility_date: '2025-06-01' }),
        'w.js': 'export default {}',
      };
      assert.match(await refuse(ok, { CELL_APP: '' }), /CELL_APP is not set/);
      assert.match(await refuse(ok, { CELL_APP: 'Bad_Name' }), /no application name/);
      assert.match(await refuse(ok, { SVC_S3_ENDPOINT: '' }), /SVC_S3_ENDPOINT is not set/);
    });
  });
});
