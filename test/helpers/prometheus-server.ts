// A real Prometheus server and promtool for the metrics tests, as scripts/install-prometheus.sh
// (run by `make tools`) leaves them in .tools/bin (or $SVC_PROMETHEUS_BIN, $SVC_PROMTOOL_BIN). The
// server listens on a free loopback port with a temporary data directory, scrapes what the test's
// configuration names, and is asked through its HTTP API.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort, tempDir, waitFor } from './svc.ts';

const TOOLS = resolve(import.meta.dirname, '..', '..', '.tools', 'bin');
export const PROMETHEUS_BIN = process.env.SVC_PROMETHEUS_BIN ?? join(TOOLS, 'prometheus');
export const PROMTOOL_BIN = process.env.SVC_PROMTOOL_BIN ?? join(TOOLS, 'promtool');

/** Fails naming the script that installs the tool when it is missing. */
export function ensurePrometheusInstalled(): void {
  for (const bin of [PROMETHEUS_BIN, PROMTOOL_BIN])
    assert.ok(
      existsSync(bin),
      `${bin} is missing: scripts/install-prometheus.sh (run by \`make tools\`) installs it`,
    );
}

/** promtool with these arguments and standard input; answers its exit code and output. */
export function promtool(args: string[], input = ''): { status: number | null; output: string } {
  ensurePrometheusInstalled();
  const run = spawnSync(PROMTOOL_BIN, args, { input, encoding: 'utf8' });
  if (run.error) throw run.error;
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** One series of an instant query's answer. */
export interface QueryResult {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PrometheusServer {
  url: string;
  /** The instant vector of a PromQL query; throws on an answer that is not a success. */
  query(promql: string): Promise<QueryResult[]>;
  /** A GET of the API (`/api/v1/...`), its `data`. */
  api(path: string): Promise<unknown>;
  /** Everything the server wrote so far (its log). */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts Prometheus with `config` (YAML text) written beside `files` (name to text, e.g. a rules
 * file the config names), and answers once its API says it is ready.
 */
export async function startPrometheus(
  config: string,
  files: Record<string, string> = {},
): Promise<PrometheusServer> {
  ensurePrometheusInstalled();
  const dir = tempDir('svc-prometheus-');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  writeFileSync(join(dir, 'prometheus.yml'), config);
  const listen = `127.0.0.1:${await freePort()}`;
  const child: ChildProcess = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=${listen}`,
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  child.stderr!.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const url = `http://${listen}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };
  const api = async (path: string): Promise<unknown> => {
    const response = await fetch(`${url}${path}`);
    const body = (await response.json()) as { status: string; data?: unknown; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? response.status}`);
    return body.data;
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${output}`);
        return (await fetch(`${url}/-/ready`)).status === 200;
      },
      'prometheus to be ready',
      30_000,
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${output}`);
  }
  return {
    url,
    api,
    async query(promql) {
      const data = (await api(`/api/v1/query?query=${encodeURIComponent(promql)}`)) as {
        resultType: string;
        result: QueryResult[];
      };
      assert.equal(data.resultType, 'vector', promql);
      return data.result;
    },
    log: () => output,
    stop,
  };
}
