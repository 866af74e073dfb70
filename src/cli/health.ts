// `svc health` (docs/cli.md "svc health"): the local node's health with a 2-second deadline.

import type { Command } from 'commander';
import { Problem } from '../problem.ts';
import { addBucketFlags, addSettingFlags, settingsFromCommand } from './flags.ts';
import { type HttpAnswer, httpExchange } from './http.ts';
import { say } from './output.ts';

const HEALTH_DEADLINE_MS = 2000;

export function registerHealth(program: Command): void {
  addSettingFlags(addBucketFlags(program.command('health').description("Check the local node's health")), [
    'listen',
    'transport',
    'wg-address',
  ]).action(async (flags: Record<string, unknown>) => {
    const settings = settingsFromCommand(flags);
    const body = await checkHealth(healthUrl(settings.node.listen));
    say(JSON.stringify(body));
  });
}

/** The URL `sail` answers health on, given its listen address (a wildcard bind is reached on loopback). */
export function healthUrl(listen: string): string {
  const at = listen.lastIndexOf(':');
  let host = listen.slice(0, at);
  const port = listen.slice(at + 1);
  if (host === '0.0.0.0' || host === '') host = '127.0.0.1';
  if (host === '[::]') host = '[::1]';
  return `http://${host}:${port}/.well-known/svc/health`;
}

/** Fetches and checks the health document; refuses with the spec's two titles. */
export async function checkHealth(url: string): Promise<unknown> {
  let response: HttpAnswer;
  try {
    response = await httpExchange(new URL(url), { method: 'GET', timeoutMs: HEALTH_DEADLINE_MS });
  } catch {
    throw new Problem('not-found', 'Node is not answering', `nothing answered at ${url} within 2 s`);
  }
  let body: unknown;
  try {
    body = JSON.parse(response.text);
  } catch {
    body = undefined;
  }
  const doc = body as { ok?: unknown; version?: unknown; node?: unknown } | undefined;
  if (
    response.status !== 200 ||
    !doc ||
    doc.ok !== true ||
    typeof doc.version !== 'string' ||
    typeof doc.node !== 'string'
  ) {
    throw new Problem(
      'not-found',
      'Node is not healthy',
      `${url} answered ${response.status} without a healthy health document`,
    );
  }
  return body;
}
