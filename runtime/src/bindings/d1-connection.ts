// The holder's side of one database's SQLite process (d1-process.ts): each call is one message
// and its answer, in order. A query that runs past D1's 30 s ends the process with SIGKILL, and
// with it the connection: the caller treats the database as lost on this node and restores it
// from the bucket, which holds every write it acknowledged.

import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { D1Success } from './d1-engine.ts';
import { D1QueryError } from './d1-engine.ts';
import type { ProcessAnswer, ProcessRequest } from './d1-process.ts';
import type { D1Query, ResultsFormat } from './d1-sql.ts';

/** D1's longest query (developers.cloudflare.com/d1/platform/limits/). */
export const D1_QUERY_TIMEOUT_MS = 30_000;

/** The query ran past the limit; the connection is gone. */
export class QueryTimedOut extends Error {}

export interface RunResult {
  results: D1Success[];
  /** The WAL grew: the queries changed the database. */
  wrote: boolean;
  /** The WAL's size just after the commit, a transaction boundary (frames past it may not be). */
  walEnd: number;
}

/**
 * Where the process's code is: beside this module, bundled (`make dist` writes d1-process.mjs
 * beside the chunk that holds this code), or the checkout's TypeScript.
 */
function processModule(): string {
  const bundled = fileURLToPath(new URL('./d1-process.mjs', import.meta.url));
  return existsSync(bundled) ? bundled : fileURLToPath(new URL('./d1-process.ts', import.meta.url));
}

type Pending = { resolve: (value: unknown) => void; reject: (err: Error) => void };
type RequestBody = ProcessRequest extends infer R
  ? R extends { id: number }
    ? Omit<R, 'id'>
    : never
  : never;

export class SqliteConnection {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, Pending>();
  readonly #timeoutMs: number;
  readonly #exited: Promise<void>;
  #next = 1;
  #ended: Error | null = null;

  constructor(file: string, timeoutMs = D1_QUERY_TIMEOUT_MS) {
    this.#timeoutMs = timeoutMs;
    this.#child = fork(processModule(), [file], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    this.#child.on('message', (answer: ProcessAnswer) => {
      const pending = this.#pending.get(answer.id);
      if (!pending) return;
      this.#pending.delete(answer.id);
      if (answer.ok) pending.resolve(answer.value);
      else pending.reject(answer.query ? new D1QueryError(answer.message) : new Error(answer.message));
    });
    this.#exited = new Promise((resolve) => this.#child.once('exit', () => resolve()));
    this.#child.once('exit', (code, signal) =>
      this.#end(new Error(`the database's process ended (${signal ?? `exit ${code}`})`)),
    );
    this.#child.on('error', (err) => this.#end(err));
  }

  /** Runs one request's queries in one transaction. */
  run(queries: D1Query[], format: ResultsFormat): Promise<RunResult> {
    return this.#call({ op: 'run', queries, format }) as Promise<RunResult>;
  }

  /** Folds the WAL into the database file and empties it. */
  async checkpoint(): Promise<void> {
    await this.#call({ op: 'checkpoint' });
  }

  /** Closes the database and waits for its process to end. */
  async close(): Promise<void> {
    if (!this.#ended) await this.#call({ op: 'close' }).catch(() => this.#child.kill('SIGKILL'));
    await this.#exited;
  }

  #call(body: RequestBody): Promise<unknown> {
    if (this.#ended) return Promise.reject(this.#ended);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#end(new QueryTimedOut(`the query ran past D1's ${this.#timeoutMs / 1000} s`));
        this.#child.kill('SIGKILL');
      }, this.#timeoutMs);
      const settle = () => clearTimeout(timer);
      this.#pending.set(id, {
        resolve: (value) => {
          settle();
          resolve(value);
        },
        reject: (err) => {
          settle();
          reject(err);
        },
      });
      this.#child.send({ id, ...body });
    });
  }

  /** Fails every call waiting and every call to come with `err`. */
  #end(err: Error): void {
    if (this.#ended) return;
    this.#ended = err;
    for (const pending of this.#pending.values()) pending.reject(err);
    this.#pending.clear();
  }
}
