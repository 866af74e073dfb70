// The observability part of the daemon (`--observability`, `--ingress-access-log`): it gives the
// other parts their event sink (`ctx.events`), writes the events in batches and, with an access
// log, follows it and writes the meter's snapshots, all on one flush interval. The coordinator
// reaps shards past the retention about once an hour. Off, the sink does nothing and nothing runs.

import type { Settings } from '../config/settings.ts';
import type { DaemonService, NodeContext } from '../node/context.ts';
import { Problem } from '../problem.ts';
import { keys } from '../registry/keys.ts';
import { renderRouting } from '../routing/render.ts';
import { resolveRequest } from '../routing/resolve.ts';
import type { FleetRouting, RoutingInput } from '../routing/types.ts';
import type { Store } from '../store/store.ts';
import { parseAccessLine } from './access-log.ts';
import { noEvents } from './events.ts';
import { LogFollower } from './follower.ts';
import { RETENTION_MS } from './hours.ts';
import { Meter } from './meter.ts';
import { LEFTOVER_GRACE_MS, reapShards } from './reap.ts';
import { EventRecorder } from './recorder.ts';

/** How often the access log is read. */
export const FOLLOW_MS = 1_000;
/** How often the coordinator looks for shards past the retention. */
export const REAP_EVERY_MS = 3_600_000;

/** `--ingress-access-log` counts into the bucket only when observability is on. */
export function checkObservabilitySettings(settings: Settings): void {
  const { enabled, ingressAccessLog } = settings.observability;
  if (ingressAccessLog && !enabled) {
    throw new Problem(
      'invalid-input',
      'Access log needs observability',
      `--ingress-access-log ${ingressAccessLog} is followed only with --observability (SVC_OBSERVABILITY=true); turn it on or drop the access log`,
    );
  }
}

export function observabilityService(): DaemonService {
  let stop: (() => Promise<void>) | null = null;
  return {
    name: 'observability',
    async start(ctx) {
      ctx.events = noEvents;
      if (ctx.settings.observability.enabled) stop = await startObservability(ctx);
    },
    async stop() {
      await stop?.();
      stop = null;
    },
  };
}

async function startObservability(ctx: NodeContext): Promise<() => Promise<void>> {
  const { store, nodeId, log, settings } = ctx;
  const recorder = new EventRecorder({ store, nodeId, log });
  ctx.events = recorder;
  const path = settings.observability.ingressAccessLog;
  let meter: Meter | null = null;
  let follower: LogFollower | null = null;
  if (path) {
    const m = new Meter({
      store,
      nodeId,
      applicationOf: applicationResolver(ctx),
      log,
      counted: (application, entry) => ctx.metrics?.served(application, entry),
    });
    meter = m;
    await m.resume().catch((err) => log.warn({ err }, 'could not read this node’s last metrics snapshot'));
    follower = new LogFollower(path, (line) => {
      const entry = parseAccessLine(line);
      if (entry) m.count(entry);
    });
  }
  let reapedAt = Date.now();
  const flush = async () => {
    await follower?.poll();
    await Promise.all([recorder.flush(), meter?.flush()]);
    if (Date.now() - reapedAt >= REAP_EVERY_MS) {
      reapedAt = Date.now();
      await reap(store, nodeId, reapedAt, ctx.lease?.isCoordinator() ?? false).catch((err) =>
        log.warn({ err }, 'reaping observability shards failed'),
      );
    }
  };
  const timers = [
    setInterval(
      () => void flush().catch((err) => log.warn({ err }, 'observability flush failed')),
      Math.max(100, settings.observability.flushMs),
    ),
    ...(follower ? [setInterval(() => void follower.poll(), FOLLOW_MS)] : []),
  ];
  // The first poll opens an existing log at its end: only what is served from now on counts.
  await follower?.poll();
  return async () => {
    for (const timer of timers) clearInterval(timer);
    await flush();
    await follower?.close();
    ctx.events = noEvents;
  };
}

/** Host to application as the routing this node serves says; the document is re-rendered per pass. */
function applicationResolver(ctx: NodeContext): (host: string, uri: string) => string | undefined {
  let input: RoutingInput | null = null;
  let doc: FleetRouting | null = null;
  return (host, uri) => {
    const current = ctx.routing?.current() ?? null;
    if (!current) return undefined;
    if (current !== input) {
      input = current;
      doc = renderRouting(current);
    }
    return resolveRequest(doc!, host, uri.split('?')[0] ?? '/').application;
  };
}

/** This node's own expired shards; on the coordinator also whatever departed nodes left. */
export async function reap(store: Store, nodeId: string, nowMs: number, coordinator: boolean): Promise<void> {
  for (const prefix of [keys.eventsPrefix, keys.metricsPrefix]) {
    await reapShards(store, prefix, nowMs, { node: nodeId });
    if (coordinator)
      await reapShards(store, prefix, nowMs, { retentionMs: RETENTION_MS + LEFTOVER_GRACE_MS });
  }
}
