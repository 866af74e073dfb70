// The node daemon behind `svc sail` (docs/cli.md "svc sail"; docs/architecture.md "How a request flows"):
// opens and self-tests the bucket, binds the node API, and stops cleanly on a signal.

import { mkdir } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { Settings } from '../config/settings.ts';
import type { NodeMetrics } from '../metrics/node-metrics.ts';
import { metricsService } from '../metrics/service.ts';
import { meteredStore } from '../metrics/store.ts';
import { checkObservabilitySettings, observabilityService } from '../observability/service.ts';
import { openStore } from '../store/open.ts';
import { selfTestStore } from '../store/selftest.ts';
import { SVC_VERSION } from '../version.ts';
import type { DaemonService, NodeContext, StopOptions } from './context.ts';
import { deployService } from './deploys/service.ts';
import { fleetService } from './fleet/service.ts';
import { identityService } from './identity-service.ts';
import { settleMemory } from './memory-settle.ts';
import { ensureNodeId } from './node-id.ts';
import { runtimeHostService } from './runtime-host.ts';
import { buildServer } from './server.ts';

/** Builds the daemon's services for one context; each concern adds its own here. */
function buildServices(_ctx: NodeContext, metrics: NodeMetrics | null): DaemonService[] {
  // Observability first, so every later service has its event sink, and it stops last, writing
  // the events of the drain. Metrics next: it counts what goes into that sink. Identity next:
  // every later service may sign node tokens or need the ingress tokens. The runtime host before
  // the fleet, so that it still answers the runtimes the fleet drains. The fleet last, so it stops
  // (drains) first.
  return [
    observabilityService(),
    metricsService(metrics),
    identityService(),
    deployService(),
    runtimeHostService(),
    fleetService(),
  ];
}

/** A started daemon. */
export interface Daemon {
  ctx: NodeContext;
  url: string;
  server: FastifyInstance;
  stop(options?: StopOptions): Promise<void>;
}

/** Starts every part of the daemon and answers once the API is serving. */
export async function startDaemon(settings: Settings): Promise<Daemon> {
  checkObservabilitySettings(settings);
  const log = pino({ name: 'svc', level: process.env.SVC_LOG_LEVEL ?? 'info' }, pino.destination(2));
  await mkdir(settings.node.stateDir, { recursive: true, mode: 0o700 });
  const nodeId = await ensureNodeId(settings.node.stateDir, settings.node.id);
  // With --metrics-listen every bucket request is counted: the store is wrapped once, here. The
  // metrics client (prom-client, and OpenTelemetry's API it pulls in) is loaded only then: a node
  // without it keeps about 2 MB of heap less (bench/RESULTS.md "1,000 idle applications").
  const metrics = settings.metrics.listen
    ? new (await import('../metrics/node-metrics.ts')).NodeMetrics(nodeId, () => ctx)
    : null;
  const opened = await openStore({ ...settings.bucket, stateDir: settings.node.stateDir });
  const store = metrics ? meteredStore(opened, metrics) : opened;
  try {
    await selfTestStore(store);
  } catch (err) {
    await store.close();
    throw err;
  }
  const ctx: NodeContext = { settings, store, nodeId, version: SVC_VERSION, log };
  if (metrics) ctx.metrics = metrics;
  const services = buildServices(ctx, metrics);
  const started: DaemonService[] = [];
  const stopServices = async (options: StopOptions = {}) => {
    for (const service of started.reverse()) await service.stop(options);
  };
  const server = await buildServer(ctx);
  try {
    for (const service of services) {
      await service.start(ctx);
      started.push(service);
    }
    const [host, port] = splitHostPort(settings.node.listen);
    await server.listen({ host, port });
  } catch (err) {
    await stopServices();
    await store.close();
    throw err;
  }
  const [host, port] = splitHostPort(settings.node.listen);
  const address = server.server.address();
  const boundPort = typeof address === 'object' && address ? address.port : port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  log.info({ url, node: nodeId, store: store.description }, 'serving');
  return {
    ctx,
    url,
    server,
    async stop(options: StopOptions = {}) {
      await server.close();
      await stopServices(options);
      await store.close();
    },
  };
}

/**
 * Runs the daemon until a signal: SIGTERM or SIGINT drain the node and stop its applications;
 * SIGUSR2 exits leaving the applications serving, for a restart or an upgrade of the daemon (the
 * next run on the same state directory adopts them; docs/supervisor.md).
 */
export async function runDaemon(settings: Settings): Promise<void> {
  const daemon = await startDaemon(settings);
  // Listening for signals before saying so: whoever reads the line may stop the node at once.
  const signal = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGUSR2', () => resolve('SIGUSR2'));
  });
  process.stdout.write(`svc ${SVC_VERSION} listening on ${daemon.url} as node "${daemon.ctx.nodeId}"\n`);
  // Memory a start burst (or any other) left resident goes back once it is garbage.
  const settler = settleMemory();
  const name = await signal;
  settler.stop();
  const keepApplications = name === 'SIGUSR2';
  daemon.ctx.log.info(
    { signal: name, keepApplications },
    keepApplications ? 'restarting: applications keep serving' : 'stopping',
  );
  await daemon.stop({ keepApplications });
}

function splitHostPort(listen: string): [string, number] {
  const at = listen.lastIndexOf(':');
  return [listen.slice(0, at).replace(/^\[(.*)\]$/, '$1'), Number(listen.slice(at + 1))];
}
