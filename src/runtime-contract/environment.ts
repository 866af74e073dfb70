// The contract between svc and its runtime executable (docs/runtime.md "The environment contract"):
// the environment a node hands to `cell publish` and `cell serve`, and the health path the
// supervisor probes. Both sides use this one module: svc builds the environment here, the runtime
// reads it here, so a variable cannot be renamed on one side only.

import { isApplicationName, isNodeId } from '../registry/names.ts';
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
  if (!isNodeId(node)) {
    return `CELL_NODE must be the node id (1-128 letters, digits, _ - .), got ${JSON.stringify(node ?? '')}`;
  }
  const portText = env.CELL_PORT ?? '';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    return `CELL_PORT must be a port number 1-65535, got ${JSON.stringify(portText)}`;
  }
  return { application, node, port, host: env.CELL_BIND_HOST || '127.0.0.1' };
}

/**
 * What else a node tells `cell serve`. `otel`: one span line per request on stdout (observability
 * is on). `secretsFile`: the file the node's keeper writes the application's secrets to.
 * `unsupervisedExitMs`: how long to keep serving once the daemon is gone and no supervisor probes.
 * An operator's `--cell-env` value for a variable wins over what the node would set.
 */
export function serveOptionsEnvironment(
  options: {
    otel: boolean;
    secretsFile?: string;
    unsupervisedExitMs: number;
    hostSocket?: string;
    objectsDir?: string;
  },
  cellEnv: Record<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {};
  if (options.hostSocket) env[HOST_SOCKET_VARIABLE] = options.hostSocket;
  if (options.objectsDir && !Object.hasOwn(cellEnv, OBJECTS_DIR_VARIABLE))
    env[OBJECTS_DIR_VARIABLE] = options.objectsDir;
  if (options.otel && !Object.hasOwn(cellEnv, 'CELL_OTEL')) env.CELL_OTEL = '1';
  if (!Object.hasOwn(cellEnv, UNSUPERVISED_EXIT_VARIABLE))
    env[UNSUPERVISED_EXIT_VARIABLE] = String(options.unsupervisedExitMs);
  if (options.secretsFile) env.CELL_SECRETS_FILE = options.secretsFile;
  return env;
}

/** The variable of `unsupervisedExitMs`; the runtime reads it with its other timing knobs. */
export const UNSUPERVISED_EXIT_VARIABLE = 'CELL_UNSUPERVISED_EXIT_MS';

/**
 * The node's runtime host socket (docs/runtime.md "The runtime host"): the daemon answers there
 * what a runtime needs from the bucket. Without it, `cell serve` starts a private host.
 */
export const HOST_SOCKET_VARIABLE = 'CELL_HOST_SOCKET';

/**
 * The folder under which a runtime keeps each application's Durable Objects
 * (`<folder>/<application>/`, docs/bindings.md "Durable Objects"): a node daemon names one in its
 * state directory, which outlives the process and the machine's temp folder.
 */
export const OBJECTS_DIR_VARIABLE = 'CELL_OBJECTS_DIR';

/**
 * The MaxMind DB the runtime fills `request.cf` from (docs/runtime.md "The environment contract"):
 * `svc sail --geoip-db`, or set by hand for `cell serve` run alone. Unset: no geolocation.
 */
export const GEOIP_DB_VARIABLE = 'CELL_GEOIP_DB';

/** Reads `serveOptionsEnvironment` back (the unsupervised bound apart). */
export function readServeOptions(env: NodeJS.ProcessEnv): {
  otel: boolean;
  secretsFile: string | undefined;
  hostSocket: string | undefined;
  geoipDb: string | undefined;
} {
  return {
    otel: env.CELL_OTEL === '1',
    secretsFile: env.CELL_SECRETS_FILE || undefined,
    hostSocket: env[HOST_SOCKET_VARIABLE] || undefined,
    geoipDb: env[GEOIP_DB_VARIABLE] || undefined,
  };
}

/** What a node tells `cell publish`: the application, and the names (never values) of its secrets. */
export function publishEnvironment(
  application: string,
  secretNames: string[],
  deploy?: string,
): Record<string, string> {
  // CELL_DEPLOY: the svc deploy this publish is, noted in the deployment's record so that the
  // deploy's fate can be read from the bucket even if its node dies right after the selector moved.
  return {
    CELL_APP: application,
    CELL_SECRET_NAMES: secretNames.join(','),
    ...(deploy ? { CELL_DEPLOY: deploy } : {}),
  };
}

/** Reads `publishEnvironment` back; the application is checked by the runtime, which names the fix. */
export function readPublishRequest(env: NodeJS.ProcessEnv): {
  application: string | undefined;
  secretNames: string[];
  deploy: string | undefined;
} {
  return {
    application: env.CELL_APP || undefined,
    secretNames: (env.CELL_SECRET_NAMES ?? '').split(',').filter(Boolean),
    deploy: env.CELL_DEPLOY || undefined,
  };
}
