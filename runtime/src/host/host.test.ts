// The runtime host (docs/runtime.md "The runtime host"): a real `cell host --stdio` child driven
// over its stdin and stdout as a front drives it, against the real local-directory bucket with
// deployments published by the real `cell publish`; the node daemon serves the same code on its
// socket. Also: every request example of runtime/protocol/host-protocol.json is taken, and every
// answer has the shape of an example of its op.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import { after, before, describe, it, test } from 'node:test';
import { keys } from '../../../src/registry/keys.ts';
import { openDirStore } from '../../../src/store/dir.ts';
import type { Store } from '../../../src/store/store.ts';
import {
  CELL_BIN,
  copyProject,
  dirBucketEnv,
  EXAMPLES,
  publish,
  runCell,
} from '../../../test/helpers/cell.ts';
import { waitFor } from '../../../test/helpers/svc.ts';
import { cronId } from '../cron.ts';
import { CELL_VERSION_LINE } from '../version.ts';
import { workerdBinary } from '../workerd.ts';
import { HealthAsks } from './health-asks.ts';
import { linesOf, serveFront } from './host.ts';
import { HEALTH_ASK_LINE, HOST_PROTOCOL_VERSION } from './protocol.ts';

type Line = Record<string, unknown> & {
  id?: number | null;
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
};

const VECTORS = JSON.parse(
  readFileSync(resolve(import.meta.dirname, '..', '..', 'protocol', 'host-protocol.json'), 'utf8'),
) as {
  protocol: number;
  messages: { name: string; from: string; answers?: string; line: Record<string, unknown> }[];
};

