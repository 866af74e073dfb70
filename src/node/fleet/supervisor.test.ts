// The supervisor against the runtime stand-in (test/helpers/cell-standin.ts `serve`, a named
// stand-in honouring the runtime contract). No sleeps: every wait polls with a deadline.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { fetchText, isRunning } from '../../../test/helpers/cell.ts';
import { freePort, tempDir, waitFor } from '../../../test/helpers/svc.ts';
import type { EventInput } from '../../observability/events.ts';
import type { ProcessStatus } from '../../registry/records.ts';
import { healthUrl, runtimeEnv, Supervisor, type SupervisorOptions } from './supervisor.ts';

const STANDIN = resolve(import.meta.dirname, '..', '..', '..', 'test', 'helpers', 'cell-standin.ts');
const silent = pino({ level: 'silent' });
const supervisors: Supervisor[] = [];
after(() => Promise.all(supervisors.map((s) => s.stop())));

/** A range of free loopback ports (checked one by one; the range is only as wide as asked). */
async function portRange(size: number): Promise<[number, number]> {
  for (;;) {
    const start = await freePort();
    if (start + size > 65535) continue;
    let free = true;
    for (let port = start + 1; port < start + size && free; port++) free = await canBind(port);
    if (free) return [start, start + size - 1];
  }
}

function canBind(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const server = createServer();
    server.once('error', () => ok(false));
    server.listen(port, '127.0.0.1', () => server.close(() => ok(true)));
  });
}

async function supervisor(options: Partial<SupervisorOptions> = {}, ports = 4): Promise<Supervisor> {
  const s = new Supervisor({
    cellBin: STANDIN,
    cellEnv: {},
    bindHost: '127.0.0.1',
    portRange: await portRange(ports),
    portQuarantineMs: 600_000,
    outputBytes: 64 * 1024,
    nodeId: 'node-1',
    bucketEnv: { SVC_S3_ENDPOINT: 'file:///nowhere' },
    log: silent,
    healthPollMs: 50,
    healthCheckMs: 100,
    stopGraceMs: 10_000,
    restart: { baseDelayMs: 20, maxDelayMs: 200, stableMs: 30_000, crashloopAfter: 3 },
    ...options,
  });
  supervisors.push(s);
  return s;
}

const status = (s: Supervisor, application: string): ProcessStatus | undefined =>
  s.statuses().find((p) => p.application === application);

/** waitFor, answering the value it waited for. */
async function until<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  what: string,
): Promise<T> {
  return (await waitFor(check, what)) as T;
}

async function readyStatus(s: Supervisor, application: string): Promise<ProcessStatus> {
  const ready = await waitFor(() => {
    const p = status(s, application);
    return p?.ready && p.state === 'ready' ? p : undefined;
  }, `${application} ready`);
  return ready!;
}

async function standinEnv(
  port: number,
): Promise<{ env: Record<string, unknown>; healthProbes: number; hups: number }> {
  const answer = await fetchText(`http://127.0.0.1:${port}/env`);
  assert.ok(answer, 'the stand-in answers');
  return JSON.parse(answer.body);
}

test('starts a process per application with the runtime contract environment', async () => {
  process.env.SVC_NOT_FOR_THE_RUNTIME = 'secret';
  const s = await supervisor({ cellEnv: { GREETING: 'a=b,c' }, observability: true });
  await s.apply([{ application: 'alpha' }, { application: 'beta' }]);
  const alpha = await readyStatus(s, 'alpha');
  const beta = await readyStatus(s, 'beta');
  assert.notEqual(alpha.port, beta.port);
  assert.equal(alpha.runtimeVersion, '0.0.0-standin');
  assert.equal(alpha.restarts, 0);
  assert.ok(alpha.pid && isRunning(alpha.pid));
  const { env } = await standinEnv(alpha.port);
  assert.equal(env.CELL_APP, 'alpha');
  assert.equal(env.CELL_NODE, 'node-1');
  assert.equal(env.CELL_PORT, String(alpha.port));
  assert.equal(env.CELL_BIND_HOST, '127.0.0.1');
  assert.equal(env.CELL_OTEL, '1');
  assert.equal(env.SVC_S3_ENDPOINT, 'file:///nowhere');
  assert.deepEqual(env.leaked, []);
  const greeting = await fetchText(`http://127.0.0.1:${alpha.port}/`);
  assert.equal(greeting?.body, 'standin alpha');
  assert.match(s.outputTail('alpha')!, /serving alpha/);
  assert.equal(s.outputTail('nobody'), null);
  delete process.env.SVC_NOT_FOR_THE_RUNTIME;
});

