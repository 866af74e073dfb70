// Bucket faults end in bounded, named answers (docs/decisions.md "Store: bounded operations"):
// a real `svc sail` and real CLI runs against a MinIO of this file's
// own that the tests freeze (SIGSTOP), run with a wrong secret, and stop; and directory buckets
// that cannot be one. Deadlines below are the tests' patience, not timing assertions: the bound
// itself is the store's (OPERATION_DEADLINE_MS), and the node's answer says it.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { getApplication } from '../src/registry/applications.ts';
import { openStore } from '../src/store/open.ts';
import type { Store } from '../src/store/store.ts';
import { assertProblem, call, ensureDeployedApplication } from './helpers/applications.ts';
import { type Signer, signerFor, trustOperator } from './helpers/in-process-node.ts';
import { type Minio, type MinioBucketOptions, startMinio } from './helpers/minio.ts';
import { type RunResult, runSvc, type SailProcess, startSail, tempDir, waitFor } from './helpers/svc.ts';

const INGRESS_TOKEN = 'ingress-faults-0123456789';
/** Patience for one answer: the 10 s bound plus a node's start-up slack. */
const ANSWER_PATIENCE_MS = 40_000;

let minio: Minio;
let options: MinioBucketOptions;
let store: Store;
let node: SailProcess;
let admin: Signer;

before(async () => {
  minio = await startMinio();
  options = minio.bucketOptions(await minio.createBucket());
  store = await openStore({ ...options, stateDir: tempDir() });
  admin = await trustOperator(store, signerFor('op-admin'));
  await ensureDeployedApplication(store, 'shop', {});
  node = await startSail([...bucketFlags(), '--ingress-token', INGRESS_TOKEN]);
  await waitFor(async () => (await routes()).status === 200, 'the first reconcile pass');
});

after(async () => {
  minio?.thaw();
  await node?.stop();
  await store?.close();
  await minio?.stop();
});

function bucketFlags(secret = options.secretKey): string[] {
  return [
    ...['--endpoint', options.endpoint, '--region', options.region, '--bucket', options.bucket],
    ...['--access-key', options.accessKey, '--secret-key', secret],
  ];
}

function routes() {
  return fetch(`${node.url}/v1/ingress/routes`, { headers: { authorization: `Bearer ${INGRESS_TOKEN}` } });
}

function svc(args: string[]): Promise<RunResult> {
  return runSvc(args, {
    env: { SVC_STATE_DIR: tempDir(), SVC_HOME: tempDir() },
    timeoutMs: ANSWER_PATIENCE_MS,
  });
}

/** The docs/cli.md failure line: exit 1, `svc: <title>: <detail> [urn:svc:<code>]`. */
function failsWith(result: RunResult, title: string, code: string, detail: RegExp): void {
  assert.equal(result.code, 1, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  const line = result.stderr.trimEnd().split('\n').at(-1) ?? '';
  assert.ok(line.startsWith(`svc: ${title}: `), line);
  assert.ok(line.endsWith(`[urn:svc:${code}]`), line);
  assert.match(line, detail);
}

const endpointPattern = () =>
  new RegExp(`${options.endpoint.replace(/[.]/g, '\\.')}.*bucket ${options.bucket}`);

test('frozen MinIO: a write answers 503 store-unavailable within the bound, nothing is written, reads keep serving', async () => {
  minio.freeze();
  try {
    const answer = await call(node.url, 'POST', '/v1/applications/shop/block', { signer: admin });
    assertProblem(answer, 503, 'store-unavailable', 'Bucket is unavailable', /no answer within 10 s/);
    assert.match(answer.body.detail, endpointPattern());
    assert.equal((await routes()).status, 200, 'the routing document is served from memory');
    const cli = await svc(['app', 'selector', '--name', 'shop', '--set', 'zone=a', ...bucketFlags()]);
    failsWith(cli, 'Bucket is unavailable', 'store-unavailable', /no answer within 10 s/);
  } finally {
    minio.thaw();
  }
  const record = await getApplication(store, 'shop');
  assert.equal(record.blocked, false, 'the refused block was not written');
  assert.equal(record.selector, null, 'the refused selector was not written');
});

test('a wrong secret is reported as credentials refused, naming the endpoint and bucket', async () => {
  const result = await svc(['fleet', 'nodes', ...bucketFlags('not-the-secret')]);
  failsWith(result, 'Bucket refused the credentials', 'store-unavailable', endpointPattern());
  assert.match(result.stderr, /SignatureDoesNotMatch.*check the access key and secret/);
});

test('a directory bucket that cannot be one is refused at once, naming it', async () => {
  const forbidden = await svc(['fleet', 'nodes', '--endpoint', 'file:///proc/forbidden']);
  failsWith(
    forbidden,
    'Unusable directory bucket',
    'invalid-input',
    /^svc: [^:]+: file:\/\/\/proc\/forbidden: cannot create/,
  );
  const file = join(tempDir(), 'not-a-directory');
  writeFileSync(file, 'x');
  const isFile = await svc(['fleet', 'nodes', '--endpoint', `file://${file}`]);
  failsWith(isFile, 'Unusable directory bucket', 'invalid-input', /it is a file, not a directory/);
  const under = await svc(['fleet', 'nodes', '--endpoint', `file://${file}/bucket`]);
  failsWith(under, 'Unusable directory bucket', 'invalid-input', /a part of the path is a file/);
});

test('stopped MinIO: a node write and a CLI read answer store-unavailable naming the endpoint', async () => {
  await minio.stop();
  const answer = await call(node.url, 'POST', '/v1/applications/shop/unblock', { signer: admin });
  assertProblem(answer, 503, 'store-unavailable', 'Bucket is unavailable', endpointPattern());
  const result = await svc(['fleet', 'nodes', ...bucketFlags()]);
  failsWith(result, 'Bucket is unavailable', 'store-unavailable', endpointPattern());
});
