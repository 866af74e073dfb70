// Every setting of `svc sail` (docs/cli.md "svc sail" and "Flag groups") in one typed
// object, with its flag, environment variable, config-file path and default.
// Precedence: flag > environment (SVC_*) > svc.config.jsonc > default.
// The table is the single source: flags are declared from it (cli/flags.ts) and
// docs/configuration.md lists it.

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { Problem } from '../problem.ts';
import { DEFAULT_LIVENESS, type LivenessWindows, NODE_DEAD_AFTER_MS } from '../registry/liveness.ts';
import { parseEgressEntry } from '../runtime-contract/egress.ts';
import { PACKAGE_ROOT } from '../version.ts';
import { hostPart, parseEndpoint, parseTunnelAddress, type TunnelAddress } from '../wireguard/address.ts';

export type SettingKind = 'string' | 'count' | 'bool' | 'list' | 'pairs';

/** One configurable setting. */
export interface SettingSpec {
  /** Dotted path in svc.config.jsonc and in the Settings object, e.g. `node.listen`. */
  path: string;
  /** Kebab-case flag name without dashes, e.g. `listen`. */
  flag: string;
  /** Environment variable. */
  env: string;
  kind: SettingKind;
  /** One line shown in `--help`. */
  help: string;
  /** Groups a command may declare: `bucket` flags are shared by every command with a bucket path. */
  group: 'bucket' | 'node' | 'wg' | 'runtime' | 'registry' | 'coordinator' | 'deploy' | 'api';
}

const s = (
  path: string,
  flag: string,
  kind: SettingKind,
  group: SettingSpec['group'],
  help: string,
  env = `SVC_${flag.toUpperCase().replaceAll('-', '_')}`,
): SettingSpec => ({ path, flag, env, kind, help, group });