test('a moved selector is told to the running process with SIGHUP, and only a move is', async () => {
  const s = await supervisor();
  await s.apply([{ application: 'alpha', deployment: 'd1' }, { application: 'beta' }]);
  const alpha = await readyStatus(s, 'alpha');
  const beta = await readyStatus(s, 'beta');
  // Started for d1: the process reads the selector itself, nothing to tell.
  await s.apply([{ application: 'alpha', deployment: 'd1' }, { application: 'beta' }]);
  assert.equal((await standinEnv(alpha.port)).hups, 0);
  // The record names a new deployment (a deploy through another node): told once.
  await s.apply([{ application: 'alpha', deployment: 'd2' }, { application: 'beta' }]);
  await s.apply([{ application: 'alpha', deployment: 'd2' }, { application: 'beta' }]);
  await waitFor(async () => (await standinEnv(alpha.port)).hups === 1, 'alpha told of d2');
  // A deploy through this node: told directly; the other application hears nothing.
  s.notify('alpha');
  await waitFor(async () => (await standinEnv(alpha.port)).hups === 2, 'alpha told again');
  s.notify('nobody');
  assert.equal((await standinEnv(beta.port)).hups, 0);
  // Still the same processes: a SIGHUP never ends one.
  assert.equal(status(s, 'alpha')!.pid, alpha.pid);
  assert.equal(status(s, 'alpha')!.restarts, 0);
});

test('a process still serving another deployment a pass after it was told is told again, less often each time', async () => {
  const deployments = tempDir('supervisor-deployments-');
  writeFileSync(join(deployments, 'alpha'), 'd1');
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_DEPLOYMENT_DIR: deployments }, retellFirstMs: 300 });
  await s.apply([{ application: 'alpha', deployment: 'd1' }]);
  const alpha = await readyStatus(s, 'alpha');
  const hups = async () => (await standinEnv(alpha.port)).hups;
  // Serving what is desired: passes tell it nothing.
  await waitFor(() => status(s, 'alpha')?.deployment === 'd1', 'its health read');
  await s.apply([{ application: 'alpha', deployment: 'd1' }]);
  // Moved to d2: told once; it keeps serving d1 (its look failed), so later passes tell it again,
  // 300 ms after it was told, then after waits that double.
  await s.apply([{ application: 'alpha', deployment: 'd2' }]);
  await waitFor(async () => (await hups()) === 1, 'alpha told of d2');
  const told: number[] = [];
  const started = Date.now();
  await waitFor(async () => {
    await s.apply([{ application: 'alpha', deployment: 'd2' }]);
    const now = await hups();
    if (now > 1 + told.length) told.push(Date.now() - started);
    return now >= 4;
  }, 'alpha told again three times');
  assert.ok(told[2]! - told[1]! > told[1]! - told[0]!, `the waits grow: told at ${told} ms`);
  // Once its health names d2, passes tell it nothing more.
  writeFileSync(join(deployments, 'alpha'), 'd2');
  await waitFor(() => status(s, 'alpha')?.deployment === 'd2', 'd2 served');
  const settled = await hups();
  for (let i = 0; i < 5; i++) await s.apply([{ application: 'alpha', deployment: 'd2' }]);
  assert.equal(await hups(), settled);
});

