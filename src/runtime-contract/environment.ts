// The contract between svc and its runtime executable (docs/runtime.md "The runtime contract"):
// the environment a node hands to `cell publish` and `cell serve`, and the health path the
// supervisor probes. Both sides use this one module: svc builds the environment here, the runtime
// reads it here, so a variable cannot be renamed on one side only.

import { isApplicationName, NODE_ID_PATTERN } from '../registry/names.ts';
import type { OpenStoreOptions } from '../store/open.ts';

/** Where a serving runtime answers whether it is ready (200) or not (503, with why). */
export const HEALTH_PATH = '/.well-known/cell/health';

/** Health probes from svc's supervisor carry this header: it tells the runtime it is supervised. */
export const SUPERVISOR_HEADER = 'cell-supervisor';

/** What `cell serve` is told about itself. */
export interface ServeIdentity {
  application: string;
  node: string;
  port: number;
  /** The address the public port binds; 127.0.0.1 when not given. */
  host: string;
}

/**
 * The node's own environment without svc's settings (`SVC_*`, the bucket credentials among them,
 * are handed over explicitly) or stray runtime variables (`CELL_*`), then the operator's
 * `--cell-env` values.
 */
export function runtimeBaseEnvironment(
  base: NodeJS.ProcessEnv,
  cellEnv: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined && !name.startsWith('SVC_') && !name.startsWith('CELL_')) env[name] = value;
  }
  return Object.assign(env, cellEnv);
}

/**
 * The bucket, as the runtime's `SVC_S3_*` variables (the names svc's own settings use). A node on
 * the local-directory bucket without an endpoint setting hands over the `file://` URL its store
 * describes itself with.
 */
export function bucketEnvironment(
  access: Partial<OpenStoreOptions>,
  storeDescription: string,
): Record<string, string> {
  const endpoint = access.endpoint ?? (storeDescription.startsWith('file://') ? storeDescription : '');
  return {
    SVC_S3_ENDPOINT: endpoint,
    SVC_S3_REGION: access.region ?? '',
    SVC_S3_BUCKET: access.bucket ?? '',
    SVC_S3_PREFIX: access.prefix ?? '',
    SVC_S3_ACCESS_KEY: access.accessKey ?? '',
    SVC_S3_SECRET_KEY: access.secretKey ?? '',
  };
}

/** Reads the bucket back on the runtime's side; null when no endpoint is given. */
export function readBucketAccess(env: NodeJS.ProcessEnv): OpenStoreOptions | null {
  const endpoint = env.SVC_S3_ENDPOINT;
  if (!endpoint) return null;
  return {
    endpoint,
    region: env.SVC_S3_REGION || undefined,
    bucket: env.SVC_S3_BUCKET || undefined,
    prefix: env.SVC_S3_PREFIX || undefined,
    accessKey: env.SVC_S3_ACCESS_KEY || undefined,
    secretKey: env.SVC_S3_SECRET_KEY || undefined,
  };
}

/** The variables that tell `cell serve` who it is and where it listens. */
export function serveIdentityEnvironment(identity: ServeIdentity): Record<string, string> {
  return {
    CELL_APP: identity.application,
    CELL_NODE: identity.node,
    CELL_PORT: String(identity.port),
    CELL_BIND_HOST: identity.host,
  };
}

/** Reads `cell serve`'s identity; a string says which variable is wrong and how. */
export function readServeIdentity(env: NodeJS.ProcessEnv): ServeIdentity | string {
  const application = env.CELL_APP;
  if (!application || !isApplicationName(application)) {
    return `CELL_APP must name the application to serve, got ${JSON.stringify(application ?? '')}`;
  }
  const node = env.CELL_NODE;
  if (!node || !NODE_ID_PATTERN.test(node) || node === '.' || node === '..') {
    return `CELL_NODE must be the node id (1-128 letters, digits, _ - .), got ${JSON.stringify(node ?? '')}`;
  }
  const portText = env.CELL_PORT ?? '';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    return `CELL_PORT must be a port number 1-65535, got ${JSON.stringify(portText)}`;
  }
  return { application, node, port, host: env.CELL_BIND_HOST || '127.0.0.1' };
}