/** The settings table, in the order of docs/cli.md's `svc sail` table. */
export const settingSpecs: readonly SettingSpec[] = [
  s(
    'bucket.endpoint',
    'endpoint',
    'string',
    'bucket',
    'S3-compatible endpoint URL, or file:///abs/dir',
    'SVC_S3_ENDPOINT',
  ),
  s('bucket.region', 'region', 'string', 'bucket', 'Bucket region', 'SVC_S3_REGION'),
  s('bucket.bucket', 'bucket', 'string', 'bucket', 'Bucket name', 'SVC_S3_BUCKET'),
  s('bucket.prefix', 'prefix', 'string', 'bucket', 'Key prefix inside the bucket', 'SVC_S3_PREFIX'),
  s('bucket.accessKey', 'access-key', 'string', 'bucket', 'Bucket access key id', 'SVC_S3_ACCESS_KEY'),
  s('bucket.secretKey', 'secret-key', 'string', 'bucket', 'Bucket secret key', 'SVC_S3_SECRET_KEY'),
  s('node.id', 'node-id', 'string', 'node', 'Id the node registers under'),
  s('node.stateDir', 'state-dir', 'string', 'node', "Directory for the node's identity"),
  s(
    'node.labels',
    'node-labels',
    'pairs',
    'node',
    'key=value, one pair per flag, for applications to select on',
  ),
  s('node.listen', 'listen', 'string', 'node', 'host:port the node API binds to'),
  s('node.advertise', 'advertise', 'string', 'node', 'host:port other nodes reach this one at'),
  s('network.transport', 'transport', 'string', 'wg', '`wireguard` or `none`'),
  s('network.wgAddress', 'wg-address', 'string', 'wg', 'Tunnel address with prefix length'),
  s(
    'network.wgEndpoint',
    'wg-endpoint',
    'string',
    'wg',
    'host:port peers send tunnel traffic to (port defaults to --wg-port)',
  ),
  s('network.wgPort', 'wg-port', 'count', 'wg', 'UDP port of the tunnel interface'),
  s('platform.domains', 'platform-domains', 'list', 'api', 'Apex domain to serve; repeatable'),
  s(
    'ingress.token',
    'ingress-token',
    'list',
    'api',
    'Token admitted on /v1/ingress and /v1/storage; repeat to admit the previous one during rotation',
  ),
  s('runtime.cellBin', 'cell-bin', 'string', 'runtime', 'Executable that runs one application'),
  s(
    'runtime.cellEnv',
    'cell-env',
    'pairs',
    'runtime',
    'Runtime variable for every process, NAME=value per flag',
  ),
  s('runtime.portRangeStart', 'port-range-start', 'count', 'runtime', 'First port for runtime processes'),
  s('runtime.portRangeEnd', 'port-range-end', 'count', 'runtime', 'Last port for runtime processes'),
  s(
    'runtime.portQuarantineMs',
    'port-quarantine-ms',
    'count',
    'runtime',
    'How long a released port is kept from a different application',
  ),
  s('runtime.bindHost', 'bind-host', 'string', 'runtime', 'Address runtime processes bind to'),
  s(
    'runtime.appMemoryMb',
    'app-memory-mb',
    'count',
    'runtime',
    "Memory one application's runtime processes may use together, in MiB (cgroup; 0: no limit)",
  ),
  s(
    'runtime.appCpuMs',
    'app-cpu-ms',
    'count',
    'runtime',
    'CPU time a workerd may run without once waiting before it is restarted, in ms (0: no limit)',
  ),
  s(
    'runtime.appCpus',
    'app-cpus',
    'count',
    'runtime',
    "Cores one application's runtime processes may use at once (cgroup quota; 0: none, equal weights)",
  ),
  s(
    'runtime.egressAllow',
    'egress-allow',
    'list',
    'runtime',
    'Private address, CIDR range or host name workers may fetch; app=… for one application; repeatable',
  ),
  s(
    'runtime.geoipDb',
    'geoip-db',
    'string',
    'runtime',
    'MaxMind DB file (.mmdb) request.cf geolocation is read from; unset: none',
  ),
  s(
    'registry.resyncMs',
    'registry-resync-ms',
    'count',
    'registry',
    'Full registry re-read interval (a safety net: changes announce themselves through the change marker)',
  ),
  s(
    'registry.nodeRefreshMs',
    'registry-node-refresh-ms',
    'count',
    'registry',
    'Node record re-read interval (heartbeats are read every pass from the listing alone)',
  ),
  s(
    'liveness.heartbeatMs',
    'heartbeat-ms',
    'count',
    'registry',
    'How often a node rewrites its record (its heartbeat); every node of a fleet the same',
  ),
  s(
    'liveness.deadAfterMs',
    'node-dead-after-ms',
    'count',
    'registry',
    'A node watched this long without a beat leaves routing',
  ),
  s(
    'liveness.lostAfterMs',
    'node-lost-after-ms',
    'count',
    'registry',
    'A node watched this long without a beat loses its placements to other nodes',
  ),
  s(
    'coordinator.leaseTtlMs',
    'coordinator-lease-ttl-ms',
    'count',
    'coordinator',
    'Coordinator lease lifetime; renewed at a third of it',
  ),
  s(
    'coordinator.reapIntervalMs',
    'coordinator-reap-interval-ms',
    'count',
    'coordinator',
    'Time between reap passes while coordinating',
  ),
  s(
    'applications.retireGraceMs',
    'retire-grace-ms',
    'count',
    'coordinator',
    'How long a retired application can be unretired before deletion',
  ),
  s(
    'deploy.artifactBytes',
    'artifact-bytes',
    'count',
    'deploy',
    'Max compressed and expanded bytes per deploy artifact',
  ),
  s('deploy.archiveEntries', 'archive-entries', 'count', 'deploy', 'Max entries per deploy archive'),
  s('deploy.activeTasks', 'active-tasks', 'count', 'deploy', 'Max active deploy tasks per node'),
  s(
    'deploy.applicationActiveTasks',
    'application-active-tasks',
    'count',
    'deploy',
    'Max active deploy tasks per application',
  ),
  s('deploy.queuedTasks', 'queued-tasks', 'count', 'deploy', 'Max receiving and queued deploys per node'),
  s(
    'deploy.applicationQueuedTasks',
    'application-queued-tasks',
    'count',
    'deploy',
    'Max receiving and queued deploys per application',
  ),
  s('deploy.stagedBytes', 'staged-bytes', 'count', 'deploy', 'Max staged deploy bytes per node'),
  s(
    'deploy.applicationStagedBytes',
    'application-staged-bytes',
    'count',
    'deploy',
    'Max staged deploy bytes per application',
  ),
  s('deploy.receiveTimeoutMs', 'receive-timeout-ms', 'count', 'deploy', 'Deploy receive deadline'),
  s('deploy.queueTimeoutMs', 'queue-timeout-ms', 'count', 'deploy', 'Deploy queue deadline'),
  s('deploy.taskTimeoutMs', 'task-timeout-ms', 'count', 'deploy', 'Deploy active-task deadline'),
  s('deploy.outputBytes', 'output-bytes', 'count', 'deploy', 'Subprocess output tail kept in memory'),
  s(
    'observability.enabled',
    'observability',
    'bool',
    'api',
    "Emit the node's own events and give runtime processes CELL_OTEL=1",
  ),
  s(
    'observability.ingressAccessLog',
    'ingress-access-log',
    'string',
    'api',
    'File the ingress writes its JSON access log to; followed to count requests per application; needs --observability',
  ),
  s(
    'observability.flushMs',
    'observability-flush-ms',
    'count',
    'api',
    'How often events and metric snapshots are written to the bucket',
  ),
  s(
    'metrics.listen',
    'metrics-listen',
    'string',
    'api',
    'host:port serving GET /metrics in the Prometheus text format; unset: nothing listens',
  ),
  s(
    'metrics.token',
    'metrics-token',
    'string',
    'api',
    'Bearer token GET /metrics asks for; needs --metrics-listen; unset: no token asked',
  ),
  s('api.public', 'api-public', 'bool', 'api', 'Serve the fleet API at each platform apex'),
  s('api.jsonBytes', 'json-bytes', 'count', 'api', 'Max bytes of a JSON control request'),
  s(
    'ingress.entryPoints',
    'proxyb-entrypoints',
    'list',
    'api',
    'Entry point for the routers of the second proxy format; repeatable',
  ),
];

