// What the tests of a binding's data through a node share (test/kv-*.test.ts, test/r2-*.test.ts):
// a deploy by a scoped key through the node, the port of the worker once it is ready, a signed
// call with a raw body answered as bytes, an issuer trusted for an application, `svc` run with stdin given and stdout kept as bytes, and
// the one-line refusal every failed command prints.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { type Answer, type Bucket, call, keyArg, type Signer } from './applications.ts';
import { projectDir } from './artifacts.ts';
import { runSvc, type SailProcess, SVC_BIN, tempDir, waitFor } from './svc.ts';

/** `svc deploy` of a project of `files` through the node, signed by `signer`, with no bucket credentials. */
export async function deployThroughNode(
  node: SailProcess,
  signer: Signer,
  files: Record<string, string>,
): Promise<void> {
  const deployed = await runSvc(['deploy', projectDir(files), '--node', node.url, '--key', keyArg(signer)], {
    env: {
      SVC_HOME: tempDir(),
      SVC_OPERATOR_KEY: undefined,
      SVC_REMOTE: undefined,
      SVC_STATE_DIR: tempDir(),
    },
    timeoutMs: 120_000,
  });
  assert.equal(deployed.code, 0, deployed.stderr);
}

/** `svc trust set`: tokens of `issuer` whose subject matches `subject` may act on `application`. */
export async function trustIssuer(
  bucket: Bucket,
  application: string,
  issuer: string,
  subject: string,
): Promise<void> {
  const args = ['trust', 'set', '--name', application, '--issuer', issuer, '--subject', subject];
  const trusted = await runSvc([...args, '--endpoint', bucket.endpoint], {
    env: { SVC_STATE_DIR: tempDir() },
    timeoutMs: 60_000,
  });
  assert.equal(trusted.code, 0, trusted.stderr);
}

/** The port of `application`'s worker on the node, once it is ready. */
export async function readyPort(node: SailProcess, admin: Signer, application: string): Promise<number> {
  return (await waitFor<number | undefined>(
    async () => {
      const answer = await call(node.url, 'GET', '/v1/state', { signer: admin });
      const found = (answer.body.processes ?? []).find(
        (p: { application: string; ready: boolean }) => p.application === application && p.ready,
      );
      return found?.port as number | undefined;
    },
    `${application} ready`,
    120_000,
  )) as number;
}

/** A signed call whose body is raw bytes, answered as bytes (and as JSON when it is JSON). */
export async function sendBytes(
  base: string,
  method: string,
  path: string,
  options: { signer?: Signer; body?: Uint8Array | string; contentType?: string } = {},
): Promise<Answer & { bytes: Buffer; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (options.signer) headers.authorization = await options.signer.bearer();
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/octet-stream';
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: options.body as BodyInit | undefined,
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const contentType = response.headers.get('content-type');
  let body: unknown = bytes;
  if (contentType?.includes('json')) body = JSON.parse(bytes.toString('utf8'));
  return { status: response.status, body, contentType, bytes, headers: response.headers };
}

/** `svc <args>` under `env`, with `stdin` given (else none), stdout kept as bytes. */
export function svcBytes(
  env: Record<string, string | undefined>,
  args: string[],
  stdin?: Buffer,
): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [SVC_BIN, ...args],
      { env: { ...process.env, ...env } as NodeJS.ProcessEnv, encoding: 'buffer', timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? Number((err as { code?: number }).code ?? 1) : 0,
          stdout,
          stderr: stderr.toString('utf8'),
        }),
    );
    child.stdin?.end(stdin ?? Buffer.alloc(0));
  });
}

/** The refusal line of a failed command: one line on stderr, nothing on stdout, exit 1. */
export function assertRefused(
  result: { code: number | null; stdout: string | Buffer; stderr: string },
  line: RegExp,
): void {
  assert.equal(result.code, 1, result.stderr);
  assert.equal(result.stdout.length, 0, String(result.stdout));
  assert.match(result.stderr, line);
  assert.equal(result.stderr.split('\n').length, 2, `one line: ${result.stderr}`);
}
