// For the deploy integration tests: posting artifacts to a real node, polling deploys with a
// deadline, and where the runtimes are.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Answer, Signer } from './applications.ts';
import { waitFor } from './svc.ts';

/** The runtime stand-in (test/helpers/cell-standin.ts), steered per deploy by its config. */
export const CELL_STANDIN = resolve(import.meta.dirname, 'cell-standin.ts');
/** The real runtime of this checkout. */
export const CELL_REAL = resolve(import.meta.dirname, '..', '..', 'runtime', 'bin', 'cell');

export interface DeployAnswer extends Answer {
  headers: Headers;
}

/** POSTs an artifact as `svc deploy` would, with a fresh token unless `authorization` is given. */
export async function postDeploy(
  base: string,
  application: string,
  body: Uint8Array | undefined,
  options: { signer?: Signer; authorization?: string; headers?: Record<string, string> } = {},
): Promise<DeployAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream', ...options.headers };
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  else if (options.signer) headers.authorization = await options.signer.bearer();
  const response = await fetch(`${base}/v1/applications/${application}/deploys`, {
    method: 'POST',
    headers,
    body: body ? new Uint8Array(body) : undefined,
  });
  return readAnswer(response);
}

export async function getDeploy(
  base: string,
  id: string,
  options: { signer?: Signer; authorization?: string } = {},
): Promise<DeployAnswer> {
  const headers: Record<string, string> = {};
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  else if (options.signer) headers.authorization = await options.signer.bearer();
  return readAnswer(await fetch(`${base}/v1/deploys/${id}`, { headers }));
}

async function readAnswer(response: Response): Promise<DeployAnswer> {
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return {
    status: response.status,
    body,
    contentType: response.headers.get('content-type'),
    headers: response.headers,
  };
}

/** Polls a deploy until it is terminal (deadline `timeoutMs`). */
export async function settledDeploy(
  base: string,
  id: string,
  signer: Signer,
  timeoutMs = 30_000,
  // biome-ignore lint/suspicious/noExplicitAny: tests read answers loosely.
): Promise<any> {
  return waitFor(
    async () => {
      const { body } = await getDeploy(base, id, { signer });
      return body?.state === 'deployed' || body?.state === 'failed' ? body : null;
    },
    `deploy ${id} to end`,
    timeoutMs,
  );
}

/** What the stand-in recorded for one deployment (the config bytes it was handed, its env, files). */
export function standinRecord(
  bucketEndpoint: string,
  application: string,
  deployment: string,
): { config: string; configFile: string; files: string[]; env: Record<string, unknown> } {
  const file = join(fileURLToPath(bucketEndpoint), 'standin', application, `${deployment}.json`);
  const record = JSON.parse(readFileSync(file, 'utf8'));
  return { ...record, config: Buffer.from(record.config, 'base64').toString('utf8') };
}

/** Whether a node's deploy staging directory is empty (or absent). */
export function stagingEmpty(stateDir: string): boolean {
  const staging = join(stateDir, 'deploys');
  return !existsSync(staging) || readdirSync(staging).length === 0;
}