/** The typed settings every part of the daemon reads. */
export interface Settings {
  bucket: {
    endpoint?: string;
    region?: string;
    bucket?: string;
    prefix?: string;
    accessKey?: string;
    secretKey?: string;
  };
  node: { id?: string; stateDir: string; labels: Record<string, string>; listen: string; advertise?: string };
  network: { transport: 'none' | 'wireguard'; wgAddress?: string; wgEndpoint?: string; wgPort: number };
  platform: { domains: string[] };
  ingress: { token: string[]; entryPoints: string[] };
  runtime: {
    cellBin: string;
    cellEnv: Record<string, string>;
    portRangeStart: number;
    portRangeEnd: number;
    portQuarantineMs: number;
    bindHost: string;
    appMemoryMb: number;
    appCpuMs: number;
    appCpus: number;
    egressAllow: string[];
    /** Absolute path of the MaxMind DB request.cf is filled from (docs/runtime.md). */
    geoipDb?: string;
  };
  registry: { resyncMs: number; nodeRefreshMs: number };
  liveness: LivenessWindows;
  coordinator: { leaseTtlMs: number; reapIntervalMs: number };
  applications: { retireGraceMs: number };
  deploy: {
    artifactBytes: number;
    archiveEntries: number;
    activeTasks: number;
    applicationActiveTasks: number;
    queuedTasks: number;
    applicationQueuedTasks: number;
    stagedBytes: number;
    applicationStagedBytes: number;
    receiveTimeoutMs: number;
    queueTimeoutMs: number;
    taskTimeoutMs: number;
    outputBytes: number;
  };
  observability: { enabled: boolean; ingressAccessLog?: string; flushMs: number };
  metrics: { listen?: string; token?: string };
  api: { public: boolean; jsonBytes: number };
}

