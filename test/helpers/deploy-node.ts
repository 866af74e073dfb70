// The node the deploy tests deploy to: a real `svc sail` with the real runtime on a fresh bucket,
// an admin key to deploy as, and the two lookups those tests share (where an application's ready
// process listens, `svc deploy` run against the node).
import { keys } from '../../src/registry/keys.ts';
import type { NodeRecord } from '../../src/registry/records.ts';
import { getJson } from '../../src/store/store.ts';
import { type Bucket, keyArg, openBucket, type Signer } from './applications.ts';
import { CELL_REAL } from './deploys.ts';
import { type RunResult, runSvc, type SailProcess, startSail, tempDir, waitFor } from './svc.ts';

/** How long an application may take from its deploy to a ready process. */
export const SERVE_DEADLINE_MS = 60_000;

export interface DeployNode {
  bucket: Bucket;
  node: SailProcess;
  /** `svc deploy <dir>` as the admin, against this node only (no operator home or remote). */
  deploy(dir: string, extra?: string[]): Promise<RunResult>;
  /** The port of the application's ready process on the node, once there is one. */
  portOf(application: string): Promise<number>;
  stop(): Promise<void>;
}

export async function startDeployNode(): Promise<DeployNode> {
  const bucket = await openBucket();
  let node: SailProcess;
  let admin: Signer;
  try {
    admin = await bucket.operator('op-admin', 'admin', ['*']);
    node = await startSail(['--endpoint', bucket.endpoint, '--cell-bin', CELL_REAL]);
  } catch (err) {
    await bucket.close();
    throw err;
  }
  const home = tempDir('svc-home-');
  return {
    bucket,
    node,
    deploy: (dir, extra = []) =>
      runSvc(['deploy', dir, '--node', node.url, '--key', keyArg(admin), ...extra], {
        env: { SVC_HOME: home, SVC_OPERATOR_KEY: undefined, SVC_REMOTE: undefined },
        timeoutMs: 180_000,
      }),
    portOf: (application) =>
      waitFor(
        async () => {
          const record = await getJson<NodeRecord>(bucket.store, keys.nodeRecord(node.nodeId));
          const process = record?.value.processes?.find((p) => p.application === application && p.ready);
          return process?.port ?? null;
        },
        () => `${application} to be ready\n${node.log().slice(-3000)}`,
        SERVE_DEADLINE_MS,
      ) as Promise<number>,
    async stop() {
      await node.stop();
      await bucket.close();
    },
  };
}
