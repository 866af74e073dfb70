// The runtime host's part in Durable Objects on the fleet (docs/bindings.md "Durable Objects on the fleet"):
// one ObjectsHolder per application whose deployment has Durable Objects, started by its front's
// first look at such a deployment. A look is given the storage folder while this node holds the
// application's objects; otherwise it fails with ObjectsStandby, which the front takes as a look
// to make again soon, serving nothing meanwhile, so it is not ready and routing leaves this node
// out for the application. When the lease is lost the front's workerd processes are killed at
// once (their pids are in the front's private folder): the front's next look stands by. The
// front also keeps a deadline of its own, from the validity this host tells it at each renewal
// (`validity`, op `objects`), so the objects stop serving even while this host is stopped.

import { performance } from 'node:perf_hooks';
import type { Store } from '../../../src/store/store.ts';
import { killRecordedWorkerds } from '../orphans.ts';
import { ObjectsHolder } from './objects-holder.ts';

/** This node does not hold the application's objects: the front serves nothing and looks again. */
export class ObjectsStandby extends Error {}

/** How long a first look waits for the holder's first decision (take, or who holds them). */
const FIRST_DECISION_MS = 5_000;

/** The longest a front's `objects` question is held. */
const MAX_VALIDITY_WAIT_MS = 60_000;

/** The answer to a front's `objects` question (docs/runtime.md "The runtime host"). */
export type ObjectsValidity =
  | { result: 'holding'; validMs: number; renewal: number }
  | { result: 'standby' }
  | { result: 'unleased' };

export interface ObjectsLook {
  application: string;
  node: string;
  /** The runtime's storage folder for the application's objects. */
  storageDir: string;
  /** The asking front's private folder (its workerd pids). */
  frontStateDir: string;
  log: (line: string) => void;
  /** The lease's lifetime (`CELL_OBJECTS_LEASE_TTL_MS`; tests shorten it). */
  ttlMs?: number;
  /** Storage keys of the classes the deployment's `deleted_classes` migrations removed. */
  deleted?: string[];
}

interface Held {
  holder: ObjectsHolder;
  /** The latest front's folder: a restarted front has a new one. */
  frontStateDir: string;
  log: (line: string) => void;
}

export class HostObjects {
  readonly #store: Store;
  readonly #held = new Map<string, Held>();

  constructor(store: Store) {
    this.#store = store;
  }

  /** The folder to start the application's workerd on; throws ObjectsStandby when another node holds them. */
  async storageDir(look: ObjectsLook): Promise<string> {
    const held = this.#held.get(look.application) ?? this.#start(look);
    held.frontStateDir = look.frontStateDir;
    held.log = look.log;
    const deadline = Date.now() + FIRST_DECISION_MS;
    while (held.holder.state !== 'holding' && held.holder.holder === null && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const dir = held.holder.storageDir;
    if (dir) {
      // The deleted classes' objects go from the bucket too, by the holder alone.
      if (look.deleted?.length) held.holder.dropNamespaces(look.deleted);
      return dir;
    }
    const by = held.holder.holder?.node;
    throw new ObjectsStandby(
      by
        ? `node ${by} holds the Durable Objects of ${look.application}: this node stands by`
        : `this node is taking over the Durable Objects of ${look.application}`,
    );
  }

  /**
   * Why a look of the application's front need not be made, while another node holds its objects
   * (the holder here checks the lease meanwhile); null when this node holds or may take them.
   */
  standingBy(application: string): string | null {
    const holder = this.#held.get(application)?.holder;
    const record = holder?.state === 'standby' ? holder.holder : null;
    if (!record || record.expires_ms <= Date.now()) return null;
    return `node ${record.node} holds the Durable Objects of ${application}: this node stands by`;
  }

  /**
   * The front's question (op `objects`): how long this node's right to serve the application's
   * objects holds. Held until the holder's renewal is another than `renewal` (the last one the
   * front heard of), or `waitMs`; answered with the validity left as of when the question arrived
   * (`askedMs`, monotonic), so the front, counting it from when it asked, never ends later than
   * the holder does (runtime/front/objects.go).
   */
  async validity(
    application: string,
    renewal: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<ObjectsValidity> {
    const askedMs = performance.now();
    const holder = this.#held.get(application)?.holder;
    if (!holder) return { result: 'standby' };
    await holder.changed(renewal, Math.min(Math.max(waitMs, 0), MAX_VALIDITY_WAIT_MS), signal);
    const validMs = holder.validFrom(askedMs);
    return validMs > 0 ? { result: 'holding', validMs, renewal: holder.renewal } : { result: 'standby' };
  }

  /** Stops serving an application's objects here (its front went away) and gives the lease up. */
  async release(application: string): Promise<void> {
    const held = this.#held.get(application);
    if (!held) return;
    this.#held.delete(application);
    await held.holder.stop();
  }

  /**
   * A front that connects while its application's objects folder exists may be serving them
   * (its previous host restarted): its holder starts at once, and if another node holds the
   * objects now, its workerd is stopped.
   */
  adopt(look: ObjectsLook): void {
    this.storageDir(look).catch((err: unknown) => {
      if (!(err instanceof ObjectsStandby)) return;
      const killed = killRecordedWorkerds(look.frontStateDir);
      if (killed.length > 0) look.log(`cell: stopped workerd ${killed.join(', ')}: ${err.message}`);
    });
  }

  /** The host stops while its fronts serve on (a restart): nothing is stopped or given up. */
  async detach(): Promise<void> {
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.all(held.map((h) => h.holder.detach()));
  }

  #start(look: ObjectsLook): Held {
    const held: Held = {
      frontStateDir: look.frontStateDir,
      log: look.log,
      holder: new ObjectsHolder({
        store: this.#store,
        application: look.application,
        node: look.node,
        dataDir: `${look.storageDir}.copies`,
        storageDir: look.storageDir,
        ...(look.ttlMs ? { ttlMs: look.ttlMs } : {}),
        log: (line) => held.log(`cell: ${line}`),
        serve: async () => {},
        stopServing: async (reason) => {
          const killed = killRecordedWorkerds(held.frontStateDir);
          if (killed.length > 0) held.log(`cell: stopped workerd ${killed.join(', ')}: ${reason}`);
        },
      }),
    };
    this.#held.set(look.application, held);
    held.holder.start();
    return held;
  }
}