const MiB = 1024 * 1024;

/** Documented defaults (docs/configuration.md). */
export function defaultSettings(): Settings {
  const stateHome = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return {
    bucket: {},
    node: { stateDir: join(stateHome, 'svc'), labels: {}, listen: '127.0.0.1:7311' },
    network: { transport: 'none', wgPort: 51820 },
    platform: { domains: [] },
    ingress: { token: [], entryPoints: ['web'] },
    runtime: {
      cellBin: join(PACKAGE_ROOT, 'runtime', 'bin', 'cell'),
      cellEnv: {},
      portRangeStart: 24000,
      portRangeEnd: 24998,
      portQuarantineMs: 600_000,
      bindHost: '127.0.0.1',
      // Cloudflare's 128 MB per isolate, plus what a workerd process and the front
      // hold besides, and a second workerd while a deploy switches (docs/decisions.md).
      appMemoryMb: 512,
      // Cloudflare's default CPU time per request (paid plan; `limits.cpu_ms` raises it).
      appCpuMs: 30_000,
      appCpus: 0,
      egressAllow: [],
    },
    registry: { resyncMs: 300_000, nodeRefreshMs: 30_000 },
    liveness: { ...DEFAULT_LIVENESS },
    coordinator: { leaseTtlMs: 45_000, reapIntervalMs: 600_000 },
    applications: { retireGraceMs: 7 * 24 * 3600_000 },
    deploy: {
      artifactBytes: 64 * MiB,
      archiveEntries: 10_000,
      activeTasks: 2,
      applicationActiveTasks: 1,
      queuedTasks: 16,
      applicationQueuedTasks: 4,
      stagedBytes: 512 * MiB,
      applicationStagedBytes: 128 * MiB,
      receiveTimeoutMs: 120_000,
      queueTimeoutMs: 600_000,
      taskTimeoutMs: 300_000,
      outputBytes: 64 * 1024,
    },
    observability: { enabled: false, flushMs: 60_000 },
    metrics: {},
    api: { public: true, jsonBytes: 65_536 },
  };
}

/** A raw value as it arrived, with where it came from (for refusals that name the source). */
export interface RawValue {
  value: unknown;
  source: string;
}

function invalidSetting(spec: SettingSpec, source: string, why: string): Problem {
  return new Problem('invalid-input', `Invalid setting ${spec.path}`, `${source}: ${why}`);
}

/** Turns one raw value into the setting's type, or refuses naming the setting and its source. */
export function coerceSetting(spec: SettingSpec, raw: RawValue): unknown {
  const { value, source } = raw;
  switch (spec.kind) {
    case 'string': {
      if (typeof value !== 'string') throw invalidSetting(spec, source, 'expected a string');
      return value;
    }
    case 'count': {
      const text = typeof value === 'number' ? String(value) : value;
      if (typeof text !== 'string' || !/^\d+$/.test(text.trim()) || !Number.isSafeInteger(Number(text))) {
        throw invalidSetting(spec, source, `expected a whole number >= 0, got ${JSON.stringify(value)}`);
      }
      return Number(text);
    }
    case 'bool': {
      if (typeof value === 'boolean') return value;
      const text = typeof value === 'string' ? value.trim().toLowerCase() : '';
      if (['1', 'true', 'yes', 'on'].includes(text)) return true;
      if (['0', 'false', 'no', 'off'].includes(text)) return false;
      throw invalidSetting(spec, source, `expected true or false, got ${JSON.stringify(value)}`);
    }
    case 'list': {
      const items = typeof value === 'string' ? value.split(',') : value;
      if (!Array.isArray(items) || items.some((item) => typeof item !== 'string')) {
        throw invalidSetting(spec, source, 'expected a list of strings');
      }
      return (items as string[]).map((item) => item.trim()).filter((item) => item !== '');
    }
    case 'pairs':
      return coercePairs(spec, raw);
  }
}

