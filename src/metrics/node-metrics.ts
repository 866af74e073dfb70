// The node's Prometheus metrics (docs/observability.md "Prometheus metrics"): one registry per
// daemon, filled from the places that already know the values. Events the daemon's parts emit
// (reconcile passes, deploy outcomes, process exits, the coordinator lease) are counted as they
// pass through the event sink; the bucket store is timed by a wrapper (store.ts); requests per
// application come from the access-log lines the observability meter counts; gauges (lease,
// deploy queue, runtime processes) are read from the daemon's memory when scraped, the runtime
// processes' CPU and memory from /proc (process-usage.ts); binding calls are seen on the runtime
// host's sockets (binding-calls.ts). Labels stay bounded: application, operation, kind, outcome,
// status class; the node id is on every series.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { EventInput, EventSink } from '../observability/events.ts';
import { LATENCY_BOUNDS_MS, statusClass } from '../observability/totals.ts';
import { type BindingCall, bindingCallObserver } from './binding-calls.ts';
import { processGroupUsage } from './process-usage.ts';

/** What the scrape-time gauges read of the running daemon (its context's slots). */
export interface DaemonState {
  lease?: { isCoordinator(): boolean } | undefined;
  fleet?: {
    coordinator(): { fence: number } | null;
    processes(): { application: string; ready: boolean; pid?: number }[];
  };
  deploys?: { limits: { counts(): { node: { pending: number; active: number; staged: number } } } };
}

/** What the meter saw of one request: the fields a counter or the histogram takes. */
export interface ServedRequest {
  status: number;
  durationMs: number;
  bytesIn: number;
  bytesOut: number;
}

export type BucketOperation = 'get' | 'put' | 'delete' | 'list' | 'stat';
export type BucketOutcome = 'ok' | 'not-found' | 'conflict' | 'error';

