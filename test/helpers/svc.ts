// Starts real `bin/svc` processes for integration tests: `sail` nodes on loopback and
// one-shot CLI runs. No sleeps: readiness is the daemon's own "listening on" line.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** Deadlines (never sleeps): how long a CLI run or a daemon start may take. */
const RUN_DEADLINE_MS = 30_000;
const START_DEADLINE_MS = 30_000;
const WAIT_DEADLINE_MS = 15_000;
const POLL_EVERY_MS = 50;

export const SVC_BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'svc');

/** A fresh temporary directory. */
export function tempDir(prefix = 'svc-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A port nothing listens on right now, on `host` (a loopback address). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** The outcome of one CLI run. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command <args>` to completion, collecting its output; SIGKILLed past the deadline. */
export function runToEnd(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? RUN_DEADLINE_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** Runs `svc <args>` to completion. */
export function runSvc(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return runToEnd(process.execPath, [SVC_BIN, ...args], options);
}

/**
 * Runtime ports of a daemon's own: `--port-range-start` and `--port-range-end` flags for a range no
 * other daemon started by the tests uses. Nodes are machines of their own in a fleet; two on one
 * machine would both hand out the first port of the default range, and one runtime would lose the
 * race for it and be restarted. Test files run in parallel processes, so each process first claims
 * a block of ports (a lock file naming its pid), then hands out ranges of it in turn.
 */
export function ownRuntimePorts(): string[] {
  const block = claimedPortBlock ?? claimPortBlock();
  claimedPortBlock = block;
  const start =
    PORT_BLOCKS_START + block * PORT_BLOCK_SIZE + (rangesHandedOut++ % RANGES_PER_BLOCK) * PORT_RANGE_SIZE;
  return ['--port-range-start', String(start), '--port-range-end', String(start + PORT_RANGE_SIZE - 1)];
}

// Below Linux's ephemeral ports (32768 on), which clients' connections and freePort() take.
const PORT_BLOCKS_START = 25_000;
const PORT_RANGE_SIZE = 200;
const RANGES_PER_BLOCK = 9;
const PORT_BLOCK_SIZE = PORT_RANGE_SIZE * RANGES_PER_BLOCK;
const PORT_BLOCKS = 4;
const PORT_LOCKS = join(tmpdir(), 'svc-test-runtime-ports');
let claimedPortBlock: number | undefined;
/** The ports startSail gave the daemon of each state directory. */
const portsOfStateDir = new Map<string, string[]>();
let rangesHandedOut = 0;

/** The first block no live process holds; a lock left by a process that died is taken over. */
function claimPortBlock(): number {
  mkdirSync(PORT_LOCKS, { recursive: true });
  for (let block = 0; block < PORT_BLOCKS; block++) {
    const lock = join(PORT_LOCKS, `block-${block}`);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        writeFileSync(lock, String(process.pid), { flag: 'wx' });
        process.on('exit', () => unlinkSync(lock));
        return block;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        if (processAlive(Number(readFileSync(lock, 'utf8')))) break;
        unlinkSync(lock);
      }
    }
  }
  throw new Error(
    `every runtime port block in ${PORT_LOCKS} is held by a live process: run at most ${PORT_BLOCKS} test files at once`,
  );
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Every live (not zombie) process whose process group is `pgid`, from /proc. */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
    } catch {}
  }
  return members;
}

/** A running `svc sail`. */
export interface SailProcess {
  url: string;
  nodeId: string;
  listen: string;
  stateDir: string;
  child: ChildProcess;
  /** Everything the daemon wrote to stderr so far (its JSON log). */
  log(): string;
  /** SIGTERM, then wait for exit; answers the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `svc sail` with the given extra flags on a free loopback port, a fresh state directory
 * (unless given) and runtime ports of its own (unless the flags name them), and resolves once it
 * prints its listening line.
 */
export async function startSail(
  flags: string[] = [],
  options: {
    env?: NodeJS.ProcessEnv;
    stateDir?: string;
    port?: number;
    timeoutMs?: number;
    /** A listen address instead of a free loopback port; null leaves it to the node's settings. */
    listen?: string | null;
    /** A command the daemon runs under, e.g. `ip netns exec <ns>`; it must exec the daemon in place. */
    under?: string[];
    /** An executable svc entry to run through its shebang, e.g. the release bundle dist/svc.mjs; bin/svc by default. */
    bin?: string;
  } = {},
): Promise<SailProcess> {
  const listen =
    options.listen === undefined ? `127.0.0.1:${options.port ?? (await freePort())}` : options.listen;
  const stateDir = options.stateDir ?? tempDir('svc-node-');
  // A release bundle runs through its shebang, with the Node flags it names, as an operator runs it.
  const entry = options.bin ? [options.bin] : [process.execPath, SVC_BIN];
  const [command, ...prefix] = [...(options.under ?? []), ...entry];
  const listenFlags = listen === null ? [] : ['--listen', listen];
  // A daemon started again on its state directory keeps its ports, so it adopts its runtimes.
  let portFlags: string[] = [];
  if (!flags.includes('--port-range-start')) {
    portFlags = portsOfStateDir.get(stateDir) ?? ownRuntimePorts();
    portsOfStateDir.set(stateDir, portFlags);
  }
  const child = spawn(
    command as string,
    [...prefix, 'sail', ...listenFlags, '--state-dir', stateDir, ...portFlags, ...flags],
    {
      env: { ...process.env, SVC_LOG_LEVEL: process.env.SVC_LOG_LEVEL ?? 'warn', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolveExit) => child.on('exit', (code) => resolveExit(code)));
  const line = await new Promise<string>((resolveLine, reject) => {
    let stdout = '';
    const timer = setTimeout(() => {
      // Never left running: a daemon nobody holds keeps the test process alive.
      child.kill('SIGKILL');
      reject(new Error(`svc sail did not start in time:\n${stderr}`));
    }, options.timeoutMs ?? START_DEADLINE_MS);
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const match = /svc \S+ listening on \S+ as node "[^"]+"/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolveLine(match[0]);
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`svc sail exited with ${code} before listening:\n${stderr}`));
    });
  });
  const [, url, nodeId] = /listening on (\S+) as node "([^"]+)"/.exec(line)!;
  return {
    url: url!,
    nodeId: nodeId!,
    listen: listen ?? new URL(url!).host,
    stateDir,
    child,
    log: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return exited;
    },
  };
}

/**
 * Polls `check` until it answers a truthy value or the deadline passes. `what` names the wait in
 * the failure; a function is called only then, so output it quotes (a process's log) is the
 * output at the deadline, not at the start of the wait.
 */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  what: string | (() => string),
  timeoutMs = WAIT_DEADLINE_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, POLL_EVERY_MS));
  }
  throw new Error(
    `timed out waiting for ${typeof what === 'function' ? what() : what}${lastError ? `: ${String(lastError)}` : ''}`,
  );
}
