// wrk (`apt-get install wrk`), run by the throughput benches: one thread, a fixed number of
// connections, any socket error or non-2xx/3xx answer fails the bench rather than counting.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Requests per second wrk measured against `url` for `seconds`. `script` is a wrk Lua script
 * (`-s`), for requests that vary (a path each time).
 */
export async function wrkRequestsPerSecond(
  url: string,
  options: { seconds: number; connections: number; headers?: string[]; script?: string },
): Promise<number> {
  const headers = (options.headers ?? []).flatMap((h) => ['-H', h]);
  const script = options.script ? ['-s', options.script] : [];
  const { stdout } = await run('wrk', [
    '-t1',
    `-c${options.connections}`,
    `-d${options.seconds}s`,
    ...headers,
    ...script,
    url,
  ]);
  const errors = /Non-2xx or 3xx responses: (\d+)|Socket errors: .*/.exec(stdout);
  if (errors) throw new Error(`wrk saw errors against ${url}:\n${stdout}`);
  const match = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  if (!match) throw new Error(`no Requests/sec in wrk output:\n${stdout}`);
  return Number(match[1]);
}

/** The first line of `wrk --version` (it exits 1 after printing it). */
export async function wrkVersion(): Promise<string> {
  const { stdout } = await run('wrk', ['--version']).catch((err) => ({ stdout: String(err.stdout) }));
  return stdout.split('\n')[0]!.trim();
}