test('runtimeEnv: cell-env may not override the contract or the bucket; CELL_OTEL as cell-env states it', () => {
  const env = runtimeEnv({
    cellEnv: { CELL_APP: 'evil', CELL_OTEL: '0', SVC_S3_BUCKET: 'other', X: '1' },
    bucketEnv: { SVC_S3_BUCKET: 'b' },
    observability: true,
    application: 'app',
    nodeId: 'n',
    port: 24000,
    bindHost: '::',
    base: { PATH: '/bin', SVC_SECRET_KEY: 's', CELL_PORT: '1' },
  });
  assert.deepEqual(env, {
    PATH: '/bin',
    X: '1',
    CELL_OTEL: '0',
    CELL_UNSUPERVISED_EXIT_MS: '300000',
    CELL_APP: 'app',
    CELL_NODE: 'n',
    CELL_PORT: '24000',
    CELL_BIND_HOST: '::',
    SVC_S3_BUCKET: 'b',
  });
  const quiet = runtimeEnv({
    cellEnv: {},
    bucketEnv: {},
    application: 'a',
    nodeId: 'n',
    port: 1,
    bindHost: 'h',
    base: {},
  });
  assert.equal(quiet.CELL_OTEL, undefined);
  const bounded = runtimeEnv({
    ...{ bucketEnv: {}, application: 'a', nodeId: 'n', port: 1, bindHost: 'h', base: {} },
    cellEnv: { CELL_UNSUPERVISED_EXIT_MS: '5000' },
  });
  assert.equal(bounded.CELL_UNSUPERVISED_EXIT_MS, '5000');
  // Durable Objects live in the node's state directory, which outlives the machine's temp folder.
  const node = { bucketEnv: {}, application: 'a', nodeId: 'n', port: 1, bindHost: 'h', base: {} };
  assert.equal(
    runtimeEnv({ ...node, cellEnv: {}, objectsDir: '/var/lib/svc/objects' }).CELL_OBJECTS_DIR,
    '/var/lib/svc/objects',
  );
  assert.equal(
    runtimeEnv({ ...node, cellEnv: { CELL_OBJECTS_DIR: '/srv/o' }, objectsDir: '/x' }).CELL_OBJECTS_DIR,
    '/srv/o',
  );
});

test('healthUrl probes a wildcard bind on loopback and brackets IPv6', () => {
  assert.equal(healthUrl('0.0.0.0', 1), 'http://127.0.0.1:1/.well-known/cell/health');
  assert.equal(healthUrl('::', 2), 'http://[::1]:2/.well-known/cell/health');
  assert.equal(healthUrl('fd00::1', 3), 'http://[fd00::1]:3/.well-known/cell/health');
  assert.equal(healthUrl('10.0.0.7', 4), 'http://10.0.0.7:4/.well-known/cell/health');
});

test('ready only once the health endpoint answers 200', async () => {
  const gates = tempDir('supervisor-gates-');
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_READY_DIR: gates } });
  await s.apply([{ application: 'gated' }]);
  const port = await until(() => status(s, 'gated')?.port, 'a port');
  // The supervisor has probed twice and been told 503: still not ready.
  await waitFor(
    async () => (await standinEnv(port).catch(() => ({ healthProbes: 0 }))).healthProbes >= 2,
    'probes',
  );
  const before = status(s, 'gated')!;
  assert.equal(before.ready, false);
  assert.equal(before.state, 'starting');
  mkdirSync(gates, { recursive: true });
  writeFileSync(join(gates, 'gated'), '');
  await readyStatus(s, 'gated');
});

test('a ready process is probed rarely; one that says its health moved is probed at once', async () => {
  const gates = tempDir('supervisor-gates-');
  mkdirSync(gates, { recursive: true });
  writeFileSync(join(gates, 'told'), '');
  const events: EventInput[] = [];
  const s = await supervisor({
    cellEnv: { STANDIN_SERVE_READY_DIR: gates },
    healthCheckMs: 600_000,
    events: { emit: (e) => events.push(e) },
  });
  await s.apply([{ application: 'told' }]);
  const ready = await readyStatus(s, 'told');
  rmSync(join(gates, 'told'));
  // Its health answers 503 now; no probe comes for ten minutes, so only the notice tells.
  s.healthMoved('told');
  await waitFor(() => status(s, 'told')?.state === 'starting', 'the process seen not ready');
  assert.equal(status(s, 'told')!.ready, false);
  assert.ok(events.some((e) => e.kind === 'process.unready' && e.application === 'told'));
  writeFileSync(join(gates, 'told'), '');
  s.healthMoved('told');
  await readyStatus(s, 'told');
  // A notice for an application it does not run is no error.
  s.healthMoved('nobody');
  assert.equal(status(s, 'told')!.pid, ready.pid);
});