/** Reconcile passes and bucket requests: from a millisecond to the bucket's own timeouts. */
const DAEMON_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class NodeMetrics {
  readonly registry = new Registry();
  readonly #reconcile: Histogram<'outcome'>;
  readonly #bucketRequests: Counter<'operation' | 'outcome'>;
  readonly #bucketSeconds: Histogram<'operation'>;
  readonly #leaseChanges: Counter<'outcome'>;
  readonly #deploys: Counter<'application' | 'outcome'>;
  readonly #restarts: Counter<'application'>;
  readonly #requests: Counter<'application' | 'status_class'>;
  readonly #requestSeconds: Histogram<'application'>;
  readonly #bytesIn: Counter<'application'>;
  readonly #bytesOut: Counter<'application'>;
  readonly #bindingCalls: Counter<'application' | 'kind' | 'outcome'>;
  readonly #bindingSeconds: Histogram<'kind'>;

  constructor(nodeId: string, state: () => DaemonState) {
    const registers = [this.registry];
    this.registry.setDefaultLabels({ node: nodeId });
    collectDefaultMetrics({ register: this.registry });
    // Gauges named like counters, which `promtool check metrics` refuses; each is the sum of the
    // by-type gauge prom-client also serves (`nodejs_active_handles{type}`...).
    for (const name of [
      'nodejs_active_handles_total',
      'nodejs_active_requests_total',
      'nodejs_active_resources_total',
    ])
      this.registry.removeSingleMetric(name);
    this.#reconcile = new Histogram({
      name: 'svc_reconcile_pass_duration_seconds',
      help: 'Duration of the reconcile passes of this node, by outcome (ok, error)',
      labelNames: ['outcome'],
      buckets: DAEMON_SECONDS,
      registers,
    });
    this.#bucketRequests = new Counter({
      name: 'svc_bucket_requests_total',
      help: 'Requests of this daemon to the bucket, by operation and outcome (ok, not-found, conflict, error)',
      labelNames: ['operation', 'outcome'],
      registers,
    });
    this.#bucketSeconds = new Histogram({
      name: 'svc_bucket_request_duration_seconds',
      help: 'Duration of the requests of this daemon to the bucket, by operation',
      labelNames: ['operation'],
      buckets: DAEMON_SECONDS,
      registers,
    });
    new Gauge({
      name: 'svc_coordinator_lease_held',
      help: '1 while this node holds the coordinator lease, else 0',
      registers,
      collect() {
        this.set(state().lease?.isCoordinator() ? 1 : 0);
      },
    });
    new Gauge({
      name: 'svc_coordinator_lease_fence',
      help: 'Fence of the coordinator lease as this node last saw it (0 while none is known)',
      registers,
      collect() {
        this.set(state().fleet?.coordinator()?.fence ?? 0);
      },
    });
    this.#leaseChanges = new Counter({
      name: 'svc_coordinator_lease_changes_total',
      help: 'Times this node acquired or lost the coordinator lease, by outcome (acquired, lost)',
      labelNames: ['outcome'],
      registers,
    });
    this.#deployGauges(state, registers);
    this.#deploys = new Counter({
      name: 'svc_deploys_total',
      help: 'Deploys this node accepted that ended, by application and outcome (deployed, failed)',
      labelNames: ['application', 'outcome'],
      registers,
    });
    this.#restarts = new Counter({
      name: 'svc_runtime_process_restarts_total',
      help: 'Exits of a runtime process that the supervisor answered with a restart, by application',
      labelNames: ['application'],
      registers,
    });
    this.#processGauges(state, registers);
    this.#requests = new Counter({
      name: 'svc_http_requests_total',
      help: 'Requests the ingress in front of this node served, by application and status class',
      labelNames: ['application', 'status_class'],
      registers,
    });
    this.#requestSeconds = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Duration of the requests the ingress in front of this node served, by application',
      labelNames: ['application'],
      buckets: LATENCY_BOUNDS_MS.map((ms) => ms / 1000),
      registers,
    });
    this.#bytesIn = new Counter({
      name: 'svc_http_request_body_bytes_total',
      help: 'Request body bytes the ingress in front of this node read, by application',
      labelNames: ['application'],
      registers,
    });
    this.#bytesOut = new Counter({
      name: 'svc_http_response_body_bytes_total',
      help: 'Response body bytes the ingress in front of this node sent, by application',
      labelNames: ['application'],
      registers,
    });
    this.#bindingCalls = new Counter({
      name: 'svc_binding_calls_total',
      help: 'Calls of the workers of this node through their bindings, by application, kind (kv, r2, d1, service) and outcome (ok, not-found, refused, error)',
      labelNames: ['application', 'kind', 'outcome'],
      registers,
    });
    this.#bindingSeconds = new Histogram({
      name: 'svc_binding_call_duration_seconds',
      help: 'Duration of the binding calls the runtime host of this node answered, by kind',
      labelNames: ['kind'],
      buckets: DAEMON_SECONDS,
      registers,
    });
  }

  #deployGauges(state: () => DaemonState, registers: Registry[]): void {
    const counts = () => state().deploys?.limits.counts().node ?? { pending: 0, active: 0, staged: 0 };
    new Gauge({
      name: 'svc_deploy_queue_depth',
      help: 'Deploys this node is receiving or holding queued for a runner',
      registers,
      collect() {
        this.set(counts().pending);
      },
    });
    new Gauge({
      name: 'svc_deploy_active',
      help: 'Deploys whose publish runs on this node now',
      registers,
      collect() {
        this.set(counts().active);
      },
    });
  }

  #processGauges(state: () => DaemonState, registers: Registry[]): void {
    const processes = () => state().fleet?.processes() ?? [];
    new Gauge({
      name: 'svc_runtime_processes',
      help: 'Runtime processes this node supervises, by application',
      labelNames: ['application'],
      registers,
      collect() {
        this.reset();
        for (const p of processes()) this.inc({ application: p.application });
      },
    });
    new Gauge({
      name: 'svc_runtime_process_ready',
      help: "1 when the application's runtime process on this node answers its health check, else 0",
      labelNames: ['application'],
      registers,
      collect() {
        this.reset();
        for (const p of processes()) this.set({ application: p.application }, p.ready ? 1 : 0);
      },
    });
    // Both read /proc once per scrape: prom-client collects every metric of a scrape before it
    // awaits any, so the second one collected takes the answer the first read.
    let read: ReturnType<typeof processUsage> | null = null;
    const usage = () => {
      if (!read) {
        read = processUsage(processes());
        queueMicrotask(() => {
          read = null;
        });
      }
      return read;
    };
    new Counter({
      name: 'svc_runtime_process_cpu_seconds_total',
      help: "CPU time of the application's runtime processes on this node (cell-front and its workerd), in seconds",
      labelNames: ['application'],
      registers,
      collect() {
        this.reset();
        for (const p of usage()) this.inc({ application: p.application }, p.cpuSeconds);
      },
    });
    new Gauge({
      name: 'svc_runtime_process_resident_memory_bytes',
      help: "Resident memory of the application's runtime processes on this node, summed",
      labelNames: ['application'],
      registers,
      collect() {
        this.reset();
        for (const p of usage()) this.inc({ application: p.application }, p.residentBytes);
      },
    });
  }

  /** The sink the daemon's parts emit into: each event counted here, then passed on. */
  tee(next: EventSink): EventSink {
    return {
      emit: (event) => {
        this.#count(event);
        next.emit(event);
      },
    };
  }

  #count(event: EventInput): void {
    const application = typeof event.application === 'string' ? event.application : '';
    switch (event.kind) {
      case 'reconcile.pass':
        if (typeof event.ms === 'number')
          this.#reconcile.observe({ outcome: event.ok === false ? 'error' : 'ok' }, event.ms / 1000);
        return;
      case 'coordinator.acquired':
      case 'coordinator.lost':
        this.#leaseChanges.inc({ outcome: event.kind.slice('coordinator.'.length) });
        return;
      case 'deploy.deployed':
      case 'deploy.failed':
        this.#deploys.inc({ application, outcome: event.kind.slice('deploy.'.length) });
        return;
      case 'process.exited':
      case 'process.crash-looping':
        this.#restarts.inc({ application });
        return;
    }
  }

  /** One bucket request, timed from its start. */
  bucketRequest(operation: BucketOperation, outcome: BucketOutcome, seconds: number): void {
    this.#bucketRequests.inc({ operation, outcome });
    this.#bucketSeconds.observe({ operation }, seconds);
  }

  /** One access-log line the meter counted for an application. */
  served(application: string, request: ServedRequest): void {
    this.#requests.inc({ application, status_class: statusClass(request.status) });
    this.#requestSeconds.observe({ application }, request.durationMs / 1000);
    if (request.bytesIn > 0) this.#bytesIn.inc({ application }, request.bytesIn);
    if (request.bytesOut > 0) this.#bytesOut.inc({ application }, request.bytesOut);
  }

  /** Each request to the runtime host's binding sockets, as it arrives: counted once answered. */
  readonly observeBindingCall: (req: IncomingMessage, res: ServerResponse) => void = bindingCallObserver(
    (call: BindingCall) => {
      this.#bindingCalls.inc({ application: call.application, kind: call.kind, outcome: call.outcome });
      this.#bindingSeconds.observe({ kind: call.kind }, call.seconds);
    },
  );

  /** The text exposition of every series. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }
}

/** CPU and memory of each supervised process that has a pid, by its application. */
function processUsage(processes: { application: string; pid?: number }[]) {
  const led = processes.filter((p): p is { application: string; pid: number } => p.pid !== undefined);
  const usage = processGroupUsage(led.map((p) => p.pid));
  return led.flatMap((p) => {
    const found = usage.get(p.pid);
    return found ? [{ application: p.application, ...found }] : [];
  });
}
