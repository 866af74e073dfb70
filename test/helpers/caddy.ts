// Starts the real Caddy build with the svc modules (.tools/bin/svc-caddy, from
// scripts/build-caddy.sh) for integration tests. No sleeps: readiness is a TCP connect to one of
// its listeners, polled with a deadline.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { tempDir, waitFor } from './svc.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
export const CADDY_BIN = process.env.SVC_CADDY_BIN ?? join(ROOT, '.tools', 'bin', 'svc-caddy');
/** The image's default configuration (docs/adapter.md "Running it"). */
export const DEFAULT_CADDYFILE = join(ROOT, 'adapter', 'Caddyfile');

const BUILD_DEADLINE_MS = 15 * 60_000;
const START_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 10_000;

/** Builds svc-caddy unless it is newer than every file under adapter/ (the script decides). */
export function ensureCaddyBuilt(): void {
  if (process.env.SVC_CADDY_BIN) return;
  execFileSync(join(ROOT, 'scripts', 'build-caddy.sh'), { stdio: 'inherit', timeout: BUILD_DEADLINE_MS });
}

/**
 * The default Caddyfile with test-only global options put first in its global block (ports,
 * admin, issuer), and extra site blocks appended. Everything else is the shipped configuration.
 */
export function defaultCaddyfileWith(globals: string[], sites = ''): string {
  const text = readFileSync(DEFAULT_CADDYFILE, 'utf8');
  const open = text.indexOf('{\n');
  if (open < 0) throw new Error(`${DEFAULT_CADDYFILE} has no global options block`);
  const inserted = globals.map((line) => `\t${line}\n`).join('');
  return `${text.slice(0, open + 2)}${inserted}${text.slice(open + 2)}\n${sites}`;
}

export interface CaddyProcess {
  child: ChildProcess;
  /** The directory Caddy keeps its local data in (HOME and XDG_* point here). */
  home: string;
  log(): string;
  stop(): Promise<void>;
}

/** Runs `svc-caddy run` with the given Caddyfile text; resolves once `readyPort` accepts connections. */
export async function startCaddy(
  caddyfile: string,
  readyPort: number,
  env: NodeJS.ProcessEnv = {},
): Promise<CaddyProcess> {
  const home = tempDir('svc-caddy-');
  const config = join(home, 'Caddyfile');
  writeFileSync(config, caddyfile);
  const child = spawn(CADDY_BIN, ['run', '--config', config, '--adapter', 'caddyfile'], {
    env: {
      PATH: process.env.PATH,
      HOME: home,
      XDG_DATA_HOME: join(home, 'data'),
      XDG_CONFIG_HOME: join(home, 'config'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const caddy: CaddyProcess = {
    child,
    home,
    log: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_DEADLINE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`svc-caddy exited ${child.exitCode}:\n${output}`);
        return accepts(readyPort);
      },
      `svc-caddy to listen on ${readyPort}`,
      START_DEADLINE_MS,
    );
  } catch (err) {
    await caddy.stop();
    throw new Error(`${(err as Error).message}\n--- svc-caddy output ---\n${output}`);
  }
  return caddy;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolveAccept) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveAccept(true);
    });
    socket.once('error', () => resolveAccept(false));
  });
}
