// Following the selector (docs/runtime.md "cell serve"): which deployment this replica serves.
// When the fleet-wide selector moves (or this node's secrets change), the new deployment starts in
// its own workerd beside the serving one and takes over only once it answers; the previous one
// then drains and stops, so a switch fails no request. The front keeps what is serving, when to
// look (the daemon's SIGHUP, the slow safety poll) and the retry schedule; one look is `look`
// here, the runtime host's `look` op (host/host.ts): it reads the selector and, when a start is
// due, writes the instance's folder so that the front only has to run workerd in it.

import { rm } from 'node:fs/promises';
import { isProblem } from '../../src/problem.ts';
import { keys } from '../../src/registry/keys.ts';
import {
  KNOWN_FEATURES,
  type Manifest,
  parseManifest,
  parsePointer,
  type QueueConsumer,
} from '../../src/runtime-tools/layout.ts';
import type { Store } from '../../src/store/store.ts';
import { ObjectsStandby } from './bindings/objects-host.ts';
import { CellError } from './errors.ts';
import { instancePaths, materialize, workerdArgs } from './instance.ts';
import type { SecretsFile } from './secrets.ts';
import { workerdBinary } from './workerd.ts';

/** The longest wait before a deployment that failed to start is tried again. */
export const MAX_RETRY_MS = 300_000;

/** Features `cell serve` can run; `containers` is understood by prune but not run here. */
const SERVABLE_FEATURES = KNOWN_FEATURES.filter((f) => f !== 'containers');

export interface LookContext {
  application: string;
  store: Store;
  /** The replica's private folder: instance folders, sockets and the blob cache live here. */
  stateDir: string;
  secretsFile: SecretsFile;
  /** Where the workerd binary is found (`CELL_WORKERD`). */
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
  /** The runtime host's bindings socket, for a deployment with KV bindings (instance.ts). */
  bindingsSocket?: () => Promise<string>;
  /** Where the deployment's Durable Objects are kept (instance.ts `MaterializeContext`). */
  durableObjectsDir?: (deletedStorageKeys: string[]) => Promise<string>;
  /**
   * Told of a deployment laid out to start that consumes queues: what it consumes and where its
   * queue trigger will listen (bindings/queue-runner.ts runs them once the front serves it).
   */
  queuesPrepared?: (deployment: string, consumers: QueueConsumer[], socket: string | null) => void;
}

/** What the front knows when it asks for a look. */
export interface LookRequest {
  /** The deployment serving now, or null. */
  active: { script: string; deployment: string; secretsDigest: string } | null;
  /** The selector's ETag once acted on; a different one means the selector moved. */
  seenEtag: string | null;
  /** The selection (`<etag>|<secrets digest>`) that failed to start, not tried again before retryAtMs. */
  failedSelection: string | null;
  retryAtMs: number;
  /** The number of the instance a start would make: folder `d<n>`, socket `w<n>.sock`. */
  sequence: number;
}

/** A deployment laid out and ready to start: what the front reads as its `Prepared` (instance.go). */
export interface Prepared {
  seenEtag: string;
  script: string;
  deployment: string;
  label: string;
  secretsDigest: string;
  dir: string;
  socket: string;
  cronSocket: string | null;
  /** Run from `dir` with only PATH and HOME in the environment. */
  command: string[];
  crons: string[];
}

export interface StartAnswer extends Prepared {
  result: 'start';
  selection: string;
}

export type LookAnswer =
  | { result: 'none' }
  | { result: 'same'; seenEtag?: string }
  | StartAnswer
  | { result: 'failed'; selection: string | null; message: string };

/**
 * One look at the selector: one stat of the secrets file and a HEAD; bodies are read only when
 * they moved. Never throws: a failure is a `failed` answer, with the selection when one was read
 * (the front retries it after a growing wait, or as soon as it moves). A bucket that did not
 * answer (`store-unavailable`) is no fault of the deployment: that failure carries no selection,
 * so the front looks again soon (when the look was asked for) rather than holding it against the
 * deployment for minutes.
 */
export async function look(context: LookContext, request: LookRequest): Promise<LookAnswer> {
  const key = keys.runtimeSelector(context.application);
  let selection: string | null = null;
  let dir: string | null = null;
  try {
    const secrets = context.secretsFile.read();
    const info = await context.store.stat(key);
    if (!info) return { result: 'none' };
    const active = request.active;
    const current = active?.secretsDigest === secrets.digest;
    if (info.etag === request.seenEtag && current) return { result: 'same' };
    if (`${info.etag}|${secrets.digest}` === request.failedSelection && Date.now() < request.retryAtMs)
      return { result: 'none' };
    const object = await context.store.get(key);
    if (!object) return { result: 'none' };
    selection = `${object.etag}|${secrets.digest}`;
    const pointer = parsePointer(object.body);
    if (!pointer.ok) throw new CellError(`${key} cannot be read: ${pointer.why}`);
    const { script, deployment } = pointer.value;
    const same = active?.script === script && active.deployment === deployment;
    if (same && current) return { result: 'same', seenEtag: object.etag };
    const manifest = await readManifest(context.store, context.application, script, deployment);
    const label = `${script}/${deployment}`;
    context.log(`cell: starting ${label}${same ? ' (its secrets changed)' : ''}`);
    const paths = instancePaths(context.stateDir, request.sequence, manifest);
    dir = paths.dir;
    await materialize(context, manifest, secrets, paths);
    context.queuesPrepared?.(deployment, manifest.queues?.consumers ?? [], paths.queueSocketPath);
    return {
      result: 'start',
      selection,
      seenEtag: object.etag,
      script,
      deployment,
      label,
      secretsDigest: secrets.digest,
      dir: paths.dir,
      socket: paths.socketPath,
      cronSocket: paths.cronSocketPath,
      command: [workerdBinary(context.env), ...workerdArgs(paths)],
      crons: manifest.crons ?? [],
      // One workerd at a time may open the Durable Objects' storage (docs/bindings.md "Durable Objects").
      ...((manifest.durable_objects?.classes.length ?? 0) > 0 ? { exclusive: true } : {}),
    };
  } catch (err) {
    if (dir) await rm(dir, { recursive: true, force: true });
    // Like a bucket that did not answer, standing by for another node's Durable Objects is no
    // fault of the deployment: the front looks again soon, and takes over once this node may.
    const bucketDown = (isProblem(err) && err.code === 'store-unavailable') || err instanceof ObjectsStandby;
    return { result: 'failed', selection: bucketDown ? null : selection, message: (err as Error).message };
  }
}

/** The manifest of a deployment, refused when it cannot be read or needs what cannot run here. */
export async function readManifest(
  store: Store,
  application: string,
  script: string,
  deployment: string,
): Promise<Manifest> {
  const key = keys.runtimeManifest(application, script, deployment);
  const object = await store.get(key);
  if (!object) throw new CellError(`the selector points at ${script}/${deployment}, but ${key} is missing`);
  const parsed = parseManifest(object.body);
  if (!parsed.ok) {
    if (parsed.unknown)
      throw new CellError(`${key} needs a newer runtime (${parsed.why}); upgrade cell on this node`);
    throw new CellError(`${key} cannot be read: ${parsed.why}`);
  }
  const missing = parsed.value.required_features.filter((f) => !SERVABLE_FEATURES.includes(f));
  if (missing.length > 0)
    throw new CellError(`${key} requires ${missing.join(', ')}, which cell serve cannot run`);
  return parsed.value;
}
