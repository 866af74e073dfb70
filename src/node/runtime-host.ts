// The node's runtime host (docs/runtime.md "The runtime host"; docs/supervisor.md): the daemon
// answers what its runtimes need from the bucket (the selector and a deployment's files, node
// leases, cron claims) on one owner-only Unix socket in its state directory, through the bucket
// client it already holds. So an application's runtime keeps no Node process and opens no bucket
// client of its own, and a redeploy costs the runtime no bucket read. It starts before the fleet
// and stops after it: a draining runtime releases its lease through it. Beside it, the bindings
// socket answers the workers' KV calls (docs/bindings.md "KV namespaces"), and the services
// socket their service bindings to other applications (docs/bindings.md "Service bindings").

import { join } from 'node:path';
import { D1Service } from '../../runtime/src/bindings/d1.ts';
import { type D1Socket, listenD1Socket } from '../../runtime/src/bindings/d1-socket.ts';
import { type KvSocket, listenKvSocket } from '../../runtime/src/bindings/kv-socket.ts';
import { HostObjects } from '../../runtime/src/bindings/objects-host.ts';
import { QueueWakers } from '../../runtime/src/bindings/queue-runner.ts';
import { D1_SOCKET } from '../../runtime/src/bindings/r2-headers.ts';
import { listenServiceSocket, type ServiceSocket } from '../../runtime/src/bindings/service.ts';
import { SERVICES_SOCKET } from '../../runtime/src/bindings/service-headers.ts';
import { applicationRpcKey } from '../../runtime/src/bindings/service-rpc.ts';
import { serviceTarget } from '../../runtime/src/bindings/service-targets.ts';
import { HealthAsks } from '../../runtime/src/host/health-asks.ts';
import { type HostSocket, listenHostSocket } from '../../runtime/src/host/socket.ts';
import type { DaemonService } from './context.ts';
import { forwardQuery } from './routes/d1.ts';
import { nudgeQueueHolder } from './routes/queues.ts';

/** The socket's path in a node's state directory; `cell serve` is told it as CELL_HOST_SOCKET. */
export function runtimeHostSocketPath(stateDir: string): string {
  return join(stateDir, 'runtime.sock');
}

/** The KV bindings socket beside it (runtime/src/bindings/kv.ts); workerd's config names it. */
export function bindingsSocketPath(stateDir: string): string {
  return join(stateDir, 'bindings.sock');
}

export function runtimeHostService(): DaemonService {
  let socket: HostSocket | null = null;
  let objects: HostObjects | null = null;
  let bindings: KvSocket | null = null;
  let services: ServiceSocket | null = null;
  let d1: { service: D1Service; socket: D1Socket } | null = null;
  return {
    name: 'runtime-host',
    async start(ctx) {
      const log = ctx.log.child({ part: 'runtime-host' });
      // With --metrics-listen, each binding call is counted (src/metrics/binding-calls.ts).
      const observe = ctx.metrics?.observeBindingCall;
      // A producer's message wakes this node's consumer of its queue, and a consumer that finds
      // its queue held by another node wakes that node's (docs/bindings.md "Queues").
      const queueWakers = new QueueWakers(nudgeQueueHolder(ctx));
      ctx.queueWakers = queueWakers;
      const kv = await listenKvSocket(
        bindingsSocketPath(ctx.settings.node.stateDir),
        ctx.store,
        (line) => log.warn(line),
        observe,
        queueWakers.sent,
      );
      bindings = kv;
      // Service bindings to other applications (docs/bindings.md "Service bindings"), found in the
      // fleet state of the last reconcile pass.
      services = await listenServiceSocket(
        join(ctx.settings.node.stateDir, SERVICES_SOCKET),
        (application) => serviceTarget(ctx.routing?.current() ?? null, application),
        (line) => log.warn(line),
        observe,
        (application) => applicationRpcKey(ctx.store, application),
      );
      // D1 (docs/bindings.md "D1 databases"): this node's copies under its state directory; a
      // query for a database another node holds goes to that node.
      const d1Service = new D1Service({
        store: ctx.store,
        node: ctx.nodeId,
        dataDir: join(ctx.settings.node.stateDir, 'd1'),
        log: (line) => log.warn(line),
        forward: forwardQuery(ctx),
      });
      d1 = {
        service: d1Service,
        socket: await listenD1Socket(
          join(ctx.settings.node.stateDir, D1_SOCKET),
          d1Service,
          (line) => log.warn(line),
          observe,
        ),
      };
      ctx.d1 = d1Service;
      objects = new HostObjects(ctx.store);
      // The supervisor asks a ready runtime for its health over its connection (health-asks.ts).
      const healthAsks = new HealthAsks();
      ctx.runtimeHealth = healthAsks;
      socket = await listenHostSocket(runtimeHostSocketPath(ctx.settings.node.stateDir), {
        store: ctx.store,
        name: `svc ${ctx.version}`,
        log: (line) => log.warn(line),
        bindingsSocket: async () => kv.path,
        queueWakers,
        objects,
        // A front's health changed: the supervisor, which probes ready fronts rarely, probes it now.
        healthMoved: (application) => ctx.fleet?.runtimeHealthMoved?.(application),
        healthAsks,
        // A front whose connection ended may have exited: one the daemon adopted has no exit event.
        disconnected: (application) => ctx.fleet?.runtimeHealthMoved?.(application),
      });
    },
    // On a restart (SIGUSR2) too: the runtimes keep serving, and connect to the next daemon.
    async stop() {
      // The runtimes serve on (a restart) or were stopped already (a drain): the objects' holders
      // let go without stopping anything, and the next daemon takes their leases back.
      await objects?.detach();
      objects = null;
      await socket?.close();
      socket = null;
      await bindings?.close();
      bindings = null;
      await services?.close();
      services = null;
      // Every database's lease is released, so another node takes it at once, not after expiry.
      await d1?.socket.close();
      await d1?.service.close();
      d1 = null;
    },
  };
}
