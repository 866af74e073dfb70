// Asking a front for its health over its runtime host connection (docs/runtime.md "The runtime
// host", the `health` push): the node's supervisor asks a ready front this way instead of opening
// a connection to its health endpoint, which costs both sides about half as much again per question
// (docs/supervisor.md "The supervisor"). The front answers with its `health` request, marked `asked`.

/** What a front's health answer says: its status, and the deployment it serves. */
export interface FrontHealth {
  status: string;
  deployment: string | null;
}

type Settle = (health: FrontHealth | null) => void;

/** The fronts connected to one host, by application, and the questions put to them. */
export class HealthAsks {
  /** Each connected front's way to be asked (one per application: the latest to say hello). */
  readonly #fronts = new Map<string, () => void>();
  /** Who waits for each application's answer; a second question joins the first. */
  readonly #waiting = new Map<string, Set<Settle>>();

  /** A front of `application` said hello; answers what to call when its connection ends. */
  attach(application: string, ask: () => void): () => void {
    this.#fronts.set(application, ask);
    return () => {
      if (this.#fronts.get(application) !== ask) return;
      this.#fronts.delete(application);
      this.#settle(application, null);
    };
  }

  /** The front of `application` told its health because it was asked. */
  told(application: string, health: FrontHealth): void {
    this.#settle(application, health);
  }

  /**
   * Asks the front of `application` for its health: null when no front of it is connected, or
   * it did not answer within `timeoutMs` (a front older than the question never does).
   */
  ask(application: string, timeoutMs: number): Promise<FrontHealth | null> {
    const put = this.#fronts.get(application);
    if (!put) return Promise.resolve(null);
    return new Promise((resolve) => {
      let waiting = this.#waiting.get(application);
      const first = !waiting;
      if (!waiting) {
        waiting = new Set();
        this.#waiting.set(application, waiting);
      }
      const settle: Settle = (health) => {
        clearTimeout(timer);
        resolve(health);
      };
      const timer = setTimeout(() => {
        waiting.delete(settle);
        if (waiting.size === 0 && this.#waiting.get(application) === waiting)
          this.#waiting.delete(application);
        resolve(null);
      }, timeoutMs);
      waiting.add(settle);
      if (first) put();
    });
  }

  #settle(application: string, health: FrontHealth | null): void {
    const waiting = this.#waiting.get(application);
    if (!waiting) return;
    this.#waiting.delete(application);
    for (const settle of waiting) settle(health);
  }
}
