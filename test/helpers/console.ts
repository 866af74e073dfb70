// For the console's browser tests and bench: `svc console` as a real process (its URL read from
// its stdout), and headless Chromium (Debian's `chromium`, installed by scripts/install-chromium.sh,
// which `make tools` runs) driven through playwright-core.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { type Browser, chromium } from 'playwright-core';
import { SVC_BIN } from './svc.ts';

export interface ConsoleProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `svc console <args>` and resolves with the URL it prints. */
export async function startConsoleProcess(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  executable: string = SVC_BIN,
): Promise<ConsoleProcess> {
  const child = spawn(process.execPath, [executable, 'console', ...args], {
    env: { ...process.env, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`svc console printed no URL:\n${stderr}`)), 30_000);
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const match = /^(http:\/\/\S+)$/m.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`svc console exited before printing its URL:\n${stderr}`));
    });
  });
  return {
    url,
    child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Debian's chromium, headless; a machine without it fails naming the script that installs it. */
export async function launchChromium(): Promise<Browser> {
  let executablePath: string;
  try {
    executablePath = execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('chromium is not installed: run scripts/install-chromium.sh (make tools runs it)');
  }
  // As root (CI), Chromium's sandbox cannot start; the pages it loads are the console's own.
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
}