/**
 * `key=value` pairs: repeated flags (an array), an object in the config file, or in the
 * environment one pair per line (runtime values may hold commas; labels may also be
 * comma-separated).
 */
function coercePairs(spec: SettingSpec, { value, source }: RawValue): Record<string, string> {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value);
    if (entries.some(([, v]) => typeof v !== 'string'))
      throw invalidSetting(spec, source, 'values must be strings');
    return Object.fromEntries(entries) as Record<string, string>;
  }
  let pairs: unknown[];
  if (typeof value === 'string') {
    pairs = spec.path === 'runtime.cellEnv' ? value.split('\n') : value.split(/[\n,]/);
    pairs = pairs.filter((pair) => (pair as string).trim() !== '');
  } else if (Array.isArray(value)) {
    pairs = value;
  } else {
    throw invalidSetting(spec, source, 'expected key=value pairs');
  }
  const result: Record<string, string> = {};
  for (const pair of pairs) {
    const at = typeof pair === 'string' ? pair.indexOf('=') : -1;
    if (typeof pair !== 'string' || at < 1) {
      throw invalidSetting(spec, source, `expected key=value, got ${JSON.stringify(pair)}`);
    }
    result[pair.slice(0, at).trim()] = pair.slice(at + 1);
  }
  return result;
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const [group, name] = path.split('.') as [string, string];
  (target[group] as Record<string, unknown>)[name] = value;
}

