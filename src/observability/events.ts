// Fleet events: what happened on a node and why, recorded in the bucket when observability is on
// (docs/observability.md "Events"). The daemon's parts receive an `EventSink` and call `emit`; the
// sink adds the node and the time. With observability off the sink is `noEvents` and does nothing.

/** What a part of the daemon says happened. `kind` is `<subject>.<verb>`, e.g. `application.blocked`. */
export interface EventInput {
  kind: string;
  /** The application concerned, when there is one. */
  application?: string;
  /** Who caused it (operator key id, node id, workload subject), when someone did. */
  actor?: string;
  /** Anything else the kind carries (docs/observability.md lists them); plain JSON values. */
  [field: string]: unknown;
}

/** One recorded event: the input plus where and when. */
export interface FleetEvent extends EventInput {
  /** ISO-8601 time the node noted it. */
  at: string;
  node: string;
}

export interface EventSink {
  emit(event: EventInput): void;
}

/** The sink when observability is off. */
export const noEvents: EventSink = { emit() {} };

/** The kind of the reconcile loop's own pass events, held back by `svc traces` unless `--all`. */
export const RECONCILE_PASS = 'reconcile.pass';

/** The most of a process's output an event carries: enough to read why it failed. */
export const OUTPUT_TAIL_CHARS = 2_000;

/** The last `OUTPUT_TAIL_CHARS` of an output tail, from a line start when one is near. */
export function eventTail(text: string): string {
  if (text.length <= OUTPUT_TAIL_CHARS) return text;
  const cut = text.slice(-OUTPUT_TAIL_CHARS);
  const line = cut.indexOf('\n');
  return line >= 0 && line < 200 ? cut.slice(line + 1) : cut;
}