test('a ready process is asked over its host connection, not probed; an answer that differs, or none, is probed at once', async () => {
  const deployments = tempDir('supervisor-deployments-');
  mkdirSync(deployments, { recursive: true });
  writeFileSync(join(deployments, 'asked'), 'd1');
  let answer: { status: string; deployment: string | null } | null = { status: 'ready', deployment: 'd1' };
  let asks = 0;
  const s = await supervisor({
    cellEnv: { STANDIN_SERVE_DEPLOYMENT_DIR: deployments },
    healthCheckMs: 50,
    readyHttpProbeMs: 600_000,
    askHealth: async (application) => {
      if (application === 'asked') asks++;
      return answer;
    },
  });
  await s.apply([{ application: 'asked' }]);
  const ready = await readyStatus(s, 'asked');
  const probes = async () => (await standinEnv(ready.port!)).healthProbes;
  const atReady = await probes();
  await waitFor(() => asks >= 10, 'ten asks');
  assert.equal(await probes(), atReady, 'no HTTP probe while it answers ready with what it serves');
  // Another deployment than its last probe said: probed.
  answer = { status: 'ready', deployment: 'd2' };
  await waitFor(async () => (await probes()) > atReady, 'a probe after a different answer');
  // No answer (a front older than the question, or one that hangs): probed.
  answer = null;
  const before = await probes();
  await waitFor(async () => (await probes()) > before + 2, 'probes while it does not answer');
  assert.equal(status(s, 'asked')!.ready, true);
});

test('a ready process that answers its asks is still probed over HTTP every readyHttpProbeMs', async () => {
  let asks = 0;
  const s = await supervisor({
    healthCheckMs: 50,
    readyHttpProbeMs: 300,
    askHealth: async () => {
      asks++;
      return { status: 'ready', deployment: null };
    },
  });
  await s.apply([{ application: 'listener' }]);
  const ready = await readyStatus(s, 'listener');
  const probes = async () => (await standinEnv(ready.port!)).healthProbes;
  const atReady = await probes();
  await waitFor(async () => (await probes()) >= atReady + 2, 'two more probes');
  assert.ok(asks >= 2, `asked ${asks} times between them`);
});

test('a hung process (SIGSTOP) sends nothing: the safety-net probe finds it not ready, and ready once it runs again', async () => {
  const s = await supervisor({ healthCheckMs: 500 });
  await s.apply([{ application: 'hung' }]);
  const ready = await readyStatus(s, 'hung');
  process.kill(ready.pid!, 'SIGSTOP');
  try {
    // Within the ready probe's interval and its timeout (2 s).
    const hung = await until(() => {
      const p = status(s, 'hung');
      return p && !p.ready ? p : undefined;
    }, 'the hung process seen not ready');
    assert.equal(hung.state, 'starting');
    assert.match(hung.detail ?? '', /health does not answer/);
  } finally {
    process.kill(ready.pid!, 'SIGCONT');
  }
  assert.equal((await readyStatus(s, 'hung')).pid, ready.pid);
});

test('a crashed process is restarted on the same port, and its process group goes with it', async () => {
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_CHILD_APPS: 'crashy' } });
  await s.apply([{ application: 'crashy' }]);
  const first = await readyStatus(s, 'crashy');
  const child = Number(
    (await until(() => /child (\d+)/.exec(s.outputTail('crashy') ?? ''), 'the child pid'))[1],
  );
  assert.ok(isRunning(child));
  process.kill(first.pid!, 'SIGKILL');
  const second = await until(() => {
    const p = status(s, 'crashy');
    return p?.ready && p.pid !== first.pid ? p : undefined;
  }, 'a restarted, ready process');
  assert.equal(second.restarts, 1);
  assert.equal(second.port, first.port);
  await waitFor(() => !isRunning(child), 'the crashed process group gone');
  assert.match(s.outputTail('crashy')!, /\[svc\] cell serve was killed by SIGKILL/);
});

test('repeated fast exits back off into crashloop and keep the output', async () => {
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_CRASH_APPS: 'doomed' } });
  await s.apply([{ application: 'doomed' }, { application: 'fine' }]);
  const looping = await until(() => {
    const p = status(s, 'doomed');
    return p?.state === 'crashloop' ? p : undefined;
  }, 'crashloop');
  assert.equal(looping.ready, false);
  assert.ok(looping.restarts >= 2, `restarts ${looping.restarts}`);
  const tail = s.outputTail('doomed')!;
  assert.match(tail, /standin: crashing/);
  assert.match(tail, /\[svc\] cell serve exited with 3/);
  // It goes on restarting (at the capped delay), and the others are not affected.
  await waitFor(() => status(s, 'doomed')!.restarts > looping.restarts, 'another restart');
  assert.equal((await readyStatus(s, 'fine')).restarts, 0);
});

