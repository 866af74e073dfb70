// `cell host` (docs/runtime.md "The runtime host"): with `--stdio`, the private host of a `cell serve`
// run without a node daemon: its front starts it once and talks to it on its stdin and stdout,
// and it exits when its input ends. With `--socket`, a node's host without svc's daemon. Either
// way it opens the bucket the environment names, and serves KV bindings (runtime/src/bindings/kv.ts)
// on a `bindings.sock` beside its socket (a private host: in the front's private folder), and a
// `services.sock` beside that, which, knowing no fleet, answers every service binding call to
// another application 503 (docs/bindings.md "Service bindings"), and a `d1.sock` for D1
// (docs/bindings.md "D1 databases").

import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { Store } from '../../../src/store/store.ts';
import { D1Service } from '../bindings/d1.ts';
import { type D1Socket, listenD1Socket } from '../bindings/d1-socket.ts';
import { type KvSocket, listenKvSocket } from '../bindings/kv-socket.ts';
import { HostObjects } from '../bindings/objects-host.ts';
import { QueueWakers } from '../bindings/queue-runner.ts';
import { D1_SOCKET } from '../bindings/r2-headers.ts';
import { listenServiceSocket, type ServiceSocket } from '../bindings/service.ts';
import { SERVICES_SOCKET } from '../bindings/service-headers.ts';
import { noFleet } from '../bindings/service-targets.ts';
import { openBucketFromEnv } from '../bucket.ts';
import { CELL_VERSION_LINE } from '../version.ts';
import { serveFront } from './host.ts';
import { listenHostSocket } from './socket.ts';

export async function hostOnStdio(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  // The front reading our answers may be gone: the answers are lost, never the process.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  const store = await openBucketFromEnv(env);
  const hostLog = (line: string) => log(`cell host: ${line}`);
  // The front's own KV socket, in its private folder, opened when a deployment binds KV.
  const bindings: {
    socket: Promise<KvSocket> | null;
    services: Promise<ServiceSocket> | null;
    d1: Promise<D1Socket> | null;
  } = { socket: null, services: null, d1: null };
  const d1 = new PrivateD1(store, env, hostLog);
  // A producer's message wakes this host's consumer of its queue (docs/bindings.md "Queues").
  const queueWakers = new QueueWakers();
  // Which node runs the application's Durable Objects (docs/bindings.md "Durable Objects on the fleet").
  const objects = new HostObjects(store);
  const bindingsSocket = async (stateDir: string) => {
    bindings.socket ??= listenKvSocket(
      join(stateDir, 'bindings.sock'),
      store,
      hostLog,
      undefined,
      queueWakers.sent,
    );
    // Beside it, the services socket, which without a daemon knows no other application, and the
    // D1 socket, whose databases this host serves itself (it forwards to no other node).
    bindings.services ??= listenServiceSocket(join(stateDir, SERVICES_SOCKET), noFleet, hostLog);
    bindings.d1 ??= listenD1Socket(join(stateDir, D1_SOCKET), d1.in(join(stateDir, 'd1')), hostLog);
    await bindings.services;
    await bindings.d1;
    return (await bindings.socket).path;
  };
  try {
    await serveFront(
      {
        input: process.stdin,
        write: (text) => process.stdout.write(text),
        // A refused front: nothing more is read, so the process can end.
        end: () => {
          process.stdout.end();
          process.stdin.destroy();
        },
      },
      { store, name: CELL_VERSION_LINE, log: hostLog, bindingsSocket, queueWakers, objects },
    );
  } finally {
    await (await bindings.socket?.catch(() => null))?.close();
    await (await bindings.services?.catch(() => null))?.close();
    await (await bindings.d1?.catch(() => null))?.close();
    await d1.service?.close();
    await store.close();
  }
  return 0;
}

/** `cell host --socket <path>`: a node's host without the daemon, until SIGTERM or SIGINT. */
export async function hostOnSocket(
  path: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<number> {
  const store = await openBucketFromEnv(env);
  const hostLog = (line: string) => log(`cell host: ${line}`);
  const queueWakers = new QueueWakers();
  const bindings = await listenKvSocket(
    join(dirname(path), 'bindings.sock'),
    store,
    hostLog,
    undefined,
    queueWakers.sent,
  );
  const services = await listenServiceSocket(join(dirname(path), SERVICES_SOCKET), noFleet, hostLog);
  const d1 = new PrivateD1(store, env, hostLog);
  const d1Socket = await listenD1Socket(
    join(dirname(path), D1_SOCKET),
    d1.in(join(dirname(path), 'd1')),
    hostLog,
  );
  const host = await listenHostSocket(path, {
    store,
    name: CELL_VERSION_LINE,
    log: hostLog,
    bindingsSocket: async () => bindings.path,
    queueWakers,
  });
  log(`cell host: serving runtimes on ${path}`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await host.close();
  await bindings.close();
  await services.close();
  await d1Socket.close();
  await d1.service?.close();
  await store.close();
  return 0;
}

/**
 * The D1 service of a host without svc's daemon, made on first use (the folder is known only
 * then): it holds the leases of the databases it serves as the node `CELL_NODE` names (or this
 * machine's name), and reaches no other node, so a database another node holds answers D1's failure.
 */
class PrivateD1 {
  service: D1Service | null = null;
  readonly #store: Store;
  readonly #node: string;
  readonly #log: (line: string) => void;

  constructor(store: Store, env: NodeJS.ProcessEnv, log: (line: string) => void) {
    this.#store = store;
    this.#node = env.CELL_NODE || `cell-${hostname()}`;
    this.#log = log;
  }

  in(dataDir: string): D1Service {
    this.service ??= new D1Service({ store: this.#store, node: this.#node, dataDir, log: this.#log });
    return this.service;
  }
}
