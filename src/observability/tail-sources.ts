// Where a node's live tail comes from (docs/observability.md "svc tail"): the tail socket of the
// application's runtime process on this node, and the same route on every other node that runs
// the application. Each source reconnects on its own when it is lost (a runtime process or a
// node restarting) and says so in the stream. What the node writes to the client goes through a
// bounded buffer: a client that reads slowly loses records, counted and told, and never holds up
// the node or the runtime.

import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import {
  droppedMessage,
  keeps,
  keepsAll,
  parseMessage,
  runtimeMessage,
  type TailFilters,
  type TailMessage,
} from './tail.ts';

/** The runtime's tail socket beside the node's runtime host socket (runtime/front/tail.go). */
export function tailSocketPath(nodeStateDir: string, application: string): string {
  const digest = createHash('sha256').update(application).digest('hex').slice(0, 16);
  return join(nodeStateDir, 'tails', `${digest}.sock`);
}

/** How long to wait before trying a lost source again: from 0.25 s, doubling to 2 s. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 2_000;

/** Bytes written to a client and not yet taken by it, past which records are dropped. */
export const TAIL_CLIENT_BUFFER_BYTES = 1 << 20;

/** The stream to one client: one JSON record a line, never buffering more than the bound. */
export class TailOutput {
  #out: Writable;
  #dropped = 0;
  #where: { node: string; application: string };
  #limit: number;

  constructor(out: Writable, where: { node: string; application: string }, limit = TAIL_CLIENT_BUFFER_BYTES) {
    this.#out = out;
    this.#where = where;
    this.#limit = limit;
  }

  /** One record the node made. */
  message(m: TailMessage): void {
    this.lines(`${JSON.stringify(m)}\n`);
  }

  /** Whole record lines as they came, written at once (one chunk, not one per record). */
  lines(text: string): void {
    if (this.#out.destroyed || this.#out.writableEnded) return;
    if (this.#out.writableLength > this.#limit) {
      this.#dropped += countLines(text);
      return;
    }
    if (this.#dropped > 0) {
      const notice = droppedMessage(this.#where, this.#dropped, 'the node', Date.now());
      this.#dropped = 0;
      this.#out.write(`${JSON.stringify(notice)}\n`);
    }
    this.#out.write(text);
  }
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * Splits a stream into whole lines, `pending` keeping a line still without its end: answers the
 * whole lines of the chunk as one text ('' when none ended).
 */
export class LineBuffer {
  #pending = '';

  push(chunk: string): string {
    const end = chunk.lastIndexOf('\n');
    if (end < 0) {
      this.#pending += chunk;
      return '';
    }
    const whole = this.#pending + chunk.slice(0, end + 1);
    this.#pending = chunk.slice(end + 1);
    return whole;
  }
}

/** Whole record lines of a source, passed on as they are, or one by one through the filters. */
function passLines(text: string, filters: TailFilters, out: TailOutput): void {
  if (keepsAll(filters)) {
    out.lines(text);
    return;
  }
  let kept = '';
  for (const line of text.split('\n')) {
    const m = line === '' ? null : parseMessage(line);
    if (m && keeps(m, filters)) kept += `${line}\n`;
  }
  if (kept !== '') out.lines(kept);
}

/** A source that runs until stopped. */
export interface TailSource {
  stop(): void;
}

interface Where {
  node: string;
  application: string;
}

/**
 * Follows the runtime process's tail socket on this node: while none is there (no process, or
 * one restarting) it looks again every 2 s at most, saying when it attaches and when it lost one.
 */
export function followLocal(path: string, where: Where, filters: TailFilters, out: TailOutput): TailSource {
  let stopped = false;
  let socket: Socket | null = null;
  let timer: NodeJS.Timeout | null = null;
  let wait = RETRY_FIRST_MS;
  let told = false;
  const attempt = () => {
    timer = null;
    if (stopped) return;
    const s = connect(path);
    socket = s;
    let attached = false;
    s.on('connect', () => {
      const lines = new LineBuffer();
      s.setEncoding('utf8');
      s.on('data', (chunk: string) => {
        let text = lines.push(chunk);
        if (!attached && text !== '') {
          // The process's first line (its hello) says it counts this connection: nothing after is missed.
          attached = true;
          wait = RETRY_FIRST_MS;
          told = false;
          out.message(
            runtimeMessage(
              where,
              `tail: attached to the runtime process of ${where.application} on node ${where.node}`,
            ),
          );
          text = text.slice(text.indexOf('\n') + 1);
        }
        if (text !== '') passLines(text, filters, out);
      });
    });
    s.on('error', () => {});
    s.on('close', () => {
      socket = null;
      if (stopped) return;
      if (attached) {
        out.message(
          runtimeMessage(
            where,
            `tail: the runtime process on node ${where.node} went away; waiting for the next one`,
          ),
        );
      } else if (!told) {
        out.message(
          runtimeMessage(
            where,
            `tail: no runtime process of ${where.application} runs on node ${where.node} yet; waiting for one`,
          ),
        );
        told = true;
      }
      timer = setTimeout(attempt, attached ? RETRY_FIRST_MS : wait);
      if (!attached) wait = Math.min(wait * 2, RETRY_MAX_MS);
    });
  };
  attempt();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      socket?.destroy();
    },
  };
}

/** A peer's base URL (`http://10.0.0.2:7311`) and id. */
export interface Peer {
  id: string;
  advertise: string;
}

/**
 * Follows one peer's tail of its own process (asked with a node token, so it does not fan out in
 * turn), reconnecting while `stillServes` says the peer runs the application.
 */
export function followPeer(
  peer: Peer,
  path: string,
  where: Where,
  options: {
    mintToken: () => Promise<string>;
    query: URLSearchParams;
    stillServes: () => boolean;
    out: TailOutput;
  },
): TailSource {
  let stopped = false;
  let abort: AbortController | null = null;
  let wait = RETRY_FIRST_MS;
  const peerWhere = { node: peer.id, application: where.application };
  const run = async () => {
    let lost = false;
    while (!stopped && options.stillServes()) {
      abort = new AbortController();
      let reason = '';
      try {
        const response = await fetch(`http://${peer.advertise}${path}?${options.query}`, {
          headers: { authorization: `Bearer ${await options.mintToken()}`, accept: 'application/x-ndjson' },
          signal: abort.signal,
        });
        if (!response.ok || !response.body) {
          reason = `it answered ${response.status}`;
          await response.body?.cancel();
        } else {
          if (lost) options.out.message(runtimeMessage(peerWhere, `tail: node ${peer.id} answers again`));
          lost = false;
          wait = RETRY_FIRST_MS;
          // The peer applied the filters: its whole lines go on as they are.
          const lines = new LineBuffer();
          const decoder = new TextDecoder();
          for await (const chunk of response.body) {
            const text = lines.push(decoder.decode(chunk, { stream: true }));
            if (text !== '') options.out.lines(text);
          }
          reason = 'the stream ended';
        }
      } catch (err) {
        reason = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
      }
      if (stopped) return;
      if (!lost)
        options.out.message(
          runtimeMessage(peerWhere, `tail: lost node ${peer.id} (${reason}); reconnecting`),
        );
      lost = true;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  };
  void run();
  return {
    stop() {
      stopped = true;
      abort?.abort();
    },
  };
}
