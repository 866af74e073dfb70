// The runtime host (docs/runtime.md "The runtime host"): everything a front needs from the
// bucket, done by one resident process per node that holds the bucket client, so a front never
// starts Node or opens the bucket itself. The node daemon serves each of its fronts over its
// Unix socket; `cell serve` run by hand starts a private host (`cell host --stdio`) instead. Each
// front is one connection: a `hello` first (protocol version, application, private folder), then
// `look` (follower.ts), `lease` (lease.ts), `cron-next` and `cron-fire` (cron.ts), `objects`
// (how long this node's right to serve the Durable Objects holds, bindings/objects-host.ts),
// and `health` (the front's health answer changed: its supervisor probes it; or the host asked
// for it with the `health` push, health-asks.ts),
// answered in the order they finish. Log lines about the application go back to the front, which writes them
// on its stderr with its own, so they land in the application's output.

import { existsSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { Store } from '../../../src/store/store.ts';
import type { HostObjects } from '../bindings/objects-host.ts';
import { FrontQueues, QueueWakers } from '../bindings/queue-runner.ts';
import { fireCron, nextCronTimes, postScheduled } from '../cron.ts';
import { type LookContext, type LookRequest, look } from '../follower.ts';
import { objectsDir } from '../instance.ts';
import { type LeaseHolder, leaseKey, releaseLease, writeLease } from '../lease.ts';
import { SecretsFile } from '../secrets.ts';
import type { FrontHealth, HealthAsks } from './health-asks.ts';
import {
  BadRequest,
  errorLine,
  HEALTH_ASK_LINE,
  type HelloRequest,
  HOST_PROTOCOL_VERSION,
  logLine,
  mismatchMessage,
  nullableString,
  number,
  object,
  parseHello,
  parseRequest,
  resultLine,
  string,
  stringList,
} from './protocol.ts';

export interface HostOptions {
  store: Store;
  /** How the host names itself in its hello answer, e.g. `svc 0.9.0`. */
  name: string;
  /** The host's own log (a front that cannot be served, a broken connection). */
  log: (line: string) => void;
  /**
   * The bindings socket (KV) serving a front whose private folder is `stateDir`, asked when a
   * deployment with bindings starts; absent: such a deployment cannot start.
   */
  bindingsSocket?: (stateDir: string) => Promise<string>;
  /**
   * Told of each message a producer on this host's bindings socket writes, so a queue consumer
   * here takes it at once (docs/bindings.md "Queues"); absent: consumers only poll.
   */
  queueWakers?: QueueWakers;
  /**
   * Which node runs each application's Durable Objects (bindings/objects-host.ts); absent: every
   * front runs its objects from its own storage folder.
   */
  objects?: HostObjects;
  /**
   * Told when a front says its health answer changed (the `health` op: its status, or the
   * deployment it serves), so a supervisor that probes ready fronts rarely probes this one now;
   * absent: the notice is answered and dropped.
   */
  healthMoved?: (application: string, health: FrontHealth) => void;
  /**
   * Where the fronts connected to this host can be asked for their health (the `health` push),
   * and their answers (a `health` request marked `asked`) go; absent: such an answer is taken as
   * a notice.
   */
  healthAsks?: HealthAsks;
  /**
   * Told when a front's connection ends (the front exited, or closed it to stop): a supervisor
   * that cannot wait for the process (one it adopted) looks at once whether it still runs.
   */
  disconnected?: (application: string) => void;
}

/** One front's connection, as two streams (a socket is both). */
export interface Connection {
  input: NodeJS.ReadableStream;
  write(text: string): void;
  /** Ends the connection (after a refused hello). */
  end(): void;
}

/** What one front's requests share. */
interface Front {
  look: LookContext;
  lease: LeaseHolder;
  /** Lease writes are conditional on the previous one's ETag: one at a time. */
  leaseChain: Promise<unknown>;
  /** The queue consumers of the deployment the front serves. */
  queues: FrontQueues;
  /** Whether a look of this front asked for the Durable Objects' folder. */
  usesObjects: boolean;
  objects: HostObjects | null;
  /** Aborted when the connection ends: a question held open (`objects`) is answered then. */
  ended: AbortController;
}

/** Serves one front until its connection ends and what it asked is answered. */
export async function serveFront(connection: Connection, options: HostOptions): Promise<void> {
  let front: Front | null = null;
  let detach: (() => void) | undefined;
  const underWay = new Set<Promise<void>>();
  for await (const line of linesOf(connection.input)) {
    if (line.trim() === '') continue;
    let request: ReturnType<typeof parseRequest>;
    try {
      request = parseRequest(line);
    } catch (err) {
      connection.write(errorLine((err as BadRequest).id ?? null, 'bad-request', (err as Error).message));
      continue;
    }
    if (!front) {
      front = greet(connection, request, options);
      if (!front) break;
      detach = options.healthAsks?.attach(front.look.application, () => connection.write(HEALTH_ASK_LINE));
      continue;
    }
    const done = answer(front, request, options)
      .then(
        (result) => connection.write(resultLine(request.id, result)),
        (err: unknown) =>
          connection.write(
            errorLine(
              request.id,
              err instanceof BadRequest ? 'bad-request' : 'failed',
              (err as Error).message,
            ),
          ),
      )
      .finally(() => underWay.delete(done));
    underWay.add(done);
  }
  front?.ended.abort();
  detach?.();
  if (front) options.disconnected?.(front.look.application);
  await Promise.all(underWay);
  await front?.queues.stop();
  if (front?.usesObjects) await options.objects?.release(front.look.application);
}

/**
 * The lines of a front's connection, `\n` or `\r\n` ended, the last one without its end too. Not
 * `readline`'s async iterator: that keeps two queues of 2,048 slots each per connection, about
 * 32 kB of a daemon's heap for every application it runs (bench/RESULTS.md "1,000 idle
 * applications on one node"). Fails as the input does; like readline's, it ends at the input's
 * end, not when the input is destroyed without one (the host closing its connections).
 */
export async function* linesOf(input: NodeJS.ReadableStream): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let lines: string[] = [];
  let ended = false;
  let failed: Error | null = null;
  let wake: (() => void) | null = null;
  const woken = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onData = (chunk: Buffer | string) => {
    partial += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    for (let end = partial.indexOf('\n'); end !== -1; end = partial.indexOf('\n')) {
      lines.push(partial.slice(0, end > 0 && partial[end - 1] === '\r' ? end - 1 : end));
      partial = partial.slice(end + 1);
    }
    if (lines.length > 0) woken();
  };
  const onEnd = () => {
    if (ended) return;
    ended = true;
    partial += decoder.end();
    if (partial !== '') lines.push(partial.endsWith('\r') ? partial.slice(0, -1) : partial);
    partial = '';
    woken();
  };
  const onError = (err: Error) => {
    failed = err;
    woken();
  };
  input.on('data', onData);
  input.once('end', onEnd);
  input.once('error', onError);
  try {
    for (;;) {
      if (lines.length > 0) {
        const ready = lines;
        lines = [];
        for (const line of ready) yield line;
        continue;
      }
      if (failed) throw failed;
      if (ended) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    input.off('data', onData);
    input.off('end', onEnd);
    input.off('error', onError);
  }
}

/** Answers the hello: the front to serve, or null once it was refused and the connection ended. */
function greet(
  connection: Connection,
  request: ReturnType<typeof parseRequest>,
  options: HostOptions,
): Front | null {
  let hello: HelloRequest;
  try {
    hello = parseHello(request);
  } catch (err) {
    connection.write(errorLine(request.id, 'bad-request', (err as Error).message));
    connection.end();
    return null;
  }
  if (hello.protocol !== HOST_PROTOCOL_VERSION) {
    const message = mismatchMessage(hello.protocol);
    options.log(`refused the runtime of ${hello.application}: ${message}`);
    connection.write(errorLine(request.id, 'protocol-mismatch', message));
    connection.end();
    return null;
  }
  connection.write(resultLine(request.id, { protocol: HOST_PROTOCOL_VERSION, host: options.name }));
  const log = (line: string) => connection.write(logLine(line));
  const { application, node, stateDir, context } = hello;
  const queues = new FrontQueues({
    store: options.store,
    application,
    node,
    log,
    wakers: options.queueWakers ?? new QueueWakers(),
  });
  const front: Front = {
    queues,
    usesObjects: false,
    objects: options.objects ?? null,
    ended: new AbortController(),
    look: {
      application,
      store: options.store,
      stateDir,
      secretsFile: new SecretsFile(context.secretsFile ?? undefined),
      env: { ...context.env, CELL_WORKERD: context.workerd },
      log,
      bindingsSocket: async () => {
        if (!options.bindingsSocket) throw new Error('this runtime host serves no KV bindings');
        return options.bindingsSocket(stateDir);
      },
      queuesPrepared: (deployment, consumers, socket) => queues.prepared(deployment, consumers, socket),
    },
    lease: { store: options.store, application, node, log },
    leaseChain: Promise.resolve(),
  };
  const objects = options.objects;
  if (objects) {
    const objectsLook = {
      application,
      node,
      storageDir: objectsDir(front.look.env, application),
      frontStateDir: stateDir,
      log,
      ttlMs: Number(front.look.env.CELL_OBJECTS_LEASE_TTL_MS) || undefined,
    };
    front.look.durableObjectsDir = (deleted) => {
      front.usesObjects = true;
      return objects.storageDir({ ...objectsLook, deleted });
    };
    // A front that may be serving objects already (its previous host restarted) is checked at once.
    if (existsSync(objectsLook.storageDir)) {
      front.usesObjects = true;
      objects.adopt(objectsLook);
    }
  }
  return front;
}

async function answer(
  front: Front,
  request: ReturnType<typeof parseRequest>,
  options: HostOptions,
): Promise<Record<string, unknown>> {
  const f = request.fields;
  switch (request.op) {
    case 'health': {
      // The front's health answer changed; whoever supervises it probes it to see how. Or the
      // host asked for it, and whoever asked gets it.
      const health = {
        status: string(f.status, 'status'),
        deployment: nullableString(f.deployment, 'deployment'),
      };
      if (f.asked === true && options.healthAsks) options.healthAsks.told(front.look.application, health);
      else options.healthMoved?.(front.look.application, health);
      return {};
    }
    case 'look': {
      const request = lookRequest(f);
      // The front names the deployment it serves: its queue consumers run, any others stop.
      front.queues.serving(request.active?.deployment ?? null);
      // A front standing by for another node's Durable Objects looks at nothing until they move.
      const standby = front.usesObjects ? front.objects?.standingBy(front.look.application) : null;
      if (standby) return { result: 'failed', selection: null, message: standby };
      return { ...(await look(front.look, request)) };
    }
    case 'lease': {
      const run = front.leaseChain.then(() => lease(front.lease, f));
      front.leaseChain = run.catch(() => {});
      return run;
    }
    case 'objects': {
      // How long this node's right to serve the Durable Objects holds, for the front's own
      // deadline (runtime/front/objects.go); a host that keeps no lease leaves it none.
      const renewal = number(f.renewal, 'renewal');
      const waitMs = number(f.waitMs, 'waitMs');
      if (!front.objects) return { result: 'unleased' };
      return {
        ...(await front.objects.validity(front.look.application, renewal, waitMs, front.ended.signal)),
      };
    }
    case 'cron-next':
      return { next: nextCronTimes(stringList(f.crons, 'crons'), number(f.afterMs, 'afterMs')) };
    case 'cron-fire': {
      const cronSocket = nullableString(f.cronSocket, 'cronSocket');
      const claim = await fireCron(
        { ...front.lease },
        {
          deployment: string(f.deployment, 'deployment'),
          run: (cron, scheduledMs) => postScheduled(cronSocket, cron, scheduledMs),
        },
        string(f.cron, 'cron'),
        number(f.scheduledMs, 'scheduledMs'),
      );
      // The handler's own error is `failure`: `error` is the envelope's, for a request that failed.
      return { outcome: claim?.outcome ?? null, ...(claim?.error ? { failure: claim.error } : {}) };
    }
    default:
      throw new BadRequest(`unknown op ${JSON.stringify(request.op)}`);
  }
}

function lookRequest(f: Record<string, unknown>): LookRequest {
  let active: LookRequest['active'] = null;
  if (f.active !== null && f.active !== undefined) {
    const a = object(f.active, 'active');
    active = {
      script: string(a.script, 'active.script'),
      deployment: string(a.deployment, 'active.deployment'),
      secretsDigest: string(a.secretsDigest, 'active.secretsDigest'),
    };
  }
  const sequence = number(f.sequence, 'sequence');
  if (!Number.isSafeInteger(sequence) || sequence < 0)
    throw new BadRequest('sequence must be a whole number');
  return {
    active,
    seenEtag: nullableString(f.seenEtag, 'seenEtag'),
    failedSelection: nullableString(f.failedSelection, 'failedSelection'),
    retryAtMs: f.retryAtMs === undefined ? 0 : number(f.retryAtMs, 'retryAtMs'),
    sequence,
  };
}

/** A write keeps serving through a bucket failure: the bucket may be back before the lease runs out. */
async function lease(holder: LeaseHolder, f: Record<string, unknown>): Promise<Record<string, unknown>> {
  const etag = nullableString(f.etag, 'etag');
  if (f.release === true) {
    await releaseLease(holder, etag);
    return { etag: null, failed: false };
  }
  const write = {
    ttlMs: number(f.ttlMs, 'ttlMs'),
    pid: number(f.pid, 'pid'),
    startedMs: number(f.startedMs, 'startedMs'),
    describe: object(f.describe ?? {}, 'describe'),
  };
  try {
    return { etag: await writeLease(holder, etag, write), failed: false };
  } catch (err) {
    holder.log(`cell: cannot renew the node lease ${leaseKey(holder)}: ${(err as Error).message}`);
    return { etag, failed: true };
  }
}
