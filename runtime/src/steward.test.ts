// `cell steward`, the bucket side of `cell serve` (docs/runtime.md "cell serve"): a real
// `cell steward` child driven over its stdin and stdout as the front drives it, against the real
// local-directory bucket with deployments published by the real `cell publish`.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { keys } from '../../src/registry/keys.ts';
import { openDirStore } from '../../src/store/dir.ts';
import type { Store } from '../../src/store/store.ts';
import { CELL_BIN, copyProject, dirBucketEnv, EXAMPLES, publish, runCell } from '../../test/helpers/cell.ts';
import { waitFor } from '../../test/helpers/svc.ts';
import { cronId } from './cron.ts';
import { workerdBinary } from './workerd.ts';

type Answer = Record<string, unknown> & { id: number };

/** A running `cell steward`: one request per line in, one answer per line out. */
class StewardChild {
  readonly child: ChildProcess;
  private nextId = 1;
  private readonly waiting = new Map<number, (answer: Answer) => void>();
  /** Every stdout line, to check nothing but answers is written there. */
  readonly lines: string[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(env: Record<string, string>) {
    this.child = spawn(process.execPath, [CELL_BIN, 'steward'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', CELL_PORT: '8080', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stderr!.on('data', (chunk) => {
      this.stderr += chunk;
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.lines.push(line);
      const answer = JSON.parse(line) as Answer;
      this.waiting.get(answer.id)?.(answer);
      this.waiting.delete(answer.id);
    });
    this.exited = new Promise((resolveExit) => this.child.on('exit', (code) => resolveExit(code)));
  }

  /** Sends one request; resolves with its answer (without the id). */
  ask(op: string, fields: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolveAnswer) => {
      this.waiting.set(id, ({ id: _id, ...rest }) => resolveAnswer(rest));
      this.child.stdin!.write(`${JSON.stringify({ id, op, ...fields })}\n`);
    });
  }

  /** Ends stdin, as the front does when the steward is idle; answers the exit code. */
  async close(): Promise<number | null> {
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}

function lookRequest(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { active: null, seenEtag: null, failedSelection: null, retryAtMs: 0, sequence: 1, ...fields };
}

function text(body: Uint8Array): string {
  return new TextDecoder().decode(body);
}