test("an exit's tail holds what the process wrote just before it, even if it arrives after the exit", async () => {
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_LATE_OUTPUT_APPS: 'late' } });
  await s.apply([{ application: 'late' }]);
  const tail = await until(() => {
    const t = s.outputTail('late') ?? '';
    return t.includes('[svc] cell serve exited with 3') ? t : undefined;
  }, 'the exit');
  const late = tail.indexOf('standin: late line');
  assert.ok(late >= 0 && late < tail.indexOf('[svc] cell serve exited with 3'), tail);
});

test('an application no longer desired is stopped; its port is kept from others but not from itself', async () => {
  const s = await supervisor();
  await s.apply([{ application: 'one' }]);
  const one = await readyStatus(s, 'one');
  await s.apply([]);
  await waitFor(() => status(s, 'one') === undefined, 'one gone');
  assert.equal(isRunning(one.pid!), false);
  assert.equal((await fetchText(`http://127.0.0.1:${one.port}/`)) ?? null, null);

  await s.apply([{ application: 'two' }]);
  const two = await readyStatus(s, 'two');
  assert.notEqual(two.port, one.port, 'the quarantined port is kept from another application');
  await s.apply([{ application: 'two' }, { application: 'one' }]);
  const back = await readyStatus(s, 'one');
  assert.equal(back.port, one.port, 'the same application takes its port back');
});

test('state stopping while a process drains', async () => {
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_IGNORE_TERM_APPS: 'slow' }, stopGraceMs: 60_000 });
  await s.apply([{ application: 'slow' }]);
  const slow = await readyStatus(s, 'slow');
  const stopping = s.apply([]);
  await stopping;
  const p = status(s, 'slow')!;
  assert.equal(p.state, 'stopping');
  assert.equal(p.ready, false);
  process.kill(slow.pid!, 'SIGKILL');
  await waitFor(() => status(s, 'slow') === undefined, 'slow gone');
});

test('stop() kills the group after the grace when SIGTERM is ignored', async () => {
  const s = await supervisor({
    cellEnv: { STANDIN_SERVE_IGNORE_TERM_APPS: '*', STANDIN_SERVE_CHILD_APPS: '*' },
    stopGraceMs: 200,
  });
  await s.apply([{ application: 'stubborn' }]);
  const p = await readyStatus(s, 'stubborn');
  const child = Number(
    (await until(() => /child (\d+)/.exec(s.outputTail('stubborn') ?? ''), 'the child pid'))[1],
  );
  await s.stop();
  assert.deepEqual(s.statuses(), []);
  await waitFor(() => !isRunning(p.pid!) && !isRunning(child), 'process and child gone');
  // Stopped for good: a late apply starts nothing.
  await s.apply([{ application: 'stubborn' }]);
  assert.deepEqual(s.statuses(), []);
});

test('the output tail is bounded by outputBytes', async () => {
  const s = await supervisor({ outputBytes: 1000, cellEnv: { STANDIN_SERVE_NOISE_BYTES: '200000' } });
  await s.apply([{ application: 'noisy' }]);
  const tail = await until(() => {
    const text = s.outputTail('noisy') ?? '';
    return text.includes('noise end') ? text : undefined;
  }, 'the end of the noise');
  assert.ok(Buffer.byteLength(tail) <= 1000, `${Buffer.byteLength(tail)} bytes`);
});

test('a port bound by something else is skipped', async () => {
  const range = await portRange(3);
  const squatter: Server = createServer();
  await new Promise<void>((ok) => squatter.listen(range[0], '127.0.0.1', ok));
  try {
    const s = await supervisor({ portRange: range });
    await s.apply([{ application: 'app' }]);
    assert.equal((await readyStatus(s, 'app')).port, range[0] + 1);
  } finally {
    squatter.close();
  }
});

test('no free port: the start fails with the reason in the output tail, and is retried', async () => {
  const s = await supervisor({}, 1);
  await s.apply([{ application: 'first' }]);
  await readyStatus(s, 'first');
  await s.apply([{ application: 'first' }, { application: 'second' }]);
  await waitFor(() => /no free port in \d+-\d+/.test(s.outputTail('second') ?? ''), 'the reason');
  await waitFor(() => status(s, 'second')!.state === 'crashloop', 'crashloop');
  // The first application's port frees up, but stays quarantined from the second.
  await s.apply([{ application: 'second' }]);
  await waitFor(() => status(s, 'first') === undefined, 'first gone');
  const restarts = status(s, 'second')!.restarts;
  await waitFor(() => status(s, 'second')!.restarts > restarts + 1, 'two more attempts');
  assert.equal(status(s, 'second')!.ready, false);
});