/** A running `cell host --stdio`: one request per line in, one answer (or push) per line out. */
class HostChild {
  readonly child: ChildProcess;
  private nextId = 1;
  private readonly waiting = new Map<number, (answer: Line) => void>();
  /** Every stdout line, to check nothing but protocol lines is written there. */
  readonly lines: string[] = [];
  /** The log lines pushed to the front, one per line. */
  logs = '';
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(env: Record<string, string>) {
    this.child = spawn(process.execPath, [CELL_BIN, 'host', '--stdio'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stderr!.on('data', (chunk) => {
      this.stderr += chunk;
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.lines.push(line);
      const answer = JSON.parse(line) as Line;
      if (answer.push === 'log') {
        this.logs += `${answer.line}\n`;
        return;
      }
      this.waiting.get(answer.id as number)?.(answer);
      this.waiting.delete(answer.id as number);
    });
    this.exited = new Promise((resolveExit) => this.child.on('exit', (code) => resolveExit(code)));
  }

  /** Sends one line as it is; resolves with the whole answer to `id`. */
  send(line: Record<string, unknown>): Promise<Line> {
    return new Promise((resolveAnswer) => {
      this.waiting.set(line.id as number, resolveAnswer);
      this.child.stdin!.write(`${JSON.stringify(line)}\n`);
    });
  }

  /** Says hello as a front does; resolves with the answer. */
  hello(fields: Record<string, unknown>): Promise<Line> {
    return this.send({ id: 0, op: 'hello', protocol: HOST_PROTOCOL_VERSION, ...fields });
  }

  /** Sends one request; resolves with its result, or `{ error: message }`. */
  async ask(op: string, fields: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const answer = await this.send({ id: this.nextId++, op, ...fields });
    return answer.error ? { error: answer.error.message } : answer.result!;
  }

  /** Ends stdin, as the front does at its stop; answers the exit code. */
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

describe('cell host', () => {
  let bucketDir: string;
  let stateDir: string;
  let store: Store;
  let bucket: Record<string, string>;
  /** hello as published: its deployment id. */
  let hello: { script: string; deployment: string };
  /** Copies of the examples that were published. */
  const projects: string[] = [];

  before(async () => {
    bucketDir = mkdtempSync(join(tmpdir(), 'cell-host-bucket-'));
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

  /** A host for one front of `application`, greeted; `secretsFile` as `cell serve` would name it. */
  const startHost = async (application: string, secretsFile: string | null = null, env = bucket) => {
    const host = new HostChild(env);
    const greeted = await host.hello({
      application,
      node: 'node-s',
      stateDir,
      context: { workerd: workerdBinary(), secretsFile, env: {} },
    });
    assert.deepEqual(greeted, {
      id: 0,
      result: { protocol: HOST_PROTOCOL_VERSION, host: CELL_VERSION_LINE },
    });
    return host;
  };

  it('is listed in cell --help', async () => {
    const result = await runCell(['--help']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /host/);
    assert.doesNotMatch(result.stdout, /steward/);
  });

  it('looks: none before a publish, then a materialized start, then same', async () => {
    const host = await startHost('hello');
    try {
      assert.deepEqual(await host.ask('look', lookRequest()), { result: 'none' });

      const project = copyProject(join(EXAMPLES, 'hello'));
      projects.push(project);
      const published = await publish(project, 'hello', bucket);
      assert.equal(published.code, 0, published.stderr);
      hello = { script: published.published!.script, deployment: published.published!.deployment };
      const selector = (await store.stat(keys.runtimeSelector('hello')))!;

      const start = await host.ask('look', lookRequest({ sequence: 3 }));
      const label = `${hello.script}/${hello.deployment}`;
      assert.deepEqual(start, {
        result: 'start',
        selection: `${selector.etag}|`,
        seenEtag: selector.etag,
        script: hello.script,
        deployment: hello.deployment,
        label,
        secretsDigest: '',
        dir: join(stateDir, 'd3'),
        socket: join(stateDir, 'w3.sock'),
        cronSocket: null,
        command: [workerdBinary(), 'serve', 'config.capnp'],
        crons: [],
      });
      assert.ok(existsSync(join(stateDir, 'd3', 'config.capnp')));
      assert.match(readFileSync(join(stateDir, 'd3', 'config.capnp'), 'utf8'), /w3\.sock/);
      assert.ok(existsSync(join(stateDir, 'blobs')), 'the assets are fetched into the blob cache');
      assert.match(host.logs, new RegExp(`cell: starting ${label}\\n`));

      const active = { script: hello.script, deployment: hello.deployment, secretsDigest: '' };
      // Serving it, selector seen: nothing to do, and nothing read but a HEAD.
      assert.deepEqual(await host.ask('look', lookRequest({ active, seenEtag: selector.etag })), {
        result: 'same',
      });
      // Serving it, selector not yet seen (e.g. after a restart of the front's bookkeeping).
      assert.deepEqual(await host.ask('look', lookRequest({ active, seenEtag: null })), {
        result: 'same',
        seenEtag: selector.etag,
      });
      // A selection that failed waits for its retry time, then is tried again.
      const gated = lookRequest({ failedSelection: `${selector.etag}|`, retryAtMs: Date.now() + 60_000 });
      assert.deepEqual(await host.ask('look', gated), { result: 'none' });
      const retried = await host.ask(
        'look',
        lookRequest({ failedSelection: `${selector.etag}|`, retryAtMs: Date.now() - 1, sequence: 4 }),
      );
      assert.equal(retried.result, 'start');
      assert.equal(retried.dir, join(stateDir, 'd4'));

      assert.equal(await host.close(), 0);
      for (const line of host.lines) {
        const parsed = JSON.parse(line);
        assert.ok(typeof parsed.id === 'number' || parsed.push === 'log', line);
      }
    } finally {
      host.child.kill('SIGKILL');
    }
  });

  it('starts the serving deployment again when its secrets change, and refuses a var/secret clash', async () => {
    const secretsFile = join(stateDir, 'secrets.json');
    const host = await startHost('hello', secretsFile);
    try {
      const selector = (await store.stat(keys.runtimeSelector('hello')))!;
      const active = { ...hello, secretsDigest: '' };
      assert.deepEqual(await host.ask('look', lookRequest({ active, seenEtag: selector.etag })), {
        result: 'same',
      });

      writeFileSync(secretsFile, JSON.stringify({ TOKEN: 's3cret' }), { mode: 0o600 });
      const again = await host.ask('look', lookRequest({ active, seenEtag: selector.etag, sequence: 5 }));
      assert.equal(again.result, 'start');
      assert.equal(again.deployment, hello.deployment);
      assert.match(again.secretsDigest as string, /^[0-9a-f]{64}$/);
      assert.equal(again.selection, `${selector.etag}|${again.secretsDigest}`);
      assert.equal(readFileSync(join(stateDir, 'd5', 'secrets', '0.txt'), 'utf8'), 's3cret');
      assert.match(host.logs, /cell: starting hello\/[0-9a-f]+ \(its secrets changed\)\n/);
      assert.doesNotMatch(host.logs, /s3cret/);

      writeFileSync(secretsFile, JSON.stringify({ GREETING: 'clash' }), { mode: 0o600 });
      const clash = await host.ask('look', lookRequest({ active, seenEtag: selector.etag, sequence: 6 }));
      assert.equal(clash.result, 'failed');
      assert.match(clash.selection as string, new RegExp(`^${escapeRegExp(selector.etag)}\\|[0-9a-f]{64}$`));
      assert.equal(
        clash.message,
        `GREETING is both a var of ${hello.script}/${hello.deployment} and a secret; remove the secret (svc app secret remove) or the var, then deploy again`,
      );
      assert.ok(!existsSync(join(stateDir, 'd6')), 'the half-made folder is removed');

      writeFileSync(secretsFile, 'not json');
      const unreadable = await host.ask('look', lookRequest({ active, seenEtag: selector.etag }));
      assert.deepEqual(unreadable, {
        result: 'failed',
        selection: null,
        message: `${secretsFile} is not JSON; the node rewrites it on its next pass`,
      });
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
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
    const host = await startHost('hello');
    try {
      const failed = await host.ask('look', lookRequest({ sequence: 7 }));
      assert.deepEqual(failed, {
        result: 'failed',
        selection: `${etag}|`,
        message: `${key} requires containers, which cell serve cannot run`,
      });
      assert.ok(!existsSync(join(stateDir, 'd7')));
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
      await store.put(selectorKey, JSON.stringify({ ...pointer, deployment: previous }));
    }
  });

  it('writes, re-takes and releases the node lease', async () => {
    const host = await startHost('hello');
    const key = keys.runtimeNodeLease('hello', 'node-s');
    const read = async () => JSON.parse(text((await store.get(key))!.body));
    try {
      const request = { release: false, pid: 4242, startedMs: 1000, ttlMs: 900_000 };
      const before = Date.now();
      const first = await host.ask('lease', { ...request, etag: null, describe: {} });
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
      const second = await host.ask('lease', { ...request, etag: first.etag, describe });
      assert.notEqual(second.etag, first.etag);
      assert.equal((await read()).deployment, hello.deployment);
      assert.doesNotMatch(host.logs, /taking it again/);

      // Someone else rewrote it: the conditional write fails, the lease is taken again.
      await store.put(key, JSON.stringify({ node: 'node-s', expires_ms: 1 }));
      const third = await host.ask('lease', { ...request, etag: second.etag, describe });
      assert.equal(third.etag, (await store.stat(key))!.etag);
      assert.equal((await read()).pid, 4242);
      assert.match(
        host.logs,
        new RegExp(
          `cell: the node lease ${escapeRegExp(key)} was changed or dropped by someone else; taking it again`,
        ),
      );

      // A release with a stale ETag leaves the lease someone else wrote.
      assert.deepEqual(await host.ask('lease', { ...request, etag: second.etag, release: true }), {
        etag: null,
        failed: false,
      });
      assert.ok(await store.stat(key));
      assert.deepEqual(await host.ask('lease', { ...request, etag: third.etag, release: true }), {
        etag: null,
        failed: false,
      });
      assert.equal(await store.stat(key), null);
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
    }
  });

  it('answers a lease write the bucket fails with failed and the ETag as sent', async () => {
    // An S3 endpoint nothing listens on: every request fails.
    const host = await startHost('hello', null, {
      SVC_S3_ENDPOINT: 'http://127.0.0.1:9',
      SVC_S3_BUCKET: 'b',
      SVC_S3_REGION: 'us-east-1',
      SVC_S3_ACCESS_KEY: 'k',
      SVC_S3_SECRET_KEY: 's',
    });
    try {
      const answer = await host.ask('lease', {
        etag: '"abc"',
        release: false,
        pid: 1,
        startedMs: 1,
        ttlMs: 3000,
        describe: {},
      });
      assert.deepEqual(answer, { etag: '"abc"', failed: true });
      assert.match(host.logs, /cell: cannot renew the node lease fleets\/hello\/nodes\/node-s\.json: /);
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
    }
  });

  it('answers the next cron times, leaving invalid expressions out', async () => {
    const host = await startHost('hello');
    try {
      const T = Date.UTC(2026, 10, 23, 14, 0, 0);
      assert.deepEqual(
        await host.ask('cron-next', { crons: ['* * * * *', '0 * * * *', 'nope'], afterMs: T }),
        {
          next: { '* * * * *': T + 60_000, '0 * * * *': T + 3_600_000 },
        },
      );
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
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
    const host = await startHost('ticker');
    let workerd: ChildProcess | null = null;
    try {
      const start = await host.ask('look', lookRequest({ sequence: 8 }));
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
      assert.deepEqual(await host.ask('cron-fire', fire), { outcome: 'ok' });
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
        host.logs,
        /cell: cron "\* \* \* \* \*" at 2026-11-23T14:05:00.000Z ran on node-s \([0-9a-f]+\): ok/,
      );
      // The same time again (another replica, or this one twice): claimed already.
      assert.deepEqual(await host.ask('cron-fire', fire), { outcome: null });
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
      if (workerd && workerd.exitCode === null) {
        const gone = new Promise((r) => workerd!.once('exit', r));
        workerd.kill('SIGKILL');
        await gone;
      }
    }
  });

  it('answers a malformed or unknown request with an error and goes on', async () => {
    const host = await startHost('hello');
    try {
      host.child.stdin!.write('not json\n');
      assert.deepEqual(await host.ask('dance'), { error: 'unknown op "dance"' });
      assert.deepEqual(await host.ask('look', { sequence: -1 }), {
        error: 'sequence must be a whole number',
      });
      assert.deepEqual(await host.ask('cron-next', { crons: '* * * * *', afterMs: 0 }), {
        error: 'crons must be a list of strings',
      });
      assert.deepEqual(await host.ask('objects', { renewal: 'last', waitMs: 1000 }), {
        error: 'renewal must be a number',
      });
      assert.deepEqual(await host.ask('objects', { renewal: 0 }), { error: 'waitMs must be a number' });
      assert.equal(await host.close(), 0);
      assert.deepEqual(JSON.parse(host.lines[1]!), {
        id: null,
        error: { code: 'bad-request', message: 'a request must be one JSON object per line, got "not json"' },
      });
    } finally {
      host.child.kill('SIGKILL');
    }
  });

  it('answers the requests under way when stdin ends, then exits 0', async () => {
    const host = await startHost('hello');
    try {
      const answers = [
        host.ask('look', lookRequest({ sequence: 9 })),
        host.ask('cron-next', { crons: ['* * * * *'], afterMs: 0 }),
      ];
      host.child.stdin!.end();
      const [looked, next] = await Promise.all(answers);
      assert.equal(looked!.result, 'start');
      assert.deepEqual(next, { next: { '* * * * *': 60_000 } });
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
    }
  });

  it('refuses a front of another protocol version, and a first request that is no hello', async () => {
    const other = new HostChild(bucket);
    const refused = await other.hello({
      protocol: HOST_PROTOCOL_VERSION + 1,
      application: 'hello',
      node: 'node-s',
      stateDir,
      context: { workerd: workerdBinary(), secretsFile: null, env: {} },
    });
    assert.deepEqual(refused, {
      id: 0,
      error: {
        code: 'protocol-mismatch',
        message: `the runtime host speaks protocol ${HOST_PROTOCOL_VERSION} and this front speaks ${HOST_PROTOCOL_VERSION + 1}: run a cell release made for this svc (cell --version) or upgrade svc`,
      },
    });
    assert.equal(await other.exited, 0, 'the host ends the connection it refused');
    assert.match(other.stderr, /cell host: refused the runtime of hello: the runtime host speaks protocol/);

    const rude = new HostChild(bucket);
    assert.deepEqual(await rude.send({ id: 3, op: 'look' }), {
      id: 3,
      error: { code: 'bad-request', message: 'the first request must be hello, got "look"' },
    });
    assert.equal(await rude.exited, 0);

    const vague = new HostChild(bucket);
    assert.deepEqual(
      await vague.hello({ application: 'hello', node: 'node-s', context: { workerd: '/w' } }),
      {
        id: 0,
        error: { code: 'bad-request', message: 'hello needs stateDir' },
      },
    );
    assert.equal(await vague.exited, 0);
  });

  it('takes every request of the protocol file, and answers each in the shape of an example', async () => {
    assert.equal(VECTORS.protocol, HOST_PROTOCOL_VERSION);
    const shapes = new Map<string, Set<string>>();
    for (const m of VECTORS.messages) {
      if (m.from !== 'host' || !m.answers || !m.line.result) continue;
      const shape = Object.keys(m.line.result as object)
        .sort()
        .join(',');
      shapes.set(m.answers, (shapes.get(m.answers) ?? new Set()).add(shape));
    }
    const host = new HostChild(bucket);
    try {
      for (const m of VECTORS.messages.filter((v) => v.from === 'front')) {
        const line = { ...m.line };
        if (line.op === 'hello')
          Object.assign(line, {
            stateDir,
            context: { workerd: workerdBinary(), secretsFile: null, env: {} },
          });
        if (line.op === 'cron-fire') line.cronSocket = null;
        const answer = await host.send(line);
        assert.ok(answer.result, `${m.name}: ${JSON.stringify(answer)}`);
        const shape = Object.keys(answer.result).sort().join(',');
        assert.ok(
          shapes.get(line.op as string)?.has(shape),
          `${m.name}: the host answered ${JSON.stringify(answer.result)}, a shape no example of ${String(line.op)} has`,
        );
      }
      assert.equal(await host.close(), 0);
    } finally {
      host.child.kill('SIGKILL');
    }
  });
});

/**
 * A front on a pipe to `serveFront` with `options`: `send` writes a line, `written` holds the host's
 * lines as they come, `hello` greets as front `shop`; ending `input` ends the connection.
 */
function pipedFront(options: Omit<Parameters<typeof serveFront>[1], 'name' | 'log'>) {
  const input = new PassThrough();
  const written: Line[] = [];
  const served = serveFront(
    {
      input,
      write: (text) => {
        for (const line of text.split('\n').filter(Boolean)) written.push(JSON.parse(line) as Line);
      },
      end: () => input.end(),
    },
    { name: 'svc test', log: () => {}, ...options },
  );
  const send = (line: Record<string, unknown>) => input.write(`${JSON.stringify(line)}\n`);
  const hello = () =>
    send({
      id: 0,
      op: 'hello',
      protocol: HOST_PROTOCOL_VERSION,
      application: 'shop',
      node: 'node-1',
      stateDir: mkdtempSync(join(tmpdir(), 'host-piped-front-')),
      context: { workerd: '/bin/true', secretsFile: null, env: {} },
    });
  return { input, written, served, send, hello };
}

test("a front's health notice and the end of its connection are told to the host's owner, with its application", async () => {
  const store = await openDirStore(mkdtempSync(join(tmpdir(), 'host-health-')));
  const told: unknown[] = [];
  const { input, written, served, send, hello } = pipedFront({
    store,
    healthMoved: (application, health) => told.push(['health', application, health]),
    disconnected: (application) => told.push(['gone', application]),
  });
  hello();
  send({ id: 1, op: 'health', status: 'starting', deployment: null });
  send({ id: 2, op: 'health', status: 'ready', deployment: 'abc' });
  send({ id: 3, op: 'health', status: 7 });
  await waitFor(() => written.length >= 4, 'every answer');
  assert.deepEqual(
    written.map((l) => [l.id, l.result ?? l.error?.code]),
    [
      [0, { protocol: HOST_PROTOCOL_VERSION, host: 'svc test' }],
      [1, {}],
      [2, {}],
      [3, 'bad-request'],
    ],
  );
  assert.deepEqual(told, [
    ['health', 'shop', { status: 'starting', deployment: null }],
    ['health', 'shop', { status: 'ready', deployment: 'abc' }],
  ]);
  input.end();
  await served;
  assert.deepEqual(told.at(-1), ['gone', 'shop']);
});

test("a front asked for its health (the health push) answers whoever asked, not as a notice; its connection's end answers null", async () => {
  const push = VECTORS.messages.find((m) => m.from === 'host' && m.line.push === 'health');
  assert.ok(push, 'the protocol file has the health push');
  assert.equal(HEALTH_ASK_LINE, `${JSON.stringify(push.line)}\n`);
  const store = await openDirStore(mkdtempSync(join(tmpdir(), 'host-asks-')));
  const moved: unknown[] = [];
  const asks = new HealthAsks();
  const { input, written, served, send, hello } = pipedFront({
    store,
    healthMoved: (application, health) => moved.push([application, health]),
    healthAsks: asks,
  });
  assert.equal(await asks.ask('shop', 1_000), null, 'no front of it connected yet');
  hello();
  await waitFor(() => written.length >= 1, 'the hello answered');
  // Two questions at once are one push; both get the answer.
  const asked = [asks.ask('shop', 30_000), asks.ask('shop', 30_000)];
  await waitFor(() => written.some((l) => l.push === 'health'), 'the push');
  assert.equal(written.filter((l) => l.push === 'health').length, 1);
  send({ id: 1, op: 'health', status: 'ready', deployment: 'abc', asked: true });
  assert.deepEqual(await Promise.all(asked), [
    { status: 'ready', deployment: 'abc' },
    { status: 'ready', deployment: 'abc' },
  ]);
  // A change is still a notice.
  send({ id: 2, op: 'health', status: 'starting', deployment: null });
  await waitFor(() => moved.length === 1, 'the notice');
  assert.deepEqual(moved, [['shop', { status: 'starting', deployment: null }]]);
  // A front that does not answer (one older than the push): null after the wait.
  assert.equal(await asks.ask('shop', 50), null);
  // One that goes away meanwhile: null at once.
  const pending = asks.ask('shop', 30_000);
  input.end();
  await served;
  assert.equal(await pending, null);
  assert.equal(await asks.ask('shop', 1_000), null);
  assert.deepEqual(
    written.filter((l) => l.id !== undefined).map((l) => [l.id, l.result]),
    [
      [0, { protocol: HOST_PROTOCOL_VERSION, host: 'svc test' }],
      [1, {}],
      [2, {}],
    ],
  );
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\"]/g, '\\$&');
}

test('linesOf: lines across chunks and split characters, \\r\\n, the last line without its end, the input failing', async () => {
  const input = new PassThrough();
  const read = (async () => {
    const out: string[] = [];
    for await (const line of linesOf(input)) out.push(line);
    return out;
  })();
  const euro = Buffer.from('€');
  input.write('{"a":1}\n{"b"');
  input.write(':2}\r\n\n');
  input.write(Buffer.concat([Buffer.from('x'), euro.subarray(0, 1)]));
  input.write(Buffer.concat([euro.subarray(1), Buffer.from('\nlast')]));
  input.end();
  assert.deepEqual(await read, ['{"a":1}', '{"b":2}', '', 'x€', 'last']);

  const failing = new PassThrough();
  const seen: string[] = [];
  const failed = (async () => {
    for await (const line of linesOf(failing)) seen.push(line);
  })();
  failing.write('one\n');
  failing.destroy(new Error('reset'));
  await assert.rejects(failed, /reset/);
  assert.deepEqual(seen, ['one']);
});
