// For the application and freeze integration tests: real `svc sail` nodes on one local-directory
// bucket, operator and node keys registered straight in that bucket (as the bucket ceremony
// does), signed calls, and problem-document assertions.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { Role } from '../../src/auth/caller.ts';
import { keyFileDocument } from '../../src/auth/key-file.ts';
import {
  ensureApplicationForDeploy,
  type PlacementIntent,
  updateApplication,
} from '../../src/registry/applications.ts';
import { keys } from '../../src/registry/keys.ts';
import type { ApplicationRecord } from '../../src/registry/records.ts';
import { openStore } from '../../src/store/open.ts';
import { putJson, type Store } from '../../src/store/store.ts';
import { projectDir } from './artifacts.ts';
import { type Signer, signerFor, trustOperator } from './in-process-node.ts';
import { runSvc, type SailProcess, startSail, tempDir, waitFor } from './svc.ts';

export type { Signer };

export interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read answers loosely, member by member.
  body: any;
  contentType: string | null;
}

/** One bucket and what the tests do to it directly. */
export interface Bucket {
  endpoint: string;
  store: Store;
  operator(id: string, role: Role, applications: string[]): Promise<Signer>;
  node(id: string): Promise<Signer>;
  /** Creates an application as its first deploy would. */
  application(name: string): Promise<void>;
  sail(flags?: string[], env?: NodeJS.ProcessEnv): Promise<SailProcess>;
  close(): Promise<void>;
}

export async function openBucket(): Promise<Bucket> {
  const dir = tempDir('svc-apps-');
  const endpoint = `file://${join(dir, 'bucket')}`;
  const store = await openStore({ endpoint, stateDir: join(dir, 'tool-state') });
  // Starts, not only started daemons: one still starting when a test gives up is stopped too.
  const starts: Promise<SailProcess>[] = [];
  return {
    endpoint,
    store,
    operator: (id, role, applications) => trustOperator(store, signerFor(id), role, applications),
    async node(id) {
      const signer = signerFor(id);
      await putJson(store, keys.nodeKey(id), { v: 1, id, publicKey: signer.pair.publicJwk, publishedAt: '' });
      return signer;
    },
    async application(name) {
      await ensureApplicationForDeploy(store, name, {}, 'test');
    },
    async sail(flags = [], env = {}) {
      const start = startSail(['--endpoint', endpoint, ...flags], { env });
      starts.push(start);
      return start;
    },
    async close() {
      const started = await Promise.allSettled(starts);
      await Promise.all(started.map((s) => (s.status === 'fulfilled' ? s.value.stop() : null)));
      await store.close();
    },
  };
}

/** One signed call (a fresh token each time: tokens are single use). */
export async function call(
  base: string,
  method: string,
  path: string,
  options: { signer?: Signer; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.signer) headers.authorization = await options.signer.bearer();
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(`${base}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed, contentType: response.headers.get('content-type') };
}

/** Asserts a problem document: status, `type` and title (and optionally the detail). */
export function assertProblem(
  answer: Answer,
  status: number,
  code: string,
  title: string,
  detail?: RegExp,
): void {
  const where = JSON.stringify(answer.body);
  assert.equal(answer.status, status, where);
  assert.equal(answer.contentType, 'application/problem+json', where);
  assert.equal(answer.body.type, `urn:svc:${code}`, where);
  assert.equal(answer.body.title, title, where);
  assert.equal(answer.body.status, status, where);
  if (detail) assert.match(answer.body.detail, detail, where);
}

/** `--key` for a signer: the key file document inline, as CI passes it. */
export function keyArg(signer: Signer): string {
  const document = keyFileDocument({ id: signer.id, pair: signer.pair, source: 'test' });
  return `base64:${Buffer.from(JSON.stringify(document)).toString('base64')}`;
}

/**
 * An application record as a successful deploy leaves it: created for the deploy, then naming
 * the deployment it produced. A node runs a process only for an application with a deployment;
 * tests of placement and processes that need no real publish start from this.
 */
export async function ensureDeployedApplication(
  store: Store,
  name: string,
  intent: PlacementIntent,
  deployment = '0000000000000000',
): Promise<ApplicationRecord> {
  await ensureApplicationForDeploy(store, name, intent, 'test');
  return updateApplication(store, name, (current) =>
    current.deployment === deployment ? null : { ...current, deployment },
  );
}

/** The URL of an application's ready process on a node (its `/v1/state`), once there is one. */
export async function readyAppUrl(
  node: { url: string; nodeId: string; log(): string },
  signer: Signer,
  application: string,
  deadlineMs = 90_000,
): Promise<string> {
  const url = await waitFor(
    async () => {
      const state = (await call(node.url, 'GET', '/v1/state', { signer })).body as {
        processes?: { application: string; port: number; ready: boolean }[];
      };
      const p = state.processes?.find((process) => process.application === application);
      return p?.ready ? `http://127.0.0.1:${p.port}` : undefined;
    },
    () => `${application} ready on ${node.nodeId}\n${node.log()}`,
    deadlineMs,
  );
  return url as string;
}

/**
 * `svc deploy` of a worker project made of `files` through `node`, to every node of the fleet
 * (`--replicas all`), with an operator home of its own; the test fails unless it exits 0.
 */
export async function deployToEveryNode(
  node: { url: string },
  signer: Signer,
  files: Record<string, string>,
): Promise<void> {
  const deployed = await runSvc(
    ['deploy', projectDir(files), '--node', node.url, '--key', keyArg(signer), '--replicas', 'all'],
    {
      env: { SVC_HOME: tempDir('svc-home-'), SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
      timeoutMs: 180_000,
    },
  );
  assert.equal(deployed.code, 0, deployed.stderr);
}