/** Looks a dotted path up in the parsed config file; undefined when absent. */
export function readPath(source: unknown, path: string): unknown {
  let current = source;
  for (const part of path.split('.')) {
    if (!current || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

/** The three sources a setting can come from, highest precedence first. */
export interface SettingSources {
  /** Values from commander, keyed by flag name in camelCase as commander gives them. */
  flags: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
  /** The parsed svc.config.jsonc, or {} when there is none. */
  file: unknown;
  /** The config file's path, for refusals. */
  filePath?: string;
}

/** camelCase of a flag name, as commander stores it (`node-id` → `nodeId`). */
export function flagKey(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The one value a setting takes from the sources, or undefined when none sets it. */
function pick(spec: SettingSpec, sources: SettingSources): RawValue | undefined {
  const flagValue = sources.flags[flagKey(spec.flag)];
  if (flagValue !== undefined) return { value: flagValue, source: `--${spec.flag}` };
  const envValue = sources.env[spec.env];
  if (envValue !== undefined && envValue !== '') return { value: envValue, source: spec.env };
  const fileValue = readPath(sources.file, spec.path);
  if (fileValue !== undefined)
    return { value: fileValue, source: `${sources.filePath ?? 'config file'} ${spec.path}` };
  return undefined;
}

/** Resolves every setting from flags, environment and config file, then validates the result. */
export function resolveSettings(sources: SettingSources, only?: readonly SettingSpec[]): Settings {
  const settings = defaultSettings();
  /** Where each setting that was given came from, by path; absent means the default. */
  const given = new Map<string, string>();
  for (const spec of only ?? settingSpecs) {
    const raw = pick(spec, sources);
    if (raw === undefined) continue;
    setPath(settings as unknown as Record<string, unknown>, spec.path, coerceSetting(spec, raw));
    given.set(spec.path, raw.source);
  }
  validateSettings(settings);
  validateWireguard(settings, given);
  validateGeoipDb(settings, given);
  applyTransport(settings, given);
  settings.node.stateDir = resolve(settings.node.stateDir);
  return settings;
}

/**
 * Checks the WireGuard settings (each refusal names where the bad value came from): with
 * `--transport wireguard` a tunnel address is required; any given form is checked either way.
 * The endpoint is stored as `host:port`, its port defaulting to `--wg-port`.
 */
function validateWireguard(settings: Settings, given: Map<string, string>): void {
  const network = settings.network;
  const bad = (path: string, why: string) =>
    new Problem('invalid-input', `Invalid setting ${path}`, `${given.get(path) ?? path}: ${why}`);
  if (network.wgPort < 1 || network.wgPort > 65535)
    throw bad('network.wgPort', `the UDP port must be 1-65535, got ${network.wgPort}`);
  if (network.wgAddress !== undefined) {
    const address = parseTunnelAddress(network.wgAddress);
    if (typeof address === 'string') throw bad('network.wgAddress', address);
  } else if (network.transport === 'wireguard') {
    throw new Problem(
      'invalid-input',
      'Invalid setting network.wgAddress',
      '--wg-address (or SVC_WG_ADDRESS, or network.wgAddress in the config file) is required with --transport wireguard: the tunnel address with prefix length, such as 10.44.0.1/24',
    );
  }
  if (network.wgEndpoint !== undefined) {
    const endpoint = parseEndpoint(network.wgEndpoint, network.wgPort);
    if (typeof endpoint === 'string') throw bad('network.wgEndpoint', endpoint);
    network.wgEndpoint = endpoint.endpoint;
  }
}

/**
 * `--geoip-db` must name a MaxMind DB: a file that ends with its metadata, which starts with this
 * marker within the file's last 128 KiB (the format's own rule). Checked at start, so a wrong path
 * is one line here rather than every runtime process failing; stored absolute, as the runtime
 * processes start elsewhere.
 */
function validateGeoipDb(settings: Settings, given: Map<string, string>): void {
  const path = settings.runtime.geoipDb;
  if (path === undefined) return;
  const bad = (why: string) =>
    new Problem(
      'invalid-input',
      'Invalid setting runtime.geoipDb',
      `${given.get('runtime.geoipDb') ?? '--geoip-db'}: ${why}`,
    );
  if (path === '') throw bad('expected the path of a MaxMind DB file (.mmdb)');
  const absolute = resolve(path);
  let tail: Buffer;
  try {
    const fd = openSync(absolute, 'r');
    try {
      const size = fstatSync(fd).size;
      const length = Math.min(size, MMDB_METADATA_WINDOW);
      tail = Buffer.alloc(length);
      readSync(fd, tail, 0, length, size - length);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw bad(
      code === 'ENOENT'
        ? `${absolute} does not exist`
        : code === 'EISDIR'
          ? `${absolute} is a directory, not a MaxMind DB file`
          : `${absolute} cannot be read (${code ?? (err as Error).message})`,
    );
  }
  if (!tail.includes(MMDB_METADATA_MARKER))
    throw bad(
      `${absolute} is not a MaxMind DB (.mmdb) file, such as GeoLite2-City.mmdb or dbip-city-lite.mmdb`,
    );
  settings.runtime.geoipDb = absolute;
}

const MMDB_METADATA_MARKER = Buffer.concat([Buffer.from([0xab, 0xcd, 0xef]), Buffer.from('MaxMind.com')]);
const MMDB_METADATA_WINDOW = 128 * 1024;

/**
 * Over WireGuard the node is reached at its tunnel address: unless given, the node API listens
 * there (same port), advertises it, and runtime processes bind to it, so routing documents name
 * tunnel addresses. `svc health` resolves `node.listen` through the same rule.
 */
function applyTransport(settings: Settings, given: Map<string, string>): void {
  if (settings.network.transport !== 'wireguard') return;
  const tunnel = parseTunnelAddress(settings.network.wgAddress as string) as TunnelAddress;
  const port = (hostPort: string) => hostPort.slice(hostPort.lastIndexOf(':') + 1);
  if (!given.has('node.listen')) settings.node.listen = `${hostPart(tunnel)}:${port(settings.node.listen)}`;
  if (!given.has('node.advertise'))
    settings.node.advertise = `${hostPart(tunnel)}:${port(settings.node.listen)}`;
  if (!given.has('runtime.bindHost')) settings.runtime.bindHost = tunnel.ip;
}

const hostPort = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/** Checks relations between settings and the forms a plain type cannot express. */
function validateSettings(settings: Settings): void {
  const bad = (path: string, why: string) => new Problem('invalid-input', `Invalid setting ${path}`, why);
  for (const [path, value] of [
    ['node.listen', settings.node.listen],
    ['node.advertise', settings.node.advertise],
    ['metrics.listen', settings.metrics.listen],
  ] as const) {
    if (value === undefined) continue;
    const match = hostPort.exec(value);
    if (!match || Number(match[2]) > 65535)
      throw bad(path, `expected host:port, got ${JSON.stringify(value)}`);
  }
  if (!['none', 'wireguard'].includes(settings.network.transport)) {
    throw bad(
      'network.transport',
      `expected wireguard or none, got ${JSON.stringify(settings.network.transport)}`,
    );
  }
  const { portRangeStart, portRangeEnd } = settings.runtime;
  if (portRangeStart < 1 || portRangeEnd > 65535 || portRangeStart > portRangeEnd) {
    throw bad(
      'runtime.portRangeStart',
      `port range ${portRangeStart}-${portRangeEnd} is not within 1-65535 and ordered`,
    );
  }
  validateMetrics(settings.metrics, bad);
  if (settings.api.jsonBytes < 2) throw bad('api.jsonBytes', 'must be at least 2 bytes');
  if (settings.coordinator.leaseTtlMs < 3) throw bad('coordinator.leaseTtlMs', 'must be at least 3 ms');
  validateLiveness(settings.liveness, bad);
  for (const entry of settings.runtime.egressAllow) {
    const parsed = parseEgressEntry(entry);
    if (typeof parsed === 'string') throw bad('runtime.egressAllow', parsed);
  }
  for (const domain of settings.platform.domains) {
    if (!/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(domain)) {
      throw bad('platform.domains', `${JSON.stringify(domain)} is not a lowercase domain name`);
    }
  }
}

/** The token travels in a header: printable ASCII without spaces; and it guards only a listener. */
function validateMetrics(metrics: Settings['metrics'], bad: (path: string, why: string) => Problem): void {
  if (metrics.token === undefined) return;
  if (!/^[\x21-\x7e]{1,1024}$/.test(metrics.token))
    throw bad('metrics.token', 'must be 1-1024 printable ASCII characters without spaces');
  if (metrics.listen === undefined)
    throw bad(
      'metrics.token',
      'guards GET /metrics, which is served only with --metrics-listen; give both or neither',
    );
}

/**
 * The windows must leave a live node room to be seen beating (docs/fleet.md "Liveness"): more than
 * a heartbeat, lost no sooner than dead, and a heartbeat readers without history still see within
 * their fixed window.
 */
function validateLiveness(liveness: LivenessWindows, bad: (path: string, why: string) => Problem): void {
  const { heartbeatMs, deadAfterMs, lostAfterMs } = liveness;
  if (heartbeatMs < 100 || heartbeatMs > NODE_DEAD_AFTER_MS / 3)
    throw bad('liveness.heartbeatMs', `must be between 100 and ${NODE_DEAD_AFTER_MS / 3} ms`);
  if (deadAfterMs <= heartbeatMs)
    throw bad('liveness.deadAfterMs', `must be more than liveness.heartbeatMs (${heartbeatMs} ms)`);
  if (lostAfterMs < deadAfterMs)
    throw bad('liveness.lostAfterMs', `must be at least liveness.deadAfterMs (${deadAfterMs} ms)`);
}