describe('cell steward', () => {
  let bucketDir: string;
  let stateDir: string;
  let store: Store;
  let bucket: Record<string, string>;
  /** hello as published: its deployment id. */
  let hello: { script: string; deployment: string };
  /** Copies of the examples that were published. */
  const projects: string[] = [];

  before(async () => {
    bucketDir = mkdtempSync(join(tmpdir(), 'cell-steward-bucket-'));
    stateDir = mkdtempSync(join(tmpdir(), 'cell-st-'));
    bucket = dirBucketEnv(bucketDir);
    store = await openDirStore(bucketDir);
  });

  after(async () => {
    await store.close();
    rmSync(bucketDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
    for (const project of projects) rmSync(project, { recursive: true, force: true });
  });

  const stewardEnv = (application: string, extra: Record<string, string> = {}) => ({
    ...bucket,
    CELL_APP: application,
    CELL_NODE: 'node-s',
    CELL_STATE_DIR_ACTIVE: stateDir,
    ...extra,
  });

  it('is not listed in cell --help', async () => {
    const result = await runCell(['--help']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /serve/);
    assert.doesNotMatch(result.stdout, /steward/);
  });

  it('looks: none before a publish, then a materialized start, then same', async () => {
    const steward = new StewardChild(stewardEnv('hello'));
    try {
      assert.deepEqual(await steward.ask('look', lookRequest()), { result: 'none' });

      const project = copyProject(join(EXAMPLES, 'hello'));
      projects.push(project);
      const published = await publish(project, 'hello', bucket);
      assert.equal(published.code, 0, published.stderr);
      hello = { script: published.published!.script, deployment: published.published!.deployment };
      const selector = (await store.stat(keys.runtimeSelector('hello')))!;

      const start = await steward.ask('look', lookRequest({ sequence: 3 }));
      const label = `${hello.script}/${hello.deployment}`;
      assert.deepEqual(start, {
        result: 'start',
        selection: `${selector.etag}|`,
        seenEtag: selector.etag,
        script: hello.script,
        deployment: hello.deployment,
        label,
        secretsDigest: '',
        secretsChanged: false,
        dir: join(stateDir, 'd3'),
        socket: join(stateDir, 'w3.sock'),
        cronSocket: null,
        command: [workerdBinary(), 'serve', 'config.capnp'],
        crons: [],
      });
      assert.ok(existsSync(join(stateDir, 'd3', 'config.capnp')));
      assert.match(readFileSync(join(stateDir, 'd3', 'config.capnp'), 'utf8'), /w3\.sock/);
      assert.ok(existsSync(join(stateDir, 'blobs')), 'the assets are fetched into the blob cache');
      assert.match(steward.stderr, new RegExp(`cell: starting ${label}\\n`));

      const active = { script: hello.script, deployment: hello.deployment, secretsDigest: '' };
      // Serving it, selector seen: nothing to do, and nothing read but a HEAD.
      assert.deepEqual(await steward.ask('look', lookRequest({ active, seenEtag: selector.etag })), {
        result: 'same',
      });
      // Serving it, selector not yet seen (e.g. after a restart of the front's bookkeeping).
      assert.deepEqual(await steward.ask('look', lookRequest({ active, seenEtag: null })), {
        result: 'same',
        seenEtag: selector.etag,
      });
      // A selection that failed waits for its retry time, then is tried again.
      const gated = lookRequest({ failedSelection: `${selector.etag}|`, retryAtMs: Date.now() + 60_000 });
      assert.deepEqual(await steward.ask('look', gated), { result: 'none' });
      const retried = await steward.ask(
        'look',
        lookRequest({ failedSelection: `${selector.etag}|`, retryAtMs: Date.now() - 1, sequence: 4 }),
      );
      assert.equal(retried.result, 'start');
      assert.equal(retried.dir, join(stateDir, 'd4'));

      assert.equal(await steward.close(), 0);
      for (const line of steward.lines) assert.equal(typeof JSON.parse(line).id, 'number', line);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('starts the serving deployment again when its secrets change, and refuses a var/secret clash', async () => {
    const secretsFile = join(stateDir, 'secrets.json');
    const steward = new StewardChild(stewardEnv('hello', { CELL_SECRETS_FILE: secretsFile }));
    try {
      const selector = (await store.stat(keys.runtimeSelector('hello')))!;
      const active = { ...hello, secretsDigest: '' };
      assert.deepEqual(await steward.ask('look', lookRequest({ active, seenEtag: selector.etag })), {
        result: 'same',
      });

      writeFileSync(secretsFile, JSON.stringify({ TOKEN: 's3cret' }), { mode: 0o600 });
      const again = await steward.ask('look', lookRequest({ active, seenEtag: selector.etag, sequence: 5 }));
      assert.equal(again.result, 'start');
      assert.equal(again.secretsChanged, true);
      assert.equal(again.deployment, hello.deployment);
      assert.match(again.secretsDigest as string, /^[0-9a-f]{64}$/);
      assert.equal(again.selection, `${selector.etag}|${again.secretsDigest}`);
      assert.equal(readFileSync(join(stateDir, 'd5', 'secrets', '0.txt'), 'utf8'), 's3cret');
      assert.match(steward.stderr, /cell: starting hello\/[0-9a-f]+ \(its secrets changed\)\n/);
      assert.doesNotMatch(steward.stderr, /s3cret/);

      writeFileSync(secretsFile, JSON.stringify({ GREETING: 'clash' }), { mode: 0o600 });
      const clash = await steward.ask('look', lookRequest({ active, seenEtag: selector.etag, sequence: 6 }));
      assert.equal(clash.result, 'failed');
      assert.match(clash.selection as string, new RegExp(`^${escapeRegExp(selector.etag)}\\|[0-9a-f]{64}$`));
      assert.equal(
        clash.message,
        `GREETING is both a var of ${hello.script}/${hello.deployment} and a secret; remove the secret (svc app secret remove) or the var, then deploy again`,
      );
      assert.ok(!existsSync(join(stateDir, 'd6')), 'the half-made folder is removed');

      writeFileSync(secretsFile, 'not json');
      const unreadable = await steward.ask('look', lookRequest({ active, seenEtag: selector.etag }));
      assert.deepEqual(unreadable, {
        result: 'failed',
        selection: null,
        message: `${secretsFile} is not JSON; the node rewrites it on its next pass`,
      });
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('refuses a deployment that needs a feature cell serve cannot run', async () => {
    const manifestKey = keys.runtimeManifest('hello', hello.script, hello.deployment);
    const manifest = JSON.parse(text((await store.get(manifestKey))!.body));
    manifest.required_features = [...manifest.required_features, 'containers'];
    const deployment = 'c0ffee';
    manifest.deployment = deployment;
    const key = keys.runtimeManifest('hello', hello.script, deployment);
    await store.put(key, JSON.stringify(manifest));
    const selectorKey = keys.runtimeSelector('hello');
    const pointer = JSON.parse(text((await store.get(selectorKey))!.body));
    const previous = pointer.deployment;
    const etag = await store.put(selectorKey, JSON.stringify({ ...pointer, deployment }));
    const steward = new StewardChild(stewardEnv('hello'));
    try {
      const failed = await steward.ask('look', lookRequest({ sequence: 7 }));
      assert.deepEqual(failed, {
        result: 'failed',
        selection: `${etag}|`,
        message: `${key} requires containers, which cell serve cannot run`,
      });
      assert.ok(!existsSync(join(stateDir, 'd7')));
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
      await store.put(selectorKey, JSON.stringify({ ...pointer, deployment: previous }));
    }
  });

  it('writes, re-takes and releases the node lease', async () => {
    const steward = new StewardChild(stewardEnv('hello'));
    const key = keys.runtimeNodeLease('hello', 'node-s');
    const read = async () => JSON.parse(text((await store.get(key))!.body));
    try {
      const request = { release: false, pid: 4242, startedMs: 1000, ttlMs: 900_000 };
      const before = Date.now();
      const first = await steward.ask('lease', { ...request, etag: null, describe: {} });
      assert.equal(typeof first.etag, 'string');
      assert.equal(first.etag, (await store.stat(key))!.etag);
      const lease = await read();
      assert.equal(lease.node, 'node-s');
      assert.equal(lease.application, 'hello');
      assert.equal(lease.pid, 4242);
      assert.equal(lease.started_ms, 1000);
      assert.ok(lease.expires_ms >= before + 900_000 && lease.expires_ms <= Date.now() + 900_000);
      assert.equal(lease.script, undefined);

      const describe = { script: hello.script, deployment: hello.deployment };
      const second = await steward.ask('lease', { ...request, etag: first.etag, describe });
      assert.notEqual(second.etag, first.etag);
      assert.equal((await read()).deployment, hello.deployment);
      assert.doesNotMatch(steward.stderr, /taking it again/);

      // Someone else rewrote it: the conditional write fails, the lease is taken again.
      await store.put(key, JSON.stringify({ node: 'node-s', expires_ms: 1 }));
      const third = await steward.ask('lease', { ...request, etag: second.etag, describe });
      assert.equal(third.etag, (await store.stat(key))!.etag);
      assert.equal((await read()).pid, 4242);
      assert.match(
        steward.stderr,
        new RegExp(
          `cell: the node lease ${escapeRegExp(key)} was changed or dropped by someone else; taking it again`,
        ),
      );

      // A release with a stale ETag leaves the lease someone else wrote.
      assert.deepEqual(await steward.ask('lease', { ...request, etag: second.etag, release: true }), {
        etag: null,
      });
      assert.ok(await store.stat(key));
      assert.deepEqual(await steward.ask('lease', { ...request, etag: third.etag, release: true }), {
        etag: null,
      });
      assert.equal(await store.stat(key), null);
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('answers a lease write the bucket fails with failed and the ETag as sent', async () => {
    // An S3 endpoint nothing listens on: every request fails.
    const steward = new StewardChild({
      ...stewardEnv('hello'),
      SVC_S3_ENDPOINT: 'http://127.0.0.1:9',
      SVC_S3_BUCKET: 'b',
      SVC_S3_REGION: 'us-east-1',
      SVC_S3_ACCESS_KEY: 'k',
      SVC_S3_SECRET_KEY: 's',
    });
    try {
      const answer = await steward.ask('lease', {
        etag: '"abc"',
        release: false,
        pid: 1,
        startedMs: 1,
        ttlMs: 3000,
        describe: {},
      });
      assert.deepEqual(answer, { etag: '"abc"', failed: true });
      assert.match(steward.stderr, /cell: cannot renew the node lease fleets\/hello\/nodes\/node-s\.json: /);
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('answers the next cron times, leaving invalid expressions out', async () => {
    const steward = new StewardChild(stewardEnv('hello'));
    try {
      const T = Date.UTC(2026, 10, 23, 14, 0, 0);
      assert.deepEqual(
        await steward.ask('cron-next', { crons: ['* * * * *', '0 * * * *', 'nope'], afterMs: T }),
        {
          next: { '* * * * *': T + 60_000, '0 * * * *': T + 3_600_000 },
        },
      );
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('fires a cron in the workerd of the look, once per scheduled time', async () => {
    // examples/cron's wrangler.toml as the cell.jsonc svc converts it to before `cell publish`.
    const project = copyProject(join(EXAMPLES, 'cron'));
    projects.push(project);
    writeFileSync(
      join(project, 'cell.jsonc'),
      JSON.stringify({
        name: 'cron',
        main: 'src/index.js',
        compatibility_date: '2025-06-01',
        triggers: { crons: ['* * * * *'] },
      }),
    );
    const published = await publish(project, 'ticker', bucket);
    assert.equal(published.code, 0, published.stderr);
    const steward = new StewardChild(stewardEnv('ticker'));
    let workerd: ChildProcess | null = null;
    try {
      const start = await steward.ask('look', lookRequest({ sequence: 8 }));
      assert.equal(start.result, 'start', JSON.stringify(start));
      assert.equal(start.cronSocket, join(stateDir, 'w8-cron.sock'));
      assert.deepEqual(start.command, [workerdBinary(), 'serve', '--experimental', 'config.capnp']);
      assert.deepEqual(start.crons, ['* * * * *']);

      // What the front does with a start: run the command in the folder, with PATH and HOME only.
      const [binary, ...args] = start.command as string[];
      let output = '';
      workerd = spawn(binary!, args, {
        cwd: start.dir as string,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      workerd.stdout!.on('data', (c) => {
        output += c;
      });
      workerd.stderr!.on('data', (c) => {
        output += c;
      });
      await waitFor(() => existsSync(start.cronSocket as string), 'the trigger socket');

      const scheduledMs = Date.UTC(2026, 10, 23, 14, 5, 0);
      const fire = {
        cron: '* * * * *',
        scheduledMs,
        deployment: start.deployment,
        cronSocket: start.cronSocket,
      };
      assert.deepEqual(await steward.ask('cron-fire', fire), { outcome: 'ok' });
      const claim = JSON.parse(
        text((await store.get(keys.runtimeCronClaim('ticker', cronId('* * * * *'), scheduledMs)))!.body),
      );
      assert.equal(claim.outcome, 'ok');
      assert.equal(claim.node, 'node-s');
      assert.equal(claim.deployment, start.deployment);
      await waitFor(
        () => output.includes('cron-example fired * * * * * 2026-11-23T14:05:00.000Z'),
        'the handler ran',
      );
      assert.match(
        steward.stderr,
        /cell: cron "\* \* \* \* \*" at 2026-11-23T14:05:00.000Z ran on node-s \([0-9a-f]+\): ok/,
      );
      // The same time again (another replica, or this one twice): claimed already.
      assert.deepEqual(await steward.ask('cron-fire', fire), { outcome: null });
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
      if (workerd && workerd.exitCode === null) {
        const gone = new Promise((r) => workerd!.once('exit', r));
        workerd.kill('SIGKILL');
        await gone;
      }
    }
  });

  it('answers a malformed or unknown request with an error and goes on', async () => {
    const steward = new StewardChild(stewardEnv('hello'));
    try {
      steward.child.stdin!.write('not json\n');
      assert.deepEqual(await steward.ask('dance'), { error: 'unknown op "dance"' });
      assert.deepEqual(await steward.ask('look', { sequence: -1 }), {
        error: 'sequence must be a whole number',
      });
      assert.deepEqual(await steward.ask('cron-next', { crons: '* * * * *', afterMs: 0 }), {
        error: 'crons must be a list of strings',
      });
      assert.equal(await steward.close(), 0);
      assert.deepEqual(JSON.parse(steward.lines[0]!), {
        id: null,
        error: 'a request must be one JSON object per line, got "not json"',
      });
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('answers the requests under way when stdin ends, then exits 0', async () => {
    const steward = new StewardChild(stewardEnv('hello'));
    try {
      const answers = [
        steward.ask('look', lookRequest({ sequence: 9 })),
        steward.ask('cron-next', { crons: ['* * * * *'], afterMs: 0 }),
      ];
      steward.child.stdin!.end();
      const [looked, next] = await Promise.all(answers);
      assert.equal(looked!.result, 'start');
      assert.deepEqual(next, { next: { '* * * * *': 60_000 } });
      assert.equal(await steward.close(), 0);
    } finally {
      steward.child.kill('SIGKILL');
    }
  });

  it('refuses to start without the state folder or with a bad identity', async () => {
    const noDir = new StewardChild({ ...bucket, CELL_APP: 'hello', CELL_NODE: 'node-s' });
    assert.equal(await noDir.close(), 1);
    assert.equal(noDir.stderr, 'cell: CELL_STATE_DIR_ACTIVE must name the folder cell serve made\n');
    const badApp = new StewardChild(stewardEnv('Not An App'));
    assert.equal(await badApp.close(), 1);
    assert.match(badApp.stderr, /^cell: CELL_APP must name the application to serve, got "Not An App"\n$/);
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\"]/g, '\\$&');
}