test('a cell-bin that is no runtime is reported in the output tail', async () => {
  const s = await supervisor({ cellBin: join(tempDir(), 'missing-cell') });
  await s.apply([{ application: 'app' }]);
  await waitFor(() => /is no runnable runtime/.test(s.outputTail('app') ?? ''), 'the reason');
  const p = status(s, 'app')!;
  assert.equal(p.ready, false);
  assert.equal(p.pid, undefined);
});

test('a restarted supervisor adopts what a killed daemon left serving and stops the rest', async () => {
  const processFile = join(tempDir('supervisor-state-'), 'processes.json');
  const range = await portRange(3);
  // A daemon of its own, killed with SIGKILL once its processes are ready: they outlive it.
  const script = `
    import pino from 'pino';
    import { Supervisor } from ${JSON.stringify(new URL('./supervisor.ts', import.meta.url).href)};
    const s = new Supervisor({
      cellBin: ${JSON.stringify(STANDIN)}, cellEnv: { STANDIN_SERVE_STAY_ORPHANED: '1' }, bindHost: '127.0.0.1',
      portRange: ${JSON.stringify(range)}, portQuarantineMs: 600000, outputBytes: 4096, nodeId: 'node-1',
      bucketEnv: {}, log: pino({ level: 'silent' }), healthPollMs: 50, processFile: ${JSON.stringify(processFile)},
    });
    await s.apply([{ application: 'gone' }, { application: 'left' }]);
    const timer = setInterval(() => {
      const p = s.statuses();
      if (p.length === 2 && p.every((x) => x.ready)) { clearInterval(timer); process.stdout.write(JSON.stringify(p) + '\\n'); }
    }, 20);
  `;
  const daemon = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: import.meta.dirname,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  daemon.stdout.on('data', (chunk) => {
    out += chunk;
  });
  const [gone, left] = await until(
    () => (out.includes('\n') ? (JSON.parse(out) as ProcessStatus[]) : undefined),
    'ready',
  );
  daemon.kill('SIGKILL');
  await waitFor(() => daemon.exitCode !== null || daemon.signalCode !== null, 'the daemon gone');
  assert.ok(isRunning(left!.pid!) && isRunning(gone!.pid!), 'the runtime processes outlived their daemon');

  const s = await supervisor({ processFile, portRange: range });
  await s.apply([{ application: 'left' }]);
  // The one still wanted is taken over as it runs; the other is stopped before anything starts.
  assert.equal(isRunning(gone!.pid!), false, 'the unwanted one stopped');
  const adopted = await readyStatus(s, 'left');
  assert.equal(adopted.pid, left!.pid);
  assert.equal(adopted.port, left!.port);
  assert.equal(adopted.restarts, 0);
  assert.match(s.outputTail('left')!, /adopted cell serve \d+ on port \d+/);
  assert.deepEqual(JSON.parse(readFileSync(processFile, 'utf8')).processes, [
    { application: 'left', pid: left!.pid, port: left!.port },
  ]);
  // Told to look at its selector when adopted (a move may have come while no daemon was there),
  // a SIGHUP still reaches it, and its exit is noticed and restarted like any other.
  await waitFor(async () => (await standinEnv(adopted.port)).hups === 1, 'the adopted process told to look');
  s.notify('left');
  await waitFor(async () => (await standinEnv(adopted.port)).hups === 2, 'the adopted process told');
  process.kill(left!.pid!, 'SIGKILL');
  const again = await until(() => {
    const p = status(s, 'left');
    return p?.ready && p.pid !== left!.pid ? p : undefined;
  }, 'a new process for left');
  assert.equal(again.restarts, 1);
  assert.equal(again.port, left!.port);
});

test('a crash-looping application stops cleanly and gives its port back', async () => {
  const s = await supervisor({ cellEnv: { STANDIN_SERVE_CRASH_APPS: 'doomed' } }, 1);
  await s.apply([{ application: 'doomed' }]);
  await waitFor(() => status(s, 'doomed')?.state === 'crashloop', 'crashloop');
  await s.apply([]);
  await waitFor(() => status(s, 'doomed') === undefined, 'doomed gone');
  await s.apply([{ application: 'doomed' }]);
  await waitFor(() => (status(s, 'doomed')?.restarts ?? 0) >= 1, 'restarted');
  assert.doesNotMatch(s.outputTail('doomed')!, /no free port/);
  assert.match(s.outputTail('doomed')!, /standin: crashing/);
});
