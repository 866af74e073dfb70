// The upload of `svc deploy`: `POST /v1/applications/:name/deploys` with the packed artifact as
// raw body and the canonical `x-svc-deploy` header, retried while the node is full until the
// queue timeout (docs/cli.md "svc deploy", docs/deploys.md "Intake").
//
// The upload sends `Expect: 100-continue`: the node answers 100 only once its pre-body checks
// pass, so a refused deploy (frozen, blocked, full...) costs no upload. Each attempt re-sends the
// same packed file, signed with a fresh token (tokens are single use).

import { createReadStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { signToken } from '../auth/token.ts';
import type { DeployStatus } from '../node/deploys/records.ts';
import { PROBLEM_CONTENT_TYPE, Problem } from '../problem.ts';
import type { Target } from './client.ts';
import { note } from './output.ts';
import { UploadMeter } from './upload-meter.ts';

// Taken as the modules themselves, not bound as ES modules: see http.ts.
const { request: httpRequest } = process.getBuiltinModule('node:http');
const { request: httpsRequest } = process.getBuiltinModule('node:https');

/** Backoff bounds when a full node gives no `retry-after`. */
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
/** How long to wait for `100 Continue` before sending the body anyway (a proxy may drop it). */
const CONTINUE_WAIT_MS = 3_000;

/** The packed artifact on disk. */
export interface PackedFile {
  file: string;
  bytes: number;
}

/** A deploy the node took: its first status, where to poll it, and which endpoint took it. */
export interface Accepted {
  status: DeployStatus;
  location: string;
  endpoint: string;
}

/** Uploads until admitted: a full node is retried per `retry-after` until the queue timeout. */
export async function submit(
  target: Target,
  application: string,
  header: string,
  packed: PackedFile,
  options: { wait: boolean; queueTimeoutMs: number; token?: string | undefined },
): Promise<Accepted> {
  const started = Date.now();
  let waiting = false;
  let attempt = 0;
  for (;;) {
    try {
      const accepted = await uploadOnce(target, application, header, packed, options.token);
      if (waiting) note(`svc: admitted after ${Math.round((Date.now() - started) / 1000)} s`);
      return accepted;
    } catch (err) {
      if (!(err instanceof Problem) || err.code !== 'deploy-overloaded' || !options.wait) throw err;
      const pause = retryDelay(err.headers['retry-after'], attempt++);
      const waited = Date.now() - started;
      if (waited + pause > options.queueTimeoutMs) {
        throw new Problem(
          'deploy-overloaded',
          err.title,
          `${err.detail ?? 'the node is full'}; gave up after ${Math.round(waited / 1000)} s (--queue-timeout ${options.queueTimeoutMs / 1000})`,
        );
      }
      if (!waiting) {
        waiting = true;
        note(
          `svc: the node is at deploy capacity; waiting for a queue place (up to ${options.queueTimeoutMs / 1000} s)`,
        );
      }
      await delay(pause);
    }
  }
}

/**
 * The pause before the next try: never sooner than `retry-after` asks, plus up to half of it
 * again as jitter; without one, an exponential backoff with the same jitter.
 */
export function retryDelay(
  retryAfter: string | undefined,
  attempt: number,
  random: () => number = Math.random,
): number {
  let base: number | null = null;
  if (retryAfter !== undefined) {
    const seconds = Number(retryAfter);
    if (/^\d+$/.test(retryAfter.trim()) && Number.isFinite(seconds)) base = seconds * 1000;
    else {
      const at = Date.parse(retryAfter);
      if (Number.isFinite(at)) base = Math.max(0, at - Date.now());
    }
  }
  if (base === null) base = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.min(attempt, 10));
  return Math.ceil(base + base * 0.5 * random());
}

/** One upload to the first endpoint that answers. */
async function uploadOnce(
  target: Target,
  application: string,
  header: string,
  packed: PackedFile,
  token: string | undefined,
): Promise<Accepted> {
  const failures: string[] = [];
  for (const endpoint of target.endpoints) {
    const bearer =
      token ?? (await signToken({ id: target.key!.id, privateKey: target.key!.pair.privateKey }));
    let answer: RawAnswer;
    try {
      answer = await postArtifact(`${endpoint}/v1/applications/${application}/deploys`, packed, {
        authorization: `Bearer ${bearer}`,
        'x-svc-deploy': header,
      });
    } catch (err) {
      failures.push(`${endpoint}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      continue;
    }
    if (answer.status === 202) {
      const status = JSON.parse(answer.body) as DeployStatus;
      return { status, location: answer.headers.location ?? `/v1/deploys/${status.id}`, endpoint };
    }
    throw problemOf(answer);
  }
  throw new Problem('not-found', 'Node is not answering', failures.join('; '));
}

interface RawAnswer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

/** The refusal a node answered, with its `retry-after` kept for the queue wait. */
function problemOf(answer: RawAnswer): Problem {
  let document: unknown = {};
  const type = String(answer.headers['content-type'] ?? '');
  if (type.startsWith(PROBLEM_CONTENT_TYPE) || type.startsWith('application/json')) {
    try {
      document = JSON.parse(answer.body);
    } catch {}
  }
  const problem = Problem.fromDocument(document, answer.status);
  const retryAfter = answer.headers['retry-after'];
  if (typeof retryAfter === 'string')
    (problem as { headers: Record<string, string> }).headers = { 'retry-after': retryAfter };
  return problem;
}

/** POSTs the packed file with `Expect: 100-continue`, showing progress on a TTY. */
function postArtifact(url: string, packed: PackedFile, headers: Record<string, string>): Promise<RawAnswer> {
  return new Promise((resolveAnswer, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const request = send(target, {
      method: 'POST',
      headers: {
        ...headers,
        accept: 'application/json',
        'content-type': 'application/octet-stream',
        'content-length': String(packed.bytes),
        expect: '100-continue',
      },
    });
    let answered = false;
    let sending = false;
    const meter = new UploadMeter(packed.bytes);
    const startBody = () => {
      if (sending || answered) return;
      sending = true;
      clearTimeout(fallback);
      const body = createReadStream(packed.file);
      body.on('data', (chunk) => meter.add((chunk as Buffer).length));
      body.on('end', () => meter.stop());
      body.pipe(request);
    };
    // Without a 100 in a while (a proxy that drops Expect), send anyway.
    const fallback = setTimeout(startBody, CONTINUE_WAIT_MS);
    request.on('continue', startBody);
    request.on('response', (response) => {
      answered = true;
      clearTimeout(fallback);
      meter.stop();
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        resolveAnswer({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        // An answer that came before the whole body was sent (a refusal): stop sending.
        if (!request.writableFinished) request.destroy();
      });
      response.on('error', reject);
    });
    request.on('error', (err) => {
      clearTimeout(fallback);
      meter.stop();
      if (!answered) reject(err);
    });
  });
}
