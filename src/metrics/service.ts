// The metrics part of the daemon (`--metrics-listen`; docs/observability.md "Prometheus
// metrics"): it puts the metrics in the way of the event sink the observability part set up, so
// every event the later parts emit is counted, and serves GET /metrics until the node stops.

import type { DaemonService } from '../node/context.ts';
import { noEvents } from '../observability/events.ts';
import { type MetricsEndpoint, startMetricsEndpoint } from './endpoint.ts';
import type { NodeMetrics } from './node-metrics.ts';

export function metricsService(metrics: NodeMetrics | null): DaemonService {
  let endpoint: MetricsEndpoint | null = null;
  return {
    name: 'metrics',
    async start(ctx) {
      const { listen, token } = ctx.settings.metrics;
      if (!metrics || !listen) return;
      ctx.events = metrics.tee(ctx.events ?? noEvents);
      endpoint = await startMetricsEndpoint({
        listen,
        token,
        exposition: () => metrics.exposition(),
        contentType: metrics.registry.contentType,
        onError: (err) => ctx.log.warn({ err }, 'collecting the metrics failed'),
      });
      ctx.log.info({ url: `${endpoint.url}/metrics` }, 'serving metrics');
    },
    async stop() {
      await endpoint?.close();
      endpoint = null;
    },
  };
}
