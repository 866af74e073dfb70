// Deploy intake (docs/deploys.md "Intake"), in the spec's order. The guard has
// authenticated the caller and checked `:name` and its scope in onRequest, before anything of the
// request beyond its headers was looked at. Then:
//
//   1. the request's own form: `x-svc-deploy` (metadata.ts), content type, an announced empty body
//   2. freeze                          409 deploys-frozen, before anything is created
//   3. runner and stager present       409 capability-missing
//   4. application created, or block check plus placement intent   409 application-blocked
//   5. runtime version comparison      409 version-skew
//   6. capacity                        429 deploy-overloaded (retry-after: 1); announced size 413
//   7. only now the body: received into staging (413, 408 receive deadline), unpacked (400, 413),
//      the record written `accepted`, and the deploy queued: 202. A disk that refuses the
//      staged bytes (full, over quota, read-only) is 503 store-unavailable naming the state
//      directory, and logged (docs/deploys.md "A full disk").
//
// A refusal at any step leaves nothing staged and no deploy record.

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { type Caller, describeCaller } from '../../auth/caller.ts';
import { diskRefusal, diskUnavailable } from '../../config/state-file.ts';
import { Problem } from '../../problem.ts';
import { ensureApplicationForDeploy } from '../../registry/applications.ts';
import { assertDeploysOpen } from '../../registry/freeze.ts';
import type { NodeContext } from '../context.ts';
import { artifactTooLarge, receiveArtifact, unpackArtifact } from './archive.ts';
import type { DeployTicket } from './limits.ts';
import { malformed, parseDeployMetadata } from './metadata.ts';
import { type DeployRecord, DeployRecordWriter, type DeployStatus, newDeployId } from './records.ts';

export interface DeployRequest {
  caller: Caller;
  application: string;
  headers: Record<string, string | string[] | undefined>;
  /** The raw request body, not yet read. */
  body: Readable;
  /** Called right before the body is read: answers `Expect: 100-continue`. */
  beforeBody?: () => void;
}

/** Runs intake to the 202: answers the accepted deploy's status. */
export async function acceptDeploy(ctx: NodeContext, request: DeployRequest): Promise<DeployStatus> {
  const { application, headers } = request;
  const metadata = parseDeployMetadata(headers['x-svc-deploy']);
  checkContentType(headers['content-type']);
  const announced = announcedLength(headers);
  if (announced === 0) throw noBody();

  await assertDeploysOpen(ctx.store);

  const service = ctx.deploys;
  if (!service) {
    throw new Problem('capability-missing', 'No deploy runner', `node ${ctx.nodeId} runs no deploy service`);
  }
  const { staging, runtimeVersion } = await service.capabilities();

  const by = describeCaller(request.caller);
  await ensureApplicationForDeploy(
    ctx.store,
    application,
    { replicas: metadata.replicas, nodeSelector: metadata.nodeSelector },
    by,
  );
  await service.checkVersionSkew(application, runtimeVersion);

  const limit = ctx.settings.deploy.artifactBytes;
  if (announced !== undefined && announced > limit) throw artifactTooLarge(limit, 'compressed');
  const ticket = service.limits.admit(application, announced);

  const id = newDeployId(application);
  const dir = join(staging, id);
  try {
    await mkdir(dir, { mode: 0o700 });
    request.beforeBody?.();
    const file = join(dir, 'artifact.tar.gz');
    const received = await receiveArtifact(request.body, file, {
      limit,
      deadlineMs: ctx.settings.deploy.receiveTimeoutMs,
      onBytes: (bytes) => ticket.stage(bytes),
      signal: service.stopping,
    });
    const root = join(dir, 'root');
    const unpacked = await unpackArtifact(
      file,
      root,
      { artifactBytes: limit, archiveEntries: ctx.settings.deploy.archiveEntries },
      (bytes) => ticket.stage(bytes),
    );
    await rm(file, { force: true });
    ticket.unstage(received);

    const now = new Date().toISOString();
    const record: DeployRecord = {
      v: 1,
      id,
      application,
      state: 'accepted',
      node: ctx.nodeId,
      by,
      createdAt: now,
      updatedAt: now,
      config: unpacked.config,
      artifactBytes: received,
      entries: unpacked.entries,
    };
    if (metadata.source) record.source = metadata.source;
    const writer = new DeployRecordWriter(ctx.store, record);
    await writer.create();
    ctx.log.info({ deploy: id, application, by, bytes: received }, `deploy ${id} accepted`);
    ctx.events?.emit({ kind: 'deploy.accepted', application, actor: by, deploy: id, bytes: received });
    return service.enqueue({ id, application, dir, root, config: unpacked.config, ticket, writer });
  } catch (err) {
    await discard(dir, ticket);
    throw stagingFailure(ctx, id, err);
  }
}

/** What a failed intake answers: the disk refusing the staged bytes is the node's, and logged. */
function stagingFailure(ctx: NodeContext, id: string, err: unknown): unknown {
  const code = diskRefusal(err);
  if (!code) return err;
  const stateDir = ctx.settings.node.stateDir;
  ctx.log.error(
    { deploy: id, stateDir, code, err: (err as Error).message },
    `deploy ${id} refused: the disk holding the state directory takes no more writes`,
  );
  return diskUnavailable(stateDir, code, 'the artifact could not be staged');
}

async function discard(dir: string, ticket: DeployTicket): Promise<void> {
  await rm(dir, { recursive: true, force: true }).catch(() => {});
  ticket.release();
}

function checkContentType(value: string | string[] | undefined): void {
  const type = typeof value === 'string' ? value.split(';')[0]!.trim().toLowerCase() : '';
  if (type !== 'application/octet-stream') {
    throw malformed(
      `send the artifact (a .tar.gz) as content-type application/octet-stream, not ${value === undefined ? 'without one' : JSON.stringify(value)}`,
    );
  }
}

/** The content-length, when the request announces one; undefined for a chunked body. */
function announcedLength(headers: Record<string, string | string[] | undefined>): number | undefined {
  const value = headers['content-length'];
  if (typeof value !== 'string') return undefined;
  const length = Number(value);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

function noBody(): Problem {
  return new Problem(
    'invalid-input',
    'Malformed request',
    'the request has no body: send the artifact (a .tar.gz)',
  );
}
