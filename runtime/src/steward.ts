// `cell steward` (hidden; docs/runtime.md "cell serve"): the part of `cell serve` that needs the
// bucket, run by the front only while there is work. It reads one JSON request per line on stdin
// and answers each with one JSON line on stdout, `{"id", ...result}`, in the order they finish:
// `look` (follower.ts), `lease` (lease.ts), `cron-next` and `cron-fire` (cron.ts). Nothing else
// is written on stdout; log lines go to stderr. When stdin ends it finishes what is under way,
// closes the bucket and exits 0.

import { createInterface } from 'node:readline';
import { readServeIdentity, readServeOptions } from '../../src/runtime-contract/environment.ts';
import { openBucketFromEnv } from './bucket.ts';
import { type CronFirer, fireCron, nextCronTimes, postScheduled } from './cron.ts';
import { CellError } from './errors.ts';
import { type LookContext, type LookRequest, look } from './follower.ts';
import { type LeaseHolder, leaseKey, releaseLease, writeLease } from './lease.ts';
import { SecretsFile } from './secrets.ts';

/** The variable naming the replica's private folder (the one `cell serve` made) to the steward. */
export const STATE_DIR_VARIABLE = 'CELL_STATE_DIR_ACTIVE';

type Answer = Record<string, unknown>;

/** What the ops share: the bucket, the replica and its log. */
interface Steward {
  look: LookContext;
  lease: LeaseHolder;
  cron: CronFirer;
}

/** Serves requests from `input` until it ends; answers the exit code. */
export async function steward(
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
  input: NodeJS.ReadableStream = process.stdin,
  write: (line: string) => void = (line) => process.stdout.write(line),
): Promise<number> {
  const identity = readServeIdentity(env);
  if (typeof identity === 'string') throw new CellError(identity);
  const stateDir = env[STATE_DIR_VARIABLE];
  if (!stateDir) throw new CellError(`${STATE_DIR_VARIABLE} must name the folder cell serve made`);
  // The front reading our answers may be gone: its answers are lost, never the process. Our
  // stderr is the front's, whose reader (the daemon) may be gone too: the log is lost likewise.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  const store = await openBucketFromEnv(env);
  const { application, node } = identity;
  const context: Steward = {
    look: {
      application,
      store,
      stateDir,
      secretsFile: new SecretsFile(readServeOptions(env).secretsFile),
      env,
      log,
    },
    lease: { store, application, node, log },
    cron: { store, application, node, log },
  };
  const underWay = new Set<Promise<void>>();
  // Lease writes are conditional on the previous one's ETag: one at a time.
  let leaseChain: Promise<unknown> = Promise.resolve();
  for await (const line of createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
    if (line.trim() === '') continue;
    let request: Record<string, unknown>;
    try {
      request = parseRequest(line);
    } catch (err) {
      write(`${JSON.stringify({ id: null, error: (err as Error).message })}\n`);
      continue;
    }
    const run = () => answer(context, request);
    let answered: Promise<Answer>;
    if (request.op === 'lease') {
      answered = leaseChain.then(run);
      leaseChain = answered.catch(() => {});
    } else {
      answered = run();
    }
    const done = answered
      .catch((err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }))
      .then((result) => write(`${JSON.stringify({ id: request.id, ...result })}\n`))
      .finally(() => underWay.delete(done));
    underWay.add(done);
  }
  await Promise.all(underWay);
  await store.close();
  return 0;
}

function parseRequest(line: string): Record<string, unknown> {
  let request: unknown;
  try {
    request = JSON.parse(line);
  } catch {
    throw new Error(`a request must be one JSON object per line, got ${JSON.stringify(line.slice(0, 200))}`);
  }
  if (!request || typeof request !== 'object' || Array.isArray(request))
    throw new Error('a request must be a JSON object');
  return request as Record<string, unknown>;
}

/** Runs one request; throws when it is malformed (the answer is then `{"id", "error"}`). */
async function answer(context: Steward, request: Record<string, unknown>): Promise<Answer> {
  switch (request.op) {
    case 'look':
      return { ...(await look(context.look, lookRequest(request))) };
    case 'lease':
      return lease(context.lease, request);
    case 'cron-next':
      return { next: nextCronTimes(stringList(request.crons, 'crons'), number(request.afterMs, 'afterMs')) };
    case 'cron-fire': {
      const cronSocket = nullableString(request.cronSocket, 'cronSocket');
      const claim = await fireCron(
        context.cron,
        {
          deployment: string(request.deployment, 'deployment'),
          run: (cron, scheduledMs) => postScheduled(cronSocket, cron, scheduledMs),
        },
        string(request.cron, 'cron'),
        number(request.scheduledMs, 'scheduledMs'),
      );
      // `error` would say the request failed: the run's own error is `failure`.
      return { outcome: claim?.outcome ?? null, ...(claim?.error ? { failure: claim.error } : {}) };
    }
    default:
      throw new Error(`unknown op ${JSON.stringify(request.op)}`);
  }
}

function lookRequest(request: Record<string, unknown>): LookRequest {
  const active = request.active;
  let served: LookRequest['active'] = null;
  if (active !== null && active !== undefined) {
    if (typeof active !== 'object' || Array.isArray(active))
      throw new Error('active must be an object or null');
    const fields = active as Record<string, unknown>;
    served = {
      script: string(fields.script, 'active.script'),
      deployment: string(fields.deployment, 'active.deployment'),
      secretsDigest: string(fields.secretsDigest, 'active.secretsDigest'),
    };
  }
  const sequence = number(request.sequence, 'sequence');
  if (!Number.isSafeInteger(sequence) || sequence < 0) throw new Error('sequence must be a whole number');
  return {
    active: served,
    seenEtag: nullableString(request.seenEtag, 'seenEtag'),
    failedSelection: nullableString(request.failedSelection, 'failedSelection'),
    retryAtMs: request.retryAtMs === undefined ? 0 : number(request.retryAtMs, 'retryAtMs'),
    sequence,
  };
}

/** A write keeps serving through a bucket failure: the bucket may be back before the lease runs out. */
async function lease(holder: LeaseHolder, request: Record<string, unknown>): Promise<Answer> {
  const etag = nullableString(request.etag, 'etag');
  if (request.release === true) {
    await releaseLease(holder, etag);
    return { etag: null };
  }
  const describe = request.describe ?? {};
  if (typeof describe !== 'object' || describe === null || Array.isArray(describe))
    throw new Error('describe must be an object');
  const write = {
    ttlMs: number(request.ttlMs, 'ttlMs'),
    pid: number(request.pid, 'pid'),
    startedMs: number(request.startedMs, 'startedMs'),
    describe: describe as Record<string, unknown>,
  };
  try {
    return { etag: await writeLease(holder, etag, write) };
  } catch (err) {
    holder.log(`cell: cannot renew the node lease ${leaseKey(holder)}: ${(err as Error).message}`);
    return { etag, failed: true };
  }
}

function string(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new Error(`${name} must be a string`);
  return value;
}

function nullableString(value: unknown, name: string): string | null {
  return value === null || value === undefined ? null : string(value, name);
}

function number(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`${name} must be a number`);
  return value;
}

function stringList(value: unknown, name: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
    throw new Error(`${name} must be a list of strings`);
  return value;
}
